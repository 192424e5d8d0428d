//! The pushdown automaton over a [`ByteGrammar`] grammar, built lazily: persistent hash-consed
//! stacks, interned states and a memoized byte-transition table.
//!
//! ## Stacks
//! A stack is a [`StackId`] into an arena of nodes `(pos, parent)`: `pos` is the grammar
//! position still to be matched in this frame, `parent` the rest of the stack. Nodes are
//! interned, so equal stacks have equal ids and pushing is O(1) amortised. Node 0 is the
//! empty stack ([`BOTTOM`]). A rule reference that ends an alternative pushes no return
//! frame (tail calls), so right recursion (`S ::= x S | ε`) runs in constant stack.
//!
//! ## States
//! A state is the sorted set of stacks whose top is a terminal (a byte set, a special
//! token or a negated token reference), plus [`BOTTOM`] when the input so far is a complete
//! match. States are interned into [`StateId`]s; state 0 is [`DEAD`] (no stack). `trans[s][b]` memoizes the
//! state after byte `b` (`UNKNOWN` until first asked), so once warm a byte step is one
//! load. A step that would need more than `max_stacks` stacks yields [`OVERFLOW`]
//! (dead for masks, an error on commit), and so does one that would create a state past
//! `max_states`.
//!
//! ## Sharing between threads
//! One automaton serves every request that uses its grammar, from any thread, through `&self`.
//! It has two sides:
//! - the **table** (states, their [`StateInfo`] and byte transitions), read without a lock:
//!   states live in [`Slots`] (append-only, set once) and transitions are `AtomicU32`s that
//!   go from `UNKNOWN` to their final value once. A warm [`step`](Automaton::step) is a few
//!   dependent loads (the state's slot, its transition) and writes nothing shared, so
//!   readers on different cores never slow each other down;
//! - the **builder** ([`Builder`]: the grammar, the stack arena, the interning maps, the
//!   memos of closures, truncations and canonical states, scratch), behind a mutex. A step
//!   whose transition is still `UNKNOWN` takes it, computes the closure, interns what it
//!   made, publishes the new state (its slot first, then the count) and the transition (a
//!   release store). [`Automaton::step`] lets go at once; a walk's [`Stepper`] keeps the
//!   lock through a stretch of new transitions. Builders wait for each other; readers
//!   never wait.
//!
//! Every transition is a function of its state's stacks, so two threads that need the same
//! one compute the same value; the second finds it filled in when it gets the lock.
//!
//! ## Cost
//! A step's closure is linear in the stacks and rules it touches; left recursion is refused
//! when lowering, so closures are finite; the work per closure is also capped by
//! `max_stacks`. Memory grows with the distinct stacks and states visited: per state, 1 KiB
//! of transition table (allocated with the state), its stacks, and a table slot of about
//! 90 bytes (in chunks that double, so up to half of them unused). An unknown transition
//! costs a lock round trip (uncontended: two atomic operations) on top of its closure.

use super::lower::{ByteSet, Symbol, ByteGrammar};
use super::slots::Slots;
use formwork_vocab::TokenId;
use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};

mod canon;

/// A state of the automaton: its index in the table. [`DEAD`] and [`OVERFLOW`] are states
/// too, so a step always gives one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct StateId(pub(crate) u32);

/// A stack: a node of the stack arena, `(pos, parent)` (its top frame and the rest of the
/// stack), or one of the two ends [`BOTTOM`] and [`CTX`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct StackId(pub(crate) u32);

impl StackId {
    /// Its index in the arena.
    #[inline(always)]
    pub(crate) fn index(self) -> usize {
        self.0 as usize
    }
}

/// The empty stack.
pub(crate) const BOTTOM: StackId = StackId(0);
/// A placeholder for "the rest of the stack", at the bottom of truncated stacks: a closure
/// that pops into it marks the state [`State::is_ctx`] (what follows depends on context).
pub(crate) const CTX: StackId = StackId(1);
/// The state with no stack: nothing can follow.
pub(crate) const DEAD: StateId = StateId(0);
/// A step that would exceed `max_stacks` (dead for masks; an error on commit).
pub(crate) const OVERFLOW: StateId = StateId(u32::MAX - 1);
/// A transition not built yet (only in the table, never handed out).
const UNKNOWN: u32 = u32::MAX;

