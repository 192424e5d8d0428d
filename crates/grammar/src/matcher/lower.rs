//! Lowering: the [`Grammar`] IR → [`Flat`], a byte-level grammar of rules, alternatives and
//! elements, plus the checks that make the pushdown matcher terminate.
//!
//! - Literals become one [`Elem::Bytes`] per byte; Unicode classes become byte-range
//!   sequences through `regex_syntax::utf8::Utf8Sequences` (single-byte ranges merged into
//!   one byte set; multi-byte sequences with equal tails merged on their lead byte; the
//!   result is one element or a helper rule whose alternatives start on disjoint lead bytes).
//! - `Alt` inside a sequence becomes a helper rule. `e{m,n}` becomes `m` copies of a unit
//!   (`e`, or a helper rule for it) then a chain of `n - m` optional helpers (`O_k ::= e O_{k-1} | ε`);
//!   `e{m,}` becomes `m` copies then `S ::= e S | ε`. A repetition of a repetition is first
//!   collapsed into one wherever the languages are equal (`((e*){0,99}){0,99}` is `e*`; see
//!   `collapse_repeats`). Right recursion in tail position does not grow the stack (the
//!   matcher pushes no return frame for a rule that ends an alternative).
//! - Checks: the root must match something; left recursion (a rule reaching itself at its
//!   left edge through nullable prefixes, with at least one frame pushed on the way) is refused
//!   with the cycle named; sizes are bounded by [`Limits`].
//!
//! - Bounded repetitions also get, for masks only, an equivalent loop rule and a map from
//!   their frame positions to it (module `repeats`): a state deep inside `e{0,100}` has
//!   the same mask as the state inside `e*` for every token shorter than the count left.
//!
//! Everything here is iterative or recursion bounded by the nesting limit, and linear in the
//! size of the lowered grammar (the analyses are worklist fixpoints and Tarjan's SCC).

use super::error::CompileError;
use crate::{Expr, Grammar, Limits, TokenRef};
use formwork_vocab::{TokenId, Vocabulary};
use regex_syntax::utf8::Utf8Sequences;
use rustc_hash::FxHashMap;

mod repeats;
mod unordered;
use repeats::Chain;
pub(crate) use repeats::RepeatPos;

/// A set of bytes, as a 256-bit bitmap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub(crate) struct ByteSet(pub [u64; 4]);

impl ByteSet {
    /// The set with one byte.
    pub fn single(b: u8) -> Self {
        let mut s = ByteSet::default();
        s.insert(b);
        s
    }
    /// Adds `b`.
    #[inline]
    pub fn insert(&mut self, b: u8) {
        self.0[(b >> 6) as usize] |= 1 << (b & 63);
    }
    /// Adds `lo..=hi`.
    pub fn insert_range(&mut self, lo: u8, hi: u8) {
        for b in lo..=hi {
            self.insert(b);
        }
    }
    /// Is `b` in the set?
    #[inline]
    pub fn contains(&self, b: u8) -> bool {
        (self.0[(b >> 6) as usize] >> (b & 63)) & 1 == 1
    }
    /// `self ∪ o`.
    #[inline]
    pub fn union(&mut self, o: &ByteSet) {
        for i in 0..4 {
            self.0[i] |= o.0[i];
        }
    }
    /// Number of bytes in the set.
    pub fn len(&self) -> u32 {
        self.0.iter().map(|w| w.count_ones()).sum()
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.0 == [0; 4]
    }
    /// The single byte in the set, if it has exactly one.
    pub fn only(&self) -> Option<u8> {
        if self.len() != 1 {
            return None;
        }
        (0..=255u8).find(|&b| self.contains(b))
    }
}

/// One element of an alternative.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Elem {
    /// One byte from `Flat::sets[i]`.
    Bytes(u32),
    /// A reference to rule `i`.
    Rule(u32),
    /// A special token, by id (`u32::MAX` when compiled without a vocabulary: never matches).
    Token(TokenId),
    /// Any one whole token but this one, except the EOS tokens and unused slots
    /// ([`Expr::NotToken`]). Without a vocabulary it lowers to a `Token(u32::MAX)` instead.
    NotToken(TokenId),
    /// End of an alternative.
    End,
}

