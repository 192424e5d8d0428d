//! Objects: listed properties in `properties` order (optional ones may be skipped), then
//! additional properties; counts for `minProperties`/`maxProperties` are tracked in the rule
//! state `(next listed property, members so far)`. With [`KeyOrder::Any`](crate::KeyOrder),
//! the members form one [`Unordered`](formwork_grammar::Unordered) group instead (any order, each key at most once).
//!
//! A listed key's value must satisfy, for every conjunct, its `properties` entry, the
//! `patternProperties` entries whose pattern matches the key, or else its
//! `additionalProperties`. Additional keys are generated from a complement trie of the listed
//! names (so they never repeat a listed key), or from the `patternProperties` patterns; with
//! patterns in several parts or beside `propertyNames`, from key regions (one string schema
//! per set of patterns a key matches, [`key_regions`]).
//!
//! Key witnesses (`x-formwork-some-key`, left by the negations of `additionalProperties`,
//! `patternProperties` and `propertyNames`: "some key it applies to is present with a value
//! it rejects") are expanded by [`some_keys`] into the union of the ways to meet them: a listed
//! name (that member required, its value also the witness's) or a required member whose key
//! is an additional-key region.

use crate::compiler::{Compiler, CompileResult};
use crate::conjunct::Conjunct;
use crate::exprs::{alt_of, invalid, is_nothing, nothing, unsupported};
use crate::layout::Seps;
use crate::resolve::escape_ptr;
use crate::json_types::as_count;
use crate::layout::unordered;
use crate::derived::SOME_KEY;
use foldhash::HashSet;
use std::collections::HashMap;
use formwork_grammar::Expr;
use serde_json::Value;

/// Key order control (annotations to a validator, so any order we pick stays valid):
/// - `propertyOrdering` (as in Google's Gemini API): an array of property names that come
///   first, in that order (each still optional unless required);
/// - `x-formwork-first` (a property name), or [`crate::SchemaOptions::force_first_key`] for the
///   root object: that key is required and comes first — e.g. a `reasoning` field generated
///   before the answer it supports.
/// Returns whether a first key was forced.
fn order_keys(cx: &mut Compiler, parts: &[Conjunct], names: &mut Vec<String>, required: &mut Vec<String>) -> CompileResult<bool> {
    let mut first: Option<(String, String)> = None;
    for p in parts {
        if let Some(v) = p.get("propertyOrdering") {
            let order = v
                .as_array()
                .and_then(|a| a.iter().map(|k| k.as_str().map(str::to_string)).collect::<Option<Vec<_>>>())
                .ok_or_else(|| invalid("propertyOrdering", "must be an array of property names", p.kw_ptr("propertyOrdering")))?;
            let mut head = Vec::new();
            for k in order {
                if !names.contains(&k) {
                    return Err(invalid("propertyOrdering", format!("`{k}` is not a property of this object"), p.kw_ptr("propertyOrdering")));
                }
                if !head.contains(&k) {
                    head.push(k);
                }
            }
            names.retain(|n| !head.contains(n));
            head.append(names);
            *names = head;
        }
        if let Some(v) = p.get("x-formwork-first") {
            let k = v.as_str().ok_or_else(|| invalid("x-formwork-first", "must be a property name", p.kw_ptr("x-formwork-first")))?;
            first = Some((k.to_string(), p.kw_ptr("x-formwork-first")));
        }
    }
    // The option applies to the root object(s) that list the key; `compile` fails if none did.
    if let Some(k) = cx.force_first.clone().filter(|k| cx.depth <= 2 && names.contains(k)) {
        cx.force_first_applied = true;
        first = Some((k, parts[0].at.clone()));
    }
    let forced = first.is_some();
    if let Some((k, at)) = first {
        if !names.contains(&k) {
            return Err(invalid("x-formwork-first", format!("the key to put first, `{k}`, is not a property of this object"), at));
        }
        names.retain(|n| n != &k);
        names.insert(0, k.clone());
        if !required.contains(&k) {
            required.push(k);
        }
    }
    Ok(forced)
}

/// The object type of the conjunction `parts`, a container laid out with `seps` (its values
/// are compiled one level deeper: the caller runs this in [`Compiler::nested`]).
pub(crate) fn compile(cx: &mut Compiler, parts: &[Conjunct], seps: &Seps) -> CompileResult<Expr> {
    let witnesses: Vec<Conjunct> = parts.iter().filter(|p| p.get(SOME_KEY).is_some()).map(|p| p.sub(&format!("/{SOME_KEY}"))).collect();
    if witnesses.is_empty() {
        return compile_with(cx, parts, seps, &[]);
    }
    some_keys(cx, parts, seps, &witnesses)
}

