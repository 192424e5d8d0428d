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
//! Expanding `member(seen, n)` names an `after` rule for every unseen member, of which the
//! input takes one: `k` rules per member, `k²` over a whole object. So a rule named is
//! only given an id and listed as pending, and rules are told apart by their keys only
//! when they are expanded (`Lazy::ids`): a rule whose key an earlier expansion already
//! built takes that rule's alternatives, so two orders of the same members still reach
//! the same stacks. Before, every rule named was hashed into both tables at once (its key
//! cloned for the second), and both grew by `k` per member: a 201-member object's reached
//! 40,000 keys each.
//!
//! ## Presence clauses
//! A group may also carry conditions on which listed members are present
//! ([`Unordered::presence`](crate::Unordered::presence)): clauses, each satisfied by any one
//! of its terms (these members present, those absent). `after(seen, n)` may end only when
//! every clause holds for `seen`, and `member(seen, n)` offers member `i` only when some
//! set of members reachable from `seen ∪ {i}` (more members added, within `max`) has every
//! required member and satisfies every clause; so an input never enters a state from
//! which the group cannot end (no dead ends for the model), and the language is exactly the
//! groups whose final set satisfies the clauses. Reachability is decided by trying the
//! subsets of the members the clauses and `required` name that are not yet seen (at most
//! [`MAX_RELEVANT`] of them: the schema compiler distributes wider conditions instead),
//! memoized by the seen ones among them.
//!
//! Static analyses treat pending rules as productive and not nullable. That is exact for the
//! ones that matter: a pending rule is only ever referenced after a member or a separator,
//! both of which the lowering checks cannot match the empty string, so no left recursion or
//! empty path runs through one. Shortest completions (`complete`) see a pending rule as
//! having none, so an output inside an unordered group cannot be closed early by the
//! budget steering; generation uses listed-order objects.

use super::{Symbol, ByteGrammar};
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// Most members presence clauses and `required` may name together (reachability tries
/// every subset of the unseen ones).
pub(crate) const MAX_RELEVANT: usize = 16;

/// One term of a presence clause: (present, absent) bitsets over the members.
pub(crate) type Term = (Box<[u64]>, Box<[u64]>);

/// A group's presence clauses as member bitsets (see the module docs).
#[derive(Clone, Debug)]
pub(crate) struct Clauses {
    /// Each clause: its terms.
    pub clauses: Vec<Vec<Term>>,
    /// The members the clauses name, by index.
    pub relevant: Box<[u32]>,
}

impl Clauses {
    /// Does `seen` satisfy every clause?
    fn hold(&self, seen: &[u64]) -> bool {
        self.clauses.iter().all(|c| {
            c.iter().any(|(p, a)| p.iter().zip(seen).all(|(p, s)| p & !s == 0) && a.iter().zip(seen).all(|(a, s)| a & s == 0))
        })
    }
}

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
    /// Presence clauses, if any.
    pub presence: Option<Arc<Clauses>>,
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

    /// May the group end with members `seen`, `n` of them?
    fn complete(&self, seen: &[u64], n: u32) -> bool {
        self.required.iter().zip(seen).all(|(q, s)| q & !s == 0) && n >= self.min && self.presence.as_ref().is_none_or(|c| c.hold(seen))
    }

    /// With presence clauses: can the group still end from members `seen`, `n` of them, by
    /// adding unseen listed members (within `max`)? Every required member is added; then the
    /// subsets of the unseen members the clauses name are tried (any other member only adds
    /// to the count).
    fn reachable(&self, c: &Clauses, seen: &[u64], n: u32) -> bool {
        let base: Vec<u64> = seen.iter().zip(self.required.iter()).map(|(s, q)| s | q).collect();
        let added: u32 = base.iter().zip(seen).map(|(b, s)| (b & !s).count_ones()).sum();
        let n = n.saturating_add(added);
        let open: Vec<u32> = c.relevant.iter().copied().filter(|&i| !has(&base, i as usize)).collect();
        if open.len() > MAX_RELEVANT {
            return true;
        }
        let mut t = base.clone();
        (0u32..1 << open.len()).any(|pick| {
            if self.max.is_some_and(|m| n.saturating_add(pick.count_ones()) > m) {
                return false;
            }
            t.copy_from_slice(&base);
            for (j, &i) in open.iter().enumerate() {
                if pick >> j & 1 == 1 {
                    t[i as usize / 64] |= 1 << (i % 64);
                }
            }
            c.hold(&t)
        })
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
    /// Rules named but not yet expanded.
    pending: FxHashMap<u32, Key>,
    /// Every family rule expanded, by key.
    ids: FxHashMap<Key, u32>,
    /// Bitset over `ByteGrammar::elems`: the positions inside family rules. A stack frame at such a
    /// position depends on the members seen; the automaton cuts truncated stacks there.
    positions: Vec<u64>,
    /// [`Family::reachable`] by family, the relevant members seen and the count (when a
    /// `max` makes it matter).
    reachable: FxHashMap<(u32, Box<[u64]>, u32), bool>,
}

