//! Shortest completions: the fewest bytes (and a short token plan) that take the current
//! parser state to a complete match, for closing an output before a token budget runs out.
//!
//! ## Tables (once per compiled grammar, built on first use)
//! - `min[r]`: the length of a shortest string of rule `r`, by Knuth's generalisation of
//!   Dijkstra to grammars: an alternative's value is known once all the rules it references
//!   are final; the smallest known value finalises its rule (a heap). `best[r]` is that
//!   alternative. Byte elements cost 1, token references (negated ones too) cost ∞ (a
//!   completion is bytes only).
//!   Since `best[r]` only references rules finalised before `r`, expanding it terminates.
//! - `rest[p]`: the fewest bytes from position `p` to the end of its alternative.
//! - `pick[k]`: the byte a completion uses for byte set `k`: a readable one (`a`-`z`,
//!   `0`-`9`, `A`-`Z`, space, other ASCII) that has a single-byte token where possible. Any
//!   byte of a set is valid on its path; the lowering keeps multi-byte UTF-8 sequences on
//!   their own alternatives (`regex_syntax::utf8`), so every pick spells valid UTF-8.
//!
//! ## Deferred rules
//! In a grammar with deferred rules not built yet (`lower::deferred`), `min` treats them as
//! matching nothing (an upper bound on the true length) and `lb` as matching one byte (a lower
//! bound: they never match the empty string). A rule is *settled* when the two agree: its `min`
//! is then exact, and so is every rule of its shortest alternative. A state whose stacks meet an
//! unsettled rule is answered after [`Completion::settle`] builds the deferred rules on the
//! alternatives that could beat the upper bound (and the tables are rebuilt): a completion builds
//! what the required parts of its output need, and leaves the optional parts it skips unbuilt.
//!
//! ## Per state (memoized)
//! A stack `(pos, parent)` needs `rest[pos] + need(parent)` bytes (`need(BOTTOM) = 0`); a
//! state needs the least over its stacks. Memos per stack node and per state make the
//! lookup after a token cheap once warm, so the loop can ask it every step: the memo per
//! state is a lock-free table (`Slots`), so many sequences sharing the grammar ask it
//! without waiting for each other; a miss locks the node memo, then the automaton's
//! builder (for the stack arena), in that order.
//!
//! ## Token plans
//! [`Matcher::completion_tokens`] spells the shortest completion with the fewest tokens
//! that are a prefix of the rest of it (dynamic programming over the trie), so each token is
//! allowed in turn. When every picked byte has a single-byte token
//! ([`Matcher::completion_bytes_bound_tokens`]), a completion of `n` bytes has a plan of at
//! most `n` tokens — the cheap check a generation loop uses far from its budget.

use super::automaton::{Automaton, Builder, StackId, StateId, BOTTOM, CTX, DEAD, OVERFLOW};
use super::index::TokenIndex;
use super::lower::{ByteSet, Symbol, ByteGrammar};
use super::slots::Slots;
use rustc_hash::FxHashMap;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Mutex;

/// No completion (only special tokens, or an empty byte set, lie ahead).
const INF: u32 = u32::MAX;
/// Longest completion spelled out by `Matcher::shortest_completion`, in bytes.
pub(crate) const MAX_COMPLETION: u32 = 1 << 20;

/// The shortest-completion tables of one compiled grammar (see the module docs).
#[derive(Debug)]
pub(crate) struct Completion {
    /// Indexed by position in `ByteGrammar::elems`: fewest bytes to the end of its alternative.
    rest: Vec<u32>,
    /// Indexed by position: is `rest` exact (every rule after it settled)?
    exact: Vec<bool>,
    /// Indexed by rule: the length of a shortest string, deferred rules not built yet
    /// matching nothing (see the module docs).
    min: Vec<u32>,
    /// The same, those rules matching one byte (a lower bound).
    lb: Vec<u32>,
    /// How many deferred rules were built when these tables were made.
    pub(super) seen: u64,
    /// Indexed by rule: the start position of a shortest alternative (`INF`: none).
    best: Vec<u32>,
    /// Indexed by byte set: the byte a completion uses.
    pick: Vec<u8>,
    /// Every nonempty set's pick is a single-byte text token.
    pub(super) per_byte: bool,
    memo: Mutex<Memo>,
    /// Indexed by state: fewest bytes to a complete match (states with one).
    states: Slots<u32>,
}

