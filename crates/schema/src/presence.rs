//! Conditions on which keys an object has, kept in its unordered member group
//! ([`Unordered::presence`](formwork_grammar::Unordered::presence)) instead of distributing
//! the whole object over them.
//!
//! Real schemas say "at least one of these keys" (`anyOf: [{required: [a]}, {required:
//! [b]}]`), "exactly one" (`oneOf` of the same), "never this key" (`not: {required: [a]}`)
//! and "this key brings those" (`dependentRequired`, array-valued `dependencies`). Each
//! distributed the object into one copy per branch, so `k` such keywords cost `2^k` copies
//! of every property's value (a schema with two `anyOf`s of three, five dependencies and a
//! `not` compiled 288 copies of its object). Read as conditions on the set of keys present,
//! they are clauses of one group, which the matcher checks on the members seen (see the
//! grammar's `lower::unordered`); the object is compiled once.
//!
//! A combinator is taken this way only when every branch is *presence-only*: an object
//! schema with `required` and annotations only. Its meaning for non-objects follows the
//! validator: `required` holds vacuously there, so `anyOf` and dependencies allow every
//! non-object, while `oneOf` of two or more branches and `not` allow none (a `type:
//! object` part is added for those).
//!
//! Used with at most [`MAX_KEYS`] keys named by the conditions of one conjunction; beyond
//! that the combinators are distributed as before. In any key order the clauses go to the
//! object's unordered member group; in listed order (and for an object with a key forced
//! first) the object's rules decide the members one by one and carry what is left of the
//! clauses ([`Residual`]), so that a member is offered only when the object can still end.

use crate::conjunct::{Conjunct, Consumed};
use serde_json::Value;

/// Most distinct keys the presence conditions of one conjunction may name (the matcher tries
/// the subsets of the unseen ones; see `MAX_RELEVANT` in the grammar, which is larger).
pub(crate) const MAX_KEYS: usize = 12;

/// Most terms one `oneOf` clause may expand to (each branch with one absent key of every
/// other branch).
const MAX_TERMS: usize = 64;

/// The combinators kept as presence conditions: the keyword, its own `Consumed` flag, and
/// the `PRESENCE_` flag that hands it to the object.
const KINDS: [(&str, Consumed, Consumed); 5] = [
    ("anyOf", Consumed::ANYOF, Consumed::PRESENCE_ANYOF),
    ("oneOf", Consumed::ONEOF, Consumed::PRESENCE_ONEOF),
    ("not", Consumed::NOT, Consumed::PRESENCE_NOT),
    ("dependentRequired", Consumed::DEPS, Consumed::PRESENCE_DEPS),
    ("dependencies", Consumed::DEPS, Consumed::PRESENCE_DEPS),
];

/// One term: keys present, keys absent.
pub(crate) type Term = (Vec<String>, Vec<String>);
/// A clause: any one of its terms.
pub(crate) type Clause = Vec<Term>;

/// Keywords a presence-only branch may carry besides `required`.
const ANNOTATIONS: &[&str] = &["$comment", "title", "description", "examples", "default", "deprecated", "readOnly", "writeOnly"];

/// The `required` names of a presence-only schema (`{"required": [...]}` and annotations).
fn required_only(v: &Value) -> Option<Vec<String>> {
    let o = v.as_object()?;
    let mut names = Vec::new();
    for (k, x) in o {
        if k == "required" {
            for n in x.as_array()? {
                let n = n.as_str()?.to_string();
                if !names.contains(&n) {
                    names.push(n);
                }
            }
        } else if !ANNOTATIONS.contains(&k.as_str()) {
            return None;
        }
    }
    o.contains_key("required").then_some(names)
}

/// The branches of `v` (an array of presence-only schemas), if every one is.
fn branches(v: Option<&Value>) -> Option<Vec<Vec<String>>> {
    let a = v?.as_array()?;
    if a.is_empty() {
        return None;
    }
    a.iter().map(required_only).collect()
}

