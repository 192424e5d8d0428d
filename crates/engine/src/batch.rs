//! Many sequences on one model: the [`BatchModel`] seam and the [`Batcher`] that steps them
//! together (continuous batching).
//!
//! ## The design
//! A [`BatchModel`] holds several sequences (a llama.cpp context with several sequence ids and
//! a KV-cache stream each). One [`BatchModel::decode_batch`] call evaluates a batch of
//! `(sequence, position, tokens)` entries at once and yields the logits of the entries that
//! asked for them. Evaluating 16 sequences' next tokens in one batch costs far less than 16
//! single steps: the weights are read once. (A model as small as the default one on 2 cores
//! is bound by arithmetic rather than by reading the weights, so there a 16-token step
//! costs about 7 single ones: 73–76 ms against 10, see the README.)
//!
//! The [`Batcher`] owns the model on its own thread (the *step thread*) and hands out
//! [`Sequence`]s. A `Sequence` implements [`Model`], so the one generation loop
//! ([`crate::generate`], and everything built on it: reasoning, retries, budgets, forced
//! tokens, tool calls) runs unchanged on a batched model, one session per thread: its
//! [`Model::decode`] submits the tokens and blocks until the step that evaluated them. The
//! step thread runs a step when every sequence it served in the last step has come back with
//! its next tokens (or [`BatcherOptions::max_wait`] after the last step, so a session busy
//! with something slow never holds the others up for more than that). New sequences join
//! at the next step and finished ones leave: continuous batching. Sessions sample and compute
//! their masks in parallel, on their own threads, between steps.
//!
//! - **Chunked prefill**: a step holds at most [`BatchModel::max_batch_tokens`] tokens. The
//!   sequences that are generating (a few tokens each) go first; prompts fill what is left,
//!   in arrival order, and a long prompt is evaluated over several steps. So a long prompt
//!   never stalls the sequences already generating.
//! - **Prefix reuse per slot**: each slot keeps what its KV cache holds after its sequence
//!   ends. [`Batcher::acquire`] routes a new request to the free slot whose cached tokens
//!   share the longest prefix with its prompt (the least recently used on a tie), and the
//!   loop's own prefix reuse ([`Model::cached_tokens`]) keeps that prefix.
//! - **Per-slot context**: each sequence has `ModelInfo::context_length` positions of its
//!   own, so one long conversation cannot starve the others.
//! - **Sequences on consecutive ids**: llama.cpp with a KV stream per sequence evaluates
//!   one run of consecutive sequence ids at a time, so a step over slots `0, 2, 5` costs three
//!   evaluations. When requests end in the middle of the slots, the step thread moves the
//!   sequence on the highest slot in use into the lowest free one
//!   ([`BatchModel::seq_swap`]: the two caches change places, so the free slot's cache
//!   stays a prefix cache, unless it is much longer than the moved sequence, then it is
//!   dropped to bound the copy; a sequence of over 2,048 positions stays). A [`Sequence`] is a handle that follows its sequence to
//!   whichever slot holds it.
//! - **Failures stay with their sequence**: a batch the model refuses is evaluated again
//!   entry by entry, so only the entry at fault gets the error, and its KV cache is rolled
//!   back to where it was.
//!
//! ## Cost
//! Per generated token and sequence: one hand-off to the step thread and back (a mutex, two
//! condition-variable wake-ups, a few µs) and one copy of the logits (4 bytes per vocabulary
//! entry). Against a decode step of milliseconds this is noise.
//!
//! ```
//! use formwork_engine::batch::{Batcher, BatcherOptions};
//! use formwork_engine::testing::ScriptedBatchModel;
//! use formwork_engine::{generate, GenerateOptions, Prompt, SamplerOptions};
//! use std::ops::ControlFlow;
//! // Each step takes 20 ms, so sequences that start together share steps even on a busy
//! // machine; the barrier makes them start together.
//! let mut model = ScriptedBatchModel::new(&["Hi", "Hel", "lo", "!"], &["</s>"], 4)
//!     .with_step_delay(std::time::Duration::from_millis(20));
//! model.script_text("Hello!");
//! let batcher = Batcher::new(Box::new(model), BatcherOptions::default());
//! let start = std::sync::Arc::new(std::sync::Barrier::new(4));
//! let threads: Vec<_> = (0..4).map(|_| {
//!     let (b, start) = (batcher.clone(), start.clone());
//!     std::thread::spawn(move || {
//!         let prompt = Prompt::Raw("Hi".into());
//!         let mut seq = b.acquire(&b.prompt_tokens(&prompt).unwrap());
//!         start.wait();
//!         let opts = GenerateOptions { sampler: SamplerOptions::greedy(), ..Default::default() };
//!         generate(&mut seq, &prompt, &opts, None, &mut |_| ControlFlow::Continue(())).unwrap().text
//!     })
//! }).collect();
//! for t in threads { assert_eq!(t.join().unwrap(), "Hello!"); }
//! assert!(batcher.stats().max_batch_sequences >= 2);
//! ```

