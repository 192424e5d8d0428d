//! [`ReasoningConstraint`]: free reasoning, then the answer's constraint, in one generation.
//!
//! The close marker is matched on the stream of generated *symbols*: the bytes of text tokens
//! and the ids of special tokens (a marker may be plain text split over any tokens, like
//! `</think>`, or contain special tokens, like Harmony's `<|end|><|start|>assistant...`). A
//! KMP automaton over the marker's symbols keeps the longest marker prefix that ends the
//! output, so a near miss (`</th` + `e`) is recognised as ordinary reasoning.
//!
//! While reasoning, every text token is allowed except one that would complete the marker
//! and run past it (its tail would reach the answer without the answer's constraint seeing
//! it); special tokens are allowed only where they continue the marker; EOS is refused (the
//! constraint does not accept). After the budget, or once a special token of the marker has
//! been produced, the rest of the marker is *forced*: only tokens that spell its next bytes
//! (or its next special token) are allowed.

use super::router::Offsets;
use crate::constraint::Constraint;
use crate::model::Model;
use formwork_vocab::{TokenId, TokenKind, TokenMask, Vocabulary};
use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;

/// One symbol of the generated stream: a byte of a text token, or a special token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sym {
    Byte(u8),
    Special(TokenId),
}

/// A marker as symbols, with its KMP failure function.
#[derive(Clone, Debug)]
pub(crate) struct Marker {
    syms: Vec<Sym>,
    /// `fail[k]`: the longest proper prefix of `syms[..k]` that is also its suffix.
    fail: Vec<usize>,
}

impl Marker {
    /// `text` tokenized by the model (special-token names recognised) as symbols.
    pub(crate) fn new(model: &dyn Model, text: &str) -> Result<Marker, String> {
        let toks = model
            .tokenize(text, false, true)
            .map_err(|e| format!("cannot tokenize the reasoning marker {text:?}: {e}"))?;
        let vocab = model.vocab();
        let mut syms = Vec::new();
        for t in toks {
            push_syms(vocab, t, &mut syms);
        }
        if syms.is_empty() {
            return Err(format!("the reasoning marker {text:?} is empty"));
        }
        Ok(Marker::from_syms(syms))
    }

    pub(crate) fn from_syms(syms: Vec<Sym>) -> Marker {
        let mut fail = vec![0; syms.len() + 1];
        let mut k = 0;
        for i in 1..syms.len() {
            while k > 0 && syms[i] != syms[k] {
                k = fail[k];
            }
            if syms[i] == syms[k] {
                k += 1;
            }
            fail[i + 1] = k;
        }
        Marker { syms, fail }
    }

    pub(crate) fn len(&self) -> usize {
        self.syms.len()
    }

    /// The matched length after `s`, from matched length `k` (< len).
    pub(crate) fn step(&self, mut k: usize, s: Sym) -> usize {
        loop {
            if self.syms[k] == s {
                return k + 1;
            }
            if k == 0 {
                return 0;
            }
            k = self.fail[k];
        }
    }

    /// The special tokens of the marker.
    fn specials(&self) -> impl Iterator<Item = TokenId> + '_ {
        self.syms.iter().filter_map(|s| match s {
            Sym::Special(t) => Some(*t),
            Sym::Byte(_) => None,
        })
    }
}

/// Appends the symbols of token `t`: its id if special, else its bytes.
pub(crate) fn push_syms(vocab: &Vocabulary, t: TokenId, out: &mut Vec<Sym>) {
    if vocab.kind(t) == TokenKind::Special {
        out.push(Sym::Special(t));
    } else {
        out.extend(vocab.token_bytes(t).iter().map(|&b| Sym::Byte(b)));
    }
}

/// Which part of the output is being generated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// The reasoning section (the close marker not yet complete).
    Reasoning,
    /// After the close marker: the answer.
    Answer,
}

/// A [`Constraint`] for a reasoning section followed by an answer (see the module docs).
///
/// `inner` constrains the answer (`None`: any answer). Once in the answer every method is
/// delegated to it.
pub struct ReasoningConstraint<'a> {
    vocab: Arc<Vocabulary>,
    inner: Option<&'a mut (dyn Constraint + 'a)>,
    close: Marker,
    /// KMP state: how much of the close marker ends the output.
    matched: usize,
    phase: Phase,
    budget: Option<usize>,
    reasoning_tokens: usize,
    /// Text tokens (not special, not unused): allowed while reasoning.
    free: TokenMask,
    /// Per KMP state: text tokens that would complete the marker and run past it.
    overshoot: Vec<Option<TokenMask>>,
    /// Per KMP state: tokens that spell the next part of the marker.
    forced: Vec<Option<TokenMask>>,
    /// Text offsets for the router that splits the streamed text.
    text: TextTracker,
    /// Whitespace-only tokens the answer may still start with before `inner` sees a token.
    lead_ws: usize,
    /// Whitespace-only text tokens (built on first use).
    ws_tokens: Option<TokenMask>,
    /// Has `inner` been given a token?
    inner_started: bool,
    /// Per KMP state: the fewest tokens finishing the marker (`None` inside: cannot spell it).
    marker_plans: Vec<Option<Option<Vec<TokenId>>>>,
    /// The length of `inner`'s completion plan from its start (asked once, while reasoning).
    inner_start_plan: Option<Option<usize>>,
}

