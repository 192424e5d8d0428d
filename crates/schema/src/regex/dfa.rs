//! A regular string grammar made deterministic: the [`Expr`] a pattern lowers to, run
//! through a Thompson NFA over code points, the subset construction and Moore minimization,
//! and emitted as a right-linear grammar (one rule per DFA state:
//! `S_i ::= class_1 S_j | class_2 S_k | ... | ε if accepting`).
//!
//! The language is exactly the input expression's (only the grammar's shape changes), but
//! the matcher then follows one stack where the expression's `.*X.*` (an unanchored pattern)
//! kept one per place `X` might have started. Expressions with rule references or tokens,
//! and NFAs or DFAs over the size bounds, are left alone (`None`).

use crate::compiler::Compiler;
use formwork_grammar::ir::normalize_ranges;
use formwork_grammar::Expr;
use rustc_hash::FxHashMap as HashMap;
use std::hash::{Hash, Hasher};

/// Most NFA nodes built from one expression.
const MAX_NFA: usize = 20_000;
/// Most DFA states before minimization.
const MAX_SUBSETS: usize = 8_000;
/// Most DFA states (rules) after minimization.
const MAX_STATES: usize = 1_500;
/// Most NFA positions summed over all subsets: a compile-time budget (the subset
/// construction and Moore's refinement grow with it; `.*[a-z]{162}.*` needs 33,000 and
/// 20 ms, where the plain lowering costs the matcher little, so it keeps that lowering).
const MAX_SUBSET_WORK: usize = 8_000;
/// The same budget for key languages (`patternProperties` regions, patterns minus listed
/// names), which have no cheaper lowering to fall back to: a key left out is a valid
/// instance rejected. About 25 ms at most.
pub(crate) const KEY_SUBSET_WORK: usize = 40_000;

enum Node {
    /// One code point in these ranges, then `next`.
    Char(Vec<(char, char)>, usize),
    /// Any of these (epsilon moves).
    Split(Vec<usize>),
    /// The end of input expression `k` (of [`determinize_all`]).
    End(u32),
}

struct Nfa {
    nodes: Vec<Node>,
    /// `any_char()`, repeated as the padding of an unanchored pattern's side.
    any_body: Expr,
    /// By expression: a `Split` node from which it matches every string body (the head of
    /// an `any_char()*` that ends it), if it has one (see [`Nfa::closure`]).
    universal: Vec<Option<usize>>,
    /// By expression: the closure of its universal node ([`Nfa::fill_universal_reach`]).
    universal_reach: Vec<Vec<u32>>,
}

impl Nfa {
    fn push(&mut self, n: Node) -> Option<usize> {
        if self.nodes.len() >= MAX_NFA {
            return None;
        }
        self.nodes.push(n);
        Some(self.nodes.len() - 1)
    }

    /// The entry of a fragment matching `e` and continuing at `next`.
    fn build(&mut self, e: &Expr, next: usize) -> Option<usize> {
        match e {
            Expr::Literal(s) => {
                let mut cur = next;
                for c in s.chars().rev() {
                    cur = self.push(Node::Char(vec![(c, c)], cur))?;
                }
                Some(cur)
            }
            Expr::Class(r) => self.push(Node::Char(r.clone(), next)),
            Expr::Seq(v) => {
                let mut cur = next;
                for x in v.iter().rev() {
                    cur = self.build(x, cur)?;
                }
                Some(cur)
            }
            Expr::Alt(v) => {
                let mut outs = Vec::with_capacity(v.len());
                for x in v {
                    outs.push(self.build(x, next)?);
                }
                self.push(Node::Split(outs))
            }
            Expr::Repeat { expr, min, max } => {
                let mut cur = match *max {
                    Some(m) if m < *min => return self.push(Node::Char(Vec::new(), next)),
                    None => {
                        let s = self.push(Node::Split(Vec::new()))?;
                        let body = self.build(expr, s)?;
                        self.nodes[s] = Node::Split(vec![body, next]);
                        // `any_char()*` right before expression `k`'s end: from here `k`
                        // matches every string body.
                        if *min == 0 && next < self.universal.len() && self.universal[next].is_none() && **expr == self.any_body {
                            self.universal[next] = Some(s);
                        }
                        s
                    }
                    Some(m) => {
                        let mut cur = next;
                        for _ in *min..m {
                            let b = self.build(expr, cur)?;
                            cur = self.push(Node::Split(vec![b, next]))?;
                        }
                        cur
                    }
                };
                for _ in 0..*min {
                    cur = self.build(expr, cur)?;
                }
                Some(cur)
            }
            Expr::Rule(_) | Expr::Token(_) | Expr::NotToken(_) | Expr::Unordered(_) => None,
        }
    }

