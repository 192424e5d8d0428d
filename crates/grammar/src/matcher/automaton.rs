//! The pushdown automaton over a [`Flat`] grammar, built lazily: persistent hash-consed
//! stacks, interned states and a memoized byte-transition table.
//!
//! ## Stacks
//! A stack is a [`NodeId`](u32) into an arena of nodes `(pos, parent)`: `pos` is the grammar
//! position still to be matched in this frame, `parent` the rest of the stack. Nodes are
//! interned, so equal stacks have equal ids and pushing is O(1) amortised. Node 0 is the
//! empty stack ([`BOTTOM`]). A rule reference that ends an alternative pushes no return
//! frame (tail calls), so right recursion (`S ::= x S | ε`) runs in constant stack.
//!
//! ## States
//! A state is the sorted set of stacks whose top is a terminal (a byte set or a special
//! token), plus [`BOTTOM`] when the input so far is a complete match. States are interned
//! into [`StateId`](u32)s; state 0 is [`DEAD`] (no stack). `trans[s][b]` memoizes the
//! state after byte `b` (`UNKNOWN` until first asked), so once warm a byte step is one
//! load. A step that would need more than `max_stacks` stacks yields [`OVERFLOW`]
//! (dead for masks, an error on commit), and so does one that would create a state past
//! `max_states`.
//!
//! ## Cost
//! A step's closure is linear in the stacks and rules it touches; left recursion is refused
//! when lowering, so closures are finite; the work per closure is also capped by
//! `max_stacks`. Memory grows with the distinct stacks and states visited (1 KiB of
//! transition table per state that has been stepped from).

use super::lower::{ByteSet, Elem, Flat};
use formwork_vocab::TokenId;
use rustc_hash::{FxHashMap, FxHashSet};

mod canon;

/// The empty stack.
pub(crate) const BOTTOM: u32 = 0;
/// A placeholder for "the rest of the stack", at the bottom of truncated stacks: a closure
/// that pops into it marks the state [`StateInfo::ctx`] (what follows depends on context).
pub(crate) const CTX: u32 = 1;
/// The state with no stack: nothing can follow.
pub(crate) const DEAD: u32 = 0;
/// A step that would exceed `max_stacks` (dead for masks; an error on commit).
pub(crate) const OVERFLOW: u32 = u32::MAX - 1;
const UNKNOWN: u32 = u32::MAX;

/// What is known about one state.
#[derive(Clone, Debug)]
pub(crate) struct StateInfo {
    /// Sorted stacks (BOTTOM included when accepting).
    pub stacks: Box<[u32]>,
    /// The input so far is a complete match.
    pub accepting: bool,
    /// Bytes some stack can take next.
    pub first: ByteSet,
    /// Special tokens some stack can take next.
    pub tokens: Box<[TokenId]>,
}

/// The lazily built automaton (see module docs).
#[derive(Debug)]
pub(crate) struct Automaton {
    pub flat: Flat,
    max_stacks: usize,
    /// Most states closures may create (`Limits::max_states`).
    max_states: usize,
    /// Some step was refused because of `max_states` (its result was [`OVERFLOW`]).
    states_capped: bool,
    /// Indexed by node id: `(pos, parent)`.
    nodes: Vec<(u32, u32)>,
    /// Indexed by node id: frames from the bottom (BOTTOM and CTX are 0).
    heights: Vec<u32>,
    node_ids: FxHashMap<(u32, u32), u32>,
    /// Indexed by state id.
    states: Vec<StateInfo>,
    state_ids: FxHashMap<Box<[u32]>, u32>,
    /// Indexed by state id: the memoized byte transitions.
    trans: Vec<Option<Box<[u32; 256]>>>,
    /// Indexed by state id: `StateInfo::ctx`, kept apart for the hot loop.
    ctx: Vec<bool>,
    /// Memo of [`canonical`](Self::canonical) per node: (canonical node, budget).
    canon_nodes: FxHashMap<u32, (u32, u32)>,
    /// Memo of [`canonical`](Self::canonical) per (state, top budget): (canonical state, budget).
    canon_states: FxHashMap<(u32, u32), (u32, u32)>,
    /// Memo of [`closure`](Self::closure) by seed set: the bytes of a state that the same
    /// stacks accept (all the characters of a string body, say) lead to one state, which is
    /// computed once. Indexed by the seeds, sorted.
    closures: FxHashMap<Box<[(u32, u32)]>, u32>,
    // Scratch for closures.
    visited: FxHashSet<(u32, u32)>,
    visited_small: Vec<(u32, u32)>,
    work: Vec<(u32, u32)>,
    out: Vec<u32>,
    seeds: Vec<(u32, u32)>,
}