/// Most key witnesses one object may carry, and most alternatives they may expand into.
const MAX_WITNESSES: usize = 4;
const MAX_WITNESS_ALTERNATIVES: usize = 48;

/// An object with key witnesses ([`SOME_KEY`]: "some key the witness admits is present, with
/// a value it accepts", left by negations): the union, over every way to meet them, of the
/// object that way. A witness is met by a listed name it admits (that member required, its
/// value also the witness's), or by an additional key; witnesses met by additional keys are
/// grouped (one key may meet several: the partitions of them), each group one required
/// member whose key and value are the groups' and the object's own for additional keys.
/// Exact: every instance meets each witness one of these ways.
fn some_keys(cx: &mut Compiler, parts: &[Conjunct], seps: &Seps, ws: &[Conjunct]) -> CompileResult<Expr> {
    let kw = witness_kw(&ws[0]);
    if ws.len() > MAX_WITNESSES {
        cx.refuse(&kw, format!("its negation needs {} keys of the object to exist at once (at most {MAX_WITNESSES} are supported)", ws.len()), ws[0].at.clone())?;
        return compile_with(cx, parts, seps, &[]);
    }
    let names = listed_names(parts);
    let mut admitted: Vec<Vec<String>> = Vec::new();
    for w in ws {
        let mut a = Vec::new();
        for k in &names {
            if admits(cx, w, k)? {
                a.push(k.clone());
            }
        }
        admitted.push(a);
    }
    // Each way: for every witness, `Ok(name)` or `Err(group)`.
    let mut ways: Vec<Vec<Result<String, usize>>> = vec![Vec::new()];
    for a in &admitted {
        let mut next = Vec::new();
        for way in &ways {
            for k in a {
                let mut w = way.clone();
                w.push(Ok(k.clone()));
                next.push(w);
            }
            let groups = way.iter().filter_map(|x| x.as_ref().err().copied()).max().map_or(0, |g| g + 1);
            for g in 0..=groups {
                let mut w = way.clone();
                w.push(Err(g));
                next.push(w);
            }
        }
        ways = next;
        if ways.len() > MAX_WITNESS_ALTERNATIVES {
            cx.refuse(&kw, format!("its negation (some key present with a value it rejects) has more than {MAX_WITNESS_ALTERNATIVES} ways to be met in this object (listed names × groups of keys)"), ws[0].at.clone())?;
            return compile_with(cx, parts, seps, &[]);
        }
    }
    let mut alts = Vec::new();
    for way in ways {
        let mut v = parts.to_vec();
        let mut groups: Vec<Vec<Conjunct>> = Vec::new();
        for (t, x) in way.iter().enumerate() {
            match x {
                Ok(k) => {
                    let value = ws[t].get("value").cloned().unwrap_or(Value::Bool(true));
                    let s = cx.synth(serde_json::json!({"required": [k], "properties": { k.clone(): value }}), &ws[t], "value");
                    v.push(s);
                }
                Err(g) => {
                    if groups.len() <= *g {
                        groups.resize(*g + 1, Vec::new());
                    }
                    groups[*g].push(ws[t].clone());
                }
            }
        }
        let e = compile_with(cx, &v, seps, &groups)?;
        if !is_nothing(&e) {
            alts.push(e);
        }
    }
    Ok(alt_of(alts))
}

/// The keyword a witness comes from (named in refusals).
fn witness_kw(w: &Conjunct) -> String {
    w.get("kw").and_then(Value::as_str).unwrap_or("not").to_string()
}

/// Does witness `w` admit the listed name `k`? Exactly: `k` checked against the witness's
/// key schema (a derived part: see `Compiler::value_ok`).
fn admits(cx: &mut Compiler, w: &Conjunct, k: &str) -> CompileResult<bool> {
    cx.value_ok(&[w.sub("/key")], &Value::String(k.to_string()))
}

/// The names an object of the conjunction may list (its `properties` and `required`, and
/// those its presence conditions name), as [`compile_with`] collects them.
fn listed_names(parts: &[Conjunct]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let mut push = |k: &str| {
        if !names.iter().any(|n| n == k) {
            names.push(k.to_string());
        }
    };
    for p in parts {
        for k in p.get("properties").and_then(Value::as_object).into_iter().flat_map(|m| m.keys()) {
            push(k);
        }
        for k in p.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
            push(k);
        }
    }
    for k in crate::presence::keys(&crate::presence::collect(parts)) {
        push(&k);
    }
    names
}