mod step;
use step::step_loop;

use crate::generate::{tokenize_prompt, EngineError, Prompt};
use crate::model::{Model, ModelError, ModelInfo};
use formwork_vocab::{TokenId, Vocabulary};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub use formwork_model::batch::{BatchEntry, BatchModel, SeqId, Tokenize};

/// How the [`Batcher`] steps.
#[derive(Clone, Debug)]
pub struct BatcherOptions {
    /// The longest a step waits, after the previous one, for a sequence it served to come
    /// back with its next tokens (while others are ready). Sequences that sample and mask
    /// quickly always make the next step; this bounds what a slow one costs the others.
    /// Default 25 ms: with 3 ms, 16 sessions sampling on 2 cores were often cut off and then
    /// competed with the decode for the cores (`bench serve`, 16 clients: 105 → 115 tok/s
    /// with the schema, 115 → 123 without, one run each).
    pub max_wait: Duration,
    /// Move sequences to close gaps between the slots in use, where the model evaluates one
    /// run of consecutive ids at a time (see "Sequences on consecutive ids" above). Default
    /// on; off only to measure what it gains (`formwork serve` reads `FORMWORK_BATCH_MOVES=0`).
    pub move_sequences: bool,
}

impl Default for BatcherOptions {
    fn default() -> Self {
        BatcherOptions { max_wait: Duration::from_millis(25), move_sequences: true }
    }
}

/// Counters of a [`Batcher`] (for `/metrics` and benchmarks).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatchStats {
    /// Steps run (model calls).
    pub steps: u64,
    /// Tokens evaluated, prompts included.
    pub tokens: u64,
    /// Entries that got logits (generated-token steps and finished prompts).
    pub logits: u64,
    /// Most sequences in one step.
    pub max_batch_sequences: usize,
    /// Sequences handed out now.
    pub in_use: usize,
    /// Slots in all.
    pub slots: usize,
    /// Prompt tokens reused from the slots' caches (routing's estimate, copies included).
    pub reused_tokens: u64,
    /// Requests that started from a prefix copied from another slot's cache.
    pub prefix_copies: u64,
    /// Sequences moved to a lower slot to close a gap between the slots in use.
    pub moves: u64,
}

/// What a session asks of the step thread.
struct Request {
    /// The sequence's handle (see [`State::slot_of`]).
    seq: SeqId,
    /// The slot that holds it, set by the step thread for the step (sequences move).
    slot: SeqId,
    /// The sequence keeps this many of its cached positions first (a pending truncation).
    keep: usize,
    /// The tokens before `keep` (only sent when a truncation is pending: evaluated again
    /// when the model cannot drop a suffix).
    prefix: Option<Vec<TokenId>>,
    /// A prompt (the first decode after the sequence was handed out or truncated), not
    /// generated or forced tokens.
    prompt: bool,
    /// Start from this slot's cache: copy it, keep `keep` positions (they equal `prefix`).
    /// Set by the step thread from the slot's record ([`Slot::copy_from`]).
    copy_from: Option<SeqId>,
    tokens: Vec<TokenId>,
    /// How many of `tokens` are evaluated so far (chunked prefill).
    done: usize,
    /// The buffer the logits are copied into (the session's own, lent to the step).
    logits: Vec<f32>,
    reply: Arc<Reply>,
}