/// Follows the streamed text the way the loop decodes it, to place the marker in it.
struct TextTracker {
    shared: Rc<Cell<Offsets>>,
    pending: Vec<u8>,
    decoded: usize,
    /// Text offset at which each of the last symbols started (the last `close.len()`).
    starts: std::collections::VecDeque<usize>,
}

impl TextTracker {
    fn push(&mut self, s: Sym, keep: usize) {
        let start = self.decoded;
        if let Sym::Byte(b) = s {
            self.pending.push(b);
            self.decoded += crate::stream::decode_prefix(&mut self.pending, false).len();
        }
        self.starts.push_back(start);
        while self.starts.len() > keep {
            self.starts.pop_front();
        }
    }

    /// Where the last `k` symbols start in the text.
    fn start_of_last(&self, k: usize) -> usize {
        if k == 0 {
            return self.decoded;
        }
        self.starts[self.starts.len() - k]
    }
}

impl<'a> ReasoningConstraint<'a> {
    /// A constraint for a generation that starts inside the reasoning section, which ends at
    /// `close` (tokenized with `model`). After `budget` reasoning tokens the close marker is
    /// forced. Fails when the marker cannot be tokenized, or contains an end-of-generation
    /// token (the loop would stop there).
    pub fn new(
        model: &dyn Model,
        close: &str,
        budget: Option<usize>,
        inner: Option<&'a mut (dyn Constraint + 'a)>,
    ) -> Result<Self, String> {
        Self::with_offsets(model, close, budget, inner, Rc::new(Cell::new(Offsets::default())))
    }

    pub(crate) fn with_offsets(
        model: &dyn Model,
        close: &str,
        budget: Option<usize>,
        inner: Option<&'a mut (dyn Constraint + 'a)>,
        shared: Rc<Cell<Offsets>>,
    ) -> Result<Self, String> {
        let close_marker = Marker::new(model, close)?;
        let vocab = model.vocab().clone();
        if let Some(t) = close_marker.specials().find(|t| vocab.eos_tokens().contains(t)) {
            return Err(format!(
                "the reasoning close marker {close:?} contains {:?}, which this model treats as end of generation; \
                 give other markers",
                vocab.token_text(t)
            ));
        }
        let mut free = TokenMask::new(vocab.len());
        for t in vocab.ids() {
            if !matches!(vocab.kind(t), TokenKind::Special | TokenKind::Unused) {
                free.insert(t);
            }
        }
        let n = close_marker.len();
        Ok(ReasoningConstraint {
            vocab,
            inner,
            matched: 0,
            phase: Phase::Reasoning,
            budget,
            reasoning_tokens: 0,
            free,
            overshoot: vec![None; n],
            forced: vec![None; n],
            close: close_marker,
            text: TextTracker { shared, pending: Vec::new(), decoded: 0, starts: Default::default() },
            lead_ws: 0,
            ws_tokens: None,
            inner_started: false,
            marker_plans: vec![None; n],
            inner_start_plan: None,
        })
    }

    /// Lets the answer start with up to `n` whitespace-only tokens that the answer's
    /// constraint does not see (models write `</think>\n\n` before answering; a JSON
    /// grammar may not allow leading whitespace).
    pub fn with_answer_lead(mut self, n: usize) -> Self {
        self.lead_ws = n;
        self
    }

    fn is_ws(&self, t: TokenId) -> bool {
        let b = self.vocab.token_bytes(t);
        self.vocab.kind(t) != TokenKind::Special && !b.is_empty() && b.iter().all(u8::is_ascii_whitespace)
    }

    /// Is a leading whitespace token still possible in the answer?
    fn lead_open(&self) -> bool {
        self.lead_ws > 0 && !self.inner_started
    }

    /// Reasoning or answer.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Tokens generated in the reasoning section (the close marker's excluded).
    pub fn reasoning_tokens(&self) -> usize {
        self.reasoning_tokens
    }

    /// Is the rest of the marker forced: budget spent, or a special token of it produced?
    fn forcing(&self) -> bool {
        self.budget.is_some_and(|b| self.reasoning_tokens >= b)
            || self.close.syms[..self.matched].iter().any(|s| matches!(s, Sym::Special(_)))
    }

    /// Runs the marker automaton over `t` from the current state: `Err(())` when the marker
    /// completes before the token's last symbol, else the new state (`len` = complete).
    fn simulate(&self, t: TokenId) -> Result<usize, ()> {
        let mut syms = Vec::new();
        push_syms(&self.vocab, t, &mut syms);
        let mut k = self.matched;
        for (i, &s) in syms.iter().enumerate() {
            k = self.close.step(k, s);
            if k == self.close.len() {
                return if i + 1 == syms.len() { Ok(k) } else { Err(()) };
            }
        }
        Ok(k)
    }

    /// Does `t` spell the next part of the marker (without running past it)?
    fn spells_next(&self, t: TokenId) -> bool {
        let rest = &self.close.syms[self.matched..];
        match rest[0] {
            Sym::Special(s) => t == s,
            Sym::Byte(_) => {
                if matches!(self.vocab.kind(t), TokenKind::Special | TokenKind::Unused) {
                    return false;
                }
                let b = self.vocab.token_bytes(t);
                !b.is_empty() && b.len() <= rest.len() && b.iter().zip(rest).all(|(&x, s)| *s == Sym::Byte(x))
            }
        }
    }

    fn reasoning_allows(&self, t: TokenId) -> bool {
        if self.forcing() {
            return self.spells_next(t);
        }
        match self.vocab.kind(t) {
            TokenKind::Unused => false,
            TokenKind::Special => {
                let s = Sym::Special(t);
                self.close.syms[self.matched] == s || self.close.syms[0] == s
            }
            _ => self.simulate(t).is_ok(),
        }
    }

    /// The fewest tokens that finish the close marker from KMP state `k` (< len): its
    /// special tokens, and for its text the longest text token spelling the next bytes.
    fn marker_plan(&mut self, k: usize) -> Option<Vec<TokenId>> {
        if let Some(p) = &self.marker_plans[k] {
            return p.clone();
        }
        let mut plan = Vec::new();
        let mut i = k;
        while i < self.close.len() {
            match self.close.syms[i] {
                Sym::Special(t) => {
                    plan.push(t);
                    i += 1;
                }
                Sym::Byte(_) => {
                    let rest: Vec<u8> = self.close.syms[i..]
                        .iter()
                        .map_while(|s| match s {
                            Sym::Byte(b) => Some(*b),
                            Sym::Special(_) => None,
                        })
                        .collect();
                    let best = self
                        .free
                        .iter_ones()
                        .filter(|&t| {
                            let b = self.vocab.token_bytes(t);
                            !b.is_empty() && rest.starts_with(b)
                        })
                        .max_by_key(|&t| self.vocab.token_bytes(t).len());
                    let Some(t) = best else {
                        self.marker_plans[k] = Some(None);
                        return None;
                    };
                    plan.push(t);
                    i += self.vocab.token_bytes(t).len();
                }
            }
        }
        self.marker_plans[k] = Some(Some(plan.clone()));
        Some(plan)
    }

    /// The length of the inner constraint's plan from its start (0 without one).
    fn inner_start_plan_len(&mut self) -> Option<usize> {
        if self.inner_start_plan.is_none() {
            let len = match self.inner.as_deref_mut() {
                Some(c) => c.completion_plan().map(|p| p.len()),
                None => Some(0),
            };
            self.inner_start_plan = Some(len);
        }
        self.inner_start_plan.expect("filled above")
    }

    fn forced_mask(&mut self) -> &TokenMask {
        let k = self.matched;
        if self.forced[k].is_none() {
            let mut m = TokenMask::new(self.vocab.len());
            for t in self.vocab.ids() {
                if self.spells_next(t) {
                    m.insert(t);
                }
            }
            self.forced[k] = Some(m);
        }
        self.forced[k].as_ref().expect("filled above")
    }

    fn overshoot_mask(&mut self) -> &TokenMask {
        let k = self.matched;
        if self.overshoot[k].is_none() {
            let mut m = TokenMask::new(self.vocab.len());
            for t in self.free.iter_ones() {
                if self.simulate(t).is_err() {
                    m.insert(t);
                }
            }
            self.overshoot[k] = Some(m);
        }
        self.overshoot[k].as_ref().expect("filled above")
    }
}