/// What is known about one state.
#[derive(Clone, Debug)]
pub(crate) struct StateInfo {
    /// Sorted stacks (BOTTOM included when accepting).
    pub stacks: Box<[StackId]>,
    /// The input so far is a complete match.
    pub accepting: bool,
    /// Bytes some stack can take next.
    pub first: ByteSet,
    /// Special tokens some stack can take next.
    pub tokens: Box<[TokenId]>,
    /// The tokens excluded by the negated token references some stack can take next
    /// (each stack takes any whole token but its own), without repeats: empty when there
    /// are none; with two or more, every token is taken by some stack.
    pub not_tokens: Box<[TokenId]>,
}

/// One state of the table: what is known about it, and its transitions as they are built.
/// Walks keep a state's entry beside its id ([`Stepper::entry`]) to step from it without
/// looking it up again.
pub(crate) struct State {
    /// By byte: the next state, `UNKNOWN` until built. Allocated with the state: nearly
    /// every state is stepped from (94 % on the JSON grammar), and a step is then one
    /// load with no check of whether the table exists.
    trans: Box<[AtomicU32; 256]>,
    /// The state popped into [`CTX`] (what follows depends on context).
    ctx: bool,
    info: StateInfo,
}

impl State {
    /// Does the state depend on context (see [`CTX`])?
    #[inline(always)]
    pub fn is_ctx(&self) -> bool {
        self.ctx
    }
}

/// The read side of the automaton: every request reads it without a lock (module docs).
struct Table {
    /// Indexed by state id.
    states: Slots<State>,
    /// States published (ids below it are set).
    n_states: AtomicU32,
    /// Some step was refused because of `max_states` (its result was [`OVERFLOW`]).
    states_capped: AtomicBool,
}

impl Table {
    #[inline]
    fn state(&self, s: StateId) -> &State {
        self.states.get(s.0).expect("state ids come from their automaton")
    }

    /// The memoized transition of `s` on `b`, if built.
    #[inline]
    fn known(&self, s: StateId, b: u8) -> Option<StateId> {
        let v = self.state(s).trans[b as usize].load(Ordering::Acquire);
        (v != UNKNOWN).then_some(StateId(v))
    }

    /// Does `s` know every byte transition?
    fn complete(&self, s: StateId) -> bool {
        self.state(s).trans.iter().all(|x| x.load(Ordering::Acquire) != UNKNOWN)
    }
}

/// The lazily built automaton (see module docs): a lock-free table and a locked builder.
pub(crate) struct Automaton {
    table: Table,
    builder: Mutex<Builder>,
}

impl std::fmt::Debug for Automaton {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Automaton").field("states", &self.n_states()).finish_non_exhaustive()
    }
}

/// The write side of the automaton: everything a closure reads and writes but the
/// published states. Only reached through [`Automaton::builder`] (one thread at a time).
#[derive(Debug)]
pub(crate) struct Builder {
    pub flat: ByteGrammar,
    max_stacks: usize,
    /// Most states closures may create (`Limits::max_states`).
    max_states: usize,
    /// Indexed by node id: `(pos, parent)`.
    nodes: Vec<(u32, StackId)>,
    /// Indexed by node id: frames from the bottom (BOTTOM and CTX are 0).
    heights: Vec<u32>,
    node_ids: FxHashMap<(u32, StackId), StackId>,
    state_ids: FxHashMap<Box<[StackId]>, StateId>,
    /// Heap bytes of the published states (infos and transition tables).
    state_bytes: usize,
    /// Memo of [`canonical`](Self::canonical) per node: (canonical node, budget).
    canon_nodes: FxHashMap<StackId, (StackId, u32)>,
    /// Memo of [`canonical`](Self::canonical) per (state, top budget): (canonical state, budget).
    canon_states: FxHashMap<(StateId, u32), (StateId, u32)>,
    /// Memo of truncations (see [`truncate`](Self::truncate)) per (state, depth).
    truncs: FxHashMap<(StateId, u32), StateId>,
    /// Memo of [`closure`](Self::closure) by seed set: the bytes of a state that the same
    /// stacks accept (all the characters of a string body, say) lead to one state, which is
    /// computed once. Indexed by the seeds, sorted.
    closures: FxHashMap<Box<[(u32, StackId)]>, StateId>,
    // Scratch for closures.
    visited: FxHashSet<(u32, StackId)>,
    visited_small: Vec<(u32, StackId)>,
    work: Vec<(u32, StackId)>,
    out: Vec<StackId>,
    seeds: Vec<(u32, StackId)>,
}

