//! The checks that make the pushdown matcher terminate: nullable rules, and left recursion
//! (a rule reaching itself at its left edge through nullable prefixes) found by Tarjan's
//! SCC and refused with the cycle named.

use super::{Symbol, ByteGrammar};
use crate::matcher::error::CompileError;
use rustc_hash::FxHashMap;

/// Who uses which rule, for the worklist fixpoints: per alternative, its rule, its count of
/// rule references, and what its other elements allow; per rule, the alternatives that
/// reference it (once per occurrence) in one flat table, `used_by[start[x]..start[x + 1]]`.
struct Uses {
    alts: Vec<Alt>,
    start: Vec<u32>,
    used_by: Vec<u32>,
}

struct Alt {
    rule: u32,
    refs: u32,
    /// It has an element that is not a rule (so it cannot match the empty string).
    terminal: bool,
    /// It has a byte set that matches nothing (so it matches nothing).
    dead: bool,
}

impl Uses {
    fn new(flat: &ByteGrammar) -> Uses {
        let n = flat.alts.len();
        let mut start = vec![0u32; n + 1];
        let mut alts = Vec::new();
        for (r, starts) in flat.alts.iter().enumerate() {
            for &s in starts {
                let mut a = Alt { rule: r as u32, refs: 0, terminal: false, dead: false };
                let mut p = s as usize;
                loop {
                    match flat.elems[p] {
                        Symbol::End => break,
                        Symbol::Rule(x) => {
                            a.refs += 1;
                            start[x as usize + 1] += 1;
                        }
                        Symbol::Bytes(i) => {
                            a.terminal = true;
                            a.dead |= flat.sets[i as usize].is_empty();
                        }
                        _ => a.terminal = true,
                    }
                    p += 1;
                }
                alts.push(a);
            }
        }
        for x in 0..n {
            start[x + 1] += start[x];
        }
        let mut fill = start.clone();
        let mut used_by = vec![0u32; start[n] as usize];
        let mut a = 0u32;
        for starts in &flat.alts {
            for &s in starts {
                let mut p = s as usize;
                while flat.elems[p] != Symbol::End {
                    if let Symbol::Rule(x) = flat.elems[p] {
                        used_by[fill[x as usize] as usize] = a;
                        fill[x as usize] += 1;
                    }
                    p += 1;
                }
                a += 1;
            }
        }
        Uses { alts, start, used_by }
    }

    /// Worklist fixpoint: a rule has the property when one of its alternatives has it for
    /// every element; `never` says an alternative's other elements rule it out. `seeds`
    /// have it from the start.
    fn fixpoint(&self, n: usize, seeds: impl Iterator<Item = u32>, never: impl Fn(&Alt) -> bool) -> Vec<bool> {
        let mut has = vec![false; n];
        let mut queue: Vec<u32> = Vec::new();
        for r in seeds {
            has[r as usize] = true;
            queue.push(r);
        }
        // Per alternative: rule references still unknown; `u32::MAX` = never.
        let mut left: Vec<u32> = Vec::with_capacity(self.alts.len());
        for a in &self.alts {
            if never(a) {
                left.push(u32::MAX);
                continue;
            }
            left.push(a.refs);
            if a.refs == 0 && !has[a.rule as usize] {
                has[a.rule as usize] = true;
                queue.push(a.rule);
            }
        }
        while let Some(r) = queue.pop() {
            for &a in &self.used_by[self.start[r as usize] as usize..self.start[r as usize + 1] as usize] {
                let c = &mut left[a as usize];
                if *c == u32::MAX || *c == 0 {
                    continue;
                }
                *c -= 1;
                let owner = self.alts[a as usize].rule as usize;
                if *c == 0 && !has[owner] {
                    has[owner] = true;
                    queue.push(owner as u32);
                }
            }
        }
        has
    }
}