impl Constraint for ReasoningConstraint<'_> {
    fn compute_mask(&mut self, mask: &mut TokenMask) {
        if self.phase == Phase::Answer {
            match self.inner.as_deref_mut() {
                Some(c) => c.compute_mask(mask),
                None => mask.set_all(),
            }
            if self.lead_open() {
                if self.ws_tokens.is_none() {
                    let mut m = TokenMask::new(self.vocab.len());
                    for t in self.free.iter_ones() {
                        if self.is_ws(t) {
                            m.insert(t);
                        }
                    }
                    self.ws_tokens = Some(m);
                }
                mask.union_with(self.ws_tokens.as_ref().expect("filled above"));
            }
            return;
        }
        if self.forcing() {
            let forced = self.forced_mask().clone();
            mask.union_with(&forced);
            return;
        }
        mask.union_with(&self.free);
        let over = self.overshoot_mask().clone();
        mask.subtract(&over);
        for s in [self.close.syms[0], self.close.syms[self.matched]] {
            if let Sym::Special(t) = s {
                mask.insert(t);
            }
        }
    }

    fn is_allowed(&mut self, t: TokenId) -> bool {
        match self.phase {
            Phase::Answer => {
                (self.lead_open() && self.is_ws(t)) || self.inner.as_deref_mut().is_none_or(|c| c.is_allowed(t))
            }
            Phase::Reasoning => self.reasoning_allows(t),
        }
    }

    fn commit(&mut self, t: TokenId) -> Result<(), String> {
        if self.phase == Phase::Answer {
            if self.lead_open() && self.is_ws(t) {
                self.lead_ws -= 1;
                return Ok(());
            }
            self.inner_started = true;
            return match self.inner.as_deref_mut() {
                Some(c) => c.commit(t),
                None => Ok(()),
            };
        }
        if !self.reasoning_allows(t) {
            return Err(format!("token {t} is not allowed in the reasoning section here"));
        }
        let forcing = self.forcing();
        let mut syms = Vec::new();
        push_syms(&self.vocab, t, &mut syms);
        for s in syms {
            self.matched = self.close.step(self.matched, s);
            self.text.push(s, self.close.len());
        }
        if !forcing {
            // Tokens that start or continue the marker count too: they may be ordinary text.
            self.reasoning_tokens += 1;
        }
        let mut o = self.text.shared.get();
        if self.matched == self.close.len() {
            self.phase = Phase::Answer;
            o.held_from = None;
            o.thinking_end = Some(self.text.start_of_last(self.close.len()));
            o.answer_start = Some(self.text.decoded);
        } else {
            o.held_from = (self.matched > 0).then(|| self.text.start_of_last(self.matched));
        }
        self.text.shared.set(o);
        Ok(())
    }

    fn is_accepting(&self) -> bool {
        match self.phase {
            Phase::Answer => self.inner.as_deref().is_none_or(|c| c.is_accepting()),
            Phase::Reasoning => false,
        }
    }

    fn is_complete(&mut self) -> Option<bool> {
        match self.phase {
            Phase::Answer => match self.inner.as_deref_mut() {
                Some(c) => c.is_complete(),
                None => Some(false),
            },
            Phase::Reasoning => Some(false),
        }
    }

    /// While reasoning: the rest of the close marker, then the answer constraint's plan from
    /// its start. In the answer: the answer constraint's (empty without one).
    fn completion_plan(&mut self) -> Option<Vec<TokenId>> {
        match self.phase {
            Phase::Answer => match self.inner.as_deref_mut() {
                Some(c) => c.completion_plan(),
                None => Some(Vec::new()),
            },
            Phase::Reasoning => {
                let mut plan = self.marker_plan(self.matched)?;
                if let Some(c) = self.inner.as_deref_mut() {
                    plan.extend(c.completion_plan()?);
                }
                Some(plan)
            }
        }
    }

    /// In the answer, once its leading whitespace is settled: the answer constraint's.
    /// Nothing is forced while reasoning (the text is free) or while whitespace may still
    /// lead the answer (a choice).
    fn forced_bytes(&mut self) -> Vec<u8> {
        match (self.phase, self.lead_open(), self.inner.as_deref_mut()) {
            (Phase::Answer, false, Some(c)) => c.forced_bytes(),
            _ => Vec::new(),
        }
    }

    fn completion_fits_after(&mut self, t: TokenId, budget: usize) -> Option<bool> {
        match self.phase {
            Phase::Answer if self.lead_open() && self.is_ws(t) => Some(self.inner_start_plan_len()? <= budget),
            Phase::Answer => match self.inner.as_deref_mut() {
                Some(c) => c.completion_fits_after(t, budget),
                None => Some(true),
            },
            Phase::Reasoning => {
                if !self.reasoning_allows(t) {
                    return Some(false);
                }
                let Ok(k) = self.simulate(t) else { return Some(false) };
                let marker = if k == self.close.len() { 0 } else { self.marker_plan(k)?.len() };
                Some(marker + self.inner_start_plan_len()? <= budget)
            }
        }
    }
}