impl Automaton {
    /// An automaton for `flat` and its initial state.
    pub fn new(flat: ByteGrammar, max_stacks: usize, max_states: usize) -> Result<(Self, StateId), usize> {
        let mut b = Builder {
            flat,
            max_stacks: max_stacks.max(1),
            max_states: max_states.max(2),
            nodes: vec![(u32::MAX, StackId(u32::MAX)), (u32::MAX, StackId(u32::MAX))],
            heights: vec![0, 0],
            node_ids: FxHashMap::default(),
            state_ids: FxHashMap::default(),
            state_bytes: 0,
            canon_nodes: FxHashMap::default(),
            canon_states: FxHashMap::default(),
            truncs: FxHashMap::default(),
            closures: FxHashMap::default(),
            visited: FxHashSet::default(),
            visited_small: Vec::new(),
            work: Vec::new(),
            out: Vec::new(),
            seeds: Vec::new(),
        };
        let t = Table {
            states: Slots::default(),
            n_states: AtomicU32::new(0),
            states_capped: AtomicBool::new(false),
        };
        b.intern_state(&t, Vec::new());
        let root = b.flat.root as usize;
        let seeds: Vec<(u32, StackId)> = b.flat.alts[root].iter().map(|&p| (p, BOTTOM)).collect();
        b.seeds = seeds;
        let init = b.closure(&t);
        if init == OVERFLOW {
            return Err(b.max_stacks);
        }
        Ok((Automaton { table: t, builder: Mutex::new(b) }, init))
    }

    /// The builder, locked (for the grammar and the stack arena; never held across a call
    /// back into the automaton, which would deadlock).
    pub fn builder(&self) -> MutexGuard<'_, Builder> {
        // A panic inside a closure leaves at worst unused arena nodes or interning entries
        // for states never published; everything published is complete. Poison is ignored.
        self.builder.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The state after `bytes` from `s`: [`DEAD`] or [`OVERFLOW`] as soon as a byte gives it.
    #[inline]
    pub fn steps(&self, s: StateId, bytes: &[u8]) -> StateId {
        let mut x = s;
        for &b in bytes {
            x = self.step(x, b);
            if x == DEAD || x == OVERFLOW {
                break;
            }
        }
        x
    }

    /// The state after byte `b` from `s` (memoized; lock-free once built).
    #[inline]
    pub fn step(&self, s: StateId, b: u8) -> StateId {
        match self.table.known(s, b) {
            Some(v) => v,
            None => self.step_slow(s, b),
        }
    }

    #[cold]
    fn step_slow(&self, s: StateId, b: u8) -> StateId {
        self.builder().step(&self.table, s, b)
    }

    /// The state after token `t` taken whole from `s`, by the stacks that name it and, when
    /// `negated` (the caller's word that `t` is a token negated references may take), by
    /// the negated references to other tokens. Not memoized: such steps are rare.
    pub fn step_token(&self, s: StateId, t: TokenId, negated: bool) -> StateId {
        let info = self.info(s);
        let taken = info.tokens.contains(&t) || (negated && info.not_tokens.iter().any(|&n| n != t));
        if !taken {
            return DEAD;
        }
        self.builder().step_token(&self.table, s, t, negated)
    }

    /// The state whose stacks are those of `a` and of `b`: where two readings of one token
    /// (its bytes, and the token taken whole) both go on.
    pub fn union(&self, a: StateId, b: StateId) -> StateId {
        match (a, b) {
            (OVERFLOW, _) | (_, OVERFLOW) => OVERFLOW,
            (DEAD, x) | (x, DEAD) => x,
            (a, b) if a == b => a,
            (a, b) => self.builder().union(&self.table, a, b),
        }
    }

