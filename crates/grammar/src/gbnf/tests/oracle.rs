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
            Expr::Token(_) => BTreeSet::new(),
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
