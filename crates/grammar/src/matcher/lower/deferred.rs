//! Deferred rules ([`LazyGrammar`](crate::LazyGrammar)): built when the matcher first
//! reaches them, lowered on their own, and appended to the live [`ByteGrammar`].
//!
//! The base grammar is lowered with its deferred rules *opaque* (no alternatives, taken to
//! match something and not the empty string). When the automaton's closure reaches one,
//! [`Deferred::expand`] asks the [`RuleSource`] for its body and the new rules it needs,
//! and lowers them as a grammar of their own (a *part*) whose root is the expanded rule.
//! The rules the part refers to but does not define (rules of the live grammar, deferred
//! rules not built yet) are opaque *stubs* in it, with the nullability the live grammar
//! knows for them, so the part's checks (nullable, productive, left recursion inside the
//! part, sizes) are the ones the whole grammar would get. The part is then appended: its
//! positions shifted, its byte sets interned into the live table, its rules renumbered
//! (the root becomes the expanded rule, stubs the rules they stand for), with its repeat
//! positions, dispatch tables and unordered families.
//!
//! **Left recursion across the seam.** The part's check sees the cycles inside the part.
//! A cycle through the seam would have to enter the expanded rule at its left edge and come
//! back out through a stub; so the expansion is refused when the root's left edge reaches a
//! stub (a JSON value starts with `{`, `[`, `"`, a digit or a letter, so a schema
//! compiler's deferred rules never do).
//!
//! A part that fails (the source's error, a limit, a check) leaves the rule without
//! alternatives: it then matches nothing, which never widens the language, and the failure
//! is logged. States are only ever built through closures, which expand a rule before they
//! read it, so the states built before an expansion never depend on it.

use super::byte_grammar::NO_DISPATCH;
use super::{lower_with, ByteGrammar, ByteSet, Symbol};
use crate::lazy::RuleSource;
use crate::{Expr, Grammar, Limits, Rule, RuleId};
use formwork_vocab::Vocabulary;
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// The live grammar's deferred rules and their source (kept by the automaton's builder).
pub(crate) struct Deferred {
    /// `None` once every deferred rule is built: the source (a schema compiler, with its copy
    /// of the schema) is then dropped.
    source: Option<Box<dyn RuleSource>>,
    /// Rules of the base grammar: their flat ids equal their ids.
    n_base: u32,
    /// Flat rule of each rule made after the base grammar.
    flat_of: FxHashMap<u32, u32>,
    /// Flat rules still to build, with their ids.
    pending: FxHashMap<u32, u32>,
    /// By flat rule: does it match the empty string?
    nullable: Vec<bool>,
    /// The live byte sets, by set (made on the first expansion).
    set_ids: FxHashMap<ByteSet, u32>,
    vocab: Option<Arc<Vocabulary>>,
    limits: Limits,
}

impl std::fmt::Debug for Deferred {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deferred").field("pending", &self.pending.len()).finish_non_exhaustive()
    }
}

/// Why a part was not appended.
type Failed = String;

impl Deferred {
    /// The deferred rules `deferred` of a base grammar of `n_base` rules, lowered with them
    /// opaque into a grammar whose rules' nullability is `nullable`.
    pub fn new(
        source: Box<dyn RuleSource>,
        deferred: &[RuleId],
        n_base: usize,
        nullable: Vec<bool>,
        vocab: Option<Arc<Vocabulary>>,
        limits: &Limits,
    ) -> Deferred {
        Deferred {
            source: (!deferred.is_empty()).then_some(source),
            n_base: n_base as u32,
            flat_of: FxHashMap::default(),
            pending: deferred.iter().map(|r| (r.0, r.0)).collect(),
            nullable,
            set_ids: FxHashMap::default(),
            vocab,
            limits: limits.clone(),
        }
    }

    /// The opaque rules of the base grammar's lowering (see [`lower_with`]).
    pub fn opaque(deferred: &[RuleId]) -> FxHashMap<u32, bool> {
        deferred.iter().map(|r| (r.0, false)).collect()
    }

    /// Is flat rule `r` still to build?
    pub fn is_pending(&self, r: u32) -> bool {
        self.pending.contains_key(&r)
    }

    fn flat(&self, id: u32) -> Option<u32> {
        if id < self.n_base {
            Some(id)
        } else {
            self.flat_of.get(&id).copied()
        }
    }