    /// Info about state `s`.
    #[inline]
    pub fn info(&self, s: StateId) -> &StateInfo {
        &self.table.state(s).info
    }

    /// Was some step refused because the grammar reached `Limits::max_states`?
    pub fn states_capped(&self) -> bool {
        self.table.states_capped.load(Ordering::Relaxed)
    }

    /// Number of states interned so far.
    pub fn n_states(&self) -> usize {
        self.table.n_states.load(Ordering::Acquire) as usize
    }

    /// A [`Stepper`] for one walk.
    pub fn stepper(&self) -> Stepper<'_> {
        let dead = (DEAD, self.table.state(DEAD));
        Stepper { aut: self, held: None, known_run: 0, last: [dead, dead] }
    }

    /// Heap bytes used.
    pub fn memory_usage(&self) -> usize {
        let b = self.builder();
        b.flat.memory_usage()
            + self.table.states.memory_usage()
            + b.state_bytes
            + b.nodes.capacity() * 12
            + b.node_ids.capacity() * 12
            + b.state_ids.capacity() * 24
            + (b.canon_nodes.capacity() + b.canon_states.capacity() + b.truncs.capacity()) * 16
            + b.closures.keys().map(|k| k.len() * 8 + 24).sum::<usize>()
    }
}

/// Known steps after which a [`Stepper`] lets the builder lock go: long enough that two
/// threads walking new ground hand the lock over rarely (each handover can put a thread to
/// sleep; 64 measured about 5 % slower with two threads missing at once), short enough
/// (tens of µs) that a walk does not keep it through a long run of known transitions.
const RELEASE_AFTER: u32 = 4096;

