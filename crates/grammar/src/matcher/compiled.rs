//! [`CompiledGrammar`]: shared, immutable from the outside — the automaton, the mask caches
//! and how a mask is computed on a miss (the per-request side, [`Matcher`], is
//! in `matching`). About 750 lines: the mask strategy (which shortcut a state takes, from the
//! cache down to a plain walk) reads best next to the caches it fills.
//!
//! ## Sharing without a global lock
//! Many sequences use one compiled grammar at once (the built-in JSON grammar, a popular
//! schema), each from its own thread. What they share is read without a lock, and a warm
//! step writes no shared memory at all (not even a reference count), so readers on
//! different cores neither wait for nor slow down each other:
//! - the automaton's states and transitions are lock-free tables (see `automaton`): a
//!   known transition is a load; only building one takes the automaton's builder lock;
//! - full masks are kept per state in a [`MaskCache`] (a `Slots` table, set once per
//!   state). A hit reads the mask in place and copies it into the caller's `TokenMask`;
//! - the context-independent parts of masks (`ContextIndependentMask`, by truncated state; first-byte
//!   dispatch parts, by state and byte) are in a [`CiCache`], read on misses only: its
//!   per-state table is lock-free; its two hash maps take a short lock per lookup or
//!   insert, never while walking.
//!
//! A miss walks the token trie with no lock held, through a `Stepper` that takes the
//! builder lock only for new transitions (keeping it across a stretch of them), then
//! publishes the mask: the first thread to publish wins, and an equal mask computed at the
//! same time is dropped. Two matchers that miss on the same state at once (sequences that
//! start together on a fresh grammar walk the same states in step) do not both walk: the
//! second waits for the first's result, and so for context-independent masks
//! ([`claim`](CompiledGrammar::claim)). So readers never wait; a miss waits only for
//! closures of other builders, or for the very mask it needs.
//!
//! Both caches are bounded (`MASK_CACHE_BYTES` each). Entries are never removed (a reader
//! may be reading one): a full cache keeps what it has and takes no more, so masks of new
//! states are computed on every miss, and the grammar reports itself
//! [`is_nearly_full`](CompiledGrammar::is_nearly_full), as when it nears
//! `Limits::max_states`. Grammar caches then compile it afresh for new requests; requests
//! already using it go on with it until they end.
//!
//! ## Cost
//! - Warm mask (a hit): a few dependent loads to find the state's mask, and the copy (6 KiB
//!   on SmolLM2, 16 KiB on Llama 3). Warm commit: a load or three per byte of the token.
//!   With many distinct states in use, the copies' sources come from beyond the core's own
//!   cache, and memory bandwidth rather than the grammar bounds masks per second.
//! - Miss: as single-threaded, plus an uncontended lock round trip per stretch of new
//!   transitions and per cache insert.
//! - Memory: per state, a table slot (about 90 bytes, in chunks that double) and 16 bytes
//!   per cache; its 1 KiB transition table is allocated with it (94 % of states need one
//!   anyway); masks as before.
//!
//! Measured by `cargo bench -p formwork-grammar --bench threads` (N threads, one shared
//! grammar, realistic documents, SmolLM2).

mod strategy;