/// A lowered grammar. Positions index `elems`; each alternative is a run of elements ended
/// by [`Elem::End`].
#[derive(Clone, Debug)]
pub(crate) struct Flat {
    /// All alternatives, back to back, each ended by `End`.
    pub elems: Vec<Elem>,
    /// Byte sets, indexed by `Elem::Bytes`.
    pub sets: Vec<ByteSet>,
    /// Indexed by rule: the start position of each alternative.
    pub alts: Vec<Vec<u32>>,
    /// Indexed by rule: its name (helpers: `parent/what`).
    pub names: Vec<String>,
    /// The start rule.
    pub root: u32,
    /// Frame positions inside bounded repetitions, with their loop equivalents (see
    /// [`RepeatPos`]); only positions with a budget of at least `repeats::MIN_BUDGET`.
    pub repeats: FxHashMap<u32, RepeatPos>,
    /// Unordered groups, whose rules are built on first use (module `unordered`).
    pub lazy: unordered::Lazy,
}

impl Flat {
    /// Heap bytes used.
    pub fn memory_usage(&self) -> usize {
        self.elems.capacity() * std::mem::size_of::<Elem>()
            + self.sets.capacity() * 32
            + self
                .alts
                .iter()
                .map(|a| a.capacity() * 4 + 24)
                .sum::<usize>()
            + self.names.iter().map(|n| n.capacity() + 24).sum::<usize>()
            + self.repeats.capacity() * 16
            + self.lazy.memory_usage()
    }
}

struct Lowerer<'a> {
    limits: &'a Limits,
    vocab: Option<&'a Vocabulary>,
    /// Indexed by rule: alternatives as element lists (`None` while a user rule is pending).
    rules: Vec<Vec<Vec<Elem>>>,
    names: Vec<String>,
    /// Indexed by rule: the user rule it was made for.
    origin: Vec<u32>,
    sets: Vec<ByteSet>,
    set_ids: FxHashMap<ByteSet, u32>,
    class_cache: FxHashMap<Vec<(char, char)>, Elem>,
    n_elems: usize,
    cur: u32,
    /// Chains of optional copies made for `e{m,n}`.
    chains: Vec<Chain>,
    /// Unordered groups: start rule and family (installed after flattening).
    groups: Vec<(u32, unordered::Family)>,
}

/// `body{min,max}` where `body` may itself be a repetition, rewritten as one repetition of
/// an inner body wherever the languages are equal. Nested repetitions of a nullable body are
/// otherwise ambiguous (`(([^x]*){0,99}){0,99}` reaches the empty string 99² ways, so the
/// matcher's stacks multiply), though their language is often that of the inner one alone.
///
/// With `X = Y{a,b}`, `X^k = Y{ka,kb}`, so `X{m,n}` is the union of `Y{ka,kb}` for
/// `m ≤ k ≤ n`. That union is one repetition of `Y` in these cases, taken from the
/// innermost pair outwards:
/// - `n = 0`: the empty string, `Y{0,0}`;
/// - `a = 0` (`Y*`, `Y?`, `Y{0,b}`): the intervals `[0, kb]` are nested, so `Y{0,nb}`
///   (unbounded when `n` or `b` is; kept apart when `nb` exceeds `max_repeat`);
/// - `a = 1, b = ∞` (`Y+`): the intervals `[k, ∞)` are nested, so `Y{m,}`.
///
/// Elsewhere the union can have gaps (`(Y{2}){0,2}` is `Y{0}`, `Y{2}` or `Y{4}`), and that
/// pair stays nested (a pair further out may still collapse onto it). The chain is at most
/// the nesting limit deep.
fn collapse_repeats(body: &Expr, min: u32, max: Option<u32>, max_repeat: u32) -> (&Expr, u32, Option<u32>) {
    // `layers[i]`: the bounds of the i-th repetition from the outside, and the body it repeats.
    let mut layers = vec![(body, min, max)];
    while let Expr::Repeat { expr, min, max } = layers[layers.len() - 1].0 {
        layers.push((expr, *min, *max));
    }
    let combine = |(a, b): (u32, Option<u32>), (m, n): (u32, Option<u32>)| -> Option<(u32, Option<u32>)> {
        match (a, b, n) {
            (_, _, Some(0)) | (0, Some(0), _) => Some((0, Some(0))),
            (0, Some(b), Some(n)) => b.checked_mul(n).filter(|&p| p <= max_repeat).map(|p| (0, Some(p))),
            (0, _, _) => Some((0, None)),
            (1, None, _) => Some((m, None)),
            _ => None,
        }
    };
    let (mut body, mut a, mut b) = layers[layers.len() - 1];
    for &(outer_body, m, n) in layers.iter().rev().skip(1) {
        match combine((a, b), (m, n)) {
            Some((a2, b2)) => (a, b) = (a2, b2),
            None => (body, a, b) = (outer_body, m, n),
        }
    }
    (body, a, b)
}