    /// Builds flat rule `r` if it is deferred (see the module docs); `false` when it is not.
    pub fn expand(&mut self, flat: &mut ByteGrammar, r: u32) -> bool {
        let Some(id) = self.pending.remove(&r) else { return false };
        if let Err(why) = self.build(flat, r, id) {
            tracing::warn!(rule = %flat.names.get(r), why = %why, "a deferred rule could not be built: it matches nothing");
            flat.opaque.remove(&r);
        }
        if self.pending.is_empty() {
            self.source = None;
        }
        true
    }

    fn build(&mut self, flat: &mut ByteGrammar, r: u32, id: u32) -> Result<(), Failed> {
        let exp = self.source.as_mut().ok_or("no rule source")?.expand(RuleId(id))?;
        // New deferred rules: empty and opaque in the live grammar from now on.
        for (d, name) in &exp.deferred {
            let f = flat.alts.len() as u32;
            flat.alts.push(Vec::new());
            flat.names.push_named(name);
            flat.opaque.insert(f, false);
            // By flat rule (unordered groups' rules made since are never referred to by
            // a part: they are no rules of the source's).
            self.nullable.resize(flat.alts.len(), false);
            self.flat_of.insert(d.0, f);
            self.pending.insert(f, d.0);
        }
        // The part: its rules first, then a stub per rule it refers to and does not define.
        let ids: Vec<u32> = exp.rules.iter().map(|(rid, _)| rid.0).collect();
        let mut index: FxHashMap<u32, u32> = ids.iter().enumerate().map(|(i, &rid)| (rid, i as u32)).collect();
        let root = *index.get(&id).ok_or_else(|| format!("the source did not define rule #{id}"))?;
        let k = exp.rules.len() as u32;
        let mut stubs: Vec<u32> = Vec::new(); // flat rules
        let mut rules: Vec<Rule> = Vec::with_capacity(exp.rules.len());
        let mut missing: Option<u32> = None;
        for (_, mut rule) in exp.rules {
            rename(&mut rule.expr, &mut |x| {
                if let Some(&i) = index.get(&x) {
                    return i;
                }
                let i = k + stubs.len() as u32;
                stubs.push(self.flat(x).unwrap_or_else(|| {
                    missing.get_or_insert(x);
                    0
                }));
                index.insert(x, i);
                i
            });
            rules.push(rule);
        }
        if let Some(x) = missing {
            return Err(format!("the part refers to rule #{x}, which no grammar defines"));
        }
        let mut opaque = FxHashMap::default();
        for (j, &f) in stubs.iter().enumerate() {
            rules.push(Rule { name: flat.names.get(f), expr: Expr::empty() });
            opaque.insert(k + j as u32, self.nullable[f as usize]);
        }
        let g = Grammar::from_rules(rules, RuleId(root)).map_err(|e| e.to_string())?;
        let (part, nullable) = lower_with(&g, self.vocab.as_deref(), &self.limits, opaque).map_err(|e| e.to_string())?;
        // Bounded as one lowering of the whole grammar would be (see `ByteGrammar::lowered`).
        if flat.lowered.0 + part.lowered.0 > self.limits.max_rules {
            return Err(format!("the grammar would need more than {} rules (Limits::max_rules)", self.limits.max_rules));
        }
        if flat.lowered.1 + part.lowered.1 > self.limits.max_elements {
            return Err(format!("the grammar would need more than {} elements (Limits::max_elements)", self.limits.max_elements));
        }
        if nullable[root as usize] {
            return Err("the rule matches the empty string".into());
        }
        if let Some(s) = left_edge_stub(&part, &nullable, root, k, k + stubs.len() as u32) {
            return Err(format!("the rule starts with rule `{}` of the grammar around it", part.names.get(s)));
        }
        flat.lowered.0 += part.lowered.0;
        flat.lowered.1 += part.lowered.1;
        let map = self.append(flat, part, nullable, r, root, k, &stubs);
        for (i, &rid) in ids.iter().enumerate() {
            if rid != id {
                self.flat_of.insert(rid, map[i]);
            }
        }
        Ok(())
    }

