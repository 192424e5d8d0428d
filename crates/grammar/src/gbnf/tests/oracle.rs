//! A slow, obviously-correct reference matcher over the IR, for checking the corpus's
//! expectations independently of the real matcher.
//!
//! `ends(e, i)` is the set of input positions where a match of `e` starting at `i` can
//! end; rule results are memoized per start position. Left recursion is not supported (a
//! rule re-entered at the same position contributes nothing), which is fine for the
//! corpus. Input is matched by code point; token references never match text.

use crate::{Expr, Grammar};
use std::collections::{BTreeSet, HashMap, HashSet};

/// True when `g` matches all of `input`.
pub fn accepts(g: &Grammar, input: &str) -> bool {
    let chars: Vec<char> = input.chars().collect();
    let mut o = Oracle { g, input: chars, memo: HashMap::new(), active: HashSet::new() };
    let n = o.input.len();
    o.rule(g.root().0, 0).contains(&n)
}

struct Oracle<'g> {
    g: &'g Grammar,
    input: Vec<char>,
    memo: HashMap<(u32, usize), BTreeSet<usize>>,
    active: HashSet<(u32, usize)>,
}

impl Oracle<'_> {
    fn rule(&mut self, r: u32, at: usize) -> BTreeSet<usize> {
        if let Some(s) = self.memo.get(&(r, at)) {
            return s.clone();
        }
        if !self.active.insert((r, at)) {
            return BTreeSet::new();
        }
        let g = self.g;
        let s = self.ends(&g.rules()[r as usize].expr, at);
        self.active.remove(&(r, at));
        self.memo.insert((r, at), s.clone());
        s
    }

    fn ends(&mut self, e: &Expr, at: usize) -> BTreeSet<usize> {
        match e {
            Expr::Literal(s) => {
                let lit: Vec<char> = s.chars().collect();
                if self.input[at..].starts_with(&lit) {
                    BTreeSet::from([at + lit.len()])
                } else {
                    BTreeSet::new()
                }
            }
            Expr::Class(ranges) => match self.input.get(at) {
                Some(&c) if ranges.iter().any(|&(a, b)| a <= c && c <= b) => BTreeSet::from([at + 1]),
                _ => BTreeSet::new(),
            },
            Expr::Token(_) | Expr::NotToken(_) => BTreeSet::new(),
            Expr::Rule(id) => self.rule(id.0, at),
            Expr::Seq(items) => {
                let mut cur = BTreeSet::from([at]);
                for item in items {
                    let mut next = BTreeSet::new();
                    for p in cur {
                        next.extend(self.ends(item, p));
                    }
                    cur = next;
                }
                cur
            }
            Expr::Alt(branches) => {
                let mut out = BTreeSet::new();
                for b in branches {
                    out.extend(self.ends(b, at));
                }
                out
            }
            Expr::Unordered(u) => {
                // Search over (position, members seen, count).
                let mut out = BTreeSet::new();
                let mut todo = vec![(at, vec![false; u.members.len()], 0u32)];
                let mut visited = BTreeSet::new();
                while let Some((p, seen, n)) = todo.pop() {
                    if !visited.insert((p, seen.clone(), n)) {
                        continue;
                    }
                    let complete = u.members.iter().zip(&seen).all(|((_, req), s)| !req || *s);
                    if complete && n >= u.min {
                        out.insert(p);
                    }
                    if u.max.is_some_and(|m| n >= m) {
                        continue;
                    }
                    let starts: Vec<usize> = if n == 0 { vec![p] } else { self.ends(&u.sep, p).into_iter().collect() };
                    for q in starts {
                        for (i, (m, _)) in u.members.iter().enumerate() {
                            if !seen[i] {
                                let mut s2 = seen.clone();
                                s2[i] = true;
                                todo.extend(self.ends(m, q).into_iter().map(|e| (e, s2.clone(), n + 1)));
                            }
                        }
                        if let Some(x) = &u.extra {
                            todo.extend(self.ends(x, q).into_iter().map(|e| (e, seen.clone(), n + 1)));
                        }
                    }
                }
                out
            }
            Expr::Repeat { expr, min, max } => {
                let mut out = BTreeSet::new();
                let mut seen = BTreeSet::new();
                let mut frontier = BTreeSet::from([at]);
                if *min == 0 {
                    out.insert(at);
                    seen.insert(at);
                }
                let mut count = 0u32;
                while max.is_none_or(|m| count < m) && !frontier.is_empty() {
                    count += 1;
                    let mut next = BTreeSet::new();
                    for p in &frontier {
                        next.extend(self.ends(expr, *p));
                    }
                    if count >= *min {
                        if next.is_subset(&seen) {
                            break;
                        }
                        seen.extend(next.iter().copied());
                        out.extend(next.iter().copied());
                    }
                    frontier = next;
                }
                out
            }
        }
    }
}
