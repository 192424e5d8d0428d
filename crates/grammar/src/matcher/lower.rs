//! Lowering: the [`Grammar`] IR → [`ByteGrammar`], a byte-level grammar of rules, alternatives and
//! elements, plus the checks that make the pushdown matcher terminate.
//!
//! - Literals become one [`Symbol::Bytes`] per byte; Unicode classes become byte-range
//!   sequences through `regex_syntax::utf8::Utf8Sequences` (single-byte ranges merged into
//!   one byte set; multi-byte sequences with equal tails merged on their lead byte; the
//!   result is one element or a helper rule whose alternatives start on disjoint lead bytes,
//!   which the automaton treats as one terminal: a *dispatch* rule, see `Dispatch`).
//! - Alternatives that start with the same element are left-factored (`X a | X b` becomes
//!   `X (a | b)`), so a state holds one stack for all of them until they differ.
//! - `Alt` inside a sequence becomes a helper rule. `e{m,n}` becomes `m` copies of a unit
//!   (`e`, or a helper rule for it) then a chain of `n - m` optional helpers (`O_k ::= e O_{k-1} | ε`);
//!   `e{m,}` becomes `m` copies then `S ::= e S | ε`. A repetition of a repetition is first
//!   collapsed into one wherever the languages are equal (`((e*){0,99}){0,99}` is `e*`; see
//!   `collapse_repeats`). Right recursion in tail position does not grow the stack (the
//!   matcher pushes no return frame for a rule that ends an alternative).
//! - Checks: the root must match something; left recursion (a rule reaching itself at its
//!   left edge through nullable prefixes, with at least one frame pushed on the way) is refused
//!   with the cycle named; sizes are bounded by [`Limits`].
//!
//! - Bounded repetitions also get, for masks only, an equivalent loop rule and a map from
//!   their frame positions to it (module `repeats`): a state deep inside `e{0,100}` has
//!   the same mask as the state inside `e*` for every token shorter than the count left.
//!
//! Everything here is iterative or recursion bounded by the nesting limit, and linear in the
//! size of the lowered grammar (the analyses are worklist fixpoints and Tarjan's SCC).

use super::error::CompileError;
use crate::{Expr, Grammar, Limits, TokenRef};
use formwork_vocab::{TokenId, Vocabulary};
use regex_syntax::utf8::Utf8Sequences;
use rustc_hash::FxHashMap;

mod checks;
mod byte_grammar;
mod deferred;
mod repeats;
mod unordered;
pub(crate) use checks::nullable;
use checks::check;
pub(crate) use byte_grammar::{ByteGrammar, ByteSet, RuleNames, Symbol};
use repeats::Chain;
pub(crate) use repeats::RepeatPos;
pub(crate) use deferred::Deferred;

/// A rule's body while lowering.
enum Body {
    /// Alternatives as element lists.
    Alts(Vec<Vec<Symbol>>),
    /// `unit next | ε` (`unit | ε` without `next`): a step of a bounded repetition's chain, or
    /// a star (`next` itself), the bulk of most lowered grammars, kept without allocating.
    Opt { unit: Symbol, next: Option<u32> },
}

struct Lowerer<'a> {
    limits: &'a Limits,
    vocab: Option<&'a Vocabulary>,
    /// Indexed by rule: its body (alternatives as element lists).
    rules: Vec<Body>,
    names: RuleNames,
    /// Indexed by rule: the user rule it was made for.
    origin: Vec<u32>,
    sets: Vec<ByteSet>,
    set_ids: FxHashMap<ByteSet, u32>,
    /// `set_ids` of the single-byte sets (`u32::MAX`: none yet): every literal byte asks.
    single_ids: [u32; 256],
    class_cache: FxHashMap<Vec<(char, char)>, Symbol>,
    /// The rules made for classes (their alternatives start on disjoint lead bytes).
    class_rules: Vec<u32>,
    n_elems: usize,
    cur: u32,
    /// Chains of optional copies made for `e{m,n}`.
    chains: Vec<Chain>,
    /// Unordered groups: start rule and family (installed after flattening).
    groups: Vec<(u32, unordered::Family)>,
}

