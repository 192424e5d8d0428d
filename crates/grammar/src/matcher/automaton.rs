//! The pushdown automaton over a [`ByteGrammar`] grammar, built lazily: persistent hash-consed
//! stacks, interned states and a memoized byte-transition table.
//!
//! ## Stacks
//! A stack is a [`StackId`] into an arena of nodes `(pos, parent)`: `pos` is the grammar
//! position still to be matched in this frame, `parent` the rest of the stack. Nodes are
//! interned, so equal stacks have equal ids and pushing is O(1) amortised. Node 0 is the
//! empty stack ([`BOTTOM`]). A rule reference that ends an alternative pushes no return
//! frame (tail calls), so right recursion (`S ::= x S | ε`) runs in constant stack.
//! Stacks of a state that share their top frames are one stack over a join of their
//! parents (a graph-structured stack; see `join`), so a state holds each top position once.
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
//! A step's closure is the union of its seeds' own closures, each computed once and
//! remembered (a state of many stacks seeds many sets that share most of their seeds: on
//! MaskBench with the Llama 3.1 vocabulary this took TBM p99.9 from 0.83–0.87 to 0.72–0.74 ms
//! on the half not tuned on). Each is linear in the stacks and rules it touches; left recursion is refused
//! when lowering, so closures are finite; the work per closure is also capped by
//! `max_stacks`. Memory grows with the distinct stacks and states visited: per state, 1 KiB
//! of transition table (made with the state, from chunks of 32 tables), its stacks, and a
//! table slot of about 90 bytes (in chunks that double, so up to half of them unused). An
//! unknown transition costs a lock round trip (uncontended: two atomic operations) on top
//! of its closure. The builder's interning and memo maps are [`ShardedMap`]s: each grows a
//! sixteenth at a time, so no single step pays for rehashing a whole large map (one such
//! rehash was a third of a 2 ms mask).

use super::lower::{ByteSet, Symbol, ByteGrammar, Deferred};
use super::sharded::ShardedMap;
use super::slots::{SlotIndex, Slots};
use formwork_vocab::TokenId;
use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

mod build;
mod canon;
mod join;

/// A state of the automaton: its index in the table. [`DEAD`] and [`OVERFLOW`] are states
/// too, so a step always gives one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct StateId(pub(crate) u32);

impl SlotIndex for StateId {
    #[inline(always)]
    fn slot(self) -> u32 {
        self.0
    }
}

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
/// The state after an end-of-sequence token was committed.
pub(crate) const ENDED: StateId = StateId(u32::MAX - 2);
/// The valid multi-byte UTF-8 characters: (lead bytes, the range of each following byte),
/// from the UTF-8 definition (RFC 3629), for the checks that step whole characters.
pub(crate) const UTF8_SEQUENCES: &[((u8, u8), &[(u8, u8)])] = &[
    ((0xC2, 0xDF), &[(0x80, 0xBF)]),
    ((0xE0, 0xE0), &[(0xA0, 0xBF), (0x80, 0xBF)]),
    ((0xE1, 0xEC), &[(0x80, 0xBF), (0x80, 0xBF)]),
    ((0xED, 0xED), &[(0x80, 0x9F), (0x80, 0xBF)]),
    ((0xEE, 0xEF), &[(0x80, 0xBF), (0x80, 0xBF)]),
    ((0xF0, 0xF0), &[(0x90, 0xBF), (0x80, 0xBF), (0x80, 0xBF)]),
    ((0xF1, 0xF3), &[(0x80, 0xBF), (0x80, 0xBF), (0x80, 0xBF)]),
    ((0xF4, 0xF4), &[(0x80, 0x8F), (0x80, 0xBF), (0x80, 0xBF)]),
];

/// A transition not built yet (only in the table, never handed out).
const UNKNOWN: u32 = u32::MAX;

/// What is known about one state.
#[derive(Clone, Debug)]
pub(crate) struct StateInfo {
    /// Sorted stacks (BOTTOM included when accepting).
    pub stacks: std::sync::Arc<[StackId]>,
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
    /// By byte: the next state, `UNKNOWN` until built. Made with the state: nearly every
    /// state is stepped from (94 % on the JSON grammar), and a step is then one load with
    /// no check of whether the table exists.
    trans: TransSlot,
    /// The state popped into [`CTX`] (what follows depends on context).
    ctx: bool,
    /// Every byte transition is built: set by `Builder::step_all`, or by [`Table::complete`]
    /// when its scan finds them all, so that asking again is one load instead of a scan of
    /// the 256 entries.
    complete: AtomicBool,
    info: StateInfo,
}

impl State {
    /// Does the state depend on context (see [`CTX`])?
    #[inline(always)]
    pub fn is_ctx(&self) -> bool {
        self.ctx
    }
}

/// A state's transition table: one of the tables of a chunk that several states share.
/// Tables are made [`TRANS_CHUNK`] at a time: a state then costs no allocation of its own
/// (1 KiB each, which is a large request for glibc's allocator, and one that makes it
/// consolidate its small free chunks first), only a reference count.
struct TransSlot {
    chunk: TransChunk,
    i: u32,
}