/// [`compile`], with the key witnesses met by additional keys: `groups` of witnesses, each
/// one required member of its own.
fn compile_with(cx: &mut Compiler, parts: &[Conjunct], seps: &Seps, groups: &[Vec<Conjunct>]) -> CompileResult<Expr> {
    let strict = cx.opts.strict;
    // Listed and required names.
    // In order, without repeats (the sets answer "seen?" for objects of many properties).
    let mut names: Vec<String> = Vec::new();
    let mut required: Vec<String> = Vec::new();
    let (mut name_set, mut required_set) = (HashSet::default(), HashSet::default());
    let add = |v: &mut Vec<String>, set: &mut HashSet<String>, k: &str| {
        if !set.contains(k) {
            set.insert(k.to_string());
            v.push(k.to_string());
        }
    };
    let (mut minp, mut maxp): (u64, Option<u64>) = (0, None);
    for p in parts {
        if let Some(props) = p.get("properties") {
            let props = props.as_object().ok_or_else(|| invalid("properties", "must be an object", p.kw_ptr("properties")))?;
            for k in props.keys() {
                add(&mut names, &mut name_set, k);
                if strict {
                    add(&mut required, &mut required_set, k);
                }
            }
        }
        if let Some(r) = p.get("required") {
            let r = r.as_array().ok_or_else(|| invalid("required", "must be an array of strings", p.kw_ptr("required")))?;
            for k in r {
                let k = k.as_str().ok_or_else(|| invalid("required", "must be an array of strings", p.kw_ptr("required")))?;
                add(&mut required, &mut required_set, k);
            }
        }
        if let Some(v) = p.get("minProperties") {
            minp = minp.max(as_count(v).ok_or_else(|| invalid("minProperties", "must be a non-negative integer", p.kw_ptr("minProperties")))?);
        }
        if let Some(v) = p.get("maxProperties") {
            let n = as_count(v).ok_or_else(|| invalid("maxProperties", "must be a non-negative integer", p.kw_ptr("maxProperties")))?;
            maxp = Some(maxp.map_or(n, |m| m.min(n)));
        }
    }
    for r in &required {
        add(&mut names, &mut name_set, r);
    }
    // Keys named by conditions on which keys are present: listed members too, so the
    // group can tell whether they are there.
    let presence = crate::presence::collect(parts);
    for k in crate::presence::keys(&presence) {
        add(&mut names, &mut name_set, &k);
    }
    // A key forced first keeps the listed order for this object.
    let forced_first = order_keys(cx, parts, &mut names, &mut required)?;
    let required_set: HashSet<&str> = required.iter().map(|r| r.as_str()).collect();
    // Value of each listed name.
    let mut members: Vec<(String, Expr, bool)> = Vec::new();
    // Each part's keywords that the names below read, looked up once per part rather than
    // once per name and part (a large object's names times its parts).
    struct Read<'a> {
        props: Option<&'a serde_json::Map<String, Value>>,
        patterns: Option<&'a serde_json::Map<String, Value>>,
        additional: bool,
        has_properties: bool,
        names: bool,
    }
    let reads: Vec<Option<Read>> = parts
        .iter()
        .map(|p| {
            p.obj().map(|o| Read {
                props: o.get("properties").and_then(|x| x.as_object()),
                patterns: o.get("patternProperties").and_then(|x| x.as_object()),
                additional: o.contains_key("additionalProperties"),
                has_properties: o.contains_key("properties"),
                names: o.contains_key("propertyNames"),
            })
        })
        .collect();
    for name in &names {
        let mut vparts = Vec::new();
        let mut forbidden = false;
        for (p, read) in parts.iter().zip(&reads) {
            let Some(o) = read else { continue };
            let mut covered = false;
            if o.props.is_some_and(|m| m.contains_key(name)) {
                vparts.push(p.sub(&format!("/properties/{}", escape_ptr(name))));
                covered = true;
            }
            if let Some(pp) = o.patterns {
                for pat in pp.keys() {
                    match cx.pattern_matches(pat, name) {
                        Some(true) => {
                            vparts.push(p.sub(&format!("/patternProperties/{}", escape_ptr(pat))));
                            covered = true;
                        }
                        Some(false) => {}
                        None => return Err(unsupported("patternProperties", format!("pattern {pat:?} is not supported"), p.kw_ptr("patternProperties"))),
                    }
                }
            }
            if !covered {
                if o.additional {
                    vparts.push(p.sub("/additionalProperties"));
                } else if strict && o.has_properties {
                    forbidden = true;
                }
            }
            if o.names {
                let pn = p.sub("/propertyNames");
                if !pn.real {
                    return Err(unsupported("propertyNames", "inside a derived schema", p.kw_ptr("propertyNames")));
                }
                if !cx.value_ok(&[pn], &Value::String(name.clone()))? {
                    forbidden = true;
                }
            }
        }
        let req = required_set.contains(name.as_str());
        let value = if forbidden { nothing() } else { cx.schema(vparts)? };
        if is_nothing(&value) {
            if req {
                return Ok(nothing());
            }
            continue;
        }
        members.push((name.clone(), value, req));
    }
    // Additional keys.
    let mut extra: Vec<(Expr, Expr)> = Vec::new(); // (key incl. quotes, value)
    let pattern_parts: Vec<&Conjunct> = parts.iter().filter(|p| p.get("patternProperties").and_then(|x| x.as_object()).is_some_and(|m| !m.is_empty())).collect();
    let closed = strict || parts.iter().any(|p| p.get("additionalProperties") == Some(&Value::Bool(false)) && pattern_parts.iter().all(|q| !same_part(p, q)));
    let has_names = parts.iter().any(|p| p.get("propertyNames").is_some());
    // The additional keys as regions of (key parts, value parts), where the fast paths below
    // do not apply (several `patternProperties`, or with `propertyNames`) and for key
    // witnesses; `None` when there is no additional key.
    let mut regions: Option<Vec<(Vec<Conjunct>, Vec<Conjunct>)>> = None;
    if !pattern_parts.is_empty() {
        if closed_by_others_than(parts, &pattern_parts) {
            // Only listed names.
        } else if pattern_parts.len() > 1 || has_names || !groups.is_empty() {
            match key_regions(cx, parts, &pattern_parts, &names)? {
                Some(r) => regions = Some(r),
                // Refused in lenient mode: any additional key, any value (wider).
                None => regions = Some(vec![(key_parts(cx, parts, &[], &names), Vec::new())]),
            }
            for (kp, vp) in regions.clone().into_iter().flatten() {
                let value = cx.schema(vp)?;
                if is_nothing(&value) {
                    continue;
                }
                let key = cx.schema(kp)?;
                if !is_nothing(&key) {
                    extra.push((key, value));
                }
            }
        } else {
            extra = pattern_keys(cx, parts, pattern_parts[0], &names)?;
        }
    } else if !closed {
        let vparts: Vec<Conjunct> = parts.iter().filter(|p| p.get("additionalProperties").is_some()).map(|p| p.sub("/additionalProperties")).collect();
        let value = cx.schema(vparts.clone())?;
        let key = if has_names {
            let kparts = key_parts(cx, parts, &parts.iter().filter(|p| p.get("propertyNames").is_some()).map(|p| p.sub("/propertyNames")).collect::<Vec<_>>(), &names);
            cx.schema(kparts)?
        } else {
            Expr::seq([Expr::lit("\""), crate::chars::excluding(cx, &names, "key")?, Expr::lit("\"")])
        };
        if !is_nothing(&value) && !is_nothing(&key) {
            extra.push((key, value));
        }
        if !groups.is_empty() {
            let pn: Vec<Conjunct> = parts.iter().filter(|p| p.get("propertyNames").is_some()).map(|p| p.sub("/propertyNames")).collect();
            regions = Some(vec![(key_parts(cx, parts, &pn, &names), vparts)]);
        }
    }
    // Key witnesses met by additional keys: one required member per group, its key an
    // additional key every witness of the group admits (in any region), its value what they
    // and the object allow there.
    let kv = |k: Expr, v: Expr| Expr::seq([k, seps.colon.clone(), v]);
    let mut witnessed: Vec<Expr> = Vec::new();
    for g in groups {
        let mut alts = Vec::new();
        for (kp, vp) in regions.clone().into_iter().flatten() {
            let mut vparts = vp;
            vparts.extend(g.iter().map(|w| w.sub("/value")));
            let value = cx.schema(vparts)?;
            if is_nothing(&value) {
                continue;
            }
            let mut kparts = kp;
            kparts.extend(g.iter().map(|w| w.sub("/key")));
            let key = cx.schema(kparts)?;
            if !is_nothing(&key) {
                alts.push(kv(key, value));
            }
        }
        if alts.is_empty() {
            return Ok(nothing()); // no additional key can meet the group
        }
        witnessed.push(alt_of(alts));
    }
    let presence = crate::presence::by_index(&presence, |k| members.iter().position(|m| m.0 == k).map(|i| i as u32));
    // Members as `key: value` (the witnessed ones after the listed ones, which the presence
    // clauses index).
    let mut keyed: Vec<(Expr, bool)> = members.into_iter().map(|(k, v, req)| (kv(Expr::lit(serde_json::to_string(&k).unwrap_or_default()), v), req)).collect();
    keyed.extend(witnessed.into_iter().map(|e| (e, true)));
    if cx.opts.key_order == crate::KeyOrder::Any && !forced_first {
        return Ok(unordered(seps, keyed, extra, minp, maxp, presence));
    }
    build(cx, seps, &keyed, extra, minp, maxp, &presence, &parts[0].at)
}