    /// The sorted set of `Char`/`End` nodes reachable from `from` by epsilon moves.
    ///
    /// When that reaches an expression's universal node (it is past the unanchored end of a
    /// pattern that has matched), the expression's other nodes are dropped, since it now
    /// matches every continuation: whatever they match is a string body too. Every
    /// expression here yields JSON string bodies only, and a body splits into characters in
    /// one way, so all of an expression's nodes in one subset sit at a character boundary
    /// when one of them does. A `.*R.*` then has one state after `R`'s first match instead
    /// of one per set of partial matches still under way. `owner[n]`: the expression node
    /// `n` was built for.
    fn closure(&self, from: &[usize], seen: &mut [bool], owner: &[u32]) -> Vec<u32> {
        let mut done = 0u32;
        let mut out = self.epsilon(from, seen, |n| {
            let k = owner[n];
            if self.universal.get(k as usize) == Some(&Some(n)) {
                done |= 1 << k;
            }
        });
        if done != 0 {
            // Of each finished expression, keep its universal node's closure only (all of
            // which is in `out` already).
            out.retain(|&n| {
                let k = owner[n as usize] as usize;
                done >> k & 1 == 0 || self.universal_reach[k].binary_search(&n).is_ok()
            });
        }
        out.sort_unstable();
        out
    }

    /// The `Char`/`End` nodes reachable from `from` by epsilon moves (unsorted), calling
    /// `split` on each `Split` node passed. `seen` is all false, and left so.
    fn epsilon(&self, from: &[usize], seen: &mut [bool], mut split: impl FnMut(usize)) -> Vec<u32> {
        let mut out = Vec::new();
        let mut stack: Vec<usize> = from.to_vec();
        let mut visited = Vec::new();
        while let Some(n) = stack.pop() {
            if seen[n] {
                continue;
            }
            seen[n] = true;
            visited.push(n);
            match &self.nodes[n] {
                Node::Split(v) => {
                    split(n);
                    stack.extend(v.iter().copied())
                }
                _ => out.push(n as u32),
            }
        }
        for n in visited {
            seen[n] = false;
        }
        out
    }

    /// Fills `universal_reach`: by expression, the sorted `Char`/`End` nodes reachable by
    /// epsilon moves from its universal node.
    fn fill_universal_reach(&mut self) {
        let mut seen = vec![false; self.nodes.len()];
        let reach: Vec<Vec<u32>> = self
            .universal
            .iter()
            .map(|u| {
                let mut out = u.map_or_else(Vec::new, |u| self.epsilon(&[u], &mut seen, |_| {}));
                out.sort_unstable();
                out
            })
            .collect();
        self.universal_reach = reach;
    }
}

/// A DFA over elementary code-point intervals.
pub(crate) struct Dfa {
    /// Per state: accepting, and edges `(ranges, target)` with disjoint ranges.
    states: Vec<(bool, Vec<(Vec<(char, char)>, usize)>)>,
}

impl Dfa {
    /// Number of states.
    pub(crate) fn len(&self) -> usize {
        self.states.len()
    }

    /// Whether the DFA accepts `s` (a string of code points, as the grammar reads them).
    #[cfg(test)]
    pub(crate) fn accepts(&self, s: &str) -> bool {
        if self.states.is_empty() {
            return false;
        }
        let mut q = 0;
        for c in s.chars() {
            match self.states[q].1.iter().find(|(r, _)| r.iter().any(|&(a, b)| a <= c && c <= b)) {
                Some(&(_, t)) => q = t,
                None => return false,
            }
        }
        self.states[q].0
    }
}

fn to_char_range(lo: u32, hi: u32) -> Option<(char, char)> {
    let lo = if (0xD800..=0xDFFF).contains(&lo) { 0xE000 } else { lo };
    let hi = if (0xD800..=0xDFFF).contains(&hi) { 0xD7FF } else { hi };
    if lo > hi {
        return None;
    }
    Some((char::from_u32(lo)?, char::from_u32(hi)?))
}

/// The minimal DFA of `e`, or `None` when `e` is not regular here or too big. A DFA with no
/// states accepts nothing.
pub(crate) fn determinize(e: &Expr) -> Option<Dfa> {
    determinize_all(&[e], |m| m & 1 != 0, MAX_SUBSET_WORK)
}

