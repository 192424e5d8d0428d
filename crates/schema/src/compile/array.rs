//! Arrays: positional items (`prefixItems`, array-form `items`), the rest (`items`,
//! `additionalItems`), counts, `contains` (at least one match, by position of the first hit) and
//! `uniqueItems` over small finite item domains (one rule per set of values used so far;
//! elsewhere refused, or under lenient mode ignored with a warning, which only widens).

use crate::compiler::{Compiler, CompileResult};
use crate::conjunct::Conjunct;
use crate::exprs::{alt_of, invalid, is_nothing, nothing, seq_of};
use crate::layout::Seps;
use crate::json_types::{as_count, type_bits, JsonTypes};
use formwork_grammar::Expr;
use serde_json::Value;

/// The array type of the conjunction `parts`, a container laid out with `seps` (its items
/// are compiled one level deeper: the caller runs this in [`Compiler::nested`]).
pub(crate) fn compile(cx: &mut Compiler, parts: &[Conjunct], seps: &Seps) -> CompileResult<Expr> {
    let sep = seps.comma.clone();
    let (mut min, mut max): (u64, Option<u64>) = (0, None);
    let mut k = 0usize; // positional items
    let mut unique = false;
    let mut contains: Vec<Conjunct> = Vec::new();
    let mut min_contains: u64 = 1;
    for p in parts {
        if let Some(v) = p.get("minItems") {
            min = min.max(as_count(v).ok_or_else(|| invalid("minItems", "must be a non-negative integer", p.kw_ptr("minItems")))?);
        }
        if let Some(v) = p.get("maxItems") {
            let n = as_count(v).ok_or_else(|| invalid("maxItems", "must be a non-negative integer", p.kw_ptr("maxItems")))?;
            max = Some(max.map_or(n, |m| m.min(n)));
        }
        if p.get("uniqueItems") == Some(&Value::Bool(true)) {
            unique = true;
        }
        if let Some(a) = p.get("prefixItems").and_then(|x| x.as_array()) {
            k = k.max(a.len());
        } else if let Some(a) = p.get("items").and_then(|x| x.as_array()) {
            k = k.max(a.len());
        }
        if p.get("contains").is_some() {
            contains.push(p.sub("/contains"));
            if let Some(v) = p.get("minContains") {
                min_contains = as_count(v).ok_or_else(|| invalid("minContains", "must be a non-negative integer", p.kw_ptr("minContains")))?;
            }
            if p.get("maxContains").is_some() {
                cx.refuse("maxContains", "counting non-matching items needs the complement of `contains`", p.kw_ptr("maxContains"))?;
            }
        }
    }
    if max.is_some_and(|m| m < min) {
        return Ok(nothing());
    }
    // Schema parts for position j (None = rest).
    let at_pos = |j: Option<usize>| -> Vec<Conjunct> {
        let mut v = Vec::new();
        for p in parts {
            let Some(o) = p.obj() else { continue };
            if let Some(a) = o.get("prefixItems").and_then(|x| x.as_array()) {
                match j {
                    Some(j) if j < a.len() => v.push(p.sub(&format!("/prefixItems/{j}"))),
                    _ => {
                        if o.contains_key("items") {
                            v.push(p.sub("/items"));
                        }
                    }
                }
            } else if let Some(a) = o.get("items").and_then(|x| x.as_array()) {
                match j {
                    Some(j) if j < a.len() => v.push(p.sub(&format!("/items/{j}"))),
                    _ => {
                        if o.contains_key("additionalItems") {
                            v.push(p.sub("/additionalItems"));
                        }
                    }
                }
            } else if o.contains_key("items") {
                v.push(p.sub("/items"));
            }
        }
        v
    };
    let rest_parts = at_pos(None);
    let rest = cx.schema(rest_parts.clone())?;
    let max_total = if is_nothing(&rest) { Some(max.map_or(k as u64, |m| m.min(k as u64))) } else { max };
    if max_total.is_some_and(|m| m < min) {
        return Ok(nothing());
    }
    let mut pos = Vec::new();
    for j in 0..k {
        pos.push(cx.schema(at_pos(Some(j)))?);
    }
    if !contains.is_empty() && min_contains > 0 {
        if k > 0 || unique || min > 1 || max.is_some() || min_contains > 1 || contains.len() > 1 {
            cx.refuse("contains", "contains together with positional items, uniqueItems, item counts or minContains > 1", contains[0].at.clone())?;
        } else {
            let mut hp = rest_parts.clone();
            hp.push(contains[0].clone());
            let hit = cx.schema(hp)?;
            if is_nothing(&hit) {
                return Ok(nothing());
            }
            let before = Expr::star(Expr::seq([rest.clone(), sep.clone()]));
            let after = Expr::star(Expr::seq([sep.clone(), rest.clone()]));
            let body = if is_nothing(&rest) { hit } else { Expr::seq([before, hit, after]) };
            return Ok(seps.wrap("[", body, false, "]"));
        }
    }
    if unique && max_total.is_none_or(|m| m > 1) {
        if let Some(e) = unique_items(cx, parts, &rest_parts, k, min, max_total, seps)? {
            return Ok(e);
        }
        // Lenient and not enforced: the array as if `uniqueItems` were absent (wider, never narrower).
    }
    // Positional items then the rest: the items when there is at least one, and whether
    // there may be none.
    let rest_min = min.saturating_sub(k as u64);
    let rest_max = max_total.map(|m| m.saturating_sub(k as u64));
    let no_rest = max_total.is_some_and(|m| m <= k as u64) || is_nothing(&rest);
    if k == 0 {
        if no_rest {
            return Ok(seps.empty("[", "]"));
        }
        let more = crate::chars::rep(cx, Expr::seq([sep.clone(), rest.clone()]), rest_min.saturating_sub(1), rest_max.map(|m| m.saturating_sub(1)))?;
        return Ok(seps.wrap("[", Expr::seq([rest.clone(), more]), rest_min == 0, "]"));
    }
    if rest_min > 0 && is_nothing(&rest) {
        return Ok(nothing());
    }
    let mut tail = if no_rest { Expr::empty() } else { crate::chars::rep(cx, Expr::seq([sep.clone(), rest.clone()]), rest_min, rest_max)? };
    // Build from the last positional item backwards; `tail` is what may follow item j.
    let kk = max_total.map_or(k, |m| (m as usize).min(k));
    if kk == 0 {
        return Ok(seps.empty("[", "]"));
    }
    for j in (1..kk).rev() {
        let item = seq_of(vec![sep.clone(), pos[j].clone(), tail]);
        tail = if (j as u64) >= min { alt_of(vec![Expr::empty(), item]) } else { item };
    }
    Ok(seps.wrap("[", seq_of(vec![pos[0].clone(), tail]), min == 0, "]"))
}

