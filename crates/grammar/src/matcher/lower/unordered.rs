//! Unordered member groups ([`Expr::Unordered`](crate::Expr::Unordered)): a JSON object's
//! members in any order, each listed member at most once.
//!
//! A permutation language has no context-free grammar of polynomial size, so the rules are
//! built lazily, as the matcher first reaches them. A group of `k` listed members becomes
//! one *family* of rules over `(seen, n)`, where `seen` is the set of listed members so far
//! (a bitset) and `n` the count of members so far, capped where `min`/`max` stop caring:
//! - `after(seen, n)`: the group may end here (every required member seen and `n ≥ min`),
//!   or, while there is room, a separator (none before the first member) and
//!   `member(seen, n)`;
//! - `member(seen, n)`: one member now: an unseen listed member `i`, then
//!   `after(seen ∪ {i}, n + 1)`, or an extra member, then `after(seen, n + 1)`.
//!
//! The lowering builds `after(∅, 0)` at once (so the static analyses see the group's start)
//! and leaves every other family rule *pending*: a rule id with no alternatives yet, listed
//! in [`Lazy::pending`]. The automaton's closure calls [`ByteGrammar::expand`] when it reaches a
//! rule with no alternatives; expanding appends the rule's alternatives to `ByteGrammar::elems`.
//! An input visits at most `k + 1` sets per object, so the work is linear in the input,
//! not exponential in `k`.
//!
//! Static analyses treat pending rules as productive and not nullable. That is exact for the
//! ones that matter: a pending rule is only ever referenced after a member or a separator,
//! both of which the lowering checks cannot match the empty string, so no left recursion or
//! empty path runs through one. Shortest completions (`complete`) see a pending rule as
//! having none, so an output inside an unordered group cannot be closed early by the
//! budget steering; generation uses listed-order objects.

use super::{Symbol, ByteGrammar};
use rustc_hash::FxHashMap;

/// One group: its members' rules and bounds.
#[derive(Clone, Debug)]
pub(crate) struct Family {
    /// Rule of each listed member.
    pub members: Box<[u32]>,
    /// Bitset over `members`: the required ones.
    pub required: Box<[u64]>,
    /// Rule of an extra member, if extras are allowed.
    pub extra: Option<u32>,
    /// Rule of the separator.
    pub sep: u32,
    /// Fewest members.
    pub min: u32,
    /// Most members.
    pub max: Option<u32>,
    /// The family's start rule (set by [`ByteGrammar::add_family`]; names its rules).
    pub start: u32,
}

impl Family {
    /// The count past which `n` makes no difference.
    fn cap(&self) -> u32 {
        match self.max {
            Some(m) => m.saturating_add(1),
            None => self.min.max(1),
        }
    }

    fn room(&self, n: u32) -> bool {
        self.max.is_none_or(|m| n < m)
    }
}

/// A family rule: which family, `after` or `member`, the count and the members seen.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    family: u32,
    member: bool,
    count: u32,
    seen: Box<[u64]>,
}

/// The families of a lowered grammar and their rules built so far.
#[derive(Clone, Debug, Default)]
pub(crate) struct Lazy {
    pub families: Vec<Family>,
    /// Rules created but not yet expanded.
    pub pending: FxHashMap<u32, Key>,
    /// Every family rule created, by key.
    ids: FxHashMap<Key, u32>,
    /// Bitset over `ByteGrammar::elems`: the positions inside family rules. A stack frame at such a
    /// position depends on the members seen; the automaton cuts truncated stacks there.
    positions: Vec<u64>,
}

impl Lazy {
    /// Heap bytes used.
    pub fn memory_usage(&self) -> usize {
        let key = |k: &Key| k.seen.len() * 8 + 40;
        self.pending.values().map(key).sum::<usize>()
            + self.ids.keys().map(key).sum::<usize>()
            + self.families.iter().map(|f| f.members.len() * 4 + f.required.len() * 8 + 48).sum::<usize>()
            + self.positions.len() * 8
    }

    /// Is grammar position `pos` inside a family rule?
    #[inline]
    pub fn in_family(&self, pos: u32) -> bool {
        self.positions.get(pos as usize / 64).is_some_and(|w| w >> (pos % 64) & 1 == 1)
    }
}

fn has(bits: &[u64], i: usize) -> bool {
    bits[i / 64] >> (i % 64) & 1 == 1
}

/// The bitset words for `k` members.
pub(crate) fn words(k: usize) -> usize {
    k.div_ceil(64).max(1)
}