/// Lowers `g`. With a vocabulary, named tokens are resolved (an unknown one is an error);
/// without, token elements never match.
pub(crate) fn lower(
    g: &Grammar,
    vocab: Option<&Vocabulary>,
    limits: &Limits,
) -> Result<Flat, CompileError> {
    let n_user = g.rules().len();
    let mut lw = Lowerer {
        limits,
        vocab,
        rules: vec![Vec::new(); n_user],
        names: g.rules().iter().map(|r| r.name.clone()).collect(),
        origin: (0..n_user as u32).collect(),
        sets: Vec::new(),
        set_ids: FxHashMap::default(),
        class_cache: FxHashMap::default(),
        n_elems: 0,
        cur: 0,
        chains: Vec::new(),
        groups: Vec::new(),
    };
    if n_user > limits.max_rules {
        return Err(CompileError::TooManyRules {
            rule: g.rule(g.root()).name.clone(),
            limit: limits.max_rules,
        });
    }
    for (i, rule) in g.rules().iter().enumerate() {
        lw.cur = i as u32;
        let alts: Vec<&Expr> = match &rule.expr {
            Expr::Alt(v) => v.iter().collect(),
            e => vec![e],
        };
        let mut lowered = Vec::with_capacity(alts.len());
        for a in alts {
            let mut out = Vec::new();
            lw.seq(a, &mut out, 0)?;
            lowered.push(out);
        }
        lw.rules[i] = lowered;
    }
    let mut flat = lw.flatten(g.root().0);
    for (start, fam) in std::mem::take(&mut lw.groups) {
        flat.add_family(start, fam);
        let o = lw.origin[start as usize];
        lw.origin.resize(flat.alts.len(), o);
    }
    repeats::add_loops(&mut flat, &lw.chains, &mut lw.origin, limits);
    check(&flat, &lw.origin)?;
    Ok(flat)
}