use super::complete::{Completion, Unsettled};
use super::automaton::{Automaton, StackId, StateId, Stepper, DEAD, OVERFLOW};
use super::error::CompileError;
use super::index::TokenIndex;
use super::lower::{lower, lower_with, ByteGrammar, ByteSet, Deferred};
use super::mask::{repeat_split, same_within, walk_from, Accel, Chain, Closed, MAX_CHAIN, MAX_CLOSED, MAX_CLOSED_INSTEAD, SetChain, ContextIndependentMask, ContextIndependentSubtree};
use super::slots::Slots;
use crate::{Grammar, Limits};
use formwork_vocab::{TokenId, TokenMask, Vocabulary};
use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Bytes kept by each of the two caches of a compiled grammar (full masks, and
/// context-independent parts); a full cache takes no more (see the module docs).
const MASK_CACHE_BYTES: usize = 64 << 20;
/// Longest run of forced bytes reported by [`Matcher::forced_bytes`].
pub(super) const MAX_FORCED: usize = 4096;

/// A grammar compiled against a vocabulary: immutable from the outside, `Send + Sync`,
/// shared by `Arc` between all requests that use the same grammar and vocabulary.
///
/// Inside, a lazily built automaton and caches of masks per parser state are shared, so
/// every request benefits from the work of earlier ones: after warm-up a mask is a cache
/// hit (a 16 KiB copy on a 128k vocabulary). Requests on different threads do not lock
/// each other out: hits and warm steps take no lock at all, and a miss walks the token trie
/// with no lock held (see the module docs for the design and its cost).
pub struct CompiledGrammar {
    pub(super) index: Arc<TokenIndex>,
    pub(super) initial: StateId,
    pub(super) aut: Automaton,
    /// Full masks by state.
    pub(super) masks: MaskCache,
    /// Context-independent parts of masks.
    ci: CiCache,
    /// Masks inside bounded repetitions go through canonical states (see `mask`).
    repeat_shortcut: AtomicBool,
    /// States whose masks some thread is computing (see [`claim`](Self::claim));
    /// `in_flight_done` is signalled when one is done and some thread waits.
    in_flight: Mutex<InFlightSet>,
    in_flight_done: Condvar,
    pub(super) limits: Limits,
    /// Shortest-completion tables, built on first use and again when deferred rules were
    /// built since (see `complete`), with the count of deferred rules built they saw.
    pub(super) completion: std::sync::RwLock<Option<(u64, Arc<Completion>)>>,
}

/// Room left in a cache of at most `MASK_CACHE_BYTES`: reserves `bytes`, or marks the
/// cache full and refuses.
#[derive(Default)]
struct Budget {
    /// Bytes held.
    used: AtomicUsize,
    /// Some insert was refused.
    full: AtomicBool,
}

impl Budget {
    fn reserve(&self, bytes: usize) -> bool {
        if self.used.fetch_add(bytes, Ordering::Relaxed) + bytes <= MASK_CACHE_BYTES {
            return true;
        }
        self.used.fetch_sub(bytes, Ordering::Relaxed);
        self.full.store(true, Ordering::Relaxed);
        false
    }

    fn is_full(&self) -> bool {
        self.full.load(Ordering::Relaxed)
    }
}

/// Full masks by parser state, read without a lock.
#[derive(Default)]
pub(super) struct MaskCache {
    /// Indexed by state: its full mask, once computed.
    pub(super) masks: Slots<Arc<TokenMask>>,
    budget: Budget,
}

/// The context-independent parts of masks, read on misses.
#[derive(Default)]
struct CiCache {
    /// Indexed by truncated state: its context-independent mask.
    ci: Slots<Arc<ContextIndependentMask>>,
    /// Indexed by (state after a first byte, that byte): the subtree's context-independent
    /// part, for first-byte dispatch.
    sub: Mutex<FxHashMap<(StateId, u8), Arc<ContextIndependentSubtree>>>,
    /// Indexed by (looping target, the first bytes leading to it): that group's part of a
    /// first-byte dispatch.
    group: Mutex<FxHashMap<(StateId, ByteSet), Arc<ContextIndependentMask>>>,
    /// States with no cheaper way than a plain walk (no accelerator, dispatch or chain),
    /// so that a truncated state's full state is tried instead, and neither twice (see
    /// `context_independent_mask`); with whether the search for one met a state that
    /// depends on context (if not, the full state's search would fail the same way).
    plain: Mutex<FxHashMap<StateId, bool>>,
    /// Truncated states searched for a closed set (`mask::Closed`): the accelerator of the
    /// set found, for each of its states; `None` for a state whose search failed.
    closed: Mutex<FxHashMap<StateId, Option<Arc<Accel>>>>,
    /// Bytes of the first three.
    budget: Budget,
}

/// What a thread computes for a state, in [`CompiledGrammar::in_flight`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Work {
    /// A matcher's full mask.
    Mask,
    /// A context-independent mask (of a truncated state).
    Ci,
}

/// The states whose masks are being computed, and how many threads wait for one.
#[derive(Default)]
struct InFlightSet {
    masks: Vec<StateId>,
    ci: Vec<StateId>,
    waiters: usize,
}

