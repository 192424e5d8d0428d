//! Loop equivalents of bounded repetitions, for masks.
//!
//! `e{m,n}` lowers to `m` copies of a unit then a chain `O_k ::= unit O_{k-1} | ε`. Inside
//! it every step lands on a new grammar position, so every state is new and its mask would
//! be a full trie walk. But a token of `ℓ` bytes starts at most `ℓ` units (each unit that
//! a token starts takes at least one of its bytes), so where the repetition still allows
//! at least `ℓ` more units the token cannot tell the chain from a loop:
//!
//! - a frame of `O_k` behaves like the same frame of `S ::= unit S | ε` (a *star*), and so
//!   does the frame under the last mandatory unit of `R ::= unit^m O_k` (the chain in tail
//!   position: `O_k` then the end of `R`, like `S` then the end of `S`);
//! - a frame inside a run of `r` identical mandatory copies (`unit unit unit …`, from
//!   `e{m,…}` or a long literal) behaves like `P ::= unit P` (an *endless* loop), and
//!   nothing below it is reachable.
//!
//! Here the loop rules are added to the [`ByteGrammar`] grammar (unreachable from the root) and
//! each such frame position is mapped to its loop position with its *budget*, the number
//! of units the repetition still allows from it. The automaton replaces frames by their
//! loop equivalents (`Builder::canonical`), whose states repeat and self-loop, and mask
//! computation uses the result for tokens no longer than the smallest budget. Units that
//! match the empty string are left alone (an empty unit takes no byte, so the count
//! argument fails).

use super::{Symbol, ByteGrammar};
use crate::Limits;
use rustc_hash::FxHashMap;

/// Chain frames with a smaller budget are left as they are (their masks are walked).
pub(crate) const MIN_BUDGET: u32 = 4;
/// Shortest run of identical elements given an endless loop.
const MIN_RUN: u32 = 8;

/// A chain of optional copies `O_1 … O_count` made for one bounded repetition.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Chain {
    /// The rule `O_1` (`O_j` is rule `first + j - 1`).
    pub first: u32,
    /// Number of optional copies.
    pub count: u32,
    /// The repeated unit (a byte set or a rule).
    pub unit: Symbol,
    /// The rule `R ::= unit^m O_count` holding the mandatory copies, if any (its last
    /// element, the reference to `O_count`, is the frame under the last mandatory unit).
    pub entry: Option<u32>,
}

/// What a frame position inside a bounded repetition may be replaced by for masks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RepeatPos {
    /// The equivalent position in the unit's loop rule.
    pub pos: u32,
    /// Units the repetition still allows from this frame: a token of at most this many
    /// bytes is allowed from the frame exactly when it is allowed from the loop.
    pub budget: u32,
    /// The loop never ends (a run of mandatory copies): frames below are unreachable
    /// within the budget and may be dropped.
    pub endless: bool,
}