impl Lowerer<'_> {
    fn err_name(&self) -> String {
        self.names[self.origin[self.cur as usize] as usize].clone()
    }

    fn push(&mut self, out: &mut Vec<Elem>, e: Elem) -> Result<(), CompileError> {
        self.n_elems += 1;
        if self.n_elems > self.limits.max_elements {
            return Err(CompileError::TooManyElements {
                rule: self.err_name(),
                limit: self.limits.max_elements,
            });
        }
        out.push(e);
        Ok(())
    }

    fn new_rule(&mut self, what: &str) -> Result<u32, CompileError> {
        if self.rules.len() >= self.limits.max_rules {
            return Err(CompileError::TooManyRules {
                rule: self.err_name(),
                limit: self.limits.max_rules,
            });
        }
        let id = self.rules.len() as u32;
        let origin = self.origin[self.cur as usize];
        self.names
            .push(format!("{}/{}{}", self.names[origin as usize], what, id));
        self.origin.push(origin);
        self.rules.push(Vec::new());
        self.n_elems += 1; // each alternative's End is counted with its rule
        Ok(id)
    }

    fn set_id(&mut self, s: ByteSet) -> u32 {
        if let Some(&i) = self.set_ids.get(&s) {
            return i;
        }
        let i = self.sets.len() as u32;
        self.sets.push(s);
        self.set_ids.insert(s, i);
        i
    }

    /// Appends the lowering of `e` to `out`. Iterative (an explicit task stack), so deep
    /// expressions cannot overflow the thread's stack; depth is bounded by the nesting limit.
    fn seq(&mut self, e: &Expr, out: &mut Vec<Elem>, depth: usize) -> Result<(), CompileError> {
        enum Task<'e> {
            /// Lower `expr` into buffer `buf` at nesting `depth`.
            Lower(&'e Expr, usize, usize),
            /// Buffers `first..first + n` are the branches of rule `rule`; append it to `out`.
            Alt {
                rule: u32,
                first: usize,
                n: usize,
                out: usize,
            },
            /// Buffer `unit` is a repeated expression; append the repetition to `out`.
            Repeat {
                unit: usize,
                min: u32,
                max: Option<u32>,
                out: usize,
            },
        }
        let max_depth = self.limits.max_nesting.saturating_mul(4).max(64);
        let mut bufs: Vec<Vec<Elem>> = vec![std::mem::take(out)];
        let mut tasks = vec![Task::Lower(e, 0, depth)];
        while let Some(t) = tasks.pop() {
            match t {
                Task::Lower(e, buf, depth) => {
                    if depth > max_depth {
                        return Err(CompileError::NestingTooDeep {
                            rule: self.err_name(),
                            limit: max_depth,
                        });
                    }
                    match e {
                        Expr::Literal(s) => {
                            for b in s.bytes() {
                                let id = self.set_id(ByteSet::single(b));
                                self.push_buf(&mut bufs[buf], Elem::Bytes(id))?;
                            }
                        }
                        Expr::Class(r) => {
                            let el = self.class_elem(r)?;
                            self.push_buf(&mut bufs[buf], el)?;
                        }
                        Expr::Seq(v) => {
                            tasks.extend(v.iter().rev().map(|x| Task::Lower(x, buf, depth + 1)))
                        }
                        Expr::Alt(v) => {
                            let rule = self.new_rule("alt")?;
                            let first = bufs.len();
                            bufs.extend(v.iter().map(|_| Vec::new()));
                            tasks.push(Task::Alt {
                                rule,
                                first,
                                n: v.len(),
                                out: buf,
                            });
                            tasks.extend(
                                v.iter()
                                    .enumerate()
                                    .rev()
                                    .map(|(i, x)| Task::Lower(x, first + i, depth + 1)),
                            );
                        }
                        Expr::Rule(id) => self.push_buf(&mut bufs[buf], Elem::Rule(id.0))?,
                        Expr::Unordered(u) => {
                            let r = self.unordered(u, depth)?;
                            self.push_buf(&mut bufs[buf], Elem::Rule(r))?;
                        }
                        Expr::Token(t) => {
                            let id = self.token(t)?;
                            self.push_buf(&mut bufs[buf], Elem::Token(id))?;
                        }
                        Expr::NotToken(t) => {
                            let id = self.token(t)?;
                            let el = if self.vocab.is_some() { Elem::NotToken(id) } else { Elem::Token(id) };
                            self.push_buf(&mut bufs[buf], el)?;
                        }
                        Expr::Repeat { expr, min, max } => {
                            let limit = self.limits.max_repeat;
                            let (expr, min, max) = collapse_repeats(expr, *min, *max, limit);
                            let biggest = max.unwrap_or(min).max(min);
                            if biggest > limit {
                                return Err(CompileError::RepeatTooLarge {
                                    rule: self.err_name(),
                                    count: biggest,
                                    limit,
                                });
                            }
                            let unit = bufs.len();
                            bufs.push(Vec::new());
                            tasks.push(Task::Repeat {
                                unit,
                                min,
                                max,
                                out: buf,
                            });
                            tasks.push(Task::Lower(expr, unit, depth + 1));
                        }
                    }
                }
                Task::Alt {
                    rule,
                    first,
                    n,
                    out,
                } => {
                    let alts: Vec<Vec<Elem>> = bufs[first..first + n]
                        .iter_mut()
                        .map(std::mem::take)
                        .collect();
                    self.rules[rule as usize] = alts;
                    self.push_buf(&mut bufs[out], Elem::Rule(rule))?;
                }
                Task::Repeat {
                    unit,
                    min,
                    max,
                    out,
                } => {
                    let unit = std::mem::take(&mut bufs[unit]);
                    let mut o = std::mem::take(&mut bufs[out]);
                    self.repeat(unit, min, max, &mut o)?;
                    bufs[out] = o;
                }
            }
        }
        *out = std::mem::take(&mut bufs[0]);
        Ok(())
    }

    fn push_buf(&mut self, out: &mut Vec<Elem>, e: Elem) -> Result<(), CompileError> {
        self.push(out, e)
    }

    fn repeat(
        &mut self,
        unit: Vec<Elem>,
        min: u32,
        max: Option<u32>,
        out: &mut Vec<Elem>,
    ) -> Result<(), CompileError> {
        let unit = if unit.len() == 1 {
            unit[0]
        } else {
            let r = self.new_rule("group")?;
            self.rules[r as usize] = vec![unit];
            Elem::Rule(r)
        };
        // Mandatory copies before a long chain go into a helper rule that ends with the
        // chain, `R ::= unit^min O_{n-min}`, so that the frame under the last mandatory
        // unit has a loop equivalent (see `repeats`).
        let wrap = matches!(max, Some(n) if min >= 1 && n - min >= repeats::MIN_BUDGET);
        let mut body = Vec::new();
        let target: &mut Vec<Elem> = if wrap { &mut body } else { out };
        for _ in 0..min {
            self.push(target, unit)?;
        }
        match max {
            None => {
                let s = self.new_rule("star")?;
                self.n_elems += 2;
                self.rules[s as usize] = vec![vec![unit, Elem::Rule(s)], vec![]];
                self.push(out, Elem::Rule(s))?;
            }
            Some(n) => {
                let mut prev: Option<u32> = None;
                let first = self.rules.len() as u32;
                for _ in min..n {
                    let o = self.new_rule("opt")?;
                    let mut a = vec![unit];
                    a.extend(prev.map(Elem::Rule));
                    self.n_elems += a.len() + 1;
                    if self.n_elems > self.limits.max_elements {
                        return Err(CompileError::TooManyElements {
                            rule: self.err_name(),
                            limit: self.limits.max_elements,
                        });
                    }
                    self.rules[o as usize] = vec![a, vec![]];
                    prev = Some(o);
                }
                if let Some(p) = prev {
                    // `O_j` (j optional copies left) is rule `first + j - 1`.
                    let mut entry = None;
                    if wrap {
                        self.push(&mut body, Elem::Rule(p))?;
                        let r = self.new_rule("rep")?;
                        self.rules[r as usize] = vec![body];
                        self.push(out, Elem::Rule(r))?;
                        entry = Some(r);
                    } else {
                        self.push(out, Elem::Rule(p))?;
                    }
                    self.chains.push(Chain {
                        first,
                        count: n - min,
                        unit,
                        entry,
                    });
                }
            }
        }
        Ok(())
    }

    /// An unordered group: one rule per member, extra and separator, and the family's start
    /// rule (left without alternatives until [`Flat::add_family`]).
    fn unordered(&mut self, u: &crate::Unordered, depth: usize) -> Result<u32, CompileError> {
        let rule_of = |lw: &mut Self, e: &Expr, what: &str| -> Result<u32, CompileError> {
            let r = lw.new_rule(what)?;
            let mut out = Vec::new();
            lw.seq(e, &mut out, depth + 1)?;
            lw.rules[r as usize] = vec![out];
            Ok(r)
        };
        let mut members = Vec::with_capacity(u.members.len());
        let mut required = vec![0u64; unordered::words(u.members.len())];
        for (i, (m, req)) in u.members.iter().enumerate() {
            members.push(rule_of(self, m, "member")?);
            if *req {
                required[i / 64] |= 1 << (i % 64);
            }
        }
        let extra = match &u.extra {
            Some(x) => Some(rule_of(self, x, "extra")?),
            None => None,
        };
        let sep = rule_of(self, &u.sep, "sep")?;
        let start = self.new_rule("unordered")?;
        let fam = unordered::Family {
            members: members.into_boxed_slice(),
            required: required.into_boxed_slice(),
            extra,
            sep,
            min: u.min,
            max: u.max,
            start,
        };
        self.groups.push((start, fam));
        Ok(start)
    }

    #[inline(never)]
    fn token(&mut self, t: &TokenRef) -> Result<TokenId, CompileError> {
        let Some(v) = self.vocab else {
            return Ok(TokenId(u32::MAX));
        };
        let found = match t {
            TokenRef::Id(id) => (id.index() < v.len()).then_some(*id),
            TokenRef::Name(n) => v
                .special_by_name(n)
                .or_else(|| v.ids().find(|&t| v.token_bytes(t) == n.as_bytes())),
        };
        found.ok_or_else(|| CompileError::UnknownToken {
            rule: self.err_name(),
            token: match t {
                TokenRef::Id(id) => format!("<[{id}]>"),
                TokenRef::Name(n) => n.clone(),
            },
        })
    }

    #[inline(never)]
    fn class_elem(&mut self, ranges: &[(char, char)]) -> Result<Elem, CompileError> {
        if let Some(&e) = self.class_cache.get(ranges) {
            return Ok(e);
        }
        let mut single = ByteSet::default();
        // Multi-byte sequences keyed by their tail; lead bytes merged.
        let mut multi: Vec<(ByteSet, Vec<(u8, u8)>)> = Vec::new();
        for &(a, b) in ranges {
            for seq in Utf8Sequences::new(a, b) {
                let s = seq.as_slice();
                if s.len() == 1 {
                    single.insert_range(s[0].start, s[0].end);
                    continue;
                }
                let tail: Vec<(u8, u8)> = s[1..].iter().map(|r| (r.start, r.end)).collect();
                match multi.iter_mut().find(|(_, t)| *t == tail) {
                    Some((lead, _)) => lead.insert_range(s[0].start, s[0].end),
                    None => {
                        let mut lead = ByteSet::default();
                        lead.insert_range(s[0].start, s[0].end);
                        multi.push((lead, tail));
                    }
                }
            }
        }
        let e = if multi.is_empty() {
            Elem::Bytes(self.set_id(single))
        } else {
            let r = self.new_rule("class")?;
            let mut alts = Vec::new();
            if !single.is_empty() {
                alts.push(vec![Elem::Bytes(self.set_id(single))]);
            }
            for (lead, tail) in multi {
                let mut a = vec![Elem::Bytes(self.set_id(lead))];
                for (lo, hi) in tail {
                    let mut s = ByteSet::default();
                    s.insert_range(lo, hi);
                    a.push(Elem::Bytes(self.set_id(s)));
                }
                self.n_elems += a.len() + 1;
                alts.push(a);
            }
            self.rules[r as usize] = alts;
            Elem::Rule(r)
        };
        self.class_cache.insert(ranges.to_vec(), e);
        Ok(e)
    }

    fn flatten(&mut self, root: u32) -> Flat {
        let mut elems = Vec::with_capacity(self.n_elems + 1);
        let mut alts = Vec::with_capacity(self.rules.len());
        for r in &self.rules {
            let mut starts = Vec::with_capacity(r.len());
            for a in r {
                starts.push(elems.len() as u32);
                elems.extend_from_slice(a);
                elems.push(Elem::End);
            }
            alts.push(starts);
        }
        Flat {
            elems,
            sets: std::mem::take(&mut self.sets),
            alts,
            names: std::mem::take(&mut self.names),
            root,
            repeats: FxHashMap::default(),
            lazy: Default::default(),
        }
    }
}