#[derive(Default)]
struct Reply {
    slot: Mutex<Option<Result<Vec<f32>, (ModelError, usize)>>>,
    ready: Condvar,
}

struct Slot {
    /// The tokens its KV cache holds, as the step thread last left it.
    cached: Vec<TokenId>,
    /// The handle of the sequence using it.
    handle: Option<SeqId>,
    /// The slot whose cache this one's sequence starts from, until its first step (routing
    /// planned a copy; moves keep it pointing at the slot that holds that cache).
    copy_from: Option<usize>,
    /// When it was last released (LRU among equal prefixes).
    released: u64,
}

struct State {
    slots: Vec<Slot>,
    /// Sequences are moved to close gaps ([`BatchModel::contiguous_seqs`]); off after a
    /// swap the model refused.
    compact: bool,
    pending: Vec<Request>,
    /// Sequences served by the last step that have not come back yet.
    awaited: Vec<SeqId>,
    last_step_end: Instant,
    clock: u64,
    shutdown: bool,
    stats: BatchStats,
}

/// What the batcher's handles, its sequences and the step thread share: the state behind one
/// lock, the condition variables that wake the step thread and waiting sessions, and the
/// model's fixed facts.
struct BatcherInner {
    state: Mutex<State>,
    /// Wakes the step thread (a request arrived, a sequence was released, shutdown).
    work: Condvar,
    /// Wakes sessions waiting for a free slot.
    freed: Condvar,
    info: ModelInfo,
    vocab: Arc<Vocabulary>,
    tokenizer: Arc<dyn Tokenize>,
    max_wait: Duration,
    /// The model can copy a sequence's cache to another (routing may plan copies).
    can_copy: bool,
    /// The model's embedding capability (it runs beside the step thread, not on it).
    embedder: Option<Arc<dyn formwork_model::embed::Embed>>,
}

impl State {
    /// The slot that holds the sequence of `handle` (a [`Sequence`]'s `seq`) now, if it is
    /// in use: sequences move (see "Sequences on consecutive ids").
    fn slot_of(&self, handle: SeqId) -> Option<usize> {
        self.slots.iter().position(|s| s.handle == Some(handle))
    }
}

impl BatcherInner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Steps many [`Sequence`]s of one [`BatchModel`] together. Cloning shares it; the step
/// thread ends when the last clone and the last sequence are dropped.
#[derive(Clone)]
pub struct Batcher {
    shared: Arc<BatcherInner>,
    _owner: Arc<Owner>,
}

/// Stops the step thread when the last [`Batcher`] clone goes.
struct Owner(Arc<BatcherInner>);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.lock().shutdown = true;
        self.0.work.notify_all();
    }
}

impl std::fmt::Debug for Batcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batcher").field("model", &self.shared.info.name).field("stats", &self.stats()).finish()
    }
}

impl Batcher {
    /// Starts the step thread over `model`.
    pub fn new(model: Box<dyn BatchModel>, options: BatcherOptions) -> Self {
        let n = model.n_seq().max(1);
        let shared = Arc::new(BatcherInner {
            state: Mutex::new(State {
                slots: (0..n).map(|_| Slot { cached: Vec::new(), handle: None, copy_from: None, released: 0 }).collect(),
                compact: options.move_sequences && model.contiguous_seqs(),
                pending: Vec::new(),
                awaited: Vec::new(),
                last_step_end: Instant::now(),
                clock: 0,
                shutdown: false,
                stats: BatchStats { slots: n, ..Default::default() },
            }),
            work: Condvar::new(),
            freed: Condvar::new(),
            info: model.info().clone(),
            vocab: model.vocab().clone(),
            tokenizer: model.tokenizer(),
            max_wait: options.max_wait,
            can_copy: model.can_copy_seqs(),
            embedder: model.embedder(),
        });
        let s = shared.clone();
        std::thread::Builder::new()
            .name(format!("batch-{}", shared.info.name))
            .spawn(move || step_loop(model, s))
            .expect("cannot start the batch step thread");
        Batcher { _owner: Arc::new(Owner(shared.clone())), shared }
    }