impl InFlightSet {
    fn list(&mut self, work: Work) -> &mut Vec<StateId> {
        match work {
            Work::Mask => &mut self.masks,
            Work::Ci => &mut self.ci,
        }
    }
}

/// What [`CompiledGrammar::claim`] found.
enum Claim<'a, T> {
    /// The result, computed (by another thread, maybe while this one waited).
    Done(T),
    /// Nobody computes it: this thread does, under this mark.
    Mine(InFlight<'a>),
}

/// A state's mark in [`CompiledGrammar::in_flight`], cleared (and waiters woken) on drop,
/// also when the computation panics.
struct InFlight<'a> {
    g: &'a CompiledGrammar,
    s: StateId,
    work: Work,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut busy = locked(&self.g.in_flight);
        let list = busy.list(self.work);
        if let Some(i) = list.iter().position(|&x| x == self.s) {
            list.swap_remove(i);
        }
        let wake = busy.waiters > 0;
        drop(busy);
        // A notification is a system call: only when someone waits.
        if wake {
            self.g.in_flight_done.notify_all();
        }
    }
}

/// Locks one of a cache's maps. Only complete entries are inserted, so a poisoned lock
/// still guards a consistent map.
fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl std::fmt::Debug for CompiledGrammar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledGrammar")
            .field("vocab_len", &self.index.vocab().len())
            .finish_non_exhaustive()
    }
}

impl CompiledGrammar {
    /// Compiles `g` for `vocab`: lowers it to bytes, checks it (left recursion, nothing
    /// matched, sizes) and computes the start state. The vocabulary's token trie is built
    /// once per vocabulary and shared (see [`TokenIndex::for_vocab`]).
    pub fn new(
        g: &Grammar,
        vocab: Arc<Vocabulary>,
        limits: &Limits,
    ) -> Result<Arc<Self>, CompileError> {
        Self::with_index(g, TokenIndex::for_vocab(&vocab), limits)
    }

    /// Compiles `g` against a prebuilt [`TokenIndex`].
    pub fn with_index(
        g: &Grammar,
        index: Arc<TokenIndex>,
        limits: &Limits,
    ) -> Result<Arc<Self>, CompileError> {
        let flat = lower(g, Some(index.vocab()), limits)?;
        Self::from_flat(flat, None, index, limits)
    }

    /// Compiles a grammar with deferred rules (see [`LazyGrammar`](crate::LazyGrammar)):
    /// the rules built up front are lowered and checked now, each deferred one when a
    /// parser state first reaches it (a deferred rule that fails to build then matches
    /// nothing, and the failure is logged).
    pub fn lazy(g: crate::LazyGrammar, index: Arc<TokenIndex>, limits: &Limits) -> Result<Arc<Self>, CompileError> {
        let crate::LazyGrammar { grammar, deferred, source } = g;
        let (flat, nullable) = lower_with(&grammar, Some(index.vocab()), limits, Deferred::opaque(&deferred))?;
        let d = Deferred::new(source, &deferred, grammar.rules().len(), nullable, Some(index.vocab().clone()), limits);
        Self::from_flat(flat, Some(d), index, limits)
    }

    fn from_flat(flat: ByteGrammar, deferred: Option<Deferred>, index: Arc<TokenIndex>, limits: &Limits) -> Result<Arc<Self>, CompileError> {
        let rules = flat.alts.len();
        let elems = flat.elems.len();
        let (aut, initial) = Automaton::new(flat, deferred, limits.max_stacks, limits.max_states)
            .map_err(|limit| CompileError::TooManyStacks { limit })?;
        tracing::debug!(rules, elems, "compiled grammar");
        Ok(Arc::new(CompiledGrammar {
            index,
            initial,
            aut,
            masks: MaskCache::default(),
            ci: CiCache::default(),
            repeat_shortcut: AtomicBool::new(true),
            in_flight: Mutex::new(InFlightSet::default()),
            in_flight_done: Condvar::new(),
            limits: limits.clone(),
            completion: std::sync::RwLock::new(None),
        }))
    }