/// `body{min,max}` where `body` may itself be a repetition, rewritten as one repetition of
/// an inner body wherever the languages are equal. Nested repetitions of a nullable body are
/// otherwise ambiguous (`(([^x]*){0,99}){0,99}` reaches the empty string 99² ways, so the
/// matcher's stacks multiply), though their language is often that of the inner one alone.
///
/// With `X = Y{a,b}`, `X^k = Y{ka,kb}`, so `X{m,n}` is the union of `Y{ka,kb}` for
/// `m ≤ k ≤ n`. That union is one repetition of `Y` in these cases, taken from the
/// innermost pair outwards:
/// - `n = 0`: the empty string, `Y{0,0}`;
/// - `a = 0` (`Y*`, `Y?`, `Y{0,b}`): the intervals `[0, kb]` are nested, so `Y{0,nb}`
///   (unbounded when `n` or `b` is; kept apart when `nb` exceeds `max_repeat`);
/// - `a = 1, b = ∞` (`Y+`): the intervals `[k, ∞)` are nested, so `Y{m,}`.
///
/// Elsewhere the union can have gaps (`(Y{2}){0,2}` is `Y{0}`, `Y{2}` or `Y{4}`), and that
/// pair stays nested (a pair further out may still collapse onto it). The chain is at most
/// the nesting limit deep.
fn collapse_repeats(body: &Expr, min: u32, max: Option<u32>, max_repeat: u32) -> (&Expr, u32, Option<u32>) {
    // `layers[i]`: the bounds of the i-th repetition from the outside, and the body it repeats.
    let mut layers = vec![(body, min, max)];
    while let Expr::Repeat { expr, min, max } = layers[layers.len() - 1].0 {
        layers.push((expr, *min, *max));
    }
    let combine = |(a, b): (u32, Option<u32>), (m, n): (u32, Option<u32>)| -> Option<(u32, Option<u32>)> {
        match (a, b, n) {
            (_, _, Some(0)) | (0, Some(0), _) => Some((0, Some(0))),
            (0, Some(b), Some(n)) => b.checked_mul(n).filter(|&p| p <= max_repeat).map(|p| (0, Some(p))),
            (0, _, _) => Some((0, None)),
            (1, None, _) => Some((m, None)),
            _ => None,
        }
    };
    let (mut body, mut a, mut b) = layers[layers.len() - 1];
    for &(outer_body, m, n) in layers.iter().rev().skip(1) {
        match combine((a, b), (m, n)) {
            Some((a2, b2)) => (a, b) = (a2, b2),
            None => (body, a, b) = (outer_body, m, n),
        }
    }
    (body, a, b)
}

/// Lowers `g`. With a vocabulary, named tokens are resolved (an unknown one is an error);
/// without, token elements never match.
pub(crate) fn lower(
    g: &Grammar,
    vocab: Option<&Vocabulary>,
    limits: &Limits,
) -> Result<ByteGrammar, CompileError> {
    lower_with(g, vocab, limits, FxHashMap::default()).map(|(flat, _)| flat)
}