    /// Static facts; `context_length` is one sequence's room.
    pub fn info(&self) -> &ModelInfo {
        &self.shared.info
    }

    /// The vocabulary.
    pub fn vocab(&self) -> &Arc<Vocabulary> {
        &self.shared.vocab
    }

    /// The model's embedding capability ([`BatchModel::embedder`]), if it has one.
    pub fn embedder(&self) -> Option<Arc<dyn formwork_model::embed::Embed>> {
        self.shared.embedder.clone()
    }

    /// Counters.
    pub fn stats(&self) -> BatchStats {
        self.shared.lock().stats
    }

    /// The prompt's tokens as [`generate`](crate::generate) will evaluate them (for routing
    /// with [`acquire`](Self::acquire)).
    pub fn prompt_tokens(&self, prompt: &Prompt) -> Result<Vec<TokenId>, EngineError> {
        tokenize_prompt(&Probe(&self.shared), prompt)
    }

    /// A sequence for a request whose prompt is `prompt` (tokens; may be empty): the free
    /// slot whose cache shares the longest prefix with it. Blocks while every slot is in use.
    pub fn acquire(&self, prompt: &[TokenId]) -> Sequence {
        let mut st = self.shared.lock();
        loop {
            if let Some(route) = route(&st.slots, prompt, self.shared.can_copy) {
                return self.bind(&mut st, route);
            }
            st = self.shared.freed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Like [`acquire`](Self::acquire), but `None` at once when every slot is in use.
    pub fn try_acquire(&self, prompt: &[TokenId]) -> Option<Sequence> {
        let mut st = self.shared.lock();
        route(&st.slots, prompt, self.shared.can_copy).map(|r| self.bind(&mut st, r))
    }

    fn bind(&self, st: &mut State, route: Route) -> Sequence {
        let i = route.slot;
        st.stats.reused_tokens += route.reused as u64;
        let (cached, copy_from) = match route.copy_from {
            Some(src) => {
                st.stats.prefix_copies += 1;
                (st.slots[src].cached[..route.reused].to_vec(), Some(SeqId(src as u32)))
            }
            None => (st.slots[i].cached.clone(), None),
        };
        // Handles and slots are numbered alike; a handle starts on the slot of its number when
        // that number is free (a moved sequence may hold it).
        let taken = |h: usize| st.slots.iter().any(|s| s.handle == Some(SeqId(h as u32)));
        let handle = if !taken(i) { i } else { (0..st.slots.len()).find(|&h| !taken(h)).expect("a free slot leaves a handle free") };
        st.slots[i].handle = Some(SeqId(handle as u32));
        st.slots[i].copy_from = route.copy_from;
        st.stats.in_use += 1;
        Sequence {
            shared: self.shared.clone(),
            _owner: self._owner.clone(),
            seq: SeqId(handle as u32),
            evaluated: cached.len(),
            tokens: cached,
            // A copied prefix is a pending change of the slot's cache, like a truncation.
            truncated: copy_from.is_some(),
            prompting: true,
            logits: Vec::with_capacity(self.shared.vocab.len()),
            logits_valid: false,
            reply: Arc::new(Reply::default()),
        }
    }
}

/// Where a request goes: a free slot, and the cached prefix it starts from (its own, or
/// one copied from another slot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Route {
    slot: usize,
    /// Prompt tokens the sequence starts with (not evaluated again).
    reused: usize,
    /// The slot whose cache is copied first.
    copy_from: Option<usize>,
}

/// What copying a prefix from another slot costs, in tokens of prefill: a copy moves a
/// slot's whole KV buffer, about what evaluating a few tokens costs on small models.
const COPY_COST: usize = 16;

/// Routing. Without copies: the free slot sharing the longest prefix with `prompt`, least
/// recently released first. With copies ([`BatchModel::can_copy_seqs`]), the request may
/// start from the longest prefix any slot holds (free or in use), and the free slot it
/// goes to is the cheapest by `2 × prefill + destroyed (+ 2 × COPY_COST for a copy)`:
/// `prefill` the prompt tokens still to evaluate, `destroyed` the cached tokens of that
/// slot the prompt does not share (another conversation's, which would have to be
/// evaluated again if it came back). So a slot holding a different conversation keeps it,
/// as a prefix cache would, and a shared head (a system prompt) is copied, not recomputed.
fn route(slots: &[Slot], prompt: &[TokenId], can_copy: bool) -> Option<Route> {
    let common = |s: &Slot| s.cached.iter().zip(prompt).take_while(|(a, b)| a == b).count();
    if !can_copy {
        return slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.handle.is_none())
            // Ties go to the lowest slot, which keeps the slots in use together.
            .max_by_key(|&(i, s)| (common(s), std::cmp::Reverse(s.released), std::cmp::Reverse(i)))
            .map(|(i, s)| Route { slot: i, reused: common(s), copy_from: None });
    }
    // The prompt's last token is always evaluated (its logits are needed): a prefix longer
    // than that is worth no more.
    let useful = prompt.len().saturating_sub(1);
    let (best, best_len) = slots.iter().enumerate().map(|(i, s)| (i, common(s).min(useful))).max_by_key(|&(_, l)| l)?;
    let mut choice: Option<(usize, u64, Route)> = None; // (score, released, route)
    for (i, s) in slots.iter().enumerate().filter(|(_, s)| s.handle.is_none()) {
        let shared = common(s);
        let own = shared.min(useful);
        let destroyed = s.cached.len() - shared;
        let mut options = vec![(2 * (useful - own) + destroyed, Route { slot: i, reused: own, copy_from: None })];
        if best != i && best_len > own {
            let copy = Route { slot: i, reused: best_len, copy_from: Some(best) };
            options.push((2 * (useful - best_len) + destroyed + 2 * COPY_COST, copy));
        }
        for (score, r) in options {
            if choice.as_ref().is_none_or(|&(sc, rel, _)| (score, s.released) < (sc, rel)) {
                choice = Some((score, s.released, r));
            }
        }
    }
    choice.map(|(_, _, r)| r)
}