/// The schema parts of an additional key (a JSON string): `pn` (the `propertyNames` parts),
/// and none of the listed `names`.
fn key_parts(cx: &mut Compiler, parts: &[Conjunct], pn: &[Conjunct], names: &[String]) -> Vec<Conjunct> {
    let mut kparts = pn.to_vec();
    let mut v = serde_json::json!({"type": "string"});
    if !names.is_empty() {
        v["x-formwork-not-values"] = serde_json::json!(names);
    }
    kparts.push(cx.synth(v, &parts[0], "propertyNames"));
    kparts
}

/// The additional members of an object whose `patternProperties` are in part `pp`: the keys
/// (with quotes) and values, one pair per set of patterns a key can match (its value must
/// satisfy each of them), plus the keys no pattern matches when `pp` allows them (not in
/// strict mode). Listed
/// `names` are never additional keys. Other parts' `additionalProperties` apply to every
/// additional key (their `properties` are among `names`).
fn pattern_keys(cx: &mut Compiler, parts: &[Conjunct], pp: &Conjunct, names: &[String]) -> CompileResult<Vec<(Expr, Expr)>> {
    let map = pp.get("patternProperties").and_then(|x| x.as_object()).cloned().unwrap_or_default();
    let pats: Vec<String> = map.keys().cloned().collect();
    let at = pp.kw_ptr("patternProperties");
    let others: Vec<Conjunct> = parts.iter().filter(|p| !same_part(p, pp) && p.get("additionalProperties").is_some()).map(|p| p.sub("/additionalProperties")).collect();
    let value_of = |cx: &mut Compiler, set: u32| {
        let mut v: Vec<Conjunct> = (0..pats.len()).filter(|&k| set & (1 << k) != 0).map(|k| pp.sub(&format!("/patternProperties/{}", escape_ptr(&pats[k])))).collect();
        if set == 0 && pp.get("additionalProperties").is_some() {
            v.push(pp.sub("/additionalProperties"));
        }
        v.extend(others.iter().cloned());
        cx.schema(v)
    };
    let quoted = |body: Expr| Expr::seq([Expr::lit("\""), body, Expr::lit("\"")]);
    // Listed names some pattern matches: members, never additional keys.
    let listed: Vec<String> = names.iter().filter(|n| pats.iter().any(|p| cx.pattern_matches(p, n) != Some(false))).cloned().collect();
    let rest = !cx.opts.strict && pp.get("additionalProperties") != Some(&Value::Bool(false));
    let mut out = Vec::new();
    if pats.len() == 1 && listed.is_empty() && !rest {
        let value = value_of(cx, 1)?;
        let body = crate::regex::string_body(cx, &pats[0], 0, None, &at, "patternProperties")?;
        if !is_nothing(&value) && !is_nothing(&body) {
            out.push((quoted(body), value));
        }
        return Ok(out);
    }
    if pats.len() <= crate::regex::MAX_REGION_PATTERNS {
        // Keys no pattern matches must differ from every listed name.
        let excluded = if rest { names } else { &listed[..] };
        if let Some(regions) = crate::regex::pattern_regions(cx, &pats, excluded, rest, &at, "patternProperties")? {
            for (set, body) in regions {
                let value = value_of(cx, set)?;
                if !is_nothing(&value) {
                    out.push((quoted(body), value));
                }
            }
            return Ok(out);
        }
    }
    // Many patterns, or DFAs over the bounds. A key only one pattern matches takes that
    // pattern's schema (exact); any pattern's key (but listed names) may also take a value
    // that satisfies every pattern's schema — exact for a key several patterns match only
    // when it matches them all, and never wider than the schema.
    if pats.len() > 1 && pats.len() <= 32 {
        for (k, pat) in pats.iter().enumerate() {
            let others: Vec<String> = pats.iter().enumerate().filter(|&(j, _)| j != k).map(|(_, p)| p.clone()).collect();
            let value = value_of(cx, 1 << k)?;
            if is_nothing(&value) {
                continue;
            }
            if let Some(body) = crate::regex::string_body_only(cx, pat, &others, &listed, &at, "patternProperties")? {
                out.push((quoted(body), value));
            }
        }
    }
    let value = value_of(cx, (1u32 << pats.len().min(31)) - 1)?;
    if is_nothing(&value) {
        return Ok(out);
    }
    let mut keys = Vec::new();
    for pat in &pats {
        let mine: Vec<String> = listed.iter().filter(|n| cx.pattern_matches(pat, n) != Some(false)).cloned().collect();
        let body = if mine.is_empty() {
            crate::regex::string_body(cx, pat, 0, None, &at, "patternProperties")?
        } else {
            match crate::regex::string_body_except(cx, pat, &mine, &at, "patternProperties")? {
                Some(b) => b,
                // Too large a DFA: this pattern's other keys are left out.
                None => continue,
            }
        };
        keys.push(quoted(body));
    }
    if !keys.is_empty() {
        out.push((alt_of(keys), value));
    }
    Ok(out)
}