#[derive(Debug, Default)]
struct Memo {
    /// Stack node → fewest bytes to empty it (exact ones only).
    nodes: FxHashMap<StackId, u32>,
}

/// A state's need is not known exactly yet: these positions of its stacks have rules after
/// them that are not settled (see [`Completion::settle`]).
#[derive(Debug)]
pub(crate) struct Unsettled(pub Vec<u32>);

impl Completion {
    /// The tables of `b`'s grammar as built so far (`seen` deferred rules built).
    pub(super) fn new(b: &Builder, index: &TokenIndex, seen: u64) -> Self {
        let flat = &b.flat;
        let (min, best) = rule_mins(flat, &[]);
        let deferred: Vec<u32> = (0..flat.alts.len() as u32).filter(|&r| b.is_deferred(r)).collect();
        let lb = if deferred.is_empty() { min.clone() } else { rule_mins(flat, &deferred).0 };
        let mut rest = vec![0u32; flat.elems.len()];
        let mut exact = vec![true; flat.elems.len()];
        for starts in &flat.alts {
            for &s in starts {
                let mut end = s as usize;
                while flat.elems[end] != Symbol::End {
                    end += 1;
                }
                let (mut acc, mut ok) = (0u32, true);
                for p in (s as usize..end).rev() {
                    acc = acc.saturating_add(cost(flat, &min, p));
                    if let Symbol::Rule(x) = flat.elems[p] {
                        ok &= min[x as usize] == lb[x as usize];
                    }
                    rest[p] = acc;
                    exact[p] = ok;
                }
                rest[end] = 0;
            }
        }
        let trie = index.trie();
        let has_token = |b: u8| trie.child(0, b).is_some_and(|c| !trie.tokens_at(c).is_empty());
        let mut per_byte = true;
        let pick = flat
            .sets
            .iter()
            .map(|set| {
                if set.is_empty() {
                    return 0;
                }
                match preferred(set).find(|&b| has_token(b)) {
                    Some(b) => b,
                    None => {
                        per_byte = false;
                        preferred(set).next().expect("nonempty set")
                    }
                }
            })
            .collect();
        Completion { rest, exact, min, lb, seen, best, pick, per_byte, memo: Mutex::new(Memo::default()), states: Slots::default() }
    }