/// [`lower`], with *opaque* rules: the user rules in `opaque` (by id, with whether they
/// match the empty string) are left without alternatives and assumed to match something
/// (module `deferred`: rules built on first use, and the rules of the live grammar that
/// a part lowered on its own refers to). Also returns which rules are nullable.
pub(crate) fn lower_with(
    g: &Grammar,
    vocab: Option<&Vocabulary>,
    limits: &Limits,
    opaque: FxHashMap<u32, bool>,
) -> Result<(ByteGrammar, Vec<bool>), CompileError> {
    let n_user = g.rules().len();
    let mut lw = Lowerer {
        limits,
        vocab,
        rules: (0..n_user).map(|_| Body::Alts(Vec::new())).collect(),
        names: RuleNames::new(g.rules().iter().map(|r| r.name.clone()).collect()),
        origin: (0..n_user as u32).collect(),
        sets: Vec::new(),
        set_ids: FxHashMap::default(),
        single_ids: [u32::MAX; 256],
        class_cache: FxHashMap::default(),
        class_rules: Vec::new(),
        n_elems: 0,
        cur: 0,
        chains: Vec::new(),
        groups: Vec::new(),
    };
    if n_user > limits.max_rules {
        return Err(CompileError::TooManyRules {
            rule: g.rule(g.root()).name.clone(),
            limit: limits.max_rules,
        });
    }
    for (i, rule) in g.rules().iter().enumerate() {
        if opaque.contains_key(&(i as u32)) {
            continue;
        }
        lw.cur = i as u32;
        let alts: Vec<&Expr> = match &rule.expr {
            Expr::Alt(v) => v.iter().collect(),
            e => vec![e],
        };
        let mut lowered = Vec::with_capacity(alts.len());
        for a in alts {
            let mut out = Vec::new();
            lw.seq(a, &mut out, 0)?;
            lowered.push(out);
        }
        lw.rules[i] = Body::Alts(lowered);
    }
    lw.factor_prefixes();
    let mut flat = lw.flatten(g.root().0);
    flat.opaque = opaque;
    flat.add_dispatches(&std::mem::take(&mut lw.class_rules));
    for (start, fam) in std::mem::take(&mut lw.groups) {
        flat.add_family(start, fam);
        let o = lw.origin[start as usize];
        lw.origin.resize(flat.alts.len(), o);
    }
    // Decided before the loop rules are added: they are reached only through `flat.repeats`,
    // never from the root, so the root's language is the same with them.
    let (nullable, productive) = checks::nullable_and_productive(&flat);
    if !productive[flat.root as usize] {
        return Err(CompileError::MatchesNothing { rule: flat.names.get(flat.root) });
    }
    let nullable = repeats::add_loops(&mut flat, &lw.chains, &mut lw.origin, limits, nullable);
    check(&flat, &lw.origin, &nullable)?;
    Ok((flat, nullable))
}