impl Lazy {
    /// Heap bytes used.
    pub fn memory_usage(&self) -> usize {
        let key = |k: &Key| k.seen.len() * 8 + 40;
        self.pending.values().map(key).sum::<usize>()
            + self.ids.keys().map(key).sum::<usize>()
            + self.families.iter().map(|f| f.members.len() * 4 + f.required.len() * 8 + 48).sum::<usize>()
            + self.positions.len() * 8
            + self.reachable.keys().map(|k| k.1.len() * 8 + 40).sum::<usize>()
    }

    /// Appends `other`'s families and rules, those of a part lowered on its own (module
    /// `deferred`), whose rule `r` is rule `rule(r)` here and whose positions start at `off`.
    pub(crate) fn append(&mut self, other: Lazy, rule: impl Fn(u32) -> u32, off: u32) {
        let fo = self.families.len() as u32;
        let key = |k: Key| Key { family: k.family + fo, ..k };
        for mut f in other.families {
            f.members = f.members.iter().map(|&m| rule(m)).collect();
            f.extra = f.extra.map(&rule);
            f.sep = rule(f.sep);
            f.start = rule(f.start);
            self.families.push(f);
        }
        self.pending.extend(other.pending.into_iter().map(|(r, k)| (rule(r), key(k))));
        self.ids.extend(other.ids.into_iter().map(|(k, r)| (key(k), rule(r))));
        self.reachable.extend(other.reachable.into_iter().map(|((f, s, n), v)| ((f + fo, s, n), v)));
        for (w, &bits) in other.positions.iter().enumerate() {
            for b in 0..64 {
                if bits >> b & 1 == 1 {
                    let p = off as usize + w * 64 + b;
                    if self.positions.len() <= p / 64 {
                        self.positions.resize(p / 64 + 1, 0);
                    }
                    self.positions[p / 64] |= 1 << (p % 64);
                }
            }
        }
    }

