//! [`ScriptedModel`]: a deterministic fake [`Model`] for testing the loop without weights.
//!
//! Enabled by the `testing` cargo feature. The model has a tiny vocabulary given as byte
//! strings, a greedy longest-match tokenizer, and a *script*: for generated step `i`
//! (counted from the last prompt evaluation), a ranked list of preferred tokens. The first
//! gets logit 10, the second 9, and so on; every other token gets 0. Past the end of the
//! script the first EOS token is preferred. So a greedy sampler follows the script, and a
//! constraint that rejects the first choice makes the loop fall through to the next one.
//!
//! ```
//! use formwork_engine::{generate, testing::ScriptedModel, GenerateOptions, Prompt, SamplerOptions};
//! use std::ops::ControlFlow;
//! let mut m = ScriptedModel::new(&["Hi", "Hel", "lo", " world", "!"], &["<|im_end|>"]);
//! m.script_text("Hello world!");          // then EOS
//! let opts = GenerateOptions { sampler: SamplerOptions::greedy(), ..Default::default() };
//! let g = generate(&mut m, &Prompt::Raw("Hi".into()), &opts, None, &mut |_| ControlFlow::Continue(())).unwrap();
//! assert_eq!(g.text, "Hello world!");
//! ```

use crate::model::{Model, ModelError, ModelInfo};
use formwork_vocab::{TokenId, TokenKind, Vocabulary};
use std::sync::Arc;

/// A [`ScriptedModel`] that writes the next of its `answers` on each generation (the last
/// one again when they run out): the script is set when the loop truncates the cache at
/// the start of a generation. For tests of retries and of anything that generates twice.
#[derive(Debug, Clone)]
pub struct ScriptedAnswers {
    inner: ScriptedModel,
    answers: Vec<String>,
    given: usize,
}

impl ScriptedAnswers {
    /// `answers` on `inner` (its vocabulary must spell them).
    pub fn new(inner: ScriptedModel, answers: &[&str]) -> Self {
        assert!(!answers.is_empty(), "ScriptedAnswers needs at least one answer");
        ScriptedAnswers { inner, answers: answers.iter().map(|s| s.to_string()).collect(), given: 0 }
    }

    /// The scripted model underneath.
    pub fn inner(&self) -> &ScriptedModel {
        &self.inner
    }