/// The model facts and tokenizer without a sequence: what [`tokenize_prompt`] needs.
struct Probe<'a>(&'a BatcherInner);

impl Model for Probe<'_> {
    fn info(&self) -> &ModelInfo {
        &self.0.info
    }
    fn vocab(&self) -> &Arc<Vocabulary> {
        &self.0.vocab
    }
    fn tokenize(&self, text: &str, add_bos: bool, parse_special: bool) -> Result<Vec<TokenId>, ModelError> {
        self.0.tokenizer.tokenize(text, add_bos, parse_special)
    }
    fn n_past(&self) -> usize {
        0
    }
    fn truncate(&mut self, _: usize) -> Result<(), ModelError> {
        Ok(())
    }
    fn decode(&mut self, _: &[TokenId]) -> Result<&[f32], ModelError> {
        Err(ModelError::Decode("a probe has no sequence".into()))
    }
}

/// One sequence of a [`Batcher`]: a [`Model`] whose decodes are batched with the other
/// sequences'. Dropping it frees its slot (the slot keeps its cache for prefix reuse).
pub struct Sequence {
    shared: Arc<BatcherInner>,
    _owner: Arc<Owner>,
    seq: SeqId,
    /// The sequence's tokens as the generation loop sees them.
    tokens: Vec<TokenId>,
    /// Of `tokens`, how many the KV cache holds unchanged (a truncation lowers it; the next
    /// decode tells the step thread).
    evaluated: usize,
    truncated: bool,
    /// The next decode is a prompt (see `Request::prompt`).
    prompting: bool,
    logits: Vec<f32>,
    logits_valid: bool,
    reply: Arc<Reply>,
}