/// The additional keys of an object with `patternProperties` in the parts `pps`, as regions
/// of (key parts, value parts): one per set of the patterns (of every part) a key matches,
/// its key a string that matches exactly those, satisfies every `propertyNames` and is none
/// of the listed `names`; its value satisfies, for every part of `pps`, the schemas of its
/// patterns in the set, or that part's `additionalProperties` when none of them is. Keys no
/// pattern matches (not in strict mode) take every part's `additionalProperties`. Other
/// parts' `additionalProperties` apply to every region. Each key region is compiled as a
/// string schema (one product automaton of its patterns, the negations of the others and
/// the names). `None` when refused in lenient mode (more than
/// [`crate::regex::MAX_REGION_PATTERNS`] distinct patterns).
#[allow(clippy::type_complexity)]
fn key_regions(cx: &mut Compiler, parts: &[Conjunct], pps: &[&Conjunct], names: &[String]) -> CompileResult<Option<Vec<(Vec<Conjunct>, Vec<Conjunct>)>>> {
    let at = pps[0].kw_ptr("patternProperties");
    // (pattern, its part) over every part, in order, and the distinct patterns.
    let mut pats: Vec<(String, usize)> = Vec::new();
    let mut distinct: Vec<String> = Vec::new();
    for (c, pp) in pps.iter().enumerate() {
        for pat in pp.get("patternProperties").and_then(Value::as_object).into_iter().flat_map(|m| m.keys()) {
            pats.push((pat.clone(), c));
            if !distinct.contains(pat) {
                distinct.push(pat.clone());
            }
        }
    }
    if distinct.len() > crate::regex::MAX_REGION_PATTERNS {
        cx.refuse("patternProperties", format!("{} distinct patterns in several `patternProperties`, with `propertyNames` or with a key witness (at most {})", distinct.len(), crate::regex::MAX_REGION_PATTERNS), at)?;
        return Ok(None);
    }
    let pn: Vec<Conjunct> = parts.iter().filter(|p| p.get("propertyNames").is_some()).map(|p| p.sub("/propertyNames")).collect();
    let others: Vec<Conjunct> = parts.iter().filter(|p| !pps.iter().any(|q| same_part(p, q)) && p.get("additionalProperties").is_some()).map(|p| p.sub("/additionalProperties")).collect();
    let first = if cx.opts.strict { 1u32 } else { 0 };
    let mut out = Vec::new();
    for set in first..(1u32 << distinct.len()) {
        let matched = |pat: &str| distinct.iter().position(|d| d == pat).is_some_and(|k| set & (1 << k) != 0);
        let mut v: Vec<Conjunct> = Vec::new();
        for (c, pp) in pps.iter().enumerate() {
            let mine: Vec<&String> = pats.iter().filter(|(pat, o)| *o == c && matched(pat)).map(|(pat, _)| pat).collect();
            if mine.is_empty() {
                if pp.get("additionalProperties").is_some() {
                    v.push(pp.sub("/additionalProperties"));
                }
            } else {
                v.extend(mine.into_iter().map(|pat| pp.sub(&format!("/patternProperties/{}", escape_ptr(pat)))));
            }
        }
        v.extend(others.iter().cloned());
        let mut k = key_parts(cx, parts, &pn, names);
        for (j, pat) in distinct.iter().enumerate() {
            if set & (1 << j) != 0 {
                k.push(cx.synth(serde_json::json!({"type": "string", "pattern": pat}), pps[0], "patternProperties"));
            }
        }
        let unmatched: Vec<&String> = distinct.iter().enumerate().filter(|(j, _)| set & (1 << j) == 0).map(|(_, p)| p).collect();
        if !unmatched.is_empty() {
            k.push(cx.synth(serde_json::json!({"type": "string", "x-formwork-not-pattern": unmatched}), pps[0], "patternProperties"));
        }
        out.push((k, v));
    }
    Ok(Some(out))
}