    /// The vocabulary.
    pub fn vocab(&self) -> &Arc<Vocabulary> {
        self.index.vocab()
    }

    /// The shared token index (trie) of the vocabulary.
    pub fn index(&self) -> &Arc<TokenIndex> {
        &self.index
    }

    /// The limits it was compiled with.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Heap bytes used by this grammar (automaton, transition tables, cached masks), not
    /// counting the shared vocabulary index.
    pub fn memory_usage(&self) -> usize {
        let ci = &self.ci;
        let maps = locked(&ci.sub).capacity() * 24 + locked(&ci.group).capacity() * 48;
        self.aut.memory_usage()
            + self.masks.budget.used.load(Ordering::Relaxed)
            + self.masks.masks.memory_usage()
            + ci.budget.used.load(Ordering::Relaxed)
            + ci.ci.memory_usage()
            + maps
    }

    /// Has this grammar built 80 % of the parser states `Limits::max_states` allows, or
    /// filled one of its mask caches (which then take no more masks)? Caches then compile
    /// it afresh for new requests (requests already using it keep it, with the rest of the
    /// room), so a long-lived shared grammar never reaches the limit and keeps its masks
    /// cached. Lock-free (a cache asks on every hit): three loads.
    pub fn is_nearly_full(&self) -> bool {
        let n = self.aut.n_states();
        n.saturating_mul(5) >= self.limits.max_states.saturating_mul(4)
            || self.masks.budget.is_full()
            || self.ci.budget.is_full()
    }

    /// The result of `work` for state `s` if `found` has it; else, if another thread is
    /// computing it, waits for that thread (calling `before_wait` first) and looks again;
    /// else marks it as this thread's to compute. Threads that miss together on a fresh
    /// grammar (sequences that start together walk the same states in step) thus share one
    /// walk instead of each doing it.
    ///
    /// No deadlock: a thread waits only where it holds no mark of the kind it waits for
    /// (a matcher's miss waits for a full mask before marking anything; a full mask's
    /// computation waits for a context-independent one while holding none, and nested ones
    /// — a first-byte dispatch's targets, canonical states' masks — never wait), and it
    /// lets the builder lock go first (`before_wait`). So the thread waited for never waits
    /// for the waiter, and finishes (or unwinds, which clears its mark too).
    fn claim<T>(&self, work: Work, s: StateId, found: impl Fn() -> Option<T>, mut before_wait: impl FnMut()) -> Claim<'_, T> {
        let mut busy = locked(&self.in_flight);
        loop {
            if let Some(x) = found() {
                return Claim::Done(x);
            }
            if !busy.list(work).contains(&s) {
                break;
            }
            before_wait();
            busy.waiters += 1;
            busy = self.in_flight_done.wait(busy).unwrap_or_else(|e| e.into_inner());
            busy.waiters -= 1;
        }
        busy.list(work).push(s);
        Claim::Mine(InFlight { g: self, s, work })
    }

    /// A matcher's miss on state `s`: its mask, computed here unless another thread is
    /// already computing it (then waited for; see [`claim`](Self::claim)). Returns the
    /// mask, whether it came from the cache, and the trie nodes walked.
    pub(super) fn mask_miss(&self, s: StateId) -> (Arc<TokenMask>, bool, usize) {
        let _mark = match self.claim(Work::Mask, s, || self.masks.masks.get(s).cloned(), || {}) {
            Claim::Done(m) => return (m, true, 0),
            Claim::Mine(mark) => mark,
        };
        let mut st = self.aut.stepper();
        let r = self.mask_of(&mut st, s, &mut Vec::new());
        // The builder lock goes before the waiters are woken.
        drop(st);
        r
    }

    /// The state after token `t` from `s` (not EOS, which the caller handles): the union of
    /// its bytes read as text and of the token taken whole by the references that name it
    /// or negate another token. [`DEAD`] when neither goes on; [`OVERFLOW`] past a limit.
    pub(super) fn after_token(&self, s: StateId, t: TokenId) -> StateId {
        let vocab = self.index.vocab();
        let aut = &self.aut;
        let mut by_text = DEAD;
        if vocab.is_text(t) {
            by_text = aut.steps(s, vocab.token_bytes(t));
        }
        let info = aut.info(s);
        let negated = !info.not_tokens.is_empty() && takes_negated(vocab, t);
        if !negated && !info.tokens.contains(&t) {
            return by_text;
        }
        aut.union(by_text, aut.step_token(s, t, negated))
    }

    /// Turns the bounded-repetition shortcut on (the default) or off. Off, a state inside
    /// `e{m,n}` has its mask walked from the state itself instead of taken from its
    /// canonical (looping) state: the same masks, slower. For tests and diagnosis.
    pub fn set_repeat_shortcut(&self, on: bool) {
        self.repeat_shortcut.store(on, Ordering::Relaxed);
    }

}