impl Automaton {
    /// An automaton for `flat` and its initial state.
    pub fn new(flat: Flat, max_stacks: usize, max_states: usize) -> Result<(Self, u32), usize> {
        let mut a = Automaton {
            flat,
            max_stacks: max_stacks.max(1),
            max_states: max_states.max(2),
            states_capped: false,
            nodes: vec![(u32::MAX, u32::MAX), (u32::MAX, u32::MAX)],
            heights: vec![0, 0],
            node_ids: FxHashMap::default(),
            states: Vec::new(),
            state_ids: FxHashMap::default(),
            trans: Vec::new(),
            ctx: Vec::new(),
            canon_nodes: FxHashMap::default(),
            canon_states: FxHashMap::default(),
            closures: FxHashMap::default(),
            visited: FxHashSet::default(),
            visited_small: Vec::new(),
            work: Vec::new(),
            out: Vec::new(),
            seeds: Vec::new(),
        };
        a.intern_state(Vec::new());
        let root = a.flat.root as usize;
        let seeds: Vec<(u32, u32)> = a.flat.alts[root].iter().map(|&p| (p, BOTTOM)).collect();
        a.seeds = seeds;
        let init = a.closure();
        if init == OVERFLOW {
            return Err(a.max_stacks);
        }
        Ok((a, init))
    }

    /// The state after byte `b` from `s` (memoized).
    #[inline]
    pub fn step(&mut self, s: u32, b: u8) -> u32 {
        if let Some(t) = &self.trans[s as usize] {
            let v = t[b as usize];
            if v != UNKNOWN {
                return v;
            }
        }
        self.step_slow(s, b)
    }

    #[cold]
    fn step_slow(&mut self, s: u32, b: u8) -> u32 {
        let next = if !self.states[s as usize].first.contains(b) {
            DEAD
        } else {
            self.seeds.clear();
            for &n in self.states[s as usize].stacks.iter() {
                if n == BOTTOM || n == CTX {
                    continue;
                }
                let (pos, parent) = self.nodes[n as usize];
                if let Elem::Bytes(k) = self.flat.elems[pos as usize] {
                    if self.flat.sets[k as usize].contains(b) {
                        self.seeds.push((pos + 1, parent));
                    }
                }
            }
            self.memo_closure()
        };
        let t = self.trans[s as usize].get_or_insert_with(|| Box::new([UNKNOWN; 256]));
        t[b as usize] = next;
        next
    }