    /// The rules named but not yet expanded.
    pub fn pending_rules(&self) -> impl Iterator<Item = u32> + '_ {
        self.pending.keys().copied()
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
        self.lazy.pending.insert(start, key);
        self.expand(start);
    }

    /// A new pending rule for `key` (told apart from others of the same key when expanded).
    fn family_rule(&mut self, key: Key) -> u32 {
        let r = self.alts.len() as u32;
        self.alts.push(Vec::new());
        let base = self.lazy.families[key.family as usize].start;
        self.names.push_helper(base, if key.member { "member" } else { "after" });
        self.lazy.pending.insert(r, key);
        r
    }

    /// Can family `f`'s group still end from `seen` with `n` members (always, without
    /// presence clauses)? Memoized.
    fn viable(&mut self, f: u32, seen: &[u64], n: u32) -> bool {
        let fam = &self.lazy.families[f as usize];
        let Some(c) = fam.presence.clone() else { return true };
        // What reachability depends on: the relevant members seen, and with a `max` the
        // required ones seen too (they count) and the count.
        let mut proj = vec![0u64; seen.len()];
        for &i in c.relevant.iter() {
            if has(seen, i as usize) {
                proj[i as usize / 64] |= 1 << (i % 64);
            }
        }
        if fam.max.is_some() {
            for (p, (s, q)) in proj.iter_mut().zip(seen.iter().zip(fam.required.iter())) {
                *p |= s & q;
            }
        }
        let key = (f, proj.into_boxed_slice(), if fam.max.is_some() { n } else { 0 });
        if let Some(&v) = self.lazy.reachable.get(&key) {
            return v;
        }
        let v = fam.reachable(&c, seen, n);
        self.lazy.reachable.insert(key, v);
        v
    }

    /// Builds the alternatives of pending rule `r` (nothing when `r` is not pending).
    pub(crate) fn expand(&mut self, r: u32) {
        let Some(key) = self.lazy.pending.remove(&r) else { return };
        // A rule of a key already built (the same members, reached in another order, or
        // named again by another expansion) takes that rule's alternatives: the same
        // stacks, so the same states.
        if let Some(&twin) = self.lazy.ids.get(&key) {
            self.alts[r as usize] = self.alts[twin as usize].clone();
            return;
        }
        self.lazy.ids.insert(key.clone(), r);
        let fam = self.lazy.families[key.family as usize].clone();
        let n = key.count;
        let next = (n + 1).min(fam.cap());
        // Members that may come next (every unseen one, unless presence clauses rule it out).
        let mut open: Vec<usize> = Vec::new();
        for i in 0..fam.members.len() {
            if has(&key.seen, i) {
                continue;
            }
            if fam.presence.is_some() {
                let mut seen = key.seen.to_vec();
                seen[i / 64] |= 1 << (i % 64);
                if !self.viable(key.family, &seen, next) {
                    continue;
                }
            }
            open.push(i);
        }
        let extra_ok = fam.extra.is_some() && (fam.presence.is_none() || self.viable(key.family, &key.seen, next));
        let mut alts: Vec<Vec<Symbol>> = Vec::new();
        if !key.member {
            if fam.complete(&key.seen, n) {
                alts.push(Vec::new());
            }
            if fam.room(n) && (!open.is_empty() || extra_ok) {
                let m = self.family_rule(Key { member: true, ..key.clone() });
                alts.push(if n == 0 { vec![Symbol::Rule(m)] } else { vec![Symbol::Rule(fam.sep), Symbol::Rule(m)] });
            }
        } else if fam.room(n) {
            for &i in &open {
                let mut seen = key.seen.clone();
                seen[i / 64] |= 1 << (i % 64);
                let after = self.family_rule(Key { family: key.family, member: false, count: next, seen });
                alts.push(vec![Symbol::Rule(fam.members[i]), Symbol::Rule(after)]);
            }
            if let (Some(x), true) = (fam.extra, extra_ok) {
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
        let u = Unordered { members, extra: extra.then(|| Expr::lit("x")), sep: Expr::lit(","), min, max, presence: vec![] };
        let mut b = GrammarBuilder::new();
        b.define("root", Expr::seq([Expr::lit("{"), Expr::Unordered(Box::new(u)), Expr::lit("}")]));
        b.build("root").unwrap()
    }

    /// Every sequence of up to `max` letters of `alphabet` (the empty one included).
    fn sequences(alphabet: &[u8], max: usize) -> Vec<Vec<u8>> {
        let mut seqs: Vec<Vec<u8>> = vec![vec![]];
        for len in 1..=max {
            let longest: Vec<Vec<u8>> = seqs.iter().filter(|s| s.len() == len - 1).cloned().collect();
            for s in longest {
                for &c in alphabet {
                    let mut t = s.clone();
                    t.push(c);
                    seqs.push(t);
                }
            }
        }
        seqs
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
            let seqs = sequences(&alphabet, 5);
            for s in &seqs {
                let text: Vec<String> = s.iter().map(|&c| (c as char).to_string()).collect();
                let input = format!("{{{}}}", text.join(","));
                assert_eq!(ok(&g, &input), oracle(s, req, extra, min, max), "{input} with req {req:?}, extra {extra}, {min}..{max:?}");
            }
            // Separators only between members.
            assert!(!ok(&g, "{,a}") && !ok(&g, "{a,}") && !ok(&g, "{a,,b}"));
        }
    }

    /// Presence clauses: the language is exactly the groups whose final member set satisfies
    /// them, and no prefix the grammar lets through is a dead end (a set it can no longer
    /// complete).
    #[test]
    fn presence_clauses_match_their_definition_and_leave_no_dead_ends() {
        use crate::Presence;
        let t = |present: &[u32], absent: &[u32]| Presence { present: present.to_vec(), absent: absent.to_vec() };
        // Members a b c d (indices 0..4); extra members x.
        let cases: Vec<(Vec<Vec<Presence>>, [bool; 4], bool, Option<u32>)> = vec![
            // anyOf [{required: [a]}, {required: [b, c]}]
            (vec![vec![t(&[0], &[]), t(&[1, 2], &[])]], [false; 4], true, None),
            // dependencies {a: [d]} and not {required: [c]}
            (vec![vec![t(&[], &[0]), t(&[0, 3], &[])], vec![t(&[], &[2])]], [false; 4], false, None),
            // exactly one of a, b (oneOf of required), d required, at most 3 members
            (vec![vec![t(&[0], &[1]), t(&[1], &[0])]], [false, false, false, true], true, Some(3)),
            // not {required: [a, b]}, and a implies b: a can never be present
            (vec![vec![t(&[], &[0]), t(&[], &[1])], vec![t(&[], &[0]), t(&[0, 1], &[])]], [false; 4], false, None),
            // contradictory: a required, a absent — nothing matches
            (vec![vec![t(&[], &[0])]], [true, false, false, false], false, None),
        ];
        let alphabet = [b'a', b'b', b'c', b'd', b'x'];
        for (presence, req, extra, max) in cases {
            let members = req.iter().enumerate().map(|(i, &r)| (Expr::lit(((b'a' + i as u8) as char).to_string()), r)).collect();
            let u = Unordered { members, extra: extra.then(|| Expr::lit("x")), sep: Expr::lit(","), min: 0, max, presence: presence.clone() };
            let mut b = GrammarBuilder::new();
            // Beside another alternative, so a group that matches nothing still compiles.
            b.define("root", Expr::alt([Expr::lit("n"), Expr::seq([Expr::lit("{"), Expr::Unordered(Box::new(u)), Expr::lit("}")])]));
            let g = b.build("root").unwrap();
            let oracle = |items: &[u8]| {
                let has = |i: u32| items.contains(&(b'a' + i as u8));
                oracle(items, &req, extra, 0, max)
                    && presence.iter().all(|c| c.iter().any(|t| t.present.iter().all(|&i| has(i)) && t.absent.iter().all(|&i| !has(i))))
            };
            let vocab = std::sync::Arc::new(formwork_vocab::Vocabulary::from_strings(&["{", "}", ",", "a", "b", "c", "d", "x", "n"], &["</s>"]));
            let cg = crate::CompiledGrammar::new(&g, vocab, &Limits::default()).unwrap();
            let seqs = sequences(&alphabet, 5);
            for s in &seqs {
                let text: Vec<String> = s.iter().map(|&c| (c as char).to_string()).collect();
                let body = text.join(",");
                let input = format!("{{{body}}}");
                assert_eq!(ok(&g, &input), oracle(s), "{input} with {presence:?}");
                // A prefix the grammar lets through can still be completed.
                let mut m = cg.matcher();
                if s.len() <= 4 && m.commit_bytes(format!("{{{body}").as_bytes()).is_ok() {
                    let completes = seqs.iter().filter(|t| t.starts_with(s)).any(|t| oracle(t));
                    assert!(completes, "dead end after {{{body} with {presence:?}");
                }
            }
        }
    }

    #[test]
    fn a_large_group_builds_only_the_sets_an_input_visits() {
        // 200 optional members: 2^200 sets, of which one input visits 201.
        let names: Vec<String> = (0..200).map(|i| format!("\"k{i}\":1")).collect();
        let members = names.iter().map(|n| (Expr::lit(n.clone()), false)).collect();
        let u = Unordered { members, extra: None, sep: Expr::lit(","), min: 0, max: None, presence: vec![] };
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
        let inner = Unordered { members: vec![(Expr::lit("p"), true), (Expr::lit("q"), false)], extra: None, sep: Expr::lit(","), min: 0, max: None, presence: vec![] };
        let obj = Expr::seq([Expr::lit("{"), Expr::Unordered(Box::new(inner)), Expr::lit("}")]);
        let outer = Unordered { members: vec![(Expr::seq([Expr::lit("o:"), obj]), true), (Expr::lit("z"), false)], extra: None, sep: Expr::lit(","), min: 0, max: None, presence: vec![] };
        let mut b = GrammarBuilder::new();
        b.define("root", Expr::seq([Expr::lit("{"), Expr::Unordered(Box::new(outer)), Expr::lit("}")]));
        let g = b.build("root").unwrap();
        for yes in ["{o:{p}}", "{z,o:{q,p}}", "{o:{p,q},z}"] {
            assert!(ok(&g, yes), "{yes}");
        }
        for no in ["{z}", "{o:{q}}", "{o:{p,p}}", "{o:{p},o:{p}}"] {
            assert!(!ok(&g, no), "{no}");
        }
        let empty = Unordered { members: vec![(Expr::empty(), false)], extra: None, sep: Expr::lit(","), min: 0, max: None, presence: vec![] };
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