/// The automaton as one walk (a mask computation) uses it: steps like
/// [`Automaton::step`], but a step that must build takes the builder lock and keeps it
/// until [`RELEASE_AFTER`] known steps in a row, so a walk through new ground (a fresh
/// grammar: most transitions unknown) locks once per stretch instead of once per
/// transition. Threads building at the same time then hand the lock over rarely (each
/// handover can put a thread to sleep for longer than a closure takes), while readers,
/// who never take it, are not affected. All builder work of the walk goes through here,
/// so the thread never asks for the lock it holds.
///
/// It also remembers the last two states it looked up: a trie walk steps from a node's
/// state into each child in turn and asks about the child's state, so most lookups skip
/// the table's chunk and slot loads.
pub(crate) struct Stepper<'a> {
    aut: &'a Automaton,
    held: Option<MutexGuard<'a, Builder>>,
    /// Known steps since the lock was last needed.
    known_run: u32,
    /// The last two states looked up, and their entries (the latest first).
    last: [(StateId, &'a State); 2],
}

impl<'a> Stepper<'a> {
    /// The table entry of `s`.
    #[inline(always)]
    fn state(&mut self, s: StateId) -> &'a State {
        if s == self.last[0].0 {
            return self.last[0].1;
        }
        if s == self.last[1].0 {
            self.last.swap(0, 1);
        } else {
            self.last[1] = self.last[0];
            self.last[0] = (s, self.aut.table.state(s));
        }
        self.last[0].1
    }

    /// The builder, locked until the next stretch of known steps.
    fn build(&mut self) -> &mut Builder {
        self.known_run = 0;
        let aut = self.aut;
        self.held.get_or_insert_with(|| aut.builder())
    }

    /// The state after `bytes` from `s`: [`DEAD`] or [`OVERFLOW`] as soon as a byte gives it.
    #[inline]
    pub fn steps(&mut self, s: StateId, bytes: &[u8]) -> StateId {
        let mut x = s;
        for &b in bytes {
            x = self.step(x, b);
            if x == DEAD || x == OVERFLOW {
                break;
            }
        }
        x
    }

    /// The state after byte `b` from `s`.
    #[inline(always)]
    pub fn step(&mut self, s: StateId, b: u8) -> StateId {
        let e = self.state(s);
        self.step_from(e, s, b)
    }

    /// The table entry of `s` (lock-free), for [`step_from`](Self::step_from).
    #[inline(always)]
    pub fn entry(&self, s: StateId) -> &'a State {
        self.aut.table.state(s)
    }

    /// [`step`](Self::step) from `s` whose entry `e` the caller kept.
    #[inline(always)]
    pub fn step_from(&mut self, e: &'a State, s: StateId, b: u8) -> StateId {
        let v = e.trans[b as usize].load(Ordering::Acquire);
        if v == UNKNOWN {
            return self.step_slow(s, b);
        }
        if self.held.is_some() {
            self.known_run += 1;
            if self.known_run >= RELEASE_AFTER {
                self.held = None;
            }
        }
        StateId(v)
    }

    #[cold]
    fn step_slow(&mut self, s: StateId, b: u8) -> StateId {
        let t = &self.aut.table;
        self.build().step(t, s, b)
    }

    /// The state after any valid UTF-8 character with lead byte `lead` and continuation
    /// ranges `rest` from `s`, when the grammar's elements show it is one state for all of
    /// them (see `Builder::char_step`); `None` when they do not, and stepping byte by byte
    /// must decide.
    pub fn char_step(&mut self, s: StateId, lead: u8, rest: &[(u8, u8)]) -> Option<StateId> {
        let t = &self.aut.table;
        self.build().char_step(t, s, lead, rest)
    }

    /// Lets the builder lock go (before waiting for another thread, which may need it).
    pub fn release(&mut self) {
        self.held = None;
    }

    /// Fills in every byte transition of `s` at once (see [`Builder::step_all`]).
    pub fn step_all(&mut self, s: StateId) {
        let t = &self.aut.table;
        if !t.complete(s) {
            self.build().step_all(t, s);
        }
    }

    /// State `s` truncated below its top `k` frames (see [`Builder::truncate`]; memoized).
    pub fn truncate(&mut self, s: StateId, k: usize) -> StateId {
        let t = &self.aut.table;
        self.build().truncate(t, s, k)
    }

    /// The canonical state of `s` and its budget (see `Builder::canonical` in `canon`;
    /// memoized).
    pub fn canonical(&mut self, s: StateId, top_min: u32, deep_min: u32) -> (StateId, u32) {
        let t = &self.aut.table;
        self.build().canonical(t, s, top_min, deep_min)
    }

    /// Info about state `s` (lock-free).
    #[inline]
    pub fn info(&mut self, s: StateId) -> &'a StateInfo {
        &self.state(s).info
    }

    /// Does state `s` depend on context (see [`CTX`])? Lock-free.
    #[inline(always)]
    pub fn is_ctx(&mut self, s: StateId) -> bool {
        self.state(s).ctx
    }
}

impl Builder {
    /// Node `n` of the stack arena: `(pos, parent)` (not for [`BOTTOM`] / [`CTX`]).
    #[inline]
    pub fn node(&self, n: StackId) -> (u32, StackId) {
        self.nodes[n.index()]
    }

    /// The state after byte `b` from `s`: memoized, or built and published.
    fn step(&mut self, t: &Table, s: StateId, b: u8) -> StateId {
        let st = t.state(s);
        // Another thread may have built it while this one waited for the lock.
        let v = st.trans[b as usize].load(Ordering::Acquire);
        if v != UNKNOWN {
            return StateId(v);
        }
        let info = &st.info;
        let next = if !info.first.contains(b) {
            DEAD
        } else {
            self.seeds.clear();
            for &n in info.stacks.iter() {
                if n == BOTTOM || n == CTX {
                    continue;
                }
                let (pos, parent) = self.nodes[n.index()];
                if let Symbol::Bytes(k) = self.flat.elems[pos as usize] {
                    if self.flat.sets[k as usize].contains(b) {
                        self.seeds.push((pos + 1, parent));
                    }
                }
            }
            self.memo_closure(t)
        };
        st.trans[b as usize].store(next.0, Ordering::Release);
        next
    }