/// Most distinct item values `uniqueItems` is enforced over with one rule per set of values
/// used so far (2^8 rules).
const MAX_UNIQUE_SETS: usize = 8;
/// Most distinct item values `uniqueItems` is enforced over at all.
const MAX_UNIQUE_VALUES: usize = 256;
/// Most (value, item count) states of `uniqueItems` in listed order (two rules each).
const MAX_UNIQUE_ORDERED_STATES: u64 = 8_192;

/// `uniqueItems` enforced, for a finite item domain and no positional items: up to
/// [`MAX_UNIQUE_SETS`] values exactly, one rule per set of item values used so far; up to
/// [`MAX_UNIQUE_VALUES`], in any key order (checking) an unordered group of the values
/// (exact), in listed order (generation) the values in the order the schema lists them, each
/// at most once (narrower, as listed key order is for objects: it generates only valid
/// arrays). Otherwise refused (an error), or under lenient mode a warning and `None`: the
/// caller then compiles the array without the keyword, so that an unenforced keyword only
/// widens the grammar.
#[allow(clippy::too_many_arguments)]
fn unique_items(cx: &mut Compiler, parts: &[Conjunct], rest_parts: &[Conjunct], k: usize, min: u64, max: Option<u64>, seps: &Seps) -> CompileResult<Option<Expr>> {
    // Finite item domain: enum/const on the items, or boolean/null types.
    let mut cands: Option<Vec<Value>> = None;
    for p in rest_parts {
        let mut q = p.clone();
        for _ in 0..8 {
            if let Some(r) = q.get("$ref").filter(|_| q.obj().is_some_and(|o| o.len() == 1)) {
                let _ = r;
                q = cx.resolve_ref(&q, "$ref")?;
            } else {
                break;
            }
        }
        if let Some(e) = q.get("enum").and_then(|x| x.as_array()) {
            cands = Some(e.clone());
        } else if let Some(c) = q.get("const") {
            cands = Some(vec![c.clone()]);
        } else if let Some(t) = q.get("type").and_then(|t| type_bits(t)) {
            if !t.intersects(!(JsonTypes::BOOL | JsonTypes::NULL)) {
                let mut v = Vec::new();
                if t.intersects(JsonTypes::BOOL) {
                    v.extend([Value::Bool(true), Value::Bool(false)]);
                }
                if t.intersects(JsonTypes::NULL) {
                    v.push(Value::Null);
                }
                cands = Some(v);
            }
        }
    }
    let at = parts.iter().find(|p| p.get("uniqueItems") == Some(&Value::Bool(true))).map(|p| p.kw_ptr("uniqueItems")).unwrap_or_default();
    let Some(c) = cands.filter(|_| k == 0) else {
        cx.refuse("uniqueItems", "enforced only for items with a small finite domain (enum/const/boolean) and no positional items", at)?;
        return Ok(None);
    };
    let mut vals: Vec<Value> = Vec::new();
    for v in c {
        if !vals.iter().any(|x| crate::json_types::json_eq(x, &v)) && cx.value_ok(rest_parts, &v)? {
            vals.push(v);
        }
    }
    let n = vals.len();
    if n > MAX_UNIQUE_VALUES {
        cx.refuse("uniqueItems", format!("{n} distinct item values (at most {MAX_UNIQUE_VALUES} are supported)"), at)?;
        return Ok(None);
    }
    let lits: Vec<Expr> = vals.iter().map(|v| cx.literal(v)).collect();
    if n > MAX_UNIQUE_SETS {
        // A bound at or above the number of values says nothing distinct items do not.
        let max = max.filter(|&m| m < n as u64);
        let counts = counts_kept(min, max, n) + 1;
        if cx.opts.key_order != crate::KeyOrder::Any && counts.saturating_mul(n as u64 + 1) > MAX_UNIQUE_ORDERED_STATES {
            cx.refuse(
                "uniqueItems",
                format!("{n} distinct item values with {} item counts to tell apart (minItems/maxItems): more than {MAX_UNIQUE_ORDERED_STATES} states", counts - 1),
                at,
            )?;
            return Ok(None);
        }
        return Ok(Some(if cx.opts.key_order == crate::KeyOrder::Any {
            // Each value at most once, in any order: an unordered group of the values, whose
            // rules are built as inputs reach them (what an object's keys are).
            crate::layout::unordered_in(seps, "[", "]", lits.into_iter().map(|l| (l, false)).collect(), Vec::new(), min, max, Vec::new())
        } else {
            unique_in_listed_order(cx, lits, min, max, seps)
        }));
    }
    cx.uid += 1;
    let uid = cx.uid;
    let name = |set: u32| format!("uniq{uid}-{set}");
    for set in 0..(1u32 << n) {
        let cnt = set.count_ones() as u64;
        let mut alts = Vec::new();
        if cnt >= min {
            alts.push(if cnt == 0 { Expr::empty() } else { seps.last.clone() });
        }
        if max.is_none_or(|m| cnt < m) {
            for (i, l) in lits.iter().enumerate() {
                if set & (1 << i) == 0 {
                    let id = cx.b.rule_id(&name(set | (1 << i)));
                    let s = if cnt == 0 { seps.first.clone() } else { seps.comma.clone() };
                    alts.push(Expr::seq([s, l.clone(), Expr::Rule(id)]));
                }
            }
        }
        cx.b.define(&name(set), alt_of(alts));
    }
    let start = cx.b.rule_id(&name(0));
    Ok(Some(bracketed(seps, start)))
}