/// Adds the loop rules of `chains` and of runs of identical elements to `flat` and fills
/// `flat.repeats`. Best effort: nothing is added past the size limits. `nullable` says which
/// rules match the empty string; returned with the loop rules added, for the checks that follow.
pub(crate) fn add_loops(flat: &mut ByteGrammar, chains: &[Chain], origin: &mut Vec<u32>, limits: &Limits, mut nullable: Vec<bool>) -> Vec<bool> {
    debug_assert_eq!(nullable, super::nullable(flat));
    let before = flat.alts.len();
    let consumes = |e: Symbol| match e {
        Symbol::Bytes(_) => true,
        Symbol::Rule(r) => !nullable[r as usize],
        Symbol::Token(_) | Symbol::NotToken(_) | Symbol::End => false,
    };
    // Loop rules by (unit, endless): the start of the alternative `unit L`.
    let mut loops: FxHashMap<(Symbol, bool), u32> = FxHashMap::default();
    let mut loop_of =
        |flat: &mut ByteGrammar, origin: &mut Vec<u32>, unit: Symbol, endless: bool, owner: u32| {
            if let Some(&p) = loops.get(&(unit, endless)) {
                return Some(p);
            }
            if flat.alts.len() >= limits.max_rules || flat.elems.len() + 4 > limits.max_elements {
                return None;
            }
            let r = flat.alts.len() as u32;
            let start = flat.elems.len() as u32;
            flat.elems.extend([unit, Symbol::Rule(r), Symbol::End]);
            let mut alts = vec![start];
            if !endless {
                alts.push(flat.elems.len() as u32);
                flat.elems.push(Symbol::End);
            }
            flat.alts.push(alts);
            let what = if endless { "endless" } else { "star" };
            flat.names.push_helper(owner, what);
            origin.push(origin[owner as usize]);
            loops.insert((unit, endless), start);
            Some(start)
        };
    let mut repeats: FxHashMap<u32, RepeatPos> = FxHashMap::default();
    for c in chains {
        if c.count < MIN_BUDGET || !consumes(c.unit) {
            continue;
        }
        let Some(star) = loop_of(flat, origin, c.unit, false, c.first) else {
            continue;
        };
        if let Some(r) = c.entry {
            // `unit^m O_count` with the last mandatory unit under way: `count` more allowed.
            let alt = flat.alts[r as usize][0] as usize;
            let mut last = alt;
            while flat.elems[last + 1] != Symbol::End {
                last += 1;
            }
            repeats.insert(
                last as u32,
                RepeatPos {
                    pos: star + 1,
                    budget: c.count,
                    endless: false,
                },
            );
        }
        for j in MIN_BUDGET..=c.count {
            // `O_j ::= unit O_{j-1} | ε`: about to start a unit (j allowed), or back from
            // one (j - 1 more allowed).
            let p0 = flat.alts[(c.first + j - 1) as usize][0];
            repeats.insert(
                p0,
                RepeatPos {
                    pos: star,
                    budget: j,
                    endless: false,
                },
            );
            if j > MIN_BUDGET {
                repeats.insert(
                    p0 + 1,
                    RepeatPos {
                        pos: star + 1,
                        budget: j - 1,
                        endless: false,
                    },
                );
            }
        }
    }
    // Runs of identical elements inside alternatives (mandatory copies).
    let n_rules = flat.alts.len();
    for r in 0..n_rules {
        for i in 0..flat.alts[r].len() {
            let mut p = flat.alts[r][i] as usize;
            while flat.elems[p] != Symbol::End {
                let e = flat.elems[p];
                let mut q = p + 1;
                while flat.elems[q] == e {
                    q += 1;
                }
                if (q - p) as u32 >= MIN_RUN && consumes(e) {
                    if let Some(l) = loop_of(flat, origin, e, true, r as u32) {
                        for x in p..=q - MIN_RUN as usize {
                            let budget = (q - x) as u32;
                            repeats.insert(
                                x as u32,
                                RepeatPos {
                                    pos: l,
                                    budget,
                                    endless: true,
                                },
                            );
                        }
                    }
                }
                p = q;
            }
        }
    }
    flat.repeats = repeats;
    // A loop rule is `unit L | ε` (a star: nullable) or `unit L` (endless: not, since its
    // unit consumes).
    for r in before..flat.alts.len() {
        nullable.push(flat.alts[r].iter().any(|&a| flat.elems[a as usize] == Symbol::End));
    }
    nullable
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Expr, GrammarBuilder};

    fn lowered(e: Expr) -> ByteGrammar {
        let mut b = GrammarBuilder::new();
        b.define("root", e);
        super::super::lower(&b.build("root").unwrap(), None, &Limits::default()).unwrap()
    }

    /// Budgets recorded for `kind` (star or endless), sorted.
    fn budgets(f: &ByteGrammar, endless: bool) -> Vec<u32> {
        let mut v: Vec<u32> = f
            .repeats
            .values()
            .filter(|r| r.endless == endless)
            .map(|r| r.budget)
            .collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn chains_map_to_a_star_with_their_budgets() {
        // 2 mandatory copies, then 28 optional ones: the chain `O_4..O_28` about to start
        // a unit (budgets 4..=28) and the frame under the last mandatory unit (28). The
        // unit is a byte set, so "back from a unit" frames are recorded but never used.
        let f = lowered(Expr::repeat(Expr::class([('a', 'z')], false), 2, Some(30)));
        let mut want: Vec<u32> = (4..=28).chain(4..=27).chain([28]).collect();
        want.sort_unstable();
        assert_eq!(budgets(&f, false), want);
        // Every target is the same star rule `S ::= [a-z] S | ε`.
        let star = f.repeats.values().map(|r| r.pos).min().unwrap();
        assert!(f
            .repeats
            .values()
            .all(|r| r.pos == star || r.pos == star + 1));
        let s = f.alts.iter().position(|a| a.contains(&star)).unwrap();
        assert_eq!(f.alts[s].len(), 2);
        assert_eq!(f.elems[star as usize + 1], Symbol::Rule(s as u32));
        assert!(f.names.get(s as u32).contains("star"), "{}", f.names.get(s as u32));
        // A chain too short to matter records nothing.
        assert!(lowered(Expr::repeat(Expr::lit("a"), 0, Some(3)))
            .repeats
            .is_empty());
    }

    #[test]
    fn nullable_units_are_left_alone_and_runs_are_endless() {
        // (Not `("a"?){0,30}`: lowering collapses that to `"a"{0,30}`.)
        let f = lowered(Expr::repeat(Expr::alt([Expr::lit("a"), Expr::empty()]), 0, Some(30)));
        assert!(
            f.repeats.is_empty(),
            "an empty unit takes no byte: no budget holds"
        );
        // 20 mandatory copies: positions with 8..=20 copies left become the endless loop.
        let f = lowered(Expr::seq([
            Expr::repeat(Expr::lit("k"), 20, Some(20)),
            Expr::lit("!"),
        ]));
        assert_eq!(budgets(&f, true), (8..=20).collect::<Vec<_>>());
        let l = f.repeats.values().next().unwrap().pos;
        let r = f.alts.iter().position(|a| a == &vec![l]).unwrap();
        assert_eq!(
            f.elems[l as usize + 1],
            Symbol::Rule(r as u32),
            "P ::= k P, no way out"
        );
    }
}