    /// The state after a whole UTF-8 character (lead byte `lead`, then one byte of each of
    /// the ranges `rest`) from `s`, read off the elements without building the states in
    /// the middle of the character: each stack that takes `lead` must be followed by byte
    /// sets that each hold the whole range of their level (the stack survives every such
    /// character) or none of it (it dies on all of them). Then every valid character with
    /// this lead leaves the same stacks behind, and the state after it is the closure of
    /// their continuations: exactly what stepping byte by byte gives, which is what a
    /// `None` (some stack takes part of a range, or meets a rule or the end mid-character)
    /// leaves to the caller. Mid-character states are otherwise built only to be compared,
    /// about a dozen per string state in a new context.
    fn char_step(&mut self, t: &Table, s: StateId, lead: u8, rest: &[(u8, u8)]) -> Option<StateId> {
        self.seeds.clear();
        for &n in t.state(s).info.stacks.iter() {
            if n == BOTTOM || n == CTX {
                continue;
            }
            let (pos, parent) = self.nodes[n.index()];
            let Symbol::Bytes(k) = self.flat.elems[pos as usize] else { continue };
            if !self.flat.sets[k as usize].contains(lead) {
                continue;
            }
            let mut p = pos + 1;
            let mut alive = true;
            for &(a, b) in rest {
                let Symbol::Bytes(k) = self.flat.elems[p as usize] else { return None };
                let set = &self.flat.sets[k as usize];
                let held = (a..=b).filter(|&x| set.contains(x)).count();
                if held == 0 {
                    alive = false;
                    break;
                }
                if held != (b - a) as usize + 1 {
                    return None;
                }
                p += 1;
            }
            if alive {
                self.seeds.push((p, parent));
            }
        }
        if self.seeds.is_empty() {
            return Some(DEAD);
        }
        Some(self.memo_closure(t))
    }

    /// Fills in every byte transition of `s` at once: bytes taken by the same stacks lead to
    /// the same state, so each distinct set of stacks is closed once (a state of many stacks,
    /// an object's unseen keys, would otherwise scan all of them for each of ~200 bytes).
    fn step_all(&mut self, t: &Table, s: StateId) {
        if t.complete(s) {
            return;
        }
        let stacks = t.state(s).info.stacks.clone();
        let words = stacks.len().div_ceil(64).max(1);
        // Per byte: the stacks (by index) that take it.
        let mut sig = vec![0u64; 256 * words];
        for (i, &n) in stacks.iter().enumerate() {
            if n == BOTTOM || n == CTX {
                continue;
            }
            let pos = self.nodes[n.index()].0;
            if let Symbol::Bytes(k) = self.flat.elems[pos as usize] {
                let set = self.flat.sets[k as usize];
                for (w, &bits) in set.0.iter().enumerate() {
                    let mut bits = bits;
                    while bits != 0 {
                        let b = w * 64 + bits.trailing_zeros() as usize;
                        bits &= bits - 1;
                        sig[b * words + i / 64] |= 1 << (i % 64);
                    }
                }
            }
        }
        let mut done: FxHashMap<&[u64], StateId> = FxHashMap::default();
        let mut next = [DEAD; 256];
        for b in 0..256 {
            let key = &sig[b * words..(b + 1) * words];
            if key.iter().all(|&w| w == 0) {
                continue;
            }
            if let Some(&x) = done.get(key) {
                next[b] = x;
                continue;
            }
            self.seeds.clear();
            for (w, &bits) in key.iter().enumerate() {
                let mut bits = bits;
                while bits != 0 {
                    let i = w * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    let (pos, parent) = self.nodes[stacks[i].index()];
                    self.seeds.push((pos + 1, parent));
                }
            }
            let x = self.memo_closure(t);
            done.insert(key, x);
            next[b] = x;
        }
        for (slot, x) in t.state(s).trans.iter().zip(next) {
            if slot.load(Ordering::Acquire) == UNKNOWN {
                slot.store(x.0, Ordering::Release);
            }
        }
    }

    /// The state after token `tok` taken whole from `s` (see [`Automaton::step_token`]).
    fn step_token(&mut self, t: &Table, s: StateId, tok: TokenId, negated: bool) -> StateId {
        self.seeds.clear();
        for &n in t.state(s).info.stacks.iter() {
            if n == BOTTOM || n == CTX {
                continue;
            }
            let (pos, parent) = self.nodes[n.index()];
            let takes = match self.flat.elems[pos as usize] {
                Symbol::Token(x) => x == tok,
                Symbol::NotToken(x) => negated && x != tok,
                _ => false,
            };
            if takes {
                self.seeds.push((pos + 1, parent));
            }
        }
        self.closure(t)
    }