/// Worklist fixpoint over rules: a rule has the property when one of its alternatives has
/// it for every element; `base` says it for non-rule elements (`None` = "depends on the rule").
/// Rules of unordered groups not expanded yet have it when `pending` is true.
fn fixpoint(flat: &Flat, base: impl Fn(&Elem) -> bool, pending: bool) -> Vec<bool> {
    let n = flat.alts.len();
    let mut has = vec![false; n];
    let mut queue = Vec::new();
    if pending {
        for &r in flat.lazy.pending.keys() {
            has[r as usize] = true;
            queue.push(r);
        }
    }
    // Per alternative: (rule, number of rule references still unknown); `usize::MAX` = never.
    let mut pending: Vec<(u32, usize)> = Vec::new();
    let mut uses: Vec<Vec<u32>> = vec![Vec::new(); n]; // rule -> alternatives referencing it (per occurrence)
    for (r, starts) in flat.alts.iter().enumerate() {
        for &s in starts {
            let a = pending.len() as u32;
            let mut count = 0usize;
            let mut never = false;
            let mut p = s as usize;
            loop {
                match &flat.elems[p] {
                    Elem::End => break,
                    Elem::Rule(x) => {
                        count += 1;
                        uses[*x as usize].push(a);
                    }
                    e => never |= !base(e),
                }
                p += 1;
            }
            pending.push((r as u32, if never { usize::MAX } else { count }));
            if count == 0 && !never && !has[r] {
                has[r] = true;
                queue.push(r as u32);
            }
        }
    }
    while let Some(r) = queue.pop() {
        for &a in &uses[r as usize] {
            let (owner, c) = &mut pending[a as usize];
            if *c == usize::MAX || *c == 0 {
                continue;
            }
            *c -= 1;
            if *c == 0 && !has[*owner as usize] {
                has[*owner as usize] = true;
                queue.push(*owner);
            }
        }
    }
    has
}