/// The minimal DFA of the strings of `e` that `minus` does not match, or `None` as for
/// [`determinize`].
pub(crate) fn determinize_minus(e: &Expr, minus: &Expr) -> Option<Dfa> {
    determinize_all(&[e, minus], |m| m == 1, KEY_SUBSET_WORK)
}

/// The minimal DFA of a boolean combination of (at most 32) expressions: the strings whose set
/// of matching expressions (bit `k` for `exprs[k]`) satisfies `accept`. The subset
/// construction runs the expressions' NFAs side by side, within `work` NFA positions summed
/// over all subsets (see [`MAX_SUBSET_WORK`]). `None` as for [`determinize`].
pub(crate) fn determinize_all(exprs: &[&Expr], accept: impl Fn(u32) -> bool, work_budget: usize) -> Option<Dfa> {
    Product::new(exprs, work_budget)?.dfa(accept)
}

/// A run of a subset state's transitions: (first interval, last interval, target state).
type Run = (usize, usize, usize);

/// The subset construction of several expressions run side by side, before acceptance is
/// chosen: each subset state knows which expressions end in it. One product answers every
/// boolean combination ([`Product::dfa`]), so the regions of `patternProperties` (one DFA per
/// set of patterns) share one construction instead of repeating it per set.
pub(crate) struct Product {
    /// Per subset state: the expressions (bit `k` for `exprs[k]`) that end there, and its
    /// (first interval, last interval, target) runs.
    trans: Vec<(u32, Vec<Run>)>,
    /// Elementary interval boundaries (code points).
    cuts: Vec<u32>,
}

impl Product {
    /// The minimal DFA of the strings whose set of matching expressions satisfies `accept`.
    pub(crate) fn dfa(&self, accept: impl Fn(u32) -> bool) -> Option<Dfa> {
        let accepting: Vec<bool> = self.trans.iter().map(|(ends, _)| accept(*ends)).collect();
        minimize(&accepting, &self.trans, &self.cuts)
    }