/// The clauses of the combinators of `p` named by `which` (a set of the `Consumed` flags
/// `ANYOF`, `ONEOF`, `NOT`, `DEPS`), or `None` if one of them is not presence-only.
fn clauses(p: &Conjunct, which: Consumed) -> Option<Vec<Clause>> {
    let mut out = Vec::new();
    if which.contains(Consumed::ANYOF) {
        out.push(branches(p.get("anyOf"))?.into_iter().map(|r| (r, Vec::new())).collect());
    }
    if which.contains(Consumed::ONEOF) {
        out.push(exactly_one(&branches(p.get("oneOf"))?)?);
    }
    if which.contains(Consumed::NOT) {
        let inner = p.get("not")?;
        // `not: {required: R}`: some key of R is absent; `not: {anyOf: [...]}`: for every
        // branch, some key of it is absent.
        let negated: Vec<Vec<String>> = match required_only(inner) {
            Some(r) => vec![r],
            None => {
                let o = inner.as_object()?;
                if o.keys().any(|k| k != "anyOf" && !ANNOTATIONS.contains(&k.as_str())) {
                    return None;
                }
                branches(o.get("anyOf"))?
            }
        };
        for r in negated {
            out.push(r.into_iter().map(|k| (Vec::new(), vec![k])).collect());
        }
    }
    if which.contains(Consumed::DEPS) {
        if p.get("dependentSchemas").is_some() {
            return None;
        }
        for kw in ["dependentRequired", "dependencies"] {
            let Some(m) = p.get(kw) else { continue };
            for (k, d) in m.as_object()? {
                let mut present = vec![k.clone()];
                for n in d.as_array()? {
                    let n = n.as_str()?.to_string();
                    if !present.contains(&n) {
                        present.push(n);
                    }
                }
                out.push(vec![(Vec::new(), vec![k.clone()]), (present, Vec::new())]);
            }
        }
    }
    Some(out)
}

/// "Exactly one of these `required` lists holds", as terms: branch `i`'s keys present and,
/// for every other branch, one of its keys absent (not one of branch `i`'s). `None` past
/// [`MAX_TERMS`].
fn exactly_one(branches: &[Vec<String>]) -> Option<Clause> {
    let mut out: Clause = Vec::new();
    for (i, ri) in branches.iter().enumerate() {
        // Partial terms: the absent keys chosen so far.
        let mut partial: Vec<Vec<String>> = vec![Vec::new()];
        for (j, rj) in branches.iter().enumerate() {
            if j == i {
                continue;
            }
            let choices: Vec<&String> = rj.iter().filter(|k| !ri.contains(k)).collect();
            let mut next = Vec::new();
            for a in &partial {
                for &k in &choices {
                    let mut b = a.clone();
                    if !b.contains(k) {
                        b.push(k.clone());
                    }
                    next.push(b);
                }
            }
            partial = next;
            if partial.len() > MAX_TERMS {
                return None;
            }
        }
        out.extend(partial.into_iter().map(|absent| (ri.clone(), absent)));
        if out.len() > MAX_TERMS {
            return None;
        }
    }
    Some(out)
}

/// Which combinators of each part to keep as presence conditions, decided for the whole
/// conjunction: the presence-only `anyOf`, `oneOf`, `not` and dependencies not yet
/// consumed, when together they name at most [`MAX_KEYS`] keys. Returns, by part, the
/// `Consumed` flags to set (the combinator's own and its `PRESENCE_` flag), and whether the
/// conjunction must be an object (a `oneOf` of two or more branches, or a `not`).
pub(crate) fn plan(parts: &[Conjunct]) -> (Vec<Consumed>, bool) {
    let mut flags = vec![Consumed::empty(); parts.len()];
    let mut keys: Vec<String> = Vec::new();
    let mut object = false;
    for (i, p) in parts.iter().enumerate() {
        if p.obj().is_none() {
            continue;
        }
        for (kw, own, mark) in KINDS {
            if p.consumed.contains(own) || flags[i].contains(own) || p.get(kw).is_none() {
                continue;
            }
            let Some(cs) = clauses(p, own) else { continue };
            let mut more = keys.clone();
            for (present, absent) in cs.iter().flatten() {
                for k in present.iter().chain(absent) {
                    if !more.contains(k) {
                        more.push(k.clone());
                    }
                }
            }
            if more.len() > MAX_KEYS {
                continue;
            }
            keys = more;
            flags[i] |= own | mark;
            if own == Consumed::NOT || (own == Consumed::ONEOF && p.get("oneOf").and_then(|a| a.as_array()).is_some_and(|a| a.len() >= 2)) {
                object = true;
            }
        }
    }
    (flags, object)
}