/// Which rules match the empty string.
pub(crate) fn nullable(flat: &Flat) -> Vec<bool> {
    fixpoint(flat, |_| false, false)
}

fn check(flat: &Flat, origin: &[u32]) -> Result<(), CompileError> {
    let productive = fixpoint(
        flat,
        |e| match e {
            Elem::Bytes(i) => !flat.sets[*i as usize].is_empty(),
            _ => true,
        },
        true,
    );
    if !productive[flat.root as usize] {
        return Err(CompileError::MatchesNothing {
            rule: flat.names[flat.root as usize].clone(),
        });
    }
    let nullable = nullable(flat);
    // Members and separators of unordered groups consume input (see module `unordered`).
    for f in &flat.lazy.families {
        if let Some(&r) = f.members.iter().chain(f.extra.iter()).chain([&f.sep]).find(|&&r| nullable[r as usize]) {
            return Err(CompileError::EmptyMember { rule: flat.names[origin[r as usize] as usize].clone() });
        }
    }
    // Left-edge graph: r -> (x, pushes a frame?) for each rule x reachable at r's left edge.
    let n = flat.alts.len();
    let mut edges: Vec<Vec<(u32, bool)>> = vec![Vec::new(); n];
    for (r, starts) in flat.alts.iter().enumerate() {
        for &s in starts {
            let mut p = s as usize;
            while let Elem::Rule(x) = flat.elems[p] {
                let tail = flat.elems[p + 1] == Elem::End;
                edges[r].push((x, !tail));
                if !nullable[x as usize] {
                    break;
                }
                p += 1;
            }
        }
    }
    let scc = tarjan(&edges);
    for (r, es) in edges.iter().enumerate() {
        for &(x, push) in es {
            if push && scc[r] == scc[x as usize] {
                let path = cycle_path(&edges, &scc, x, r as u32);
                let user = |i: u32| flat.names[origin[i as usize] as usize].clone();
                let mut names: Vec<String> = Vec::new();
                for i in std::iter::once(r as u32).chain(path) {
                    let u = user(i);
                    if names.last() != Some(&u) {
                        names.push(u);
                    }
                }
                if names.len() > 1 && names.first() == names.last() {
                    names.pop();
                }
                let first = names[0].clone();
                names.push(first.clone());
                return Err(CompileError::LeftRecursion {
                    rule: first,
                    path: names.join(" -> "),
                });
            }
        }
    }
    Ok(())
}