    /// Appends lowered part `part` (rules `k..k + stubs.len()` are the stubs for flat rules
    /// `stubs`, rule `root` becomes flat rule `r`); returns the flat rule of each of its
    /// rules.
    #[allow(clippy::too_many_arguments)]
    fn append(&mut self, flat: &mut ByteGrammar, part: ByteGrammar, nullable: Vec<bool>, r: u32, root: u32, k: u32, stubs: &[u32]) -> Vec<u32> {
        if self.set_ids.is_empty() {
            self.set_ids = flat.sets.iter().enumerate().map(|(i, s)| (*s, i as u32)).collect();
        }
        let off = flat.elems.len() as u32;
        let n = part.alts.len() as u32;
        let mut next = flat.alts.len() as u32;
        let map: Vec<u32> = (0..n)
            .map(|i| {
                if i == root {
                    r
                } else if (k..k + stubs.len() as u32).contains(&i) {
                    stubs[(i - k) as usize]
                } else {
                    next += 1;
                    next - 1
                }
            })
            .collect();
        let is_stub = |i: u32| (k..k + stubs.len() as u32).contains(&i);
        // Rules, in the order of their new ids, with their names.
        for i in 0..n {
            if i == root || is_stub(i) {
                continue;
            }
            match part.names.helper(i) {
                Some((parent, what)) => flat.names.push_helper(map[parent as usize], what),
                None => flat.names.push_named(&part.names.get(i)),
            }
        }
        flat.alts.resize(next as usize, Vec::new());
        for i in 0..n {
            if !is_stub(i) {
                flat.alts[map[i as usize] as usize] = part.alts[i as usize].iter().map(|&p| p + off).collect();
            }
        }
        flat.elems.reserve(part.elems.len());
        for e in &part.elems {
            flat.elems.push(match *e {
                Symbol::Bytes(s) => {
                    let set = part.sets[s as usize];
                    let sets = &mut flat.sets;
                    Symbol::Bytes(*self.set_ids.entry(set).or_insert_with(|| {
                        sets.push(set);
                        (sets.len() - 1) as u32
                    }))
                }
                Symbol::Rule(x) => Symbol::Rule(map[x as usize]),
                e => e,
            });
        }
        for (p, mut rp) in part.repeats {
            rp.pos += off;
            flat.repeats.insert(p + off, rp);
        }
        flat.dispatch_of.resize(flat.alts.len(), NO_DISPATCH);
        for (i, &d) in part.dispatch_of.iter().enumerate() {
            if d == NO_DISPATCH {
                continue;
            }
            let mut t = part.dispatches[d as usize].clone();
            for a in t.alt_at.iter_mut().filter(|a| **a != NO_DISPATCH) {
                *a += off;
            }
            for a in t.alts.iter_mut() {
                a.0 += off;
            }
            flat.dispatch_of[map[i] as usize] = flat.dispatches.len() as u32;
            flat.dispatches.push(t);
        }
        flat.lazy.append(part.lazy, |x| map[x as usize], off);
        flat.opaque.remove(&r);
        self.nullable.resize(flat.alts.len(), false);
        for i in 0..n {
            if !is_stub(i) {
                self.nullable[map[i as usize] as usize] = nullable[i as usize];
            }
        }
        map
    }
}

/// A stub (rules `stubs`) that `root`'s left edge reaches in `part`, through nullable
/// prefixes.
fn left_edge_stub(part: &ByteGrammar, nullable: &[bool], root: u32, first: u32, end: u32) -> Option<u32> {
    let mut seen = vec![false; part.alts.len()];
    let mut work = vec![root];
    seen[root as usize] = true;
    while let Some(x) = work.pop() {
        if (first..end).contains(&x) {
            return Some(x);
        }
        for &s in &part.alts[x as usize] {
            let mut p = s as usize;
            while let Symbol::Rule(y) = part.elems[p] {
                if !std::mem::replace(&mut seen[y as usize], true) {
                    work.push(y);
                }
                if !nullable[y as usize] {
                    break;
                }
                p += 1;
            }
        }
    }
    None
}

/// Renames every rule `e` refers to, by `f` (iterative: bodies may nest deeply).
fn rename(e: &mut Expr, f: &mut impl FnMut(u32) -> u32) {
    let mut stack: Vec<&mut Expr> = vec![e];
    while let Some(e) = stack.pop() {
        match e {
            Expr::Rule(id) => id.0 = f(id.0),
            Expr::Seq(v) | Expr::Alt(v) => stack.extend(v.iter_mut()),
            Expr::Repeat { expr, .. } => stack.push(expr),
            Expr::Unordered(u) => {
                let u = &mut **u;
                stack.extend(u.members.iter_mut().map(|(e, _)| e));
                stack.extend(u.extra.iter_mut());
                stack.push(&mut u.sep);
            }
            Expr::Literal(_) | Expr::Class(_) | Expr::Token(_) | Expr::NotToken(_) => {}
        }
    }
}