impl ByteGrammar {
    /// Adds `fam` with its start rule `start` (a rule with no alternatives yet) and expands
    /// the start, `after(∅, 0)`.
    pub(crate) fn add_family(&mut self, start: u32, mut fam: Family) {
        fam.start = start;
        let family = self.lazy.families.len() as u32;
        let seen = vec![0u64; fam.required.len()].into_boxed_slice();
        self.lazy.families.push(fam);
        let key = Key { family, member: false, count: 0, seen };
        self.lazy.ids.insert(key.clone(), start);
        self.lazy.pending.insert(start, key);
        self.expand(start);
    }

    /// The rule for `key`, created pending if new.
    fn family_rule(&mut self, key: Key) -> u32 {
        if let Some(&r) = self.lazy.ids.get(&key) {
            return r;
        }
        let r = self.alts.len() as u32;
        self.alts.push(Vec::new());
        let base = self.lazy.families[key.family as usize].start;
        let name = format!("{}/{}{}", self.names[base as usize], if key.member { "member" } else { "after" }, r);
        self.names.push(name);
        self.lazy.ids.insert(key.clone(), r);
        self.lazy.pending.insert(r, key);
        r
    }

    /// Builds the alternatives of pending rule `r` (nothing when `r` is not pending).
    pub(crate) fn expand(&mut self, r: u32) {
        let Some(key) = self.lazy.pending.remove(&r) else { return };
        let fam = self.lazy.families[key.family as usize].clone();
        let n = key.count;
        let next = (n + 1).min(fam.cap());
        let mut alts: Vec<Vec<Symbol>> = Vec::new();
        if !key.member {
            let complete = fam.required.iter().zip(key.seen.iter()).all(|(q, s)| q & !s == 0);
            if complete && n >= fam.min {
                alts.push(Vec::new());
            }
            let unseen = (0..fam.members.len()).any(|i| !has(&key.seen, i));
            if fam.room(n) && (unseen || fam.extra.is_some()) {
                let m = self.family_rule(Key { member: true, ..key.clone() });
                alts.push(if n == 0 { vec![Symbol::Rule(m)] } else { vec![Symbol::Rule(fam.sep), Symbol::Rule(m)] });
            }
        } else if fam.room(n) {
            for (i, &m) in fam.members.iter().enumerate() {
                if has(&key.seen, i) {
                    continue;
                }
                let mut seen = key.seen.clone();
                seen[i / 64] |= 1 << (i % 64);
                let after = self.family_rule(Key { family: key.family, member: false, count: next, seen });
                alts.push(vec![Symbol::Rule(m), Symbol::Rule(after)]);
            }
            if let Some(x) = fam.extra {
                let after = self.family_rule(Key { family: key.family, member: false, count: next, seen: key.seen.clone() });
                alts.push(vec![Symbol::Rule(x), Symbol::Rule(after)]);
            }
        }
        let mut starts = Vec::with_capacity(alts.len());
        let first = self.elems.len();
        for a in alts {
            starts.push(self.elems.len() as u32);
            self.elems.extend_from_slice(&a);
            self.elems.push(Symbol::End);
        }
        let bits = &mut self.lazy.positions;
        bits.resize(self.elems.len().div_ceil(64), 0);
        for p in first..self.elems.len() {
            bits[p / 64] |= 1 << (p % 64);
        }
        self.alts[r as usize] = starts;
    }
}

#[cfg(test)]
mod tests {
    use crate::matcher::{accepts, CompileError};
    use crate::{Expr, Grammar, GrammarBuilder, Limits, Unordered};

    /// `{` group `}` with single-letter members `a`, `b`, ... (required where `req`), extra
    /// members `x` when `extra`, separated by `,`.
    fn group(req: &[bool], extra: bool, min: u32, max: Option<u32>) -> Grammar {
        let members = req.iter().enumerate().map(|(i, &r)| (Expr::lit(((b'a' + i as u8) as char).to_string()), r)).collect();
        let u = Unordered { members, extra: extra.then(|| Expr::lit("x")), sep: Expr::lit(","), min, max };
        let mut b = GrammarBuilder::new();
        b.define("root", Expr::seq([Expr::lit("{"), Expr::Unordered(Box::new(u)), Expr::lit("}")]));
        b.build("root").unwrap()
    }

    fn ok(g: &Grammar, s: &str) -> bool {
        accepts(g, s.as_bytes(), &Limits::default()).unwrap()
    }

    /// The definition: members separated by commas, listed ones at most once, required ones
    /// present, count within bounds.
    fn oracle(items: &[u8], req: &[bool], extra: bool, min: u32, max: Option<u32>) -> bool {
        let n = items.len() as u32;
        let listed = |c: u8| ((c - b'a') as usize) < req.len();
        items.iter().all(|&c| listed(c) || (c == b'x' && extra))
            && (0..req.len()).all(|i| {
                let k = items.iter().filter(|&&c| c == b'a' + i as u8).count();
                k <= 1 && (!req[i] || k == 1)
            })
            && n >= min
            && max.is_none_or(|m| n <= m)
    }