/// Which rules match the empty string.
pub(crate) fn nullable(flat: &ByteGrammar) -> Vec<bool> {
    Uses::new(flat).fixpoint(flat.alts.len(), nullable_opaque(flat), |a| a.terminal)
}

/// The opaque rules that match the empty string (see [`super::lower_with`]).
fn nullable_opaque(flat: &ByteGrammar) -> impl Iterator<Item = u32> + '_ {
    flat.opaque.iter().filter(|(_, &n)| n).map(|(&r, _)| r)
}

/// Which rules match the empty string, and which match something (rules of unordered groups
/// not expanded yet and opaque rules do: see modules `unordered` and `deferred`), from one
/// table of uses.
pub(crate) fn nullable_and_productive(flat: &ByteGrammar) -> (Vec<bool>, Vec<bool>) {
    let uses = Uses::new(flat);
    let n = flat.alts.len();
    let nullable = uses.fixpoint(n, nullable_opaque(flat), |a| a.terminal);
    let productive = uses.fixpoint(n, flat.lazy.pending_rules().chain(flat.opaque.keys().copied()), |a| a.dead);
    (nullable, productive)
}

/// Checks `flat`, whose nullable rules are `nullable` (see [`nullable`]) and whose root is
/// known to match something (see [`nullable_and_productive`]).
pub(super) fn check(flat: &ByteGrammar, origin: &[u32], nullable: &[bool]) -> Result<(), CompileError> {
    debug_assert_eq!(nullable, super::nullable(flat).as_slice());
    // Members and separators of unordered groups consume input (see module `unordered`).
    for f in &flat.lazy.families {
        if let Some(&r) = f.members.iter().chain(f.extra.iter()).chain([&f.sep]).find(|&&r| nullable[r as usize]) {
            return Err(CompileError::EmptyMember { rule: flat.names.get(origin[r as usize]) });
        }
    }
    // Left-edge graph: r -> (x, pushes a frame?) for each rule x reachable at r's left edge.
    let n = flat.alts.len();
    let mut edges = Graph { start: Vec::with_capacity(n + 1), list: Vec::new() };
    for starts in &flat.alts {
        edges.start.push(edges.list.len() as u32);
        for &s in starts {
            let mut p = s as usize;
            while let Symbol::Rule(x) = flat.elems[p] {
                let tail = flat.elems[p + 1] == Symbol::End;
                edges.list.push((x, !tail));
                if !nullable[x as usize] {
                    break;
                }
                p += 1;
            }
        }
    }
    edges.start.push(edges.list.len() as u32);
    let scc = tarjan(&edges);
    for r in 0..n {
        for &(x, push) in edges.of(r) {
            if push && scc[r] == scc[x as usize] {
                let path = cycle_path(&edges, &scc, x, r as u32);
                let user = |i: u32| flat.names.get(origin[i as usize]);
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

/// The left-edge graph: rule `r`'s edges (the rule reached, whether a frame is pushed) are
/// `list[start[r]..start[r + 1]]` (one table, not a vector per rule).
struct Graph {
    start: Vec<u32>,
    list: Vec<(u32, bool)>,
}

impl Graph {
    fn len(&self) -> usize {
        self.start.len() - 1
    }

    fn of(&self, r: usize) -> &[(u32, bool)] {
        &self.list[self.start[r] as usize..self.start[r + 1] as usize]
    }
}

/// A path of rules from `from` to `to` inside one SCC (BFS), `from` first.
fn cycle_path(edges: &Graph, scc: &[u32], from: u32, to: u32) -> Vec<u32> {
    let mut prev: FxHashMap<u32, u32> = FxHashMap::default();
    let mut q = std::collections::VecDeque::from([from]);
    prev.insert(from, from);
    while let Some(v) = q.pop_front() {
        if v == to {
            break;
        }
        for &(x, _) in edges.of(v as usize) {
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
fn tarjan(edges: &Graph) -> Vec<u32> {
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
            if *ei < edges.of(vi).len() {
                let w = edges.of(vi)[*ei].0;
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
