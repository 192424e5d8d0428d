//! The checks that make the pushdown matcher terminate: nullable rules, and left recursion
//! (a rule reaching itself at its left edge through nullable prefixes) found by Tarjan's
//! SCC and refused with the cycle named.

use super::{Symbol, ByteGrammar};
use crate::matcher::error::CompileError;
use rustc_hash::FxHashMap;

/// Worklist fixpoint over rules: a rule has the property when one of its alternatives has
/// it for every element; `base` says it for non-rule elements (`None` = "depends on the rule").
/// Rules of unordered groups not expanded yet have it when `pending` is true.
fn fixpoint(flat: &ByteGrammar, base: impl Fn(&Symbol) -> bool, pending: bool) -> Vec<bool> {
    let n = flat.alts.len();
    let mut has = vec![false; n];
    let mut queue = Vec::new();
    if pending {
        for &r in flat.lazy.pending.keys() {
            has[r as usize] = true;
            queue.push(r);
        }
    }
    // Per alternative: (rule, number of rule references still unknown); `usize::MAX` = never.
    let mut pending: Vec<(u32, usize)> = Vec::new();
    let mut uses: Vec<Vec<u32>> = vec![Vec::new(); n]; // rule -> alternatives referencing it (per occurrence)
    for (r, starts) in flat.alts.iter().enumerate() {
        for &s in starts {
            let a = pending.len() as u32;
            let mut count = 0usize;
            let mut never = false;
            let mut p = s as usize;
            loop {
                match &flat.elems[p] {
                    Symbol::End => break,
                    Symbol::Rule(x) => {
                        count += 1;
                        uses[*x as usize].push(a);
                    }
                    e => never |= !base(e),
                }
                p += 1;
            }
            pending.push((r as u32, if never { usize::MAX } else { count }));
            if count == 0 && !never && !has[r] {
                has[r] = true;
                queue.push(r as u32);
            }
        }
    }
    while let Some(r) = queue.pop() {
        for &a in &uses[r as usize] {
            let (owner, c) = &mut pending[a as usize];
            if *c == usize::MAX || *c == 0 {
                continue;
            }
            *c -= 1;
            if *c == 0 && !has[*owner as usize] {
                has[*owner as usize] = true;
                queue.push(*owner);
            }
        }
    }
    has
}

/// Which rules match the empty string.
pub(crate) fn nullable(flat: &ByteGrammar) -> Vec<bool> {
    fixpoint(flat, |_| false, false)
}

pub(super) fn check(flat: &ByteGrammar, origin: &[u32]) -> Result<(), CompileError> {
    let productive = fixpoint(
        flat,
        |e| match e {
            Symbol::Bytes(i) => !flat.sets[*i as usize].is_empty(),
            _ => true,
        },
        true,
    );
    if !productive[flat.root as usize] {
        return Err(CompileError::MatchesNothing {
            rule: flat.names[flat.root as usize].clone(),
        });
    }
    let nullable = nullable(flat);
    // Members and separators of unordered groups consume input (see module `unordered`).
    for f in &flat.lazy.families {
        if let Some(&r) = f.members.iter().chain(f.extra.iter()).chain([&f.sep]).find(|&&r| nullable[r as usize]) {
            return Err(CompileError::EmptyMember { rule: flat.names[origin[r as usize] as usize].clone() });
        }
    }
    // Left-edge graph: r -> (x, pushes a frame?) for each rule x reachable at r's left edge.
    let n = flat.alts.len();
    let mut edges: Vec<Vec<(u32, bool)>> = vec![Vec::new(); n];
    for (r, starts) in flat.alts.iter().enumerate() {
        for &s in starts {
            let mut p = s as usize;
            while let Symbol::Rule(x) = flat.elems[p] {
                let tail = flat.elems[p + 1] == Symbol::End;
                edges[r].push((x, !tail));
                if !nullable[x as usize] {
                    break;
                }
                p += 1;
            }
        }
    }
    let scc = tarjan(&edges);
    for (r, es) in edges.iter().enumerate() {
        for &(x, push) in es {
            if push && scc[r] == scc[x as usize] {
                let path = cycle_path(&edges, &scc, x, r as u32);
                let user = |i: u32| flat.names[origin[i as usize] as usize].clone();
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

/// A path of rules from `from` to `to` inside one SCC (BFS), `from` first.
fn cycle_path(edges: &[Vec<(u32, bool)>], scc: &[u32], from: u32, to: u32) -> Vec<u32> {
    let mut prev: FxHashMap<u32, u32> = FxHashMap::default();
    let mut q = std::collections::VecDeque::from([from]);
    prev.insert(from, from);
    while let Some(v) = q.pop_front() {
        if v == to {
            break;
        }
        for &(x, _) in &edges[v as usize] {
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
fn tarjan(edges: &[Vec<(u32, bool)>]) -> Vec<u32> {
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
            if *ei < edges[vi].len() {
                let w = edges[vi][*ei].0;
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