    fn memo(&self) -> std::sync::MutexGuard<'_, Memo> {
        self.memo.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Fewest bytes that empty stack node `n` (iterative: stacks can be deep, and joins
    /// make them a DAG: a join needs what its cheapest member needs); the positions on the
    /// way whose `rest` is not exact go to `unsettled`.
    fn node_need(&self, aut: &Builder, memo: &mut Memo, n: StackId, unsettled: &mut Vec<u32>) -> u32 {
        // Needs found in this call, exact or not: (bytes, exact).
        let mut local: FxHashMap<StackId, (u32, bool)> = FxHashMap::default();
        let known = |x: StackId, memo: &Memo, local: &FxHashMap<StackId, (u32, bool)>| -> Option<(u32, bool)> {
            if x == BOTTOM {
                return Some((0, true));
            }
            if x == CTX {
                return Some((INF, true));
            }
            memo.nodes.get(&x).map(|&v| (v, true)).or_else(|| local.get(&x).copied())
        };
        let mut todo = vec![n];
        while let Some(&x) = todo.last() {
            if known(x, memo, &local).is_some() {
                todo.pop();
                continue;
            }
            let parent = [aut.node(x).1];
            let deps: &[StackId] = if aut.is_join(x) { aut.join_members(x) } else { &parent };
            let waiting = todo.len();
            todo.extend(deps.iter().copied().filter(|&d| known(d, memo, &local).is_none()));
            if todo.len() > waiting {
                continue;
            }
            todo.pop();
            let v = if aut.is_join(x) {
                deps.iter().map(|&d| known(d, memo, &local).expect("done above")).fold((INF, true), |(a, ea), (b, eb)| (a.min(b), ea && eb))
            } else {
                let (below, exact) = known(deps[0], memo, &local).expect("done above");
                let pos = aut.node(x).0 as usize;
                // Positions past the table are rules of unordered groups built since: no completion.
                let here = !self.exact.get(pos).copied().unwrap_or(true);
                if here {
                    unsettled.push(pos as u32);
                }
                (below.saturating_add(self.rest.get(pos).copied().unwrap_or(INF)), exact && !here)
            };
            if v.1 {
                memo.nodes.insert(x, v.0);
            } else {
                local.insert(x, v);
            }
        }
        known(n, memo, &local).map_or(INF, |(v, _)| v)
    }

    /// The member of join `j` that empties with the fewest bytes (the first on a tie), for
    /// spelling a shortest completion through it.
    pub(super) fn cheapest_member(&self, aut: &Builder, j: StackId) -> StackId {
        let mut memo = self.memo();
        let mut unsettled = Vec::new();
        let members = aut.join_members(j);
        let mut best = (INF, members[0]);
        for &m in members {
            let v = self.node_need(aut, &mut memo, m, &mut unsettled);
            if v < best.0 {
                best = (v, m);
            }
        }
        best.1
    }

    /// Fewest bytes from state `s` to a complete match, and the stack that achieves it
    /// (`BOTTOM` when accepting; `None` when no byte string completes `s`); [`Unsettled`]
    /// when that depends on deferred rules not built yet and `strict` (else the upper bound).
    pub(super) fn state_need(&self, aut: &Automaton, s: StateId, strict: bool) -> Result<Option<(u32, StackId)>, Unsettled> {
        if s == DEAD || s == OVERFLOW {
            return Ok(None);
        }
        let mut memo = self.memo();
        let b = aut.builder();
        let mut best: Option<(u32, StackId)> = None;
        let mut unsettled = Vec::new();
        // Ties go to the stack whose next element comes first in the grammar (the first
        // alternative, as written: `0` before `[1-9]...`).
        let pos = |n: StackId| if n == BOTTOM || n == CTX { 0 } else { b.node(n).0 };
        for &n in aut.info(s).stacks.iter() {
            let v = self.node_need(&b, &mut memo, n, &mut unsettled);
            if v < INF && best.is_none_or(|(bv, bn)| v < bv || (v == bv && pos(n) < pos(bn))) {
                best = Some((v, n));
            }
        }
        if !unsettled.is_empty() {
            if strict {
                return Err(Unsettled(unsettled));
            }
            return Ok(best);
        }
        if let Some((v, _)) = best {
            self.states.set(s, v);
        }
        Ok(best)
    }

    /// Fewest bytes from `s` when known exactly and memoized (see
    /// [`state_need`](Self::state_need)).
    pub(super) fn known(&self, s: StateId) -> Option<u32> {
        self.states.get(s).copied()
    }

    /// Builds the deferred rules a shortest completion through positions `unsettled` might
    /// use: from the unsettled rules after them, along every alternative whose lower bound
    /// beats its rule's upper bound (see the module docs). Returns whether it built any (the
    /// tables are then stale). `b` is the builder of the grammar these tables were built for.
    pub(super) fn settle(&self, b: &mut Builder, unsettled: &[u32]) -> bool {
        let settled = |x: u32| self.min.get(x as usize) == self.lb.get(x as usize);
        let lb_cost = |flat: &ByteGrammar, p: usize| match flat.elems[p] {
            Symbol::Rule(x) => self.lb.get(x as usize).copied().unwrap_or(INF),
            _ => cost(flat, &self.lb, p),
        };
        let mut work: Vec<u32> = Vec::new();
        let mut seen = rustc_hash::FxHashSet::default();
        // The unsettled rules from position `p` to the end of its alternative, once each.
        let mut follow = |flat: &ByteGrammar, mut p: usize, work: &mut Vec<u32>| {
            while flat.elems[p] != Symbol::End {
                if let Symbol::Rule(x) = flat.elems[p] {
                    if !settled(x) && seen.insert(x) {
                        work.push(x);
                    }
                }
                p += 1;
            }
        };
        for &p in unsettled {
            follow(&b.flat, p as usize, &mut work);
        }
        let mut build = Vec::new();
        while let Some(x) = work.pop() {
            if b.is_deferred(x) {
                build.push(x);
                continue;
            }
            let ub = self.min.get(x as usize).copied().unwrap_or(INF);
            for &s in &b.flat.alts[x as usize] {
                let mut lb = 0u32;
                let mut p = s as usize;
                while b.flat.elems[p] != Symbol::End {
                    lb = lb.saturating_add(lb_cost(&b.flat, p));
                    p += 1;
                }
                if lb < ub {
                    follow(&b.flat, s as usize, &mut work);
                }
            }
        }
        let mut built = false;
        for x in build {
            built |= b.expand_deferred(x);
        }
        built
    }

    /// Appends a shortest string from position `pos` to the end of its alternative.
    pub(super) fn emit_from(&self, flat: &ByteGrammar, pos: u32, out: &mut Vec<u8>) {
        let mut todo = vec![pos];
        while let Some(p) = todo.pop() {
            match flat.elems[p as usize] {
                Symbol::End => {}
                Symbol::Bytes(k) => {
                    out.push(self.pick[k as usize]);
                    todo.push(p + 1);
                }
                Symbol::Rule(r) => {
                    todo.push(p + 1);
                    todo.push(self.best[r as usize]);
                }
                // Never on a finite path (tokens cost ∞).
                Symbol::Token(_) | Symbol::NotToken(_) => return,
            }
        }
    }
}

/// The cost of element `p` in bytes.
fn cost(flat: &ByteGrammar, min: &[u32], p: usize) -> u32 {
    match flat.elems[p] {
        Symbol::Bytes(k) if !flat.sets[k as usize].is_empty() => 1,
        Symbol::Bytes(_) | Symbol::Token(_) | Symbol::NotToken(_) => INF,
        Symbol::Rule(r) => min[r as usize],
        Symbol::End => 0,
    }
}

/// The bytes of `set` in the order a completion prefers them.
fn preferred(set: &ByteSet) -> impl Iterator<Item = u8> + '_ {
    (b'a'..=b'z')
        .chain(b'0'..=b'9')
        .chain(b'A'..=b'Z')
        .chain([b' '])
        .chain(0x21..=0x7e)
        .chain(0..=255)
        .filter(|&b| set.contains(b))
}