    /// The text of the model's last sequence (prompt and answer).
    pub fn last_sequence(&self) -> String {
        let v = self.inner.vocab();
        let bytes: Vec<u8> = self.inner.sequence.iter().flat_map(|&t| v.token_bytes(t).to_vec()).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

impl Model for ScriptedAnswers {
    fn info(&self) -> &ModelInfo {
        self.inner.info()
    }
    fn vocab(&self) -> &Arc<Vocabulary> {
        self.inner.vocab()
    }
    fn tokenize(&self, text: &str, add_bos: bool, parse_special: bool) -> Result<Vec<TokenId>, ModelError> {
        self.inner.tokenize(text, add_bos, parse_special)
    }
    fn n_past(&self) -> usize {
        self.inner.n_past()
    }
    /// `generate` truncates once at its start: the next answer is scripted then.
    fn truncate(&mut self, n: usize) -> Result<(), ModelError> {
        let a = self.answers[self.given.min(self.answers.len() - 1)].clone();
        self.inner.script_text(&a);
        self.given += 1;
        self.inner.truncate(n)
    }
    fn decode(&mut self, tokens: &[TokenId]) -> Result<&[f32], ModelError> {
        self.inner.decode(tokens)
    }
    fn cached_tokens(&self) -> Option<&[TokenId]> {
        self.inner.cached_tokens()
    }
}

/// A scripted fake model (see the module docs).
#[derive(Debug, Clone)]
pub struct ScriptedModel {
    info: ModelInfo,
    vocab: Arc<Vocabulary>,
    script: Vec<Vec<TokenId>>,
    sequence: Vec<TokenId>,
    /// Decode calls since the last `truncate` (the first one evaluates the prompt).
    calls: usize,
    /// Tokens decoded by the calls after the first since the last `truncate`: the position
    /// of the next token in the output, which picks the script step (so a batch of forced
    /// tokens advances the script by its length, as positions do in a real model).
    after_prompt: usize,
    logits: Vec<f32>,
    decoded_total: usize,
}

impl ScriptedModel {
    /// A model over `tokens` (normal text tokens, ids `0..tokens.len()`) followed by the
    /// special tokens `specials` (ids after those); the first special is the EOS token.
    /// Context length 4096, no chat template (ChatML is used), no BOS.
    pub fn new<S: AsRef<[u8]>>(tokens: &[S], specials: &[&str]) -> Self {
        let mut vocab = Vocabulary::from_strings(tokens, specials);
        let eos = vocab.eos_tokens().first().copied().into_iter().collect();
        vocab.set_eos_tokens(eos).expect("EOS inside the vocabulary");
        Self::from_vocabulary(vocab)
    }

    /// A model over an existing vocabulary (its EOS tokens end the script).
    pub fn from_vocabulary(vocab: Vocabulary) -> Self {
        let n = vocab.len();
        ScriptedModel {
            info: ModelInfo {
                name: "scripted".into(),
                chat_template: None,
                bos_token: None,
                eos_token: vocab.eos_tokens().first().map(|&e| String::from_utf8_lossy(vocab.token_bytes(e)).into_owned()),
                add_bos: false,
                context_length: 4096,
                trained_context_length: 4096,
            },
            vocab: Arc::new(vocab),
            script: Vec::new(),
            sequence: Vec::new(),
            calls: 0,
            after_prompt: 0,
            logits: vec![0.0; n],
            decoded_total: 0,
        }
    }

    /// Sets the context length.
    pub fn with_context_length(mut self, n: usize) -> Self {
        self.info.context_length = n;
        self.info.trained_context_length = n;
        self
    }

    /// Sets the chat template (and the BOS/EOS strings it sees).
    pub fn with_chat_template(mut self, template: &str, bos: Option<&str>) -> Self {
        self.info.chat_template = Some(template.to_string());
        self.info.bos_token = bos.map(str::to_string);
        self
    }

    /// Sets the script: for each generated step, the ranked preferred tokens.
    pub fn set_script(&mut self, steps: Vec<Vec<TokenId>>) {
        self.script = steps;
    }

    /// Scripts the tokenization of `text` (one preferred token per step), then EOS.
    pub fn script_text(&mut self, text: &str) {
        let toks = self.tokenize(text, false, true).expect("script text must be tokenizable with the vocabulary");
        self.script = toks.into_iter().map(|t| vec![t]).collect();
    }

    /// The id of the token whose bytes are `s` (panics when there is none: a test bug).
    pub fn token(&self, s: &str) -> TokenId {
        self.vocab
            .ids()
            .find(|&t| self.vocab.token_bytes(t) == s.as_bytes())
            .unwrap_or_else(|| panic!("no token {s:?} in the scripted vocabulary"))
    }

    /// Total tokens evaluated over the model's life (to observe prefix reuse).
    pub fn decoded_total(&self) -> usize {
        self.decoded_total
    }

    fn fill_logits(&mut self) {
        self.logits.iter_mut().for_each(|l| *l = 0.0);
        let step = self.after_prompt;
        let prefs: Vec<TokenId> = match self.script.get(step) {
            Some(p) => p.clone(),
            None => self.vocab.eos_tokens().first().copied().into_iter().collect(),
        };
        for (rank, t) in prefs.iter().enumerate() {
            self.logits[t.index()] = 10.0 - rank as f32;
        }
    }
}

impl Model for ScriptedModel {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn vocab(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    /// Greedy longest match; with `parse_special`, special-token names are matched first.
    fn tokenize(&self, text: &str, add_bos: bool, parse_special: bool) -> Result<Vec<TokenId>, ModelError> {
        let bytes = text.as_bytes();
        let mut out = Vec::new();
        if add_bos {
            if let Some(b) = self.info.bos_token.as_deref().and_then(|b| self.vocab.special_by_name(b)) {
                out.push(b);
            }
        }
        let mut i = 0;
        while i < bytes.len() {
            let mut best: Option<(usize, TokenId)> = None;
            for t in self.vocab.ids() {
                let kind = self.vocab.kind(t);
                let usable = match kind {
                    TokenKind::Special => parse_special,
                    TokenKind::Unused => false,
                    _ => true,
                };
                let tb = self.vocab.token_bytes(t);
                if usable && !tb.is_empty() && bytes[i..].starts_with(tb) {
                    let better = match best {
                        None => true,
                        Some((len, bt)) => {
                            let special = kind == TokenKind::Special;
                            let best_special = self.vocab.kind(bt) == TokenKind::Special;
                            (special && !best_special) || (special == best_special && tb.len() > len)
                        }
                    };
                    if better {
                        best = Some((tb.len(), t));
                    }
                }
            }
            let Some((len, t)) = best else {
                return Err(ModelError::Tokenize(format!(
                    "the scripted vocabulary cannot tokenize {:?}",
                    String::from_utf8_lossy(&bytes[i..])
                )));
            };
            out.push(t);
            i += len;
        }
        Ok(out)
    }

    fn n_past(&self) -> usize {
        self.sequence.len()
    }

    fn truncate(&mut self, n: usize) -> Result<(), ModelError> {
        self.sequence.truncate(n);
        self.calls = 0;
        self.after_prompt = 0;
        Ok(())
    }

    fn decode(&mut self, tokens: &[TokenId]) -> Result<&[f32], ModelError> {
        if tokens.is_empty() {
            return Err(ModelError::Decode("decode called with no tokens".into()));
        }
        if self.sequence.len() + tokens.len() > self.info.context_length {
            return Err(ModelError::ContextOverflow {
                needed: self.sequence.len() + tokens.len(),
                context: self.info.context_length,
            });
        }
        if let Some(t) = tokens.iter().find(|t| t.index() >= self.vocab.len()) {
            return Err(ModelError::Decode(format!("token {t} outside the vocabulary")));
        }
        self.sequence.extend_from_slice(tokens);
        self.decoded_total += tokens.len();
        if self.calls > 0 {
            self.after_prompt += tokens.len();
        }
        self.calls += 1;
        self.fill_logits();
        Ok(&self.logits)
    }

    fn cached_tokens(&self) -> Option<&[TokenId]> {
        Some(&self.sequence)
    }
}

/// A [`ScriptedModel`] with several sequences, as a [`BatchModel`](crate::batch::BatchModel):
/// each sequence follows the same script (or its own, [`ScriptedBatchModel::set_seq_script`]),
/// its step counted from the evaluation that finished its prompt. Records the largest batch.
#[derive(Debug)]
pub struct ScriptedBatchModel {
    seqs: Vec<ScriptedModel>,
    /// Per sequence: whether the last entry finished a prompt (the script starts after it).
    started: Vec<bool>,
    logits: Vec<Vec<f32>>,
    max_batch_tokens: usize,
    /// A batch holding this token fails (to test failure isolation).
    fail_token: Option<TokenId>,
    /// Each decode call sleeps this long (to make steps observable).
    step_delay: std::time::Duration,
    /// Sequences can be copied ([`BatchModel::seq_copy`](crate::batch::BatchModel::seq_copy)).
    copies: bool,
    /// Claims [`BatchModel::equal_micro_batches`](crate::batch::BatchModel::equal_micro_batches).
    equal: bool,
    /// Each decode call's entries, as token counts (for tests that look at the steps).
    step_log: Option<Arc<std::sync::Mutex<Vec<Vec<usize>>>>>,
    /// Claims [`BatchModel::contiguous_seqs`](crate::batch::BatchModel::contiguous_seqs)
    /// and swaps sequences (their state, script position included).
    contiguous: bool,
    /// Each decode call's sequence ids.
    seq_log: Option<Arc<std::sync::Mutex<Vec<Vec<u32>>>>>,
}

impl ScriptedBatchModel {
    /// `n_seq` sequences over the vocabulary of [`ScriptedModel::new`].
    pub fn new<S: AsRef<[u8]>>(tokens: &[S], specials: &[&str], n_seq: usize) -> Self {
        Self::from_model(ScriptedModel::new(tokens, specials), n_seq)
    }

    /// `n_seq` copies of `model` (its script, vocabulary and context length per sequence).
    pub fn from_model(model: ScriptedModel, n_seq: usize) -> Self {
        ScriptedBatchModel {
            seqs: vec![model; n_seq.max(1)],
            started: vec![false; n_seq.max(1)],
            logits: Vec::new(),
            max_batch_tokens: 512,
            fail_token: None,
            step_delay: std::time::Duration::ZERO,
            copies: false,
            equal: false,
            step_log: None,
            contiguous: false,
            seq_log: None,
        }
    }

    /// Claims equal micro-batches, as llama.cpp with a KV stream per sequence does.
    pub fn with_equal_micro_batches(mut self) -> Self {
        self.equal = true;
        self
    }

    /// Records each decode call's entries (their token counts) in `log`.
    pub fn with_step_log(mut self, log: Arc<std::sync::Mutex<Vec<Vec<usize>>>>) -> Self {
        self.step_log = Some(log);
        self
    }

    /// Claims that an evaluation covers one run of consecutive sequence ids, as llama.cpp
    /// with a KV stream per sequence does, and swaps sequences (so the batcher moves them).
    pub fn with_contiguous_seqs(mut self) -> Self {
        self.contiguous = true;
        self
    }

    /// Records each decode call's sequence ids in `log`.
    pub fn with_seq_log(mut self, log: Arc<std::sync::Mutex<Vec<Vec<u32>>>>) -> Self {
        self.seq_log = Some(log);
        self
    }

    /// Sequences can be copied, so the batcher may start a request from another slot's
    /// prefix.
    pub fn with_seq_copy(mut self) -> Self {
        self.copies = true;
        self
    }

    /// Scripts every sequence with `text` (see [`ScriptedModel::script_text`]).
    pub fn script_text(&mut self, text: &str) {
        self.seqs.iter_mut().for_each(|s| s.script_text(text));
    }

    /// Scripts one sequence.
    pub fn set_seq_script(&mut self, seq: usize, steps: Vec<Vec<TokenId>>) {
        self.seqs[seq].set_script(steps);
    }

    /// Most tokens per batch.
    pub fn with_max_batch_tokens(mut self, n: usize) -> Self {
        self.max_batch_tokens = n.max(1);
        self
    }

    /// Any batch holding `t` fails (a model error), to test that only its sequence fails.
    pub fn with_failing_token(mut self, t: TokenId) -> Self {
        self.fail_token = Some(t);
        self
    }

    /// Every decode call takes at least `d`.
    pub fn with_step_delay(mut self, d: std::time::Duration) -> Self {
        self.step_delay = d;
        self
    }

    /// The token whose bytes are `s`.
    pub fn token(&self, s: &str) -> TokenId {
        self.seqs[0].token(s)
    }
}

struct ScriptedTokenizer(ScriptedModel);

impl crate::batch::Tokenize for ScriptedTokenizer {
    fn tokenize(&self, text: &str, add_bos: bool, parse_special: bool) -> Result<Vec<TokenId>, ModelError> {
        self.0.tokenize(text, add_bos, parse_special)
    }
}

impl crate::batch::BatchModel for ScriptedBatchModel {
    fn info(&self) -> &ModelInfo {
        &self.seqs[0].info
    }
    fn vocab(&self) -> &Arc<Vocabulary> {
        &self.seqs[0].vocab
    }
    fn tokenizer(&self) -> Arc<dyn crate::batch::Tokenize> {
        Arc::new(ScriptedTokenizer(self.seqs[0].clone()))
    }
    fn n_seq(&self) -> usize {
        self.seqs.len()
    }
    fn max_batch_tokens(&self) -> usize {
        self.max_batch_tokens
    }
    fn seq_keep(&mut self, seq: crate::batch::SeqId, n: usize) -> bool {
        let s = &mut self.seqs[seq.index()];
        if n < s.sequence.len() || n == 0 {
            s.sequence.truncate(n);
            s.after_prompt = 0;
            s.calls = 0;
            self.started[seq.index()] = false;
        }
        true
    }
    fn can_copy_seqs(&self) -> bool {
        self.copies
    }
    fn equal_micro_batches(&self) -> bool {
        self.equal
    }
    fn contiguous_seqs(&self) -> bool {
        self.contiguous
    }
    fn seq_swap(&mut self, a: crate::batch::SeqId, b: crate::batch::SeqId) -> bool {
        if !self.contiguous || a == b {
            return false;
        }
        self.seqs.swap(a.index(), b.index());
        self.started.swap(a.index(), b.index());
        true
    }
    fn seq_copy(&mut self, src: crate::batch::SeqId, dst: crate::batch::SeqId) -> bool {
        if !self.copies {
            return false;
        }
        let copied = self.seqs[src.index()].sequence.clone();
        let d = &mut self.seqs[dst.index()];
        d.sequence = copied;
        d.after_prompt = 0;
        d.calls = 0;
        self.started[dst.index()] = false;
        true
    }
    fn decode_batch(&mut self, entries: &[crate::batch::BatchEntry<'_>]) -> Result<(), ModelError> {
        if !self.step_delay.is_zero() {
            std::thread::sleep(self.step_delay);
        }
        if let Some(log) = &self.step_log {
            log.lock().unwrap_or_else(|e| e.into_inner()).push(entries.iter().map(|e| e.tokens.len()).collect());
        }
        if let Some(log) = &self.seq_log {
            log.lock().unwrap_or_else(|e| e.into_inner()).push(entries.iter().map(|e| e.seq.0).collect());
        }
        let total: usize = entries.iter().map(|e| e.tokens.len()).sum();
        if total > self.max_batch_tokens {
            return Err(ModelError::Decode(format!("batch of {total} tokens over the limit {}", self.max_batch_tokens)));
        }
        if let Some(bad) = self.fail_token {
            if entries.iter().any(|e| e.tokens.contains(&bad)) {
                return Err(ModelError::Decode(format!("scripted failure on token {bad}")));
            }
        }
        for e in entries {
            let s = &self.seqs[e.seq.index()];
            if e.pos != s.sequence.len() {
                return Err(ModelError::Decode(format!("entry at position {} but sequence {} holds {}", e.pos, e.seq.0, s.sequence.len())));
            }
        }
        self.logits.clear();
        for e in entries {
            let i = e.seq.index();
            let s = &mut self.seqs[i];
            s.sequence.extend_from_slice(e.tokens);
            s.decoded_total += e.tokens.len();
            if self.started[i] {
                s.after_prompt += e.tokens.len();
            }
            if e.logits {
                self.started[i] = true;
                s.fill_logits();
                self.logits.push(s.logits.clone());
            }
        }
        Ok(())
    }
    fn logits(&self, i: usize) -> &[f32] {
        &self.logits[i]
    }
}

/// A constraint with its budget planning hidden: it forwards the mask, the checks and the
/// commits of the constraint inside, but offers no completion plan (the trait's defaults),
/// so the generation loop does not steer toward closing and the token budget cuts the
/// output where it falls — the behaviour before truncation-proof output, for comparisons.
pub struct NoPlan<C>(pub C);

impl<C: crate::constraint::Constraint> crate::constraint::Constraint for NoPlan<C> {
    fn compute_mask(&mut self, mask: &mut formwork_vocab::TokenMask) {
        self.0.compute_mask(mask)
    }
    fn is_allowed(&mut self, t: TokenId) -> bool {
        self.0.is_allowed(t)
    }
    fn commit(&mut self, t: TokenId) -> Result<(), String> {
        self.0.commit(t)
    }
    fn is_accepting(&self) -> bool {
        self.0.is_accepting()
    }
    fn is_complete(&mut self) -> Option<bool> {
        self.0.is_complete()
    }
}