/// Can a negated token reference (`!<[N]>`, for another `N`) take token `t`? Any token but
/// the EOS tokens (which only end an input the grammar accepts, as everywhere) and unused
/// slots (never allowed).
pub(super) fn takes_negated(vocab: &Vocabulary, t: TokenId) -> bool {
    vocab.kind(t) != formwork_vocab::TokenKind::Unused && !vocab.eos_tokens().contains(&t)
}

/// Byte-level check with no vocabulary: does `g` accept exactly `input`? Special tokens
/// named by the grammar never match here. A step past `limits.max_stacks` (or
/// `max_states`) is [`CompileError::Undecided`], not a rejection: the input may well be in
/// the grammar's language (an object nested in a copy of itself under distributed negations
/// can need more than 10,000 stacks).
pub fn accepts(g: &Grammar, input: &[u8], limits: &Limits) -> Result<bool, CompileError> {
    let flat = lower(g, None, limits)?;
    let (aut, mut s) = Automaton::new(flat, None, limits.max_stacks, limits.max_states)
        .map_err(|limit| CompileError::TooManyStacks { limit })?;
    for (offset, &b) in input.iter().enumerate() {
        s = aut.step(s, b);
        if s == DEAD {
            return Ok(false);
        }
        if s == OVERFLOW {
            return Err(CompileError::Undecided { offset, error: super::MatchError::overflow(limits, aut.states_capped()) });
        }
    }
    Ok(aut.info(s).accepting)
}

impl CompiledGrammar {
    /// The completion tables (built on first use, and again once deferred rules were built
    /// since; takes the automaton's builder lock to build, so the caller must not hold it).
    pub(super) fn completion(&self) -> Arc<Completion> {
        let fresh = |slot: &Option<(u64, Arc<Completion>)>| slot.as_ref().filter(|(n, _)| *n == self.aut.expansions()).map(|(_, c)| c.clone());
        if let Some(c) = fresh(&self.completion.read().unwrap_or_else(|e| e.into_inner())) {
            return c;
        }
        let mut slot = self.completion.write().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = fresh(&slot) {
            return c;
        }
        let b = self.aut.builder();
        // Read under the builder's lock: no rule is built between the tables and the count.
        let c = Arc::new(Completion::new(&b, self.index(), self.aut.expansions()));
        *slot = Some((c.seen, c.clone()));
        c
    }

    /// Fewest bytes from state `s` to a complete match, with the stack that achieves it
    /// and the tables that answered (see `complete`): deferred rules a shortest completion
    /// needs are built first, as often as it takes (each round builds at least one).
    pub(super) fn state_completion(&self, s: StateId) -> (Option<(u32, StackId)>, Arc<Completion>) {
        loop {
            let c = self.completion();
            match c.state_need(&self.aut, s, true) {
                Ok(r) => return (r, c),
                Err(Unsettled(positions)) => {
                    let mut b = self.aut.builder();
                    if !c.settle(&mut b, &positions) && self.aut.expansions() == c.seen {
                        // Nothing left to build (cannot happen: an unsettled rule reaches a
                        // deferred one); answer from the upper bounds.
                        drop(b);
                        return (c.state_need(&self.aut, s, false).unwrap_or(None), c);
                    }
                }
            }
        }
    }

    /// [`state_completion`](Self::state_completion)'s length.
    pub(super) fn completion_need(&self, s: StateId) -> Option<u32> {
        self.state_completion(s).0.map(|(v, _)| v)
    }
}