/// Per rule: the length of a shortest string and the start of an alternative achieving it
/// (Knuth's algorithm; see the module docs); rules `one` (without alternatives: deferred
/// rules not built yet) count as matching one byte.
fn rule_mins(flat: &ByteGrammar, one: &[u32]) -> (Vec<u32>, Vec<u32>) {
    let n = flat.alts.len();
    let mut min = vec![INF; n];
    let mut best = vec![INF; n];
    // Per alternative: owner rule, start, value so far (terminals + final rules), rules pending.
    let mut owner = Vec::new();
    let mut start = Vec::new();
    let mut value: Vec<u32> = Vec::new();
    let mut pending: Vec<u32> = Vec::new();
    // Indexed by rule: the alternatives that reference it (once per occurrence).
    let mut uses: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut heap = BinaryHeap::new();
    for (r, starts) in flat.alts.iter().enumerate() {
        for &s in starts {
            let a = owner.len() as u32;
            let (mut v, mut c) = (0u32, 0u32);
            let mut p = s as usize;
            loop {
                match flat.elems[p] {
                    Symbol::End => break,
                    Symbol::Rule(x) => {
                        c += 1;
                        uses[x as usize].push(a);
                    }
                    _ => v = v.saturating_add(cost(flat, &min, p)),
                }
                p += 1;
            }
            owner.push(r as u32);
            start.push(s);
            value.push(v);
            pending.push(c);
            if c == 0 && v < INF {
                heap.push(Reverse((v, r as u32, a)));
            }
        }
    }
    for &r in one {
        heap.push(Reverse((1, r, u32::MAX)));
    }
    let mut done = vec![false; n];
    while let Some(Reverse((v, r, a))) = heap.pop() {
        if done[r as usize] {
            continue;
        }
        done[r as usize] = true;
        min[r as usize] = v;
        if a != u32::MAX {
            best[r as usize] = start[a as usize];
        }
        for &a2 in &uses[r as usize] {
            let i = a2 as usize;
            value[i] = value[i].saturating_add(v);
            pending[i] -= 1;
            if pending[i] == 0 && value[i] < INF && !done[owner[i] as usize] {
                heap.push(Reverse((value[i], owner[i], a2)));
            }
        }
    }
    (min, best)
}