/// Does a part other than `pps` close the object (`additionalProperties: false`)?
fn closed_by_others_than(parts: &[Conjunct], pps: &[&Conjunct]) -> bool {
    parts.iter().any(|p| !pps.iter().any(|q| same_part(p, q)) && p.get("additionalProperties") == Some(&Value::Bool(false)))
}

/// Are `a` and `b` the same part (the same location of the same document; two synthetic
/// parts are the same only when they share their value)?
fn same_part(a: &Conjunct, b: &Conjunct) -> bool {
    std::sync::Arc::ptr_eq(&a.root, &b.root) && a.ptr == b.ptr
}


/// Most rules one listed-order object may take (members × property counts × what is left
/// of its presence clauses).
const MAX_OBJECT_RULES: usize = 20_000;

#[allow(clippy::too_many_arguments)]
fn build(cx: &mut Compiler, seps: &Seps, members: &[(Expr, bool)], extra: Vec<(Expr, Expr)>, minp: u64, maxp: Option<u64>, presence: &[Vec<formwork_grammar::Presence>], at: &str) -> CompileResult<Expr> {
    let cap: u64 = match maxp {
        Some(m) => m + 1,
        None => minp.max(1),
    };
    let n_members = members.len();
    let too_many = || crate::exprs::err(crate::SchemaErrorKind::Limit { limit: "max_rules", why: "an object with too many properties × property-count states".into() }, at);
    if (n_members as u64 + 1) * (cap + 1) > MAX_OBJECT_RULES as u64 {
        return Err(too_many());
    }
    cx.uid += 1;
    let uid = cx.uid;
    // Two rule families over (next listed member i, members so far n, what is left r of the
    // presence clauses, see `presence::Residual`):
    // - `after(i, n, r)`: the object may end here (no required member left, n ≥
    //   minProperties, every clause holds without more members), or a separator comes and
    //   then `member(i, n, r)`;
    // - `member(i, n, r)`: a member now: listed member i (then `after(i + 1, n + 1, r')`), or,
    //   when it is optional, a later one (`member(i + 1, n, r'')`); past the listed ones, an
    //   additional one. With presence clauses a choice is offered only when the clauses can
    //   still hold after it, so the object never enters a state it cannot end from.
    // The separator is written once, before the choice of key, so between two members the
    // parser follows one path, not one per member that may come next.
    let after_name = |i: usize, n: u64, r: usize| if r == 0 { format!("obj{uid}-{i}-{n}") } else { format!("obj{uid}-{i}-{n}-r{r}") };
    let member_name = |i: usize, n: u64, r: usize| if r == 0 { format!("obj{uid}-{i}-{n}-m") } else { format!("obj{uid}-{i}-{n}-r{r}-m") };
    // Before member n: the first member's separator (pretty: a newline), then commas.
    let sep = |n: u64| if n == 0 { seps.first.clone() } else { seps.comma.clone() };
    let kv = |k: &Expr, v: &Expr| Expr::seq([k.clone(), seps.colon.clone(), v.clone()]);
    // Indexed by i: is some member from i on required, and how many are?
    let mut required_from = vec![false; n_members + 1];
    let mut required_after = vec![0u64; n_members + 1];
    for i in (0..n_members).rev() {
        required_from[i] = members[i].1 || required_from[i + 1];
        required_after[i] = required_after[i + 1] + u64::from(members[i].1);
    }
    let next = |n: u64| (n + 1).min(cap);
    let room = |n: u64| maxp.is_none_or(|m| n < m);
    let Some(r0) = crate::presence::Residual::new(presence) else { return Ok(nothing()) };
    let conditional = !r0.is_empty();
    let mut plans = Plans { residuals: vec![r0], ids: HashMap::new(), members: HashMap::new() };
    if conditional {
        plans.ids.insert(plans.residuals[0].clone(), 0);
    }
    let feasible = |plans: &Plans, r: usize, from: usize, n: u64| {
        let res = &plans.residuals[r];
        res.is_empty() || res.feasible(|m| members[m as usize].1, required_after[from], maxp.map(|m| m.saturating_sub(n)))
    };
    if !feasible(&plans, 0, 0, 0) {
        return Ok(nothing());
    }
    // The choices of `member(i, n, r)`: member i present (with what is left after it), and
    // member i left out (the same), each `None` when not offered.
    let choices = |plans: &mut Plans, i: usize, n: u64, r: usize| -> (Option<usize>, Option<usize>) {
        if plans.residuals[r].is_empty() {
            return (room(n).then_some(r), (!members[i].1).then_some(r));
        }
        let present = room(n).then(|| plans.residuals[r].decide(i as u32, true)).flatten().map(|x| plans.intern(x)).filter(|&x| feasible(plans, x, i + 1, n + 1));
        let absent = (!members[i].1).then(|| plans.residuals[r].decide(i as u32, false)).flatten().map(|x| plans.intern(x)).filter(|&x| feasible(plans, x, i + 1, n));
        (present, absent)
    };
    // Does `member(i, n, r)` offer anything (with presence clauses, a member left out may
    // leave nothing to offer)?
    fn offers(plans: &mut Plans, choices: &dyn Fn(&mut Plans, usize, u64, usize) -> (Option<usize>, Option<usize>), n_members: usize, extras: bool, room: &dyn Fn(u64) -> bool, i: usize, n: u64, r: usize) -> bool {
        if i >= n_members {
            return extras && room(n);
        }
        if let Some(&known) = plans.members.get(&(i, n, r)) {
            return known;
        }
        let (present, absent) = choices(plans, i, n, r);
        let yes = present.is_some() || absent.is_some_and(|x| offers(plans, choices, n_members, extras, room, i + 1, n, x));
        plans.members.insert((i, n, r), yes);
        yes
    }
    let extras = !extra.is_empty();
    // Reachable rules only: walk forward from after(0, 0, r0). `false` = after, `true` = member.
    let mut todo = vec![(false, 0usize, 0u64, 0usize)];
    let mut done = std::collections::HashSet::new();
    while let Some((is_member, i, n, r)) = todo.pop() {
        if !done.insert((is_member, i, n, r)) {
            continue;
        }
        if done.len() > MAX_OBJECT_RULES {
            return Err(too_many());
        }
        let mut alts = Vec::new();
        if !is_member {
            if !required_from[i] && n >= minp && plans.residuals[r].ends() {
                // The end: after a member, the last separator (pretty: newline, indent).
                alts.push(if n == 0 { Expr::empty() } else { seps.last.clone() });
            }
            let more = if conditional { offers(&mut plans, &choices, n_members, extras, &room, i, n, r) } else { room(n) && (i < n_members || extras) };
            if more {
                alts.push(Expr::seq([sep(n), Expr::Rule(cx.b.rule_id(&member_name(i, n, r)))]));
                todo.push((true, i, n, r));
            }
            let body = alt_of(alts);
            cx.b.define(&after_name(i, n, r), body);
            continue;
        }
        if i < n_members {
            let (present, absent) = choices(&mut plans, i, n, r);
            if let Some(x) = present {
                let id = cx.b.rule_id(&after_name(i + 1, next(n), x));
                alts.push(Expr::seq([members[i].0.clone(), Expr::Rule(id)]));
                todo.push((false, i + 1, next(n), x));
            }
            if let Some(x) = absent.filter(|&x| !conditional || offers(&mut plans, &choices, n_members, extras, &room, i + 1, n, x)) {
                alts.push(Expr::Rule(cx.b.rule_id(&member_name(i + 1, n, x))));
                todo.push((true, i + 1, n, x));
            }
        } else if extras && room(n) {
            let id = cx.b.rule_id(&after_name(i, next(n), r));
            alts.push(Expr::seq([alt_of(extra.iter().map(|(k, v)| kv(k, v)).collect()), Expr::Rule(id)]));
            todo.push((false, i, next(n), r));
        }
        let body = alt_of(alts);
        cx.b.define(&member_name(i, n, r), body);
    }
    let start = cx.b.rule_id(&after_name(0, 0, 0));
    Ok(Expr::seq([Expr::lit("{"), seps.outer_open.clone(), Expr::Rule(start), seps.outer_close.clone(), Expr::lit("}")]))
}

/// What `build` learns as it goes: the residual clauses met so far (by id), and whether each
/// `member(i, n, r)` offers anything.
struct Plans {
    residuals: Vec<crate::presence::Residual>,
    ids: HashMap<crate::presence::Residual, usize>,
    members: HashMap<(usize, u64, usize), bool>,
}

impl Plans {
    fn intern(&mut self, r: crate::presence::Residual) -> usize {
        if let Some(&id) = self.ids.get(&r) {
            return id;
        }
        self.residuals.push(r.clone());
        self.ids.insert(r, self.residuals.len() - 1);
        self.residuals.len() - 1
    }
}

#[allow(dead_code)]
fn _unused(_: &Value) {}