    /// The state of the stacks of `a` and `b` (see [`Automaton::union`]), within the limits.
    fn union(&mut self, t: &Table, a: StateId, b: StateId) -> StateId {
        let (sa, sb) = (&t.state(a).info.stacks, &t.state(b).info.stacks);
        let mut stacks: Vec<StackId> = sa.iter().chain(sb.iter()).copied().collect();
        stacks.sort_unstable();
        stacks.dedup();
        if stacks.len() > self.max_stacks {
            return OVERFLOW;
        }
        match self.state_ids.get(stacks.as_slice()) {
            Some(&id) => id,
            None if self.state_ids.len() >= self.max_states => {
                t.states_capped.store(true, Ordering::Relaxed);
                OVERFLOW
            }
            None => self.intern_state(t, stacks),
        }
    }

    fn intern_node(&mut self, pos: u32, parent: StackId) -> StackId {
        let next = StackId(self.nodes.len() as u32);
        let id = *self.node_ids.entry((pos, parent)).or_insert(next);
        if id == next {
            self.nodes.push((pos, parent));
            self.heights.push(self.heights[parent.index()] + 1);
        }
        id
    }

    /// [`closure`](Self::closure) through the memo of seed sets.
    fn memo_closure(&mut self, t: &Table) -> StateId {
        // Stacks are sorted, so equal seed sets come out in the same order.
        if let Some(&s) = self.closures.get(self.seeds.as_slice()) {
            return s;
        }
        let key: Box<[(u32, StackId)]> = self.seeds.as_slice().into();
        let s = self.closure(t);
        self.closures.insert(key, s);
        s
    }

    /// Expands `self.seeds` (positions to match, with their stacks) into a state.
    fn closure(&mut self, t: &Table) -> StateId {
        self.visited.clear();
        self.out.clear();
        self.work.clear();
        self.work.extend_from_slice(&self.seeds);
        let mut accepting = false;
        let mut ctx = false;
        let budget = self.max_stacks.saturating_mul(8).max(1024);
        // Small closures (the common case) dedupe with a linear scan; big ones use the set.
        self.visited_small.clear();
        while let Some((pos, parent)) = self.work.pop() {
            if self.visited_small.len() < 32 {
                if self.visited_small.contains(&(pos, parent)) {
                    continue;
                }
                self.visited_small.push((pos, parent));
                if self.visited_small.len() == 32 {
                    self.visited.extend(self.visited_small.iter().copied());
                }
            } else {
                if !self.visited.insert((pos, parent)) {
                    continue;
                }
                if self.visited.len() > budget {
                    return OVERFLOW;
                }
            }
            match self.flat.elems[pos as usize] {
                Symbol::End => {
                    if parent == BOTTOM {
                        accepting = true;
                    } else if parent == CTX {
                        ctx = true;
                    } else {
                        let p = self.nodes[parent.index()];
                        self.work.push(p);
                    }
                }
                Symbol::Rule(r) => {
                    if self.flat.alts[r as usize].is_empty() {
                        // An unordered group's rule, built on first use.
                        self.flat.expand(r);
                    }
                    let cont = if self.flat.elems[pos as usize + 1] == Symbol::End {
                        parent
                    } else {
                        self.intern_node(pos + 1, parent)
                    };
                    for i in 0..self.flat.alts[r as usize].len() {
                        let a = self.flat.alts[r as usize][i];
                        self.work.push((a, cont));
                    }
                }
                Symbol::Bytes(_) | Symbol::Token(_) | Symbol::NotToken(_) => {
                    let n = self.intern_node(pos, parent);
                    self.out.push(n);
                }
            }
        }
        if self.out.len() > self.max_stacks {
            return OVERFLOW;
        }
        let mut stacks = std::mem::take(&mut self.out);
        if accepting {
            stacks.push(BOTTOM);
        }
        if ctx {
            stacks.push(CTX);
        }
        stacks.sort_unstable();
        stacks.dedup();
        let id = match self.state_ids.get(stacks.as_slice()) {
            Some(&id) => id,
            None if self.state_ids.len() >= self.max_states => {
                t.states_capped.store(true, Ordering::Relaxed);
                OVERFLOW
            }
            None => self.intern_state(t, stacks.clone()),
        };
        stacks.clear();
        self.out = stacks;
        id
    }