impl std::fmt::Debug for Sequence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sequence").field("seq", &self.seq).field("n_past", &self.tokens.len()).finish()
    }
}

impl Sequence {
    /// Which slot holds this sequence now (the batcher may move it to close gaps).
    pub fn id(&self) -> SeqId {
        let st = self.shared.lock();
        st.slot_of(self.seq).map_or(self.seq, |i| SeqId(i as u32))
    }
}

impl Model for Sequence {
    fn info(&self) -> &ModelInfo {
        &self.shared.info
    }

    fn vocab(&self) -> &Arc<Vocabulary> {
        &self.shared.vocab
    }

    fn tokenize(&self, text: &str, add_bos: bool, parse_special: bool) -> Result<Vec<TokenId>, ModelError> {
        self.shared.tokenizer.tokenize(text, add_bos, parse_special)
    }

    fn n_past(&self) -> usize {
        self.tokens.len()
    }

    fn truncate(&mut self, n: usize) -> Result<(), ModelError> {
        if n < self.tokens.len() {
            self.tokens.truncate(n);
            self.evaluated = self.evaluated.min(n);
            self.truncated = true;
            self.prompting = true;
            self.logits_valid = false;
        }
        Ok(())
    }

    fn decode(&mut self, tokens: &[TokenId]) -> Result<&[f32], ModelError> {
        if tokens.is_empty() {
            return if self.logits_valid {
                Ok(&self.logits)
            } else {
                Err(ModelError::Decode("nothing to decode: no tokens given and none evaluated since the last reset".into()))
            };
        }
        let n_vocab = self.shared.vocab.len();
        if let Some(bad) = tokens.iter().find(|t| t.index() >= n_vocab) {
            return Err(ModelError::Decode(format!("token id {bad} is out of range (the vocabulary has {n_vocab} tokens)")));
        }
        let needed = self.tokens.len() + tokens.len();
        if needed > self.shared.info.context_length {
            return Err(ModelError::ContextOverflow { needed, context: self.shared.info.context_length });
        }
        self.logits_valid = false;
        let keep = self.evaluated;
        let request = Request {
            seq: self.seq,
            slot: self.seq,
            keep,
            prefix: self.truncated.then(|| self.tokens[..keep].to_vec()),
            copy_from: None,
            prompt: std::mem::take(&mut self.prompting),
            tokens: tokens.to_vec(),
            done: 0,
            logits: std::mem::take(&mut self.logits),
            reply: self.reply.clone(),
        };
        {
            let mut st = self.shared.lock();
            if st.shutdown {
                return Err(ModelError::Decode("the model is shutting down".into()));
            }
            st.pending.push(request);
        }
        self.shared.work.notify_one();
        let result = {
            let mut slot = self.reply.slot.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if let Some(r) = slot.take() {
                    break r;
                }
                slot = self.reply.ready.wait(slot).unwrap_or_else(|e| e.into_inner());
            }
        };
        self.truncated = false;
        match result {
            Ok(logits) => {
                self.logits = logits;
                self.tokens.extend_from_slice(tokens);
                self.evaluated = self.tokens.len();
                self.logits_valid = true;
                Ok(&self.logits)
            }
            Err((e, kept)) => {
                // The step thread rolled the cache back to `kept` tokens.
                self.tokens.truncate(kept);
                self.evaluated = kept;
                Err(e)
            }
        }
    }

    fn cached_tokens(&self) -> Option<&[TokenId]> {
        Some(&self.tokens)
    }
}

impl Drop for Sequence {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        st.clock += 1;
        let now = st.clock;
        st.awaited.retain(|&s| s != self.seq);
        if let Some(i) = st.slot_of(self.seq) {
            let slot = &mut st.slots[i];
            slot.handle = None;
            slot.copy_from = None;
            slot.released = now;
        }
        st.stats.in_use -= 1;
        drop(st);
        self.shared.freed.notify_one();
        self.shared.work.notify_one();
    }
}