    /// The product of `exprs` (at most 32), within `work_budget` NFA positions summed over
    /// all subsets; `None` as for [`determinize`].
    pub(crate) fn new(exprs: &[&Expr], work_budget: usize) -> Option<Product> {
        if exprs.is_empty() || exprs.len() > 32 {
            return None;
        }
        let mut nfa = Nfa {
            nodes: (0..exprs.len() as u32).map(Node::End).collect(),
            any_body: crate::chars::any_char(),
            universal: vec![None; exprs.len()],
            universal_reach: Vec::new(),
        };
        let mut starts = Vec::with_capacity(exprs.len());
        // By node: the expression it belongs to (the start split below: none, `u32::MAX`).
        let mut owner: Vec<u32> = (0..exprs.len() as u32).collect();
        for (k, e) in exprs.iter().enumerate() {
            starts.push(nfa.build(e, k)?);
            owner.resize(nfa.nodes.len(), k as u32);
        }
        let start = if starts.len() == 1 { starts[0] } else { nfa.push(Node::Split(starts))? };
        owner.resize(nfa.nodes.len(), u32::MAX);
        nfa.fill_universal_reach();
        // Elementary intervals: between consecutive range boundaries.
        let mut cuts: Vec<u32> = vec![0, 0x11_0000];
        for n in &nfa.nodes {
            if let Node::Char(r, _) = n {
                for &(a, b) in r {
                    cuts.push(a as u32);
                    cuts.push(b as u32 + 1);
                }
            }
        }
        cuts.sort_unstable();
        cuts.dedup();
        let nint = cuts.len() - 1;
        let interval_of = |c: u32| cuts.partition_point(|&x| x <= c) - 1;
        let mut seen = vec![false; nfa.nodes.len()];
        let mut ids: HashMap<Vec<u32>, usize> = HashMap::default();
        let mut sets: Vec<Vec<u32>> = Vec::new();
        // Per subset: the expressions ending there, and its runs.
        let mut trans: Vec<(u32, Vec<Run>)> = Vec::new();
        let s0 = nfa.closure(&[start], &mut seen, &owner);
        let mut work = s0.len();
        ids.insert(s0.clone(), 0);
        sets.push(s0);
        let mut i = 0;
        // Per `Char` node: the elementary intervals its ranges cover, as a bitset
        // (`iwords` words per node).
        let iwords = nint.div_ceil(64);
        let mut imask: Vec<u64> = vec![0; nfa.nodes.len() * iwords];
        for (n, node) in nfa.nodes.iter().enumerate() {
            if let Node::Char(r, _) = node {
                let row = &mut imask[n * iwords..(n + 1) * iwords];
                for &(a, b) in r {
                    set_bits(row, interval_of(a as u32), interval_of(b as u32));
                }
            }
        }
        // Per subset, its `Char` nodes are grouped by their interval bitsets (the encoded
        // forms of one class share theirs), and each interval gets the bitset of the groups
        // that take it (`words` words). Intervals taken by the same groups lead to the same
        // subset, so each distinct bitset is closed once per subset: a class such as "any
        // character but `a`" spans most intervals, all with one bitset.
        let mut node_groups: Vec<(usize, Vec<usize>)> = Vec::new();
        let mut cover: Vec<u64> = Vec::new();
        let mut touched: Vec<usize> = Vec::new();
        // The distinct bitsets met in this subset: (first interval with it, target subset).
        let mut groups: Vec<(usize, usize)> = Vec::new();
        let mut next_nodes: Vec<usize> = Vec::new();
        // By target nodes (sorted): the subset they close into.
        let mut closed: HashMap<Vec<usize>, usize> = HashMap::default();
        while i < sets.len() {
            let set = std::mem::take(&mut sets[i]);
            let ends = set.iter().fold(0u32, |m, &n| match nfa.nodes[n as usize] {
                Node::End(k) => m | 1 << k,
                _ => m,
            });
            let mut used = 0;
            for &n in &set {
                let n = n as usize;
                let Node::Char(_, next) = &nfa.nodes[n] else { continue };
                let row = &imask[n * iwords..(n + 1) * iwords];
                match node_groups[..used].iter_mut().find(|(rep, _)| &imask[*rep * iwords..(*rep + 1) * iwords] == row) {
                    Some((_, nexts)) => nexts.push(*next),
                    None => {
                        if used == node_groups.len() {
                            node_groups.push((n, Vec::new()));
                        }
                        node_groups[used].0 = n;
                        node_groups[used].1.clear();
                        node_groups[used].1.push(*next);
                        used += 1;
                    }
                }
            }
            // `cover` is all zeros between subsets (the rows touched are cleared after use).
            let words = used.div_ceil(64).max(1);
            if cover.len() < nint * words {
                cover.resize(nint * words, 0);
            }
            touched.clear();
            for (g, (rep, _)) in node_groups[..used].iter().enumerate() {
                for (w, &bits) in imask[*rep * iwords..(*rep + 1) * iwords].iter().enumerate() {
                    let mut bits = bits;
                    while bits != 0 {
                        let k = w * 64 + bits.trailing_zeros() as usize;
                        bits &= bits - 1;
                        let row = &mut cover[k * words..(k + 1) * words];
                        if row.iter().all(|&x| x == 0) {
                            touched.push(k);
                        }
                        row[g / 64] |= 1 << (g % 64);
                    }
                }
            }
            touched.sort_unstable();
            let mut runs: Vec<(usize, usize, usize)> = Vec::new();
            groups.clear();
            for &k in &touched {
                let row = &cover[k * words..(k + 1) * words];
                let known = groups.iter().find(|&&(g, _)| &cover[g * words..(g + 1) * words] == row).map(|&(_, t)| t);
                let t = match known {
                    Some(t) => t,
                    None => {
                        next_nodes.clear();
                        for (w, &bits) in row.iter().enumerate() {
                            let mut bits = bits;
                            while bits != 0 {
                                let g = w * 64 + bits.trailing_zeros() as usize;
                                bits &= bits - 1;
                                next_nodes.extend_from_slice(&node_groups[g].1);
                            }
                        }
                        next_nodes.sort_unstable();
                        next_nodes.dedup();
                        // The same targets recur across subsets (every subset with the
                        // "any character" group steps it to the same nodes): closed once.
                        let t = match closed.get(next_nodes.as_slice()) {
                            Some(&t) => t,
                            None => {
                                let key = nfa.closure(&next_nodes, &mut seen, &owner);
                                let t = match ids.get(&key) {
                                    Some(&t) => t,
                                    None => {
                                        work += key.len();
                                        if sets.len() >= MAX_SUBSETS || work > work_budget {
                                            return None;
                                        }
                                        ids.insert(key.clone(), sets.len());
                                        sets.push(key);
                                        sets.len() - 1
                                    }
                                };
                                closed.insert(next_nodes.clone(), t);
                                t
                            }
                        };
                        groups.push((k, t));
                        t
                    }
                };
                match runs.last_mut() {
                    Some(r) if r.1 + 1 == k && r.2 == t => r.1 = k,
                    _ => runs.push((k, k, t)),
                }
            }
            for &k in &touched {
                cover[k * words..(k + 1) * words].fill(0);
            }
            trans.push((ends, runs));
            i += 1;
        }
        Some(Product { trans, cuts })
    }
}