    #[test]
    fn matches_its_definition_on_every_short_input() {
        let alphabet = [b'a', b'b', b'c', b'x'];
        let cases: [(&[bool], bool, u32, Option<u32>); 5] = [
            (&[true, false, false], false, 0, None),
            (&[false, false, false], true, 0, None),
            (&[true, true, false], true, 0, Some(3)),
            (&[false, false, false], true, 2, Some(4)),
            (&[false, true, false], false, 1, Some(2)),
        ];
        for (req, extra, min, max) in cases {
            let g = group(req, extra, min, max);
            // Every sequence of up to 5 members over the alphabet.
            let mut seqs: Vec<Vec<u8>> = vec![vec![]];
            for len in 1..=5 {
                let mut next = Vec::new();
                for s in seqs.iter().filter(|s| s.len() == len - 1) {
                    for &c in &alphabet {
                        let mut t = s.clone();
                        t.push(c);
                        next.push(t);
                    }
                }
                seqs.extend(next);
            }
            for s in &seqs {
                let text: Vec<String> = s.iter().map(|&c| (c as char).to_string()).collect();
                let input = format!("{{{}}}", text.join(","));
                assert_eq!(ok(&g, &input), oracle(s, req, extra, min, max), "{input} with req {req:?}, extra {extra}, {min}..{max:?}");
            }
            // Separators only between members.
            assert!(!ok(&g, "{,a}") && !ok(&g, "{a,}") && !ok(&g, "{a,,b}"));
        }
    }

    #[test]
    fn a_large_group_builds_only_the_sets_an_input_visits() {
        // 200 optional members: 2^200 sets, of which one input visits 201.
        let names: Vec<String> = (0..200).map(|i| format!("\"k{i}\":1")).collect();
        let members = names.iter().map(|n| (Expr::lit(n.clone()), false)).collect();
        let u = Unordered { members, extra: None, sep: Expr::lit(","), min: 0, max: None };
        let mut b = GrammarBuilder::new();
        b.define("root", Expr::seq([Expr::lit("{"), Expr::Unordered(Box::new(u)), Expr::lit("}")]));
        let g = b.build("root").unwrap();
        let mut rev = names.clone();
        rev.reverse();
        assert!(ok(&g, &format!("{{{}}}", rev.join(","))));
        assert!(ok(&g, &format!("{{{},{}}}", names[7], names[3])));
        assert!(!ok(&g, &format!("{{{},{}}}", names[7], names[7])), "a member twice");
    }

    #[test]
    fn groups_nest_and_members_may_not_be_empty() {
        let inner = Unordered { members: vec![(Expr::lit("p"), true), (Expr::lit("q"), false)], extra: None, sep: Expr::lit(","), min: 0, max: None };
        let obj = Expr::seq([Expr::lit("{"), Expr::Unordered(Box::new(inner)), Expr::lit("}")]);
        let outer = Unordered { members: vec![(Expr::seq([Expr::lit("o:"), obj]), true), (Expr::lit("z"), false)], extra: None, sep: Expr::lit(","), min: 0, max: None };
        let mut b = GrammarBuilder::new();
        b.define("root", Expr::seq([Expr::lit("{"), Expr::Unordered(Box::new(outer)), Expr::lit("}")]));
        let g = b.build("root").unwrap();
        for yes in ["{o:{p}}", "{z,o:{q,p}}", "{o:{p,q},z}"] {
            assert!(ok(&g, yes), "{yes}");
        }
        for no in ["{z}", "{o:{q}}", "{o:{p,p}}", "{o:{p},o:{p}}"] {
            assert!(!ok(&g, no), "{no}");
        }
        let empty = Unordered { members: vec![(Expr::empty(), false)], extra: None, sep: Expr::lit(","), min: 0, max: None };
        let mut b = GrammarBuilder::new();
        b.define("root", Expr::Unordered(Box::new(empty)));
        let g = b.build("root").unwrap();
        assert!(matches!(accepts(&g, b"", &Limits::default()), Err(CompileError::EmptyMember { .. })));
    }

    #[test]
    fn prints_as_a_readable_non_gbnf_form() {
        let g = group(&[true, false], true, 1, Some(3));
        assert_eq!(crate::gbnf::print(&g), "root ::= \"{\" @unordered(\"a\", \"b\"?, \"x\"*; sep \",\"; count 1..3) \"}\"\n");
    }
}