/// A path of rules from `from` to `to` inside one SCC (BFS), `from` first.
fn cycle_path(edges: &[Vec<(u32, bool)>], scc: &[u32], from: u32, to: u32) -> Vec<u32> {
    let mut prev: FxHashMap<u32, u32> = FxHashMap::default();
    let mut q = std::collections::VecDeque::from([from]);
    prev.insert(from, from);
    while let Some(v) = q.pop_front() {
        if v == to {
            break;
        }
        for &(x, _) in &edges[v as usize] {
            if scc[x as usize] == scc[from as usize] && !prev.contains_key(&x) {
                prev.insert(x, v);
                q.push_back(x);
            }
        }
    }
    let mut path = vec![to];
    let mut v = to;
    while v != from {
        match prev.get(&v) {
            Some(&p) => {
                v = p;
                path.push(v);
            }
            None => break,
        }
    }
    path.reverse();
    path
}

/// Tarjan's strongly connected components, iteratively. Returns the component of each node.
fn tarjan(edges: &[Vec<(u32, bool)>]) -> Vec<u32> {
    let n = edges.len();
    const UNSEEN: u32 = u32::MAX;
    let mut index = vec![UNSEEN; n];
    let mut low = vec![0u32; n];
    let mut on_stack = vec![false; n];
    let mut comp = vec![UNSEEN; n];
    let mut stack: Vec<u32> = Vec::new();
    let mut next_index = 0u32;
    let mut next_comp = 0u32;
    // Call stack: (node, next edge to look at).
    let mut calls: Vec<(u32, usize)> = Vec::new();
    for start in 0..n as u32 {
        if index[start as usize] != UNSEEN {
            continue;
        }
        calls.push((start, 0));
        index[start as usize] = next_index;
        low[start as usize] = next_index;
        next_index += 1;
        stack.push(start);
        on_stack[start as usize] = true;
        while let Some(&mut (v, ref mut ei)) = calls.last_mut() {
            let vi = v as usize;
            if *ei < edges[vi].len() {
                let w = edges[vi][*ei].0;
                *ei += 1;
                let wi = w as usize;
                if index[wi] == UNSEEN {
                    index[wi] = next_index;
                    low[wi] = next_index;
                    next_index += 1;
                    stack.push(w);
                    on_stack[wi] = true;
                    calls.push((w, 0));
                } else if on_stack[wi] {
                    low[vi] = low[vi].min(index[wi]);
                }
            } else {
                calls.pop();
                if let Some(&(p, _)) = calls.last() {
                    low[p as usize] = low[p as usize].min(low[vi]);
                }
                if low[vi] == index[vi] {
                    loop {
                        let w = stack.pop().unwrap();
                        on_stack[w as usize] = false;
                        comp[w as usize] = next_comp;
                        if w == v {
                            break;
                        }
                    }
                    next_comp += 1;
                }
            }
        }
    }
    comp
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GrammarBuilder;

    fn build(f: impl FnOnce(&mut GrammarBuilder)) -> Grammar {
        let mut b = GrammarBuilder::new();
        f(&mut b);
        b.build("root").unwrap()
    }

    #[test]
    fn classes_lower_to_disjoint_utf8_alternatives() {
        let g = build(|b| {
            b.define("root", Expr::any_char());
        });
        let f = lower(&g, None, &Limits::default()).unwrap();
        let Elem::Rule(r) = f.elems[f.alts[0][0] as usize] else {
            panic!("expected a class rule")
        };
        let leads: Vec<ByteSet> = f.alts[r as usize]
            .iter()
            .map(|&s| match f.elems[s as usize] {
                Elem::Bytes(i) => f.sets[i as usize],
                _ => panic!(),
            })
            .collect();
        for (i, a) in leads.iter().enumerate() {
            for b in &leads[i + 1..] {
                let mut x = *a;
                for k in 0..4 {
                    x.0[k] &= b.0[k];
                }
                assert!(x.is_empty(), "lead bytes overlap");
            }
        }
        assert_eq!(leads.len(), 8); // ASCII, C2-DF, E0, E1-EC|EE-EF, ED, F0, F1-F3, F4
    }

    #[test]
    fn left_recursion_is_refused_with_the_cycle() {
        let g = build(|b| {
            let x = b.rule_id("x");
            b.define(
                "x",
                Expr::alt([
                    Expr::seq([Expr::Rule(x), Expr::lit("+"), Expr::lit("1")]),
                    Expr::lit("1"),
                ]),
            );
            b.define("root", Expr::Rule(x));
        });
        let e = lower(&g, None, &Limits::default()).unwrap_err();
        assert!(
            matches!(&e, CompileError::LeftRecursion { rule, .. } if rule == "x"),
            "{e}"
        );
        // Indirect, through a nullable prefix.
        let g = build(|b| {
            let a = b.rule_id("a");
            let n = b.rule_id("n");
            b.define("n", Expr::opt(Expr::lit("z")));
            b.define(
                "b",
                Expr::seq([Expr::Rule(n), Expr::Rule(a), Expr::lit("y")]),
            );
            let bb = b.rule_id("b");
            b.define(
                "a",
                Expr::alt([Expr::seq([Expr::Rule(bb), Expr::lit("x")]), Expr::lit("q")]),
            );
            b.define("root", Expr::Rule(a));
        });
        let e = lower(&g, None, &Limits::default()).unwrap_err();
        assert!(matches!(e, CompileError::LeftRecursion { .. }), "{e}");
        // Star of a nullable thing is fine (tail recursion pushes nothing).
        let g = build(|b| {
            b.define("root", Expr::star(Expr::opt(Expr::lit("a"))));
        });
        assert!(lower(&g, None, &Limits::default()).is_ok());
    }

    #[test]
    fn nothing_and_size_limits() {
        let g = build(|b| {
            b.define("root", Expr::seq([Expr::lit("a"), Expr::Class(vec![])]));
        });
        assert!(matches!(
            lower(&g, None, &Limits::default()),
            Err(CompileError::MatchesNothing { .. })
        ));
        let g = build(|b| {
            let r = b.rule_id("root");
            b.define("root", Expr::seq([Expr::lit("a"), Expr::Rule(r)]));
        });
        assert!(matches!(
            lower(&g, None, &Limits::default()),
            Err(CompileError::MatchesNothing { .. })
        ));
        let g = build(|b| {
            b.define("root", Expr::repeat(Expr::lit("a"), 0, Some(1_000_000)));
        });
        assert!(matches!(
            lower(&g, None, &Limits::default()),
            Err(CompileError::RepeatTooLarge { .. })
        ));
        // Nested repetitions share their unit rule: linear size, no blow-up.
        let g = build(|b| {
            b.define(
                "root",
                Expr::repeat(
                    Expr::repeat(Expr::repeat(Expr::lit("ab"), 0, Some(1000)), 1000, None),
                    0,
                    Some(1000),
                ),
            );
        });
        assert!(lower(&g, None, &Limits::default()).unwrap().elems.len() < 20_000);
        let g = build(|b| {
            b.define("root", Expr::lit("x".repeat(500)));
        });
        let small = Limits {
            max_elements: 100,
            ..Limits::default()
        };
        assert!(matches!(
            lower(&g, None, &small),
            Err(CompileError::TooManyElements { .. })
        ));
    }
}