/// A state's transitions by byte.
pub(crate) type Transitions = [AtomicU32; 256];

/// Transition tables made at once, shared by the states that took one.
type TransChunk = std::sync::Arc<[Transitions]>;

/// Transition tables allocated at once (32 KiB).
const TRANS_CHUNK: usize = 32;

impl std::ops::Deref for TransSlot {
    type Target = Transitions;

    #[inline(always)]
    fn deref(&self) -> &Transitions {
        &self.chunk[self.i as usize]
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
        let st = self.state(s);
        if st.complete.load(Ordering::Acquire) {
            return true;
        }
        let all = st.trans.iter().all(|x| x.load(Ordering::Acquire) != UNKNOWN);
        if all {
            st.complete.store(true, Ordering::Release);
        }
        all
    }
}

/// The lazily built automaton (see module docs): a lock-free table and a locked builder.
pub(crate) struct Automaton {
    table: Table,
    builder: Mutex<Builder>,
    /// [`Builder`]'s count of deferred rules built.
    expansions: std::sync::Arc<AtomicU64>,
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
    /// The grammar's deferred rules, built on first use (`None`: it has none).
    pub deferred: Option<Deferred>,
    /// Deferred rules built so far (shared with the [`Automaton`], which reads it without
    /// the lock: tables over the whole grammar are rebuilt when it moves).
    expansions: std::sync::Arc<AtomicU64>,
    max_stacks: usize,
    /// Most states closures may create (`Limits::max_states`).
    max_states: usize,
    /// Indexed by node id: `(pos, parent)`.
    nodes: Vec<(u32, StackId)>,
    /// Indexed by node id: frames from the bottom (BOTTOM and CTX are 0).
    heights: Vec<u32>,
    node_ids: ShardedMap<(u32, StackId), StackId>,
    /// The members of each join node (see `join`), indexed by the node's parent field.
    joins: Vec<Box<[StackId]>>,
    /// The join nodes by their members.
    join_ids: ShardedMap<Box<[StackId]>, StackId>,
    /// Heap bytes of the joins.
    join_bytes: usize,
    /// Scratch for `join::factor`: by position, the stamp of the last call that saw it.
    stamps: Vec<u32>,
    stamp: u32,
    /// Joins `canon::canonical_join` is inside.
    canon_join_depth: u32,
    /// The states by their stacks (the same allocation as the state's own list).
    state_ids: ShardedMap<std::sync::Arc<[StackId]>, StateId>,
    /// Heap bytes of the published states (infos and transition tables).
    state_bytes: usize,
    /// The chunk of transition tables new states take theirs from, and how many it has
    /// handed out.
    trans_chunk: Option<(TransChunk, u32)>,
    /// Memo of [`canonical`](Self::canonical) per node: (canonical node, budget).
    canon_nodes: ShardedMap<StackId, (StackId, u32)>,
    /// Memo of [`canonical`](Self::canonical) per (state, top budget): (canonical state, budget).
    canon_states: ShardedMap<(StateId, u32), (StateId, u32)>,
    /// Memo of truncations (see [`truncate`](Self::truncate)) per (state, depth).
    truncs: ShardedMap<(StateId, u32), StateId>,
    /// Memo of [`closure`](Self::closure) by seed set: the bytes of a state that the same
    /// stacks accept (all the characters of a string body, say) lead to one state, which is
    /// computed once. Indexed by the seeds, sorted.
    closures: ShardedMap<Box<[(u32, StackId)]>, StateId>,
    /// Memo of each seed's own closure (see [`closure`](Self::closure)); `None` when it
    /// overflows. Its heap bytes in `seed_bytes`.
    seed_closures: ShardedMap<(u32, StackId), Option<SeedClosure>>,
    seed_bytes: usize,
    // Scratch for closures.
    visited: FxHashSet<(u32, StackId)>,
    visited_small: Vec<(u32, StackId)>,
    work: Vec<(u32, StackId)>,
    out: Vec<StackId>,
    union: Vec<StackId>,
    seeds: Vec<(u32, StackId)>,
    // Scratch for `step_all`: what takes a byte, each byte's signature, each signature's state.
    all_takers: Vec<(ByteSet, u32, StackId)>,
    all_sig: Vec<u64>,
    all_done: FxHashMap<u64, (u16, StateId)>,
}

/// The closure of one seed (see `Builder::closure`): the stacks it reaches, and whether it
/// reaches the end of the input or the context placeholder.
#[derive(Debug)]
struct SeedClosure {
    stacks: Box<[StackId]>,
    accepting: bool,
    ctx: bool,
}