    /// The id of the state of `stacks`, published in the table if new.
    fn intern_state(&mut self, t: &Table, stacks: Vec<StackId>) -> StateId {
        if let Some(&id) = self.state_ids.get(stacks.as_slice()) {
            return id;
        }
        let id = StateId(self.state_ids.len() as u32);
        let mut first = ByteSet::default();
        let mut tokens = Vec::new();
        let mut not_tokens = Vec::new();
        let mut accepting = false;
        let mut ctx = false;
        for &n in &stacks {
            if n == BOTTOM {
                accepting = true;
                continue;
            }
            if n == CTX {
                ctx = true;
                continue;
            }
            match self.flat.elems[self.nodes[n.index()].0 as usize] {
                Symbol::Bytes(k) => first.union(&self.flat.sets[k as usize]),
                Symbol::Token(t) if t.0 != u32::MAX && !tokens.contains(&t) => tokens.push(t),
                Symbol::NotToken(t) if !not_tokens.contains(&t) => not_tokens.push(t),
                _ => {}
            }
        }
        let stacks: Box<[StackId]> = stacks.into_boxed_slice();
        self.state_bytes += 1024 + stacks.len() * 4 + (tokens.len() + not_tokens.len()) * 4;
        self.state_ids.insert(stacks.clone(), id);
        let info = StateInfo { stacks, accepting, first, tokens: tokens.into_boxed_slice(), not_tokens: not_tokens.into_boxed_slice() };
        let trans = Box::new(std::array::from_fn(|_| AtomicU32::new(UNKNOWN)));
        t.states.set(id.0, State { trans, ctx, info });
        // Published: the slot is set before the count says so.
        t.n_states.store(id.0 + 1, Ordering::Release);
        id
    }

    /// State `s` with its stacks cut below a common height: frames more than `k` below the
    /// tallest stack's top are replaced by [`CTX`]. The cut is one height for all stacks (so
    /// stacks sharing frames are cut alike, and a step that stays above the cut maps the
    /// truncation of `s` to the truncation of the next state); stacks that reach the bottom
    /// above the cut are kept whole, so a state of shallow stacks is its own truncation.
    /// A stack is also cut at its topmost frame inside an unordered group's family rule
    /// (which records the members seen so far): what happens inside one member is the same
    /// whichever members came before, so states that differ only there share a truncation.
    fn truncate(&mut self, t: &Table, s: StateId, k: usize) -> StateId {
        if let Some(&x) = self.truncs.get(&(s, k as u32)) {
            return x;
        }
        let stacks = &t.state(s).info.stacks;
        let tallest = stacks
            .iter()
            .map(|&n| self.heights[n.index()])
            .max()
            .unwrap_or(0);
        let cut = tallest.saturating_sub(k as u32);
        let mut out: Vec<StackId> = Vec::with_capacity(stacks.len());
        let mut path: Vec<StackId> = Vec::with_capacity(k);
        for &n in stacks.iter() {
            if n == BOTTOM || n == CTX {
                out.push(n);
                continue;
            }
            path.clear();
            let mut x = n;
            // Keep at least each stack's top frame (its next terminal).
            while x != BOTTOM
                && x != CTX
                && (path.is_empty()
                    || (self.heights[x.index()] > cut && !self.flat.lazy.in_family(self.nodes[x.index()].0)))
            {
                path.push(x);
                x = self.nodes[x.index()].1;
            }
            if x == BOTTOM || x == CTX {
                out.push(n);
                continue;
            }
            let mut parent = CTX;
            for &p in path.iter().rev() {
                let pos = self.nodes[p.index()].0;
                parent = self.intern_node(pos, parent);
            }
            out.push(parent);
        }
        out.sort_unstable();
        out.dedup();
        let x = self.intern_state(t, out);
        self.truncs.insert((s, k as u32), x);
        x
    }
}

#[cfg(test)]
mod tests;
