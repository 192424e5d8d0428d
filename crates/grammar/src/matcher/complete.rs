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
    /// Stack node → fewest bytes to empty it.
    nodes: FxHashMap<StackId, u32>,
}

impl Completion {
    pub(super) fn new(flat: &ByteGrammar, index: &TokenIndex) -> Self {
        let (min, best) = rule_mins(flat);
        let mut rest = vec![0u32; flat.elems.len()];
        for starts in &flat.alts {
            for &s in starts {
                let mut end = s as usize;
                while flat.elems[end] != Symbol::End {
                    end += 1;
                }
                let mut acc = 0u32;
                for p in (s as usize..end).rev() {
                    acc = acc.saturating_add(cost(flat, &min, p));
                    rest[p] = acc;
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
        Completion { rest, best, pick, per_byte, memo: Mutex::new(Memo::default()), states: Slots::default() }
    }

    fn memo(&self) -> std::sync::MutexGuard<'_, Memo> {
        self.memo.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Fewest bytes that empty stack node `n` (iterative: stacks can be deep).
    fn node_need(&self, aut: &Builder, memo: &mut Memo, n: StackId) -> u32 {
        let mut chain = Vec::new();
        let mut x = n;
        let base = loop {
            if x == BOTTOM {
                break 0;
            }
            if x == CTX {
                break INF;
            }
            if let Some(&v) = memo.nodes.get(&x) {
                break v;
            }
            chain.push(x);
            x = aut.node(x).1;
        };
        let mut acc = base;
        for &y in chain.iter().rev() {
            // Positions past the table are rules of unordered groups built since: no completion.
            acc = acc.saturating_add(self.rest.get(aut.node(y).0 as usize).copied().unwrap_or(INF));
            memo.nodes.insert(y, acc);
        }
        acc
    }

    /// Fewest bytes from state `s` to a complete match, and the stack that achieves it
    /// (`BOTTOM` when accepting; `None` when no byte string completes `s`).
    pub(super) fn state_need(&self, aut: &Automaton, s: StateId) -> Option<(u32, StackId)> {
        if s == DEAD || s == OVERFLOW {
            return None;
        }
        let mut memo = self.memo();
        let b = aut.builder();
        let mut best: Option<(u32, StackId)> = None;
        // Ties go to the stack whose next element comes first in the grammar (the first
        // alternative, as written: `0` before `[1-9]...`).
        let pos = |n: StackId| if n == BOTTOM || n == CTX { 0 } else { b.node(n).0 };
        for &n in aut.info(s).stacks.iter() {
            let v = self.node_need(&b, &mut memo, n);
            if v < INF && best.is_none_or(|(bv, bn)| v < bv || (v == bv && pos(n) < pos(bn))) {
                best = Some((v, n));
            }
        }
        if let Some((v, _)) = best {
            self.states.set(s, v);
        }
        best
    }

    /// Fewest bytes from `s`, memoized per state.
    pub(super) fn need(&self, aut: &Automaton, s: StateId) -> Option<u32> {
        if let Some(&v) = self.states.get(s) {
            return Some(v);
        }
        self.state_need(aut, s).map(|(v, _)| v)
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
/// (Knuth's algorithm; see the module docs).
fn rule_mins(flat: &ByteGrammar) -> (Vec<u32>, Vec<u32>) {
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
    let mut done = vec![false; n];
    while let Some(Reverse((v, r, a))) = heap.pop() {
        if done[r as usize] {
            continue;
        }
        done[r as usize] = true;
        min[r as usize] = v;
        best[r as usize] = start[a as usize];
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