/// Sets bits `lo..=hi` of the bitset `row`, a word at a time.
fn set_bits(row: &mut [u64], lo: usize, hi: usize) {
    for (w, word) in row.iter_mut().enumerate().take(hi / 64 + 1).skip(lo / 64) {
        let from = if w == lo / 64 { lo % 64 } else { 0 };
        let to = if w == hi / 64 { hi % 64 } else { 63 };
        *word |= (u64::MAX >> (63 - to)) & (u64::MAX << from);
    }
}

/// Moore partition refinement over the live states (those that can reach acceptance).
/// `accepting[s]`: whether subset state `s` accepts; `trans[s].1`: its runs.
fn minimize(accepting: &[bool], trans: &[(u32, Vec<Run>)], cuts: &[u32]) -> Option<Dfa> {
    let n = trans.len();
    // Live states: reverse reachability from accepting ones.
    let mut rev: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (s, (_, runs)) in trans.iter().enumerate() {
        for &(_, _, t) in runs {
            rev[t].push(s);
        }
    }
    let mut live = vec![false; n];
    let mut stack: Vec<usize> = (0..n).filter(|&s| accepting[s]).collect();
    while let Some(s) = stack.pop() {
        if !live[s] {
            live[s] = true;
            stack.extend(rev[s].iter().copied());
        }
    }
    if !live[0] {
        return Some(Dfa { states: Vec::new() });
    }
    // Edges restricted to live targets (dead ones are dropped: no transition).
    let edges: Vec<Vec<(usize, usize, usize)>> =
        trans.iter().map(|(_, runs)| runs.iter().copied().filter(|r| live[r.2]).collect()).collect();
    let mut class: Vec<usize> = (0..n).map(|s| usize::from(accepting[s])).collect();
    let mut count = 0;
    // Each round's signatures live in one buffer (`sigs`, state `s` at `at[s]..at[s + 1]`),
    // and the map borrows them: no allocation per state and round.
    let mut sigs: Vec<Run> = Vec::new();
    let mut at: Vec<usize> = Vec::with_capacity(n + 1);
    let mut next = vec![usize::MAX; n];
    loop {
        sigs.clear();
        at.clear();
        for s in 0..n {
            at.push(sigs.len());
            if !live[s] {
                continue;
            }
            let first = sigs.len();
            for &(a, b, t) in &edges[s] {
                let c = class[t];
                let mine = sigs.len() > first;
                match sigs.last_mut() {
                    Some(r) if mine && r.1 + 1 == a && r.2 == c => r.1 = b,
                    _ => sigs.push((a, b, c)),
                }
            }
        }
        at.push(sigs.len());
        let mut sig_ids: HashMap<(usize, &[Run]), usize> = HashMap::default();
        for s in (0..n).filter(|&s| live[s]) {
            let k = sig_ids.len();
            next[s] = *sig_ids.entry((class[s], &sigs[at[s]..at[s + 1]])).or_insert(k);
        }
        let new_count = sig_ids.len();
        std::mem::swap(&mut class, &mut next);
        if new_count == count {
            break;
        }
        count = new_count;
    }
    if count > MAX_STATES {
        return None;
    }
    // Renumber with the start state's class first.
    let mut order = vec![usize::MAX; count];
    let mut reps: Vec<usize> = Vec::new();
    let mut queue = vec![0usize];
    order[class[0]] = 0;
    reps.push(0);
    while let Some(s) = queue.pop() {
        for &(_, _, t) in &edges[s] {
            if order[class[t]] == usize::MAX {
                order[class[t]] = reps.len();
                reps.push(t);
                queue.push(t);
            }
        }
    }
    let states = reps
        .iter()
        .map(|&s| {
            let mut by_target: Vec<(usize, Vec<(char, char)>)> = Vec::new();
            for &(a, b, t) in &edges[s] {
                let Some(r) = to_char_range(cuts[a], cuts[b + 1] - 1) else { continue };
                let t = order[class[t]];
                match by_target.iter_mut().find(|(x, _)| *x == t) {
                    Some((_, v)) => v.push(r),
                    None => by_target.push((t, vec![r])),
                }
            }
            (accepting[s], by_target.into_iter().map(|(t, r)| (normalize_ranges(r), t)).collect())
        })
        .collect();
    Some(Dfa { states })
}