impl Automaton {
    /// An automaton for `flat` and its initial state.
    pub fn new(flat: ByteGrammar, deferred: Option<Deferred>, max_stacks: usize, max_states: usize) -> Result<(Self, StateId), usize> {
        let expansions = std::sync::Arc::new(AtomicU64::new(0));
        let mut b = Builder {
            flat,
            deferred,
            expansions: expansions.clone(),
            max_stacks: max_stacks.max(1),
            max_states: max_states.max(2),
            nodes: vec![(u32::MAX, StackId(u32::MAX)), (u32::MAX, StackId(u32::MAX))],
            heights: vec![0, 0],
            node_ids: ShardedMap::default(),
            joins: Vec::new(),
            join_ids: ShardedMap::default(),
            join_bytes: 0,
            stamps: Vec::new(),
            stamp: 0,
            canon_join_depth: 0,
            state_ids: ShardedMap::default(),
            state_bytes: 0,
            trans_chunk: None,
            canon_nodes: ShardedMap::default(),
            canon_states: ShardedMap::default(),
            truncs: ShardedMap::default(),
            closures: ShardedMap::default(),
            seed_closures: ShardedMap::default(),
            seed_bytes: 0,
            visited: FxHashSet::default(),
            visited_small: Vec::new(),
            work: Vec::new(),
            out: Vec::new(),
            union: Vec::new(),
            seeds: Vec::new(),
            all_takers: Vec::new(),
            all_sig: Vec::new(),
            all_done: FxHashMap::default(),
        };
        let t = Table {
            states: Slots::default(),
            n_states: AtomicU32::new(0),
            states_capped: AtomicBool::new(false),
        };
        b.intern_state(&t, &[]);
        let root = b.flat.root as usize;
        let seeds: Vec<(u32, StackId)> = b.flat.alts[root].iter().map(|&p| (p, BOTTOM)).collect();
        b.seeds = seeds;
        let init = b.closure(&t);
        if init == OVERFLOW {
            return Err(b.max_stacks);
        }
        Ok((Automaton { table: t, builder: Mutex::new(b), expansions }, init))
    }

    /// Deferred rules built so far (see `lower::deferred`): the grammar has grown when this
    /// moves. Lock-free.
    pub fn expansions(&self) -> u64 {
        self.expansions.load(Ordering::Acquire)
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
        Stepper { aut: self, held: None, known_run: 0, last: [dead, dead], ctx_seen: false, path: Vec::new(), memo: Vec::new() }
    }

    /// Heap bytes used.
    pub fn memory_usage(&self) -> usize {
        let b = self.builder();
        b.flat.memory_usage()
            + self.table.states.memory_usage()
            + b.state_bytes
            + b.nodes.capacity() * 12
            + b.node_ids.table_bytes()
            + b.state_ids.table_bytes()
            + b.canon_nodes.table_bytes()
            + b.canon_states.table_bytes()
            + b.truncs.table_bytes()
            + b.closures.table_bytes()
            + b.closures.keys().map(|k| k.len() * 8).sum::<usize>()
            + b.join_ids.table_bytes()
            + b.seed_bytes
            + b.join_bytes * 2
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
    /// [`is_ctx`](Self::is_ctx) answered yes since [`take_ctx_seen`](Self::take_ctx_seen).
    ctx_seen: bool,
    /// A trie walk's states (each with its entry and transition table) and bytes by depth,
    /// kept between the walks of one mask (a mask walks many subtrees; see
    /// `mask::walk_below`).
    pub path: Vec<(StateId, &'a Transitions, u8)>,
    /// A trie walk's direct-mapped memo of transition tables and context flags by state
    /// id (`id % MEMO`), kept between walks; empty until the first walk fills it.
    pub memo: Vec<(StateId, &'a Transitions, bool)>,
}

/// Slots of [`Stepper::memo`]: more than the states one walk meets at once (a string's
/// positions, each with a few variants).
pub(crate) const MEMO: usize = 64;

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

    /// The transition table of the state whose entry is `e`, for [`step_in`](Self::step_in):
    /// a walk that keeps it beside the entry steps with one load.
    #[inline(always)]
    pub fn transitions(e: &'a State) -> &'a Transitions {
        &e.trans
    }

    /// [`step`](Self::step) from `s` whose transition table `t` the caller kept
    /// ([`transitions`](Self::transitions)).
    #[inline(always)]
    pub fn step_in(&mut self, t: &'a Transitions, s: StateId, b: u8) -> StateId {
        let v = t[b as usize].load(Ordering::Acquire);
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

    /// [`step`](Self::step) from `s` whose entry `e` the caller kept.
    #[inline(always)]
    pub fn step_from(&mut self, e: &'a State, s: StateId, b: u8) -> StateId {
        self.step_in(Self::transitions(e), s, b)
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
        let c = self.state(s).ctx;
        self.ctx_seen |= c;
        c
    }

    /// Whether [`is_ctx`](Self::is_ctx) said yes since the last call (which resets it).
    pub fn take_ctx_seen(&mut self) -> bool {
        std::mem::take(&mut self.ctx_seen)
    }
}

#[cfg(test)]
mod tests;