/// Distinct items in the order of `lits` (listed order): `pick(i, n)` is "item `i`, or one
/// after it" with `n` items so far, and `after(i, n)` the array may end (at least `min`
/// items) or go on with `pick(i, n)` while there is room; counts are kept up to what the
/// bounds need. Rules: 2 × (values + 1) × (counts), each of at most two alternatives.
fn unique_in_listed_order(cx: &mut Compiler, lits: Vec<Expr>, min: u64, max: Option<u64>, seps: &Seps) -> Expr {
    let n_vals = lits.len();
    let cap = counts_kept(min, max, n_vals);
    let next = |n: u64| (n + 1).min(cap);
    let room = |n: u64| max.is_none_or(|m| n < m) && n < n_vals as u64;
    cx.uid += 1;
    let uid = cx.uid;
    let after = |i: usize, n: u64| format!("uniq{uid}-{i}-{n}");
    let pick = |i: usize, n: u64| format!("uniq{uid}-{i}-{n}-p");
    for n in 0..=cap {
        for i in 0..=n_vals {
            let mut alts = Vec::new();
            if n >= min {
                alts.push(if n == 0 { Expr::empty() } else { seps.last.clone() });
            }
            if i < n_vals && room(n) {
                let s = if n == 0 { seps.first.clone() } else { seps.comma.clone() };
                alts.push(Expr::seq([s, Expr::Rule(cx.b.rule_id(&pick(i, n)))]));
            }
            cx.b.define(&after(i, n), alt_of(alts));
            if i < n_vals {
                let mut p = vec![Expr::seq([lits[i].clone(), Expr::Rule(cx.b.rule_id(&after(i + 1, next(n))))])];
                if i + 1 < n_vals {
                    p.push(Expr::Rule(cx.b.rule_id(&pick(i + 1, n))));
                }
                cx.b.define(&pick(i, n), alt_of(p));
            }
        }
    }
    bracketed(seps, cx.b.rule_id(&after(0, 0)))
}

/// The largest item count `uniqueItems` in listed order keeps apart for `n` values: up to
/// `max`, or up to `min` (every count past it behaves alike), and never more than `n`.
fn counts_kept(min: u64, max: Option<u64>, n: usize) -> u64 {
    max.unwrap_or(min.max(1)).min(n as u64)
}

/// `[` rule `start` `]`, with the array's outer separators.
fn bracketed(seps: &Seps, start: formwork_grammar::RuleId) -> Expr {
    Expr::seq([Expr::lit("["), seps.outer_open.clone(), Expr::Rule(start), seps.outer_close.clone(), Expr::lit("]")])
}