    /// Fills in every byte transition of `s` at once: bytes taken by the same stacks lead to
    /// the same state, so each distinct set of stacks is closed once (a state of many stacks,
    /// an object's unseen keys, would otherwise scan all of them for each of ~200 bytes).
    pub fn step_all(&mut self, s: u32) {
        if self.trans[s as usize].as_ref().is_some_and(|t| !t.contains(&UNKNOWN)) {
            return;
        }
        let stacks = self.states[s as usize].stacks.clone();
        let words = stacks.len().div_ceil(64).max(1);
        // Per byte: the stacks (by index) that take it.
        let mut sig = vec![0u64; 256 * words];
        for (i, &n) in stacks.iter().enumerate() {
            if n == BOTTOM || n == CTX {
                continue;
            }
            let pos = self.nodes[n as usize].0;
            if let Elem::Bytes(k) = self.flat.elems[pos as usize] {
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
        let mut done: FxHashMap<&[u64], u32> = FxHashMap::default();
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
                    let (pos, parent) = self.nodes[stacks[i] as usize];
                    self.seeds.push((pos + 1, parent));
                }
            }
            let x = self.memo_closure();
            done.insert(key, x);
            next[b] = x;
        }
        let t = self.trans[s as usize].get_or_insert_with(|| Box::new([UNKNOWN; 256]));
        for (slot, x) in t.iter_mut().zip(next) {
            if *slot == UNKNOWN {
                *slot = x;
            }
        }
    }

    /// The state after special token `t` from `s` (not memoized; special tokens are rare).
    pub fn step_token(&mut self, s: u32, t: TokenId) -> u32 {
        if !self.states[s as usize].tokens.contains(&t) {
            return DEAD;
        }
        self.seeds.clear();
        for &n in self.states[s as usize].stacks.iter() {
            if n == BOTTOM || n == CTX {
                continue;
            }
            let (pos, parent) = self.nodes[n as usize];
            if self.flat.elems[pos as usize] == Elem::Token(t) {
                self.seeds.push((pos + 1, parent));
            }
        }
        self.closure()
    }

    /// Info about state `s`.
    #[inline]
    pub fn info(&self, s: u32) -> &StateInfo {
        &self.states[s as usize]
    }

    /// Node `n` of the stack arena: `(pos, parent)` (not for [`BOTTOM`] / [`CTX`]).
    #[inline]
    pub fn node(&self, n: u32) -> (u32, u32) {
        self.nodes[n as usize]
    }

    /// Was some step refused because the grammar reached `Limits::max_states`?
    pub fn states_capped(&self) -> bool {
        self.states_capped
    }

    /// Number of states interned so far.
    pub fn n_states(&self) -> usize {
        self.states.len()
    }

    /// Heap bytes used.
    pub fn memory_usage(&self) -> usize {
        self.flat.memory_usage()
            + self.nodes.capacity() * 12
            + self.node_ids.capacity() * 12
            + self
                .states
                .iter()
                .map(|s| s.stacks.len() * 4 + s.tokens.len() * 4 + 72)
                .sum::<usize>()
            + self.state_ids.capacity() * 24
            + self
                .trans
                .iter()
                .map(|t| if t.is_some() { 1024 + 8 } else { 8 })
                .sum::<usize>()
            + (self.canon_nodes.capacity() + self.canon_states.capacity()) * 16
            + self
                .closures
                .keys()
                .map(|k| k.len() * 8 + 24)
                .sum::<usize>()
    }

    fn intern_node(&mut self, pos: u32, parent: u32) -> u32 {
        let next = self.nodes.len() as u32;
        let id = *self.node_ids.entry((pos, parent)).or_insert(next);
        if id == next {
            self.nodes.push((pos, parent));
            self.heights.push(self.heights[parent as usize] + 1);
        }
        id
    }

    /// [`closure`](Self::closure) through the memo of seed sets.
    fn memo_closure(&mut self) -> u32 {
        // Stacks are sorted, so equal seed sets come out in the same order.
        if let Some(&s) = self.closures.get(self.seeds.as_slice()) {
            return s;
        }
        let key: Box<[(u32, u32)]> = self.seeds.as_slice().into();
        let s = self.closure();
        self.closures.insert(key, s);
        s
    }

    /// Expands `self.seeds` (positions to match, with their stacks) into a state.
    fn closure(&mut self) -> u32 {
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
                Elem::End => {
                    if parent == BOTTOM {
                        accepting = true;
                    } else if parent == CTX {
                        ctx = true;
                    } else {
                        let p = self.nodes[parent as usize];
                        self.work.push(p);
                    }
                }
                Elem::Rule(r) => {
                    if self.flat.alts[r as usize].is_empty() {
                        // An unordered group's rule, built on first use.
                        self.flat.expand(r);
                    }
                    let cont = if self.flat.elems[pos as usize + 1] == Elem::End {
                        parent
                    } else {
                        self.intern_node(pos + 1, parent)
                    };
                    for i in 0..self.flat.alts[r as usize].len() {
                        let a = self.flat.alts[r as usize][i];
                        self.work.push((a, cont));
                    }
                }
                Elem::Bytes(_) | Elem::Token(_) => {
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
            None if self.states.len() >= self.max_states => {
                self.states_capped = true;
                OVERFLOW
            }
            None => self.intern_state(stacks.clone()),
        };
        stacks.clear();
        self.out = stacks;
        id
    }

    fn intern_state(&mut self, stacks: Vec<u32>) -> u32 {
        if let Some(&id) = self.state_ids.get(stacks.as_slice()) {
            return id;
        }
        let id = self.states.len() as u32;
        let mut first = ByteSet::default();
        let mut tokens = Vec::new();
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
            match self.flat.elems[self.nodes[n as usize].0 as usize] {
                Elem::Bytes(k) => first.union(&self.flat.sets[k as usize]),
                Elem::Token(t) if t.0 != u32::MAX && !tokens.contains(&t) => tokens.push(t),
                _ => {}
            }
        }
        let stacks: Box<[u32]> = stacks.into_boxed_slice();
        self.state_ids.insert(stacks.clone(), id);
        self.states.push(StateInfo {
            stacks,
            accepting,
            first,
            tokens: tokens.into_boxed_slice(),
        });
        self.trans.push(None);
        self.ctx.push(ctx);
        id
    }

    /// Does state `s` depend on context (see [`CTX`])?
    #[inline]
    pub fn is_ctx(&self, s: u32) -> bool {
        self.ctx[s as usize]
    }

    /// State `s` with its stacks cut below a common height: frames more than `k` below the
    /// tallest stack's top are replaced by [`CTX`]. The cut is one height for all stacks (so
    /// stacks sharing frames are cut alike, and a step that stays above the cut maps the
    /// truncation of `s` to the truncation of the next state); stacks that reach the bottom
    /// above the cut are kept whole, so a state of shallow stacks is its own truncation.
    /// A stack is also cut at its topmost frame inside an unordered group's family rule
    /// (which records the members seen so far): what happens inside one member is the same
    /// whichever members came before, so states that differ only there share a truncation.
    pub fn truncate(&mut self, s: u32, k: usize) -> u32 {
        let tallest = self.states[s as usize]
            .stacks
            .iter()
            .map(|&n| self.heights[n as usize])
            .max()
            .unwrap_or(0);
        let cut = tallest.saturating_sub(k as u32);
        let mut out: Vec<u32> = Vec::with_capacity(self.states[s as usize].stacks.len());
        let mut path: Vec<u32> = Vec::with_capacity(k);
        for i in 0..self.states[s as usize].stacks.len() {
            let n = self.states[s as usize].stacks[i];
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
                    || (self.heights[x as usize] > cut && !self.flat.lazy.in_family(self.nodes[x as usize].0)))
            {
                path.push(x);
                x = self.nodes[x as usize].1;
            }
            if x == BOTTOM || x == CTX {
                out.push(n);
                continue;
            }
            let mut parent = CTX;
            for &p in path.iter().rev() {
                let pos = self.nodes[p as usize].0;
                parent = self.intern_node(pos, parent);
            }
            out.push(parent);
        }
        out.sort_unstable();
        out.dedup();
        self.intern_state(out)
    }
}