/// The presence clauses the parts carry (their `PRESENCE_` flags), by key name.
pub(crate) fn collect(parts: &[Conjunct]) -> Vec<Clause> {
    let mut out = Vec::new();
    for p in parts {
        let which = KINDS.iter().filter(|k| p.consumed.contains(k.2)).fold(Consumed::empty(), |w, k| w | k.1);
        if !which.is_empty() {
            out.extend(clauses(p, which).expect("planned parts are presence-only"));
        }
    }
    out
}

/// The keys `clauses` name, in order of first mention.
pub(crate) fn keys(clauses: &[Clause]) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for (present, absent) in clauses.iter().flatten() {
        for k in present.iter().chain(absent) {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    keys
}

/// `clauses` over member indices (`index_of` a key's member, `None` for a key that can
/// never be present): a term needing such a key present is dropped, and such a key
/// absent always holds.
pub(crate) fn by_index(clauses: &[Clause], index_of: impl Fn(&str) -> Option<u32>) -> Vec<Vec<formwork_grammar::Presence>> {
    clauses
        .iter()
        .map(|c| {
            c.iter()
                .filter_map(|(present, absent)| {
                    let present: Option<Vec<u32>> = present.iter().map(|k| index_of(k)).collect();
                    let absent: Vec<u32> = absent.iter().filter_map(|k| index_of(k)).collect();
                    Some(formwork_grammar::Presence { present: present?, absent })
                })
                .collect()
        })
        .collect()
}

/// What is left of a group's presence clauses (over member indices) once a listed-order
/// object has decided its members before some index, present or absent: each clause's
/// terms that still can hold, over the members not decided yet. A clause some term of which
/// already holds is gone. Kept canonical (sorted, without repeats), so that two paths to the
/// same member with the same prospects share one rule (see `compile::object`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Residual(Vec<Vec<(Vec<u32>, Vec<u32>)>>);

impl Residual {
    /// The clauses before any member is decided; `None` when one can never hold.
    pub(crate) fn new(clauses: &[Vec<formwork_grammar::Presence>]) -> Option<Residual> {
        Self::canonical(clauses.iter().map(|c| c.iter().map(|t| (t.present.clone(), t.absent.clone())).collect()).collect())
    }

    fn canonical(clauses: Vec<Vec<(Vec<u32>, Vec<u32>)>>) -> Option<Residual> {
        let mut out = Vec::new();
        for mut c in clauses {
            for (p, a) in c.iter_mut() {
                p.sort_unstable();
                p.dedup();
                a.sort_unstable();
                a.dedup();
            }
            // A term needing a member both present and absent never holds.
            c.retain(|(p, a)| !p.iter().any(|x| a.binary_search(x).is_ok()));
            if c.is_empty() {
                return None;
            }
            if c.iter().any(|(p, a)| p.is_empty() && a.is_empty()) {
                continue;
            }
            c.sort_unstable();
            c.dedup();
            out.push(c);
        }
        out.sort_unstable();
        out.dedup();
        Some(Residual(out))
    }

    /// No clause left.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The clauses once member `i` is known `present` or absent; `None` when one can no
    /// longer hold.
    pub(crate) fn decide(&self, i: u32, present: bool) -> Option<Residual> {
        let clauses = self
            .0
            .iter()
            .map(|c| {
                c.iter()
                    .filter(|(p, a)| if present { !a.contains(&i) } else { !p.contains(&i) })
                    .map(|(p, a)| (p.iter().copied().filter(|&x| x != i).collect(), a.iter().copied().filter(|&x| x != i).collect()))
                    .collect()
            })
            .collect();
        Self::canonical(clauses)
    }

    /// Does every clause hold when no undecided member comes?
    pub(crate) fn ends(&self) -> bool {
        self.0.iter().all(|c| c.iter().any(|(p, _)| p.is_empty()))
    }

    /// Can the undecided members make every clause hold, with the `required` ones present
    /// and at most `room` present in all (`None`: any number), of which `required_after`
    /// are the required ones still to come? Tries every subset of the optional members the
    /// clauses name (at most 2^[`MAX_KEYS`]).
    pub(crate) fn feasible(&self, required: impl Fn(u32) -> bool, required_after: u64, room: Option<u64>) -> bool {
        if room.is_some_and(|r| required_after > r) {
            return false;
        }
        let mut named: Vec<u32> = self.0.iter().flatten().flat_map(|(p, a)| p.iter().chain(a)).copied().collect();
        named.sort_unstable();
        named.dedup();
        let forced: Vec<u32> = named.iter().copied().filter(|&m| required(m)).collect();
        let free: Vec<u32> = named.iter().copied().filter(|&m| !required(m)).collect();
        let spare = room.map_or(u64::MAX, |r| r - required_after);
        (0u32..1 << free.len()).any(|set| {
            if u64::from(set.count_ones()) > spare {
                return false;
            }
            let on = |m: u32| forced.contains(&m) || free.iter().position(|&f| f == m).is_some_and(|k| set >> k & 1 == 1);
            self.0.iter().all(|c| c.iter().any(|(p, a)| p.iter().all(|&m| on(m)) && a.iter().all(|&m| !on(m))))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn presence_only_schemas() {
        assert_eq!(required_only(&json!({"required": ["a", "b", "a"], "description": "x"})), Some(vec!["a".into(), "b".into()]));
        assert_eq!(required_only(&json!({"required": []})), Some(vec![]));
        assert_eq!(required_only(&json!({"required": ["a"], "properties": {}})), None);
        assert_eq!(required_only(&json!({"description": "no required"})), None);
        assert_eq!(required_only(&json!(true)), None);
    }

    #[test]
    fn residual_clauses_follow_decisions() {
        use formwork_grammar::Presence;
        let t = |present: &[u32], absent: &[u32]| Presence { present: present.to_vec(), absent: absent.to_vec() };
        // At least one of 0; 1 and 2. And not 3.
        let r = Residual::new(&[vec![t(&[0], &[]), t(&[1, 2], &[])], vec![t(&[], &[3])]]).unwrap();
        assert!(!r.ends(), "an empty object has neither 0 nor 1 and 2");
        assert!(r.feasible(|_| false, 0, None));
        assert!(!r.feasible(|_| false, 0, Some(0)), "no room for a member");
        let skip0 = r.decide(0, false).unwrap();
        assert!(!skip0.feasible(|_| false, 0, Some(1)), "1 and 2 need room for two");
        assert!(skip0.feasible(|_| false, 0, Some(2)));
        let with0 = r.decide(0, true).unwrap();
        assert!(with0.ends(), "0 present and 3 absent: both clauses hold");
        assert!(with0.decide(3, true).is_none(), "3 may never come");
        // Member 3 required: nothing can hold.
        assert!(!r.feasible(|m| m == 3, 1, None));
        // Decided to the end, the clauses are gone.
        let done = with0.decide(1, false).and_then(|r| r.decide(2, true)).and_then(|r| r.decide(3, false)).unwrap();
        assert!(done.is_empty() && done.ends());
        // Two paths to the same prospects are one residual.
        assert_eq!(r.decide(1, true).and_then(|r| r.decide(2, false)), r.decide(1, false).and_then(|r| r.decide(2, true)));
    }

    #[test]
    fn exactly_one_picks_an_absent_key_of_every_other_branch() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let c = exactly_one(&[s(&["a"]), s(&["b", "c"])]).unwrap();
        assert_eq!(c, vec![(s(&["a"]), s(&["b"])), (s(&["a"]), s(&["c"])), (s(&["b", "c"]), s(&["a"]))]);
        // A branch whose keys include another's can never be the only one.
        let c = exactly_one(&[s(&["a"]), s(&["a", "b"])]).unwrap();
        assert_eq!(c, vec![(s(&["a"]), s(&["b"]))]);
    }
}