/// Defines the DFA's rules (named after `key`, so an equal key reuses them) and returns the
/// start state's reference. An empty DFA is the empty class (matches nothing).
pub(crate) fn emit(cx: &mut Compiler, dfa: &Dfa, key: &str) -> Expr {
    if dfa.states.is_empty() {
        return crate::exprs::nothing();
    }
    let base = rule_base(key);
    let names: Vec<String> = (0..dfa.states.len()).map(|i| format!("{base}-{i}")).collect();
    if cx.b.is_defined(&names[0]) {
        return Expr::Rule(cx.b.rule_id(&names[0]));
    }
    let ids: Vec<_> = names.iter().map(|n| cx.b.rule_id(n)).collect();
    for (i, (accept, edges)) in dfa.states.iter().enumerate() {
        let mut alts: Vec<Expr> = edges.iter().map(|(r, t)| Expr::Seq(vec![Expr::Class(r.clone()), Expr::Rule(ids[*t])])).collect();
        if *accept {
            alts.push(Expr::empty());
        }
        let body = if alts.len() == 1 { alts.pop().unwrap_or_else(Expr::empty) } else { Expr::Alt(alts) };
        cx.b.define(&names[i], body);
    }
    Expr::Rule(ids[0])
}

/// A rule-name base for `key` that schema-derived names (lowercase) cannot take: two
/// independent 64-bit hashes of the key.
fn rule_base(key: &str) -> String {
    let h = |salt: u8| {
        let mut s = std::collections::hash_map::DefaultHasher::new();
        salt.hash(&mut s);
        key.hash(&mut s);
        s.finish()
    };
    format!("pattern-DFA{:016x}{:016x}", h(1), h(2))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::regex::tests::NO_DFA;
    use crate::SchemaOptions;
    use formwork_grammar::matcher::accepts;
    use serde_json::json;

    /// Pieces random JSON string bodies are made of: raw characters, short and `\u` escapes.
    const PIECES: &[&str] = &[
        "a", "b", "f", "A", "F", "0", "1", "9", "-", ":", "_", "x", "z", " ", ".", "é", "日", "😀", "\\n", "\\\\", "\\\"", "\\/",
        "\\u0041", "\\u00e9", "\\ud83d\\ude00", "\\u0000", "/", "\\t",
    ];

    /// A small deterministic generator of candidate strings (JSON-encoded, with quotes).
    fn candidates(seed: u64, extra: &[&str], n: usize) -> Vec<String> {
        let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let mut next = || {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 33) as usize
        };
        let mut out: Vec<String> = extra.iter().map(|s| format!("\"{s}\"")).collect();
        for _ in 0..n {
            let len = next() % 24;
            let mut s = String::from("\"");
            for _ in 0..len {
                // Favour the pattern's own pieces so that matches are frequent.
                if !extra.is_empty() && next() % 3 == 0 {
                    let e = extra[next() % extra.len()];
                    let a = next() % (e.len() + 1);
                    let b = a + next() % (e.len() + 1 - a);
                    s.push_str(e.get(a..b).unwrap_or(""));
                } else {
                    s.push_str(PIECES[next() % PIECES.len()]);
                }
            }
            s.push('"');
            out.push(s);
        }
        out
    }

    /// The DFA lowering accepts exactly what the plain lowering accepts, and nothing the
    /// validator rejects.
    fn same_language(schema: serde_json::Value, extra: &[&str]) -> usize {
        let opts = SchemaOptions::default();
        NO_DFA.with(|c| c.set(true));
        let old = crate::compile(&schema, &opts);
        NO_DFA.with(|c| c.set(false));
        let new = crate::compile(&schema, &opts).unwrap_or_else(|e| panic!("{schema}: {e}"));
        let old = old.unwrap_or_else(|e| panic!("{schema}: {e}"));
        let mut yes = 0;
        for s in candidates(extra.len() as u64 + 7, extra, 3000) {
            let a = accepts(&old, s.as_bytes(), &opts.limits).unwrap();
            let b = accepts(&new, s.as_bytes(), &opts.limits).unwrap();
            assert_eq!(a, b, "{schema}: old lowering {a}, DFA lowering {b} on {s}");
            if b {
                yes += 1;
                assert!(crate::validate(&schema, &s).is_ok(), "{schema} accepts invalid {s}");
            }
        }
        yes
    }

    /// Patterns with leading lookaheads (split into patterns to match and not to match,
    /// `regex::split_lookaheads`) accept exactly the strings the validator accepts.
    #[test]
    fn leading_lookaheads_agree_with_the_validator() {
        let opts = SchemaOptions::default();
        let cases: Vec<(serde_json::Value, Vec<&str>)> = vec![
            // Two files of the MaskBench tuning half (A) refused for their lookaheads.
            (json!({"type": "string", "pattern": "^(?=[^=]+$)(?!\\s+$)(.|\\n)+$"}), vec!["a=b", "ab", "  ", " a ", "\\n"]),
            (json!({"type": "string", "pattern": "^(?![ \\t\\n]*\\(default(.*)\\))[\\s\\S]*"}), vec!["(default)", " (default x)", "(defaul)", "x(default)"]),
            // Several lookaheads, with length bounds, and a positive one that is a prefix.
            (json!({"type": "string", "pattern": "^(?=.*[0-9])(?=.*[a-z])[a-z0-9]{3,}$"}), vec!["ab1", "abc", "123", "a1"]),
            (json!({"type": "string", "pattern": "^(?!ab)(?=a)", "maxLength": 4}), vec!["a", "ab", "ax", "b", "aab"]),
            (json!({"type": "string", "pattern": "^(?!.*\\.\\.)[a-z.]+$", "minLength": 2}), vec!["a.b", "a..b", "..", "ab"]),
        ];
        for (schema, extra) in cases {
            let g = crate::compile(&schema, &opts).unwrap_or_else(|e| panic!("{schema}: {e}"));
            let (mut yes, mut no) = (0, 0);
            for s in candidates(extra.len() as u64 + 11, &extra, 3000) {
                let ours = accepts(&g, s.as_bytes(), &opts.limits).unwrap();
                let valid = crate::validate(&schema, &s).is_ok();
                // The grammar writes a subset of the encodings (`enc_class`): it may reject
                // a valid instance only when it spells a character in a way it does not use.
                if ours {
                    assert!(valid, "{schema} accepts invalid {s}");
                    yes += 1;
                } else if valid && !s.contains("\\u") {
                    panic!("{schema} rejects valid {s}");
                } else {
                    no += 1;
                }
            }
            assert!(yes > 20 && no > 20, "{schema}: {yes} accepted, {no} rejected candidates (a weak test)");
        }
    }

    #[test]
    fn an_unanchored_pattern_has_one_state_after_its_first_match() {
        // `.*R.*` for an R with many partial matches under way: after the first match every
        // subset is the padding's own, so the construction stays near the minimal DFA
        // instead of tracking the partial matches that no longer matter.
        let opts = SchemaOptions::default();
        let mut cx = crate::compiler::Compiler::new(&json!({}), std::borrow::Cow::Borrowed(&opts));
        let (body, unanchored) = crate::regex::plain_body_for_tests(&mut cx, "x[a-z]{6}y");
        assert!(unanchored);
        let product = Product::new(&[&body], MAX_SUBSET_WORK).expect("within the budget");
        let dfa = product.dfa(|m| m & 1 != 0).expect("small");
        // Measured: 161 subsets for a 153-state minimal DFA; 288 without the collapse.
        assert!(product.trans.len() <= dfa.len() + 16, "{} subsets for a {}-state DFA", product.trans.len(), dfa.len());
    }

    #[test]
    fn dfa_lowering_keeps_the_language() {
        let cases: Vec<(serde_json::Value, Vec<&str>)> = vec![
            (json!({"type": "string", "pattern": "[a-fA-F0-9]{8}-[a-fA-F0-9]{4}-[a-fA-F0-9]{4}"}), vec!["0a1B2c3D-abcd-ABCD", "aaaaaaaa-"]),
            (json!({"type": "string", "pattern": "([0-9a-fA-F][0-9a-fA-F](:|-)){2}([0-9a-fA-F][0-9a-fA-F])"}), vec!["0a:1B-ff", "aa:"]),
            (json!({"type": "string", "pattern": "[a-zA-Z0-9_-]{12}"}), vec!["abcdefghijkl", "A_-09"]),
            (json!({"type": "string", "pattern": "^ab|cd$|ef"}), vec!["ab", "cd", "ef"]),
            (json!({"type": "string", "pattern": "^[a-z]+:"}), vec!["abc:", "x:"]),
            (json!({"type": "string", "pattern": "\\d+\\.\\d*$"}), vec!["12.", "1.5"]),
            (json!({"type": "string", "pattern": "é[日😀]|\\s\\w"}), vec!["é日", "é😀", " a", "\\nz"]),
            (json!({"type": "string", "pattern": "a\\\\b|/\"|\\n"}), vec!["a\\\\b", "\\/\\\"", "\\n"]),
            (json!({"type": "string", "pattern": "[^a-z]x", "maxLength": 6}), vec!["Ax", "\\u0041x", "9x"]),
            (json!({"type": "string", "pattern": "ab", "minLength": 3, "maxLength": 5}), vec!["abab", "xab", "abx"]),
            (json!({"type": "string", "pattern": "^a.c"}), vec!["abc", "a\\nc", "a日c"]),
            (json!({"type": "string", "pattern": "^[0-9]{2}$|x"}), vec!["12", "x", "1x"]),
            // Unanchored ends whose subsets collapse once the pattern has matched (see
            // `Nfa::closure`), with escapes and multi-byte characters after the match.
            (json!({"type": "string", "pattern": "ab\\\\|c\"d|é"}), vec!["ab\\\\", "c\\\"d", "é", "\\u00e9"]),
            (json!({"type": "string", "pattern": "(ab|a)(c|bc)"}), vec!["abc", "abbc", "ac", "\\u0061c"]),
            (json!({"type": "string", "pattern": "^x|y"}), vec!["x", "y", "\\ny", "xy"]),
            (json!({"type": "string", "pattern": "[a-z]+@[a-z]+\\.(com|org)"}), vec!["a@b.com", "xy@z.org", "@.com"]),
        ];
        for (schema, extra) in cases {
            let yes = same_language(schema.clone(), &extra);
            assert!(yes > 20, "{schema}: only {yes} accepted candidates (a weak test)");
        }
    }

    #[test]
    fn unanchored_patterns_become_small_dfas() {
        let opts = SchemaOptions::default();
        let g = crate::compile(&json!({"type": "string", "pattern": "[a-zA-Z0-9_-]{30}"}), &opts).unwrap();
        let n = g.rules().len();
        assert!(n > 30 && n < 100, "{n} rules");
        let body: String = "ab".repeat(15);
        assert!(accepts(&g, format!("\"\\u0041{body}\\n\"").as_bytes(), &opts.limits).unwrap());
        assert!(!accepts(&g, format!("\"\\u0041{}\\n\"", &body[1..]).as_bytes(), &opts.limits).unwrap());
    }

    #[test]
    fn dfa_of_expressions() {
        let e = Expr::seq([Expr::star(Expr::class([('a', 'z')], false)), Expr::lit("ab"), Expr::repeat(Expr::class([('0', '9')], false), 1, Some(2))]);
        let d = determinize(&e).unwrap();
        for (s, ok) in [("ab1", true), ("zzab12", true), ("ab123", false), ("ab", false), ("aab9", true), ("ba1", false)] {
            assert_eq!(d.accepts(s), ok, "{s}");
        }
        let minus = Expr::alt([Expr::lit("ab1"), Expr::lit("zzab")]);
        let d = determinize_minus(&e, &minus).unwrap();
        for (s, ok) in [("ab1", false), ("zzab12", true), ("ab12", true), ("zzab1", true), ("ab", false)] {
            assert_eq!(d.accepts(s), ok, "{s}");
        }
        assert_eq!(determinize_minus(&Expr::lit("x"), &Expr::lit("x")).unwrap().len(), 0);
        // Strings of `a*` and `(aa)*` but not both: odd runs of `a`.
        let (a, aa) = (Expr::star(Expr::lit("a")), Expr::star(Expr::lit("aa")));
        let d = determinize_all(&[&a, &aa], |m| m == 1, MAX_SUBSET_WORK).unwrap();
        for (s, ok) in [("", false), ("a", true), ("aa", false), ("aaa", true)] {
            assert_eq!(d.accepts(s), ok, "{s}");
        }
        assert_eq!(determinize(&crate::exprs::nothing()).unwrap().len(), 0);
        assert!(determinize(&Expr::Rule(formwork_grammar::RuleId(0))).is_none());
        assert!(determinize(&Expr::repeat(Expr::repeat(Expr::lit("ab"), 0, Some(200)), 0, Some(200))).is_none());
        // Over the work budget: the plain lowering stays.
        let long = Expr::seq([Expr::star(Expr::class([('a', 'z')], false)), Expr::repeat(Expr::class([('a', 'b')], false), 162, Some(162))]);
        assert!(determinize(&long).is_none());
    }

    #[test]
    fn set_bits_sets_exactly_the_range_across_words() {
        for (lo, hi) in [(0, 0), (3, 9), (0, 63), (63, 64), (5, 130), (64, 127), (127, 191)] {
            let mut row = [0u64; 3];
            super::set_bits(&mut row, lo, hi);
            for k in 0..192 {
                assert_eq!(row[k / 64] >> (k % 64) & 1 == 1, (lo..=hi).contains(&k), "bit {k} of {lo}..={hi}");
            }
        }
    }
}