impl Lowerer<'_> {
    fn err_name(&self) -> String {
        self.names.get(self.origin[self.cur as usize])
    }

    fn push(&mut self, out: &mut Vec<Symbol>, e: Symbol) -> Result<(), CompileError> {
        self.n_elems += 1;
        if self.n_elems > self.limits.max_elements {
            return Err(CompileError::TooManyElements {
                rule: self.err_name(),
                limit: self.limits.max_elements,
            });
        }
        out.push(e);
        Ok(())
    }

    fn new_rule(&mut self, what: &'static str) -> Result<u32, CompileError> {
        if self.rules.len() >= self.limits.max_rules {
            return Err(CompileError::TooManyRules {
                rule: self.err_name(),
                limit: self.limits.max_rules,
            });
        }
        let id = self.rules.len() as u32;
        let origin = self.origin[self.cur as usize];
        self.names.push_helper(origin, what);
        self.origin.push(origin);
        self.rules.push(Body::Alts(Vec::new()));
        self.n_elems += 1; // each alternative's End is counted with its rule
        Ok(id)
    }

    fn set_id(&mut self, s: ByteSet) -> u32 {
        if let Some(&i) = self.set_ids.get(&s) {
            return i;
        }
        let i = self.sets.len() as u32;
        self.sets.push(s);
        self.set_ids.insert(s, i);
        i
    }

    /// Appends the lowering of `e` to `out`. Iterative (an explicit task stack), so deep
    /// expressions cannot overflow the thread's stack; depth is bounded by the nesting limit.
    fn seq(&mut self, e: &Expr, out: &mut Vec<Symbol>, depth: usize) -> Result<(), CompileError> {
        enum Task<'e> {
            /// Lower `expr` into buffer `buf` at nesting `depth`.
            Lower(&'e Expr, usize, usize),
            /// Buffers `first..first + n` are the branches of rule `rule`; append it to `out`.
            Alt {
                rule: u32,
                first: usize,
                n: usize,
                out: usize,
            },
            /// Buffer `unit` is a repeated expression; append the repetition to `out`.
            Repeat {
                unit: usize,
                min: u32,
                max: Option<u32>,
                out: usize,
            },
        }
        let max_depth = self.limits.max_nesting.saturating_mul(4).max(64);
        let mut bufs: Vec<Vec<Symbol>> = vec![std::mem::take(out)];
        let mut tasks = vec![Task::Lower(e, 0, depth)];
        while let Some(t) = tasks.pop() {
            match t {
                Task::Lower(e, buf, depth) => {
                    if depth > max_depth {
                        return Err(CompileError::NestingTooDeep {
                            rule: self.err_name(),
                            limit: max_depth,
                        });
                    }
                    match e {
                        Expr::Literal(s) => {
                            for b in s.bytes() {
                                let id = match self.single_ids[b as usize] {
                                    u32::MAX => {
                                        let id = self.set_id(ByteSet::single(b));
                                        self.single_ids[b as usize] = id;
                                        id
                                    }
                                    id => id,
                                };
                                self.push_buf(&mut bufs[buf], Symbol::Bytes(id))?;
                            }
                        }
                        Expr::Class(r) => {
                            let el = self.class_elem(r)?;
                            self.push_buf(&mut bufs[buf], el)?;
                        }
                        Expr::Seq(v) => {
                            tasks.extend(v.iter().rev().map(|x| Task::Lower(x, buf, depth + 1)))
                        }
                        Expr::Alt(v) => {
                            let rule = self.new_rule("alt")?;
                            let first = bufs.len();
                            bufs.extend(v.iter().map(|_| Vec::new()));
                            tasks.push(Task::Alt {
                                rule,
                                first,
                                n: v.len(),
                                out: buf,
                            });
                            tasks.extend(
                                v.iter()
                                    .enumerate()
                                    .rev()
                                    .map(|(i, x)| Task::Lower(x, first + i, depth + 1)),
                            );
                        }
                        Expr::Rule(id) => self.push_buf(&mut bufs[buf], Symbol::Rule(id.0))?,
                        Expr::Unordered(u) => {
                            let r = self.unordered(u, depth)?;
                            self.push_buf(&mut bufs[buf], Symbol::Rule(r))?;
                        }
                        Expr::Token(t) => {
                            let id = self.token(t)?;
                            self.push_buf(&mut bufs[buf], Symbol::Token(id))?;
                        }
                        Expr::NotToken(t) => {
                            let id = self.token(t)?;
                            let el = if self.vocab.is_some() { Symbol::NotToken(id) } else { Symbol::Token(id) };
                            self.push_buf(&mut bufs[buf], el)?;
                        }
                        Expr::Repeat { expr, min, max } => {
                            let limit = self.limits.max_repeat;
                            let (expr, min, max) = collapse_repeats(expr, *min, *max, limit);
                            let biggest = max.unwrap_or(min).max(min);
                            if biggest > limit {
                                return Err(CompileError::RepeatTooLarge {
                                    rule: self.err_name(),
                                    count: biggest,
                                    limit,
                                });
                            }
                            let unit = bufs.len();
                            bufs.push(Vec::new());
                            tasks.push(Task::Repeat {
                                unit,
                                min,
                                max,
                                out: buf,
                            });
                            tasks.push(Task::Lower(expr, unit, depth + 1));
                        }
                    }
                }
                Task::Alt {
                    rule,
                    first,
                    n,
                    out,
                } => {
                    let alts: Vec<Vec<Symbol>> = bufs[first..first + n]
                        .iter_mut()
                        .map(std::mem::take)
                        .collect();
                    self.rules[rule as usize] = Body::Alts(alts);
                    self.push_buf(&mut bufs[out], Symbol::Rule(rule))?;
                }
                Task::Repeat {
                    unit,
                    min,
                    max,
                    out,
                } => {
                    let unit = std::mem::take(&mut bufs[unit]);
                    let mut o = std::mem::take(&mut bufs[out]);
                    self.repeat(unit, min, max, &mut o)?;
                    bufs[out] = o;
                }
            }
        }
        *out = std::mem::take(&mut bufs[0]);
        Ok(())
    }

    fn push_buf(&mut self, out: &mut Vec<Symbol>, e: Symbol) -> Result<(), CompileError> {
        self.push(out, e)
    }

    fn repeat(
        &mut self,
        unit: Vec<Symbol>,
        min: u32,
        max: Option<u32>,
        out: &mut Vec<Symbol>,
    ) -> Result<(), CompileError> {
        let unit = if unit.len() == 1 {
            unit[0]
        } else {
            let r = self.new_rule("group")?;
            self.rules[r as usize] = Body::Alts(vec![unit]);
            Symbol::Rule(r)
        };
        // Mandatory copies before a long chain go into a helper rule that ends with the
        // chain, `R ::= unit^min O_{n-min}`, so that the frame under the last mandatory
        // unit has a loop equivalent (see `repeats`).
        let wrap = matches!(max, Some(n) if min >= 1 && n - min >= repeats::MIN_BUDGET);
        let mut body = Vec::new();
        let target: &mut Vec<Symbol> = if wrap { &mut body } else { out };
        for _ in 0..min {
            self.push(target, unit)?;
        }
        match max {
            None => {
                let s = self.new_rule("star")?;
                self.n_elems += 2;
                self.rules[s as usize] = Body::Opt { unit, next: Some(s) };
                self.push(out, Symbol::Rule(s))?;
            }
            Some(n) => {
                let mut prev: Option<u32> = None;
                let first = self.rules.len() as u32;
                for _ in min..n {
                    let o = self.new_rule("opt")?;
                    self.n_elems += 2 + usize::from(prev.is_some());
                    if self.n_elems > self.limits.max_elements {
                        return Err(CompileError::TooManyElements {
                            rule: self.err_name(),
                            limit: self.limits.max_elements,
                        });
                    }
                    self.rules[o as usize] = Body::Opt { unit, next: prev };
                    prev = Some(o);
                }
                if let Some(p) = prev {
                    // `O_j` (j optional copies left) is rule `first + j - 1`.
                    let mut entry = None;
                    if wrap {
                        self.push(&mut body, Symbol::Rule(p))?;
                        let r = self.new_rule("rep")?;
                        self.rules[r as usize] = Body::Alts(vec![body]);
                        self.push(out, Symbol::Rule(r))?;
                        entry = Some(r);
                    } else {
                        self.push(out, Symbol::Rule(p))?;
                    }
                    self.chains.push(Chain {
                        first,
                        count: n - min,
                        unit,
                        entry,
                    });
                }
            }
        }
        Ok(())
    }

    /// An unordered group: one rule per member, extra and separator, and the family's start
    /// rule (left without alternatives until [`ByteGrammar::add_family`]).
    fn unordered(&mut self, u: &crate::Unordered, depth: usize) -> Result<u32, CompileError> {
        let rule_of = |lw: &mut Self, e: &Expr, what: &'static str| -> Result<u32, CompileError> {
            let r = lw.new_rule(what)?;
            let mut out = Vec::new();
            lw.seq(e, &mut out, depth + 1)?;
            lw.rules[r as usize] = Body::Alts(vec![out]);
            Ok(r)
        };
        let mut members = Vec::with_capacity(u.members.len());
        let mut required = vec![0u64; unordered::words(u.members.len())];
        for (i, (m, req)) in u.members.iter().enumerate() {
            members.push(rule_of(self, m, "member")?);
            if *req {
                required[i / 64] |= 1 << (i % 64);
            }
        }
        let extra = match &u.extra {
            Some(x) => Some(rule_of(self, x, "extra")?),
            None => None,
        };
        let sep = rule_of(self, &u.sep, "sep")?;
        let start = self.new_rule("unordered")?;
        let presence = (!u.presence.is_empty()).then(|| {
            let w = unordered::words(u.members.len());
            let bits = |ix: &[u32]| {
                let mut b = vec![0u64; w].into_boxed_slice();
                for &i in ix {
                    b[i as usize / 64] |= 1 << (i % 64);
                }
                b
            };
            let clauses = u.presence.iter().map(|c| c.iter().map(|t| (bits(&t.present), bits(&t.absent))).collect()).collect();
            let mut relevant: Vec<u32> = u.presence.iter().flatten().flat_map(|t| t.present.iter().chain(&t.absent).copied()).collect();
            relevant.sort_unstable();
            relevant.dedup();
            std::sync::Arc::new(unordered::Clauses { clauses, relevant: relevant.into_boxed_slice() })
        });
        let fam = unordered::Family {
            members: members.into_boxed_slice(),
            required: required.into_boxed_slice(),
            extra,
            sep,
            min: u.min,
            max: u.max,
            start,
            presence,
        };
        self.groups.push((start, fam));
        Ok(start)
    }

    #[inline(never)]
    fn token(&mut self, t: &TokenRef) -> Result<TokenId, CompileError> {
        let Some(v) = self.vocab else {
            return Ok(TokenId(u32::MAX));
        };
        let found = match t {
            TokenRef::Id(id) => (id.index() < v.len()).then_some(*id),
            TokenRef::Name(n) => v
                .special_by_name(n)
                .or_else(|| v.ids().find(|&t| v.token_bytes(t) == n.as_bytes())),
        };
        found.ok_or_else(|| CompileError::UnknownToken {
            rule: self.err_name(),
            token: match t {
                TokenRef::Id(id) => format!("<[{id}]>"),
                TokenRef::Name(n) => n.clone(),
            },
        })
    }

    #[inline(never)]
    fn class_elem(&mut self, ranges: &[(char, char)]) -> Result<Symbol, CompileError> {
        if let Some(&e) = self.class_cache.get(ranges) {
            return Ok(e);
        }
        let mut single = ByteSet::default();
        // Multi-byte sequences keyed by their tail; lead bytes merged.
        let mut multi: Vec<(ByteSet, Vec<(u8, u8)>)> = Vec::new();
        for &(a, b) in ranges {
            for seq in Utf8Sequences::new(a, b) {
                let s = seq.as_slice();
                if s.len() == 1 {
                    single.insert_range(s[0].start, s[0].end);
                    continue;
                }
                let tail: Vec<(u8, u8)> = s[1..].iter().map(|r| (r.start, r.end)).collect();
                match multi.iter_mut().find(|(_, t)| *t == tail) {
                    Some((lead, _)) => lead.insert_range(s[0].start, s[0].end),
                    None => {
                        let mut lead = ByteSet::default();
                        lead.insert_range(s[0].start, s[0].end);
                        multi.push((lead, tail));
                    }
                }
            }
        }
        let e = if multi.is_empty() {
            Symbol::Bytes(self.set_id(single))
        } else {
            let r = self.new_rule("class")?;
            let mut alts = Vec::new();
            if !single.is_empty() {
                alts.push(vec![Symbol::Bytes(self.set_id(single))]);
            }
            for (lead, tail) in multi {
                let mut a = vec![Symbol::Bytes(self.set_id(lead))];
                for (lo, hi) in tail {
                    let mut s = ByteSet::default();
                    s.insert_range(lo, hi);
                    a.push(Symbol::Bytes(self.set_id(s)));
                }
                self.n_elems += a.len() + 1;
                alts.push(a);
            }
            self.rules[r as usize] = Body::Alts(alts);
            self.class_rules.push(r);
            Symbol::Rule(r)
        };
        self.class_cache.insert(ranges.to_vec(), e);
        Ok(e)
    }

    /// Left-factors every rule's alternatives: those that start with the same element share
    /// their longest common prefix, followed by a helper rule of what is left of each
    /// (`X a | X b | c` becomes `X H | c` with `H ::= a | b`, and `H` is factored in turn).
    /// The language is the same, and so is every left edge (the first element stays first),
    /// so the checks that follow see the same recursion. What it saves is stacks: a state
    /// holds one stack per alternative that can go on, so the twelve escapes of a JSON
    /// string (`\"`, `\\`, …, `\uXXXX`), each a stack on `\` in every string state, or an
    /// enum's literals that all begin with `"`, become one stack until the first byte where
    /// they differ; every closure and step through such a state is that much cheaper.
    /// Bounded by the rule limit: past it the rest is left as it is.
    fn factor_prefixes(&mut self) {
        let mut group_of: FxHashMap<Symbol, u32> = FxHashMap::default();
        // Per alternative of the rule at hand: (its group, its index); groups are numbered
        // in order of first appearance, so sorting keeps the alternatives' order within each.
        let mut order: Vec<(u32, u32)> = Vec::new();
        // Rules made here are appended, and factored in turn.
        let mut r = 0;
        while r < self.rules.len() {
            let Body::Alts(alts) = &self.rules[r] else {
                r += 1;
                continue;
            };
            // Most rules have no shared first element: find out without allocating.
            let shared = match alts.len() {
                0 | 1 => false,
                n if n <= 8 => (1..n).any(|i| alts[i].first().is_some_and(|e| alts[..i].iter().any(|a| a.first() == Some(e)))),
                _ => {
                    group_of.clear();
                    alts.iter().any(|a| a.first().is_some_and(|&e| group_of.insert(e, 0).is_some()))
                }
            };
            if !shared || self.rules.len() >= self.limits.max_rules {
                r += 1;
                continue;
            }
            group_of.clear();
            order.clear();
            for (i, a) in alts.iter().enumerate() {
                // An empty alternative is a group of its own.
                let next = (group_of.len() + order.len()) as u32;
                let g = match a.first() {
                    Some(&e) => *group_of.entry(e).or_insert(next),
                    None => next,
                };
                order.push((g, i as u32));
            }
            order.sort_unstable();
            let Body::Alts(mut alts) = std::mem::replace(&mut self.rules[r], Body::Alts(Vec::new())) else {
                unreachable!("matched above")
            };
            let mut out: Vec<Vec<Symbol>> = Vec::new();
            let mut k = 0;
            while k < order.len() {
                let g = order[k].0;
                let end = k + order[k..].iter().take_while(|x| x.0 == g).count();
                let members = &order[k..end];
                k = end;
                if members.len() < 2 || self.rules.len() >= self.limits.max_rules {
                    out.extend(members.iter().map(|&(_, i)| std::mem::take(&mut alts[i as usize])));
                    continue;
                }
                let first = &alts[members[0].1 as usize];
                let lcp = members[1..]
                    .iter()
                    .map(|&(_, i)| first.iter().zip(&alts[i as usize]).take_while(|(a, b)| a == b).count())
                    .min()
                    .unwrap_or(0);
                let h = self.rules.len() as u32;
                self.names.push_helper(self.origin[r], "factor");
                self.origin.push(self.origin[r]);
                let mut prefix = first[..lcp].to_vec();
                prefix.push(Symbol::Rule(h));
                // The suffixes reuse the alternatives' own buffers.
                let rest: Vec<Vec<Symbol>> = members
                    .iter()
                    .map(|&(_, i)| {
                        let mut a = std::mem::take(&mut alts[i as usize]);
                        a.drain(..lcp);
                        a
                    })
                    .collect();
                self.rules.push(Body::Alts(rest));
                out.push(prefix);
            }
            self.rules[r] = Body::Alts(out);
            r += 1;
        }
    }

    fn flatten(&mut self, root: u32) -> ByteGrammar {
        let mut elems = Vec::with_capacity(self.n_elems + 1);
        let mut alts = Vec::with_capacity(self.rules.len());
        for r in &self.rules {
            match r {
                Body::Alts(r) => {
                    let mut starts = Vec::with_capacity(r.len());
                    for a in r {
                        starts.push(elems.len() as u32);
                        elems.extend_from_slice(a);
                        elems.push(Symbol::End);
                    }
                    alts.push(starts);
                }
                Body::Opt { unit, next } => {
                    let first = elems.len() as u32;
                    elems.push(*unit);
                    elems.extend(next.map(Symbol::Rule));
                    elems.push(Symbol::End);
                    alts.push(vec![first, elems.len() as u32]);
                    elems.push(Symbol::End);
                }
            }
        }
        ByteGrammar {
            elems,
            sets: std::mem::take(&mut self.sets),
            alts,
            names: std::mem::take(&mut self.names),
            root,
            repeats: FxHashMap::default(),
            lazy: Default::default(),
            opaque: FxHashMap::default(),
            dispatch_of: Vec::new(),
            dispatches: Vec::new(),
            lowered: (self.rules.len(), self.n_elems),
        }
    }
}

#[cfg(test)]
mod tests;
