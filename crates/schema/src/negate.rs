//! `not` pushed down into schemas, and the disjointness analysis behind `oneOf`.
//!
//! A negation is built as a new (synthetic) schema value: `not {required:[a,b]}` becomes
//! `anyOf[{type:object, properties:{a:false}}, {type:object, properties:{b:false}}]`, and so
//! on keyword by keyword (a schema is the conjunction of its keywords, so its negation is the
//! disjunction of theirs). Keywords whose negation is not a schema we can compile are refused.
//! The negations of `additionalProperties`, `patternProperties` and `propertyNames` need
//! "some key ... is present", which no standard keyword says: they leave a key witness
//! (`derived::SOME_KEY`) that the object compiler expands.
//!
//! `$ref`s at the negated instance itself are followed into their targets. Below it (a
//! property's value, an item) the negation of a `$ref` is left as `{"not": {"$ref": r}}` for
//! the compiler to negate when it gets there: once per target, however many negations reach
//! it, and a recursive schema, whose negation would never end, is cut there. Derived parts
//! are keyed for the compiler's memo of conjunctions (`Conjunct::key`), so the second time
//! round is the same rule: a recursive rule, as for a recursive `$ref`. A recursion that comes
//! back at the same instance would not move down the input, and is refused.

use crate::compiler::{Compiler, CompileResult};
use crate::conjunct::Conjunct;
use crate::exprs::unsupported;
use crate::derived::{IGNORED, NOT_MULTIPLE_OF, SOME_KEY};
use crate::json_types::{type_bits, value_type, JsonTypes};
use serde_json::{json, Map, Value};


/// Most schema values one negation may visit (each `$ref` target, `properties` member and
/// `anyOf`/`allOf` branch counts one): a bound on the work, and on the size of the schema
/// it builds, for negations that follow `$ref`s through a large document.
const NEGATION_BUDGET: usize = 2_000;

/// What one negation has visited: the values (budget) and the `$ref` targets on the way
/// down (a target met again below itself is a recursive schema: see the module docs).
struct Walk {
    visited: usize,
    /// The `$ref` targets being followed (`doc#ptr`): one met again below itself is a
    /// recursion where the reference could not be left as one (see the `$ref` case).
    refs: Vec<String>,
    /// How many values down from the negated instance the walk is (a property's value or an
    /// item is one more).
    level: usize,
    /// The only keys the instance can have, when the negation is conjoined with a closed
    /// object (see [`negate_within`]); `None` below the instance itself (a property's value
    /// is another instance).
    universe: Option<Vec<String>>,
    /// The document the negation is built in: the synthetic schema resolves its `$ref`s
    /// against that document's root base.
    doc: usize,
}

/// The negation of `p`, as a synthetic part.
pub(crate) fn negate(cx: &mut Compiler, p: &Conjunct) -> CompileResult<Conjunct> {
    negate_within(cx, p, None)
}

/// The negation of `p` for instances whose object keys are among `universe` (a closed object
/// it will be conjoined with): there `additionalProperties` is negated as "one of the
/// universe's keys that `p` does not list is present" (with a value its
/// `additionalProperties` rejects), which has no schema form without the universe.
pub(crate) fn negate_within(cx: &mut Compiler, p: &Conjunct, universe: Option<Vec<String>>) -> CompileResult<Conjunct> {
    let mut walk = Walk { visited: 0, refs: Vec::new(), level: 0, universe, doc: p.doc };
    let v = neg_value(cx, p, p.value().clone(), 0, &mut walk)?;
    let mut s = cx.synth(v, p, "not");
    s.at = p.at.clone();
    Ok(s)
}

fn types_value(bits: JsonTypes) -> Option<Value> {
    if bits.intersects(JsonTypes::FRAC) && !bits.intersects(JsonTypes::INT) {
        return None; // "numbers that are not integers" has no type name
    }
    let mut v = Vec::new();
    for (b, n) in [(JsonTypes::NULL, "null"), (JsonTypes::BOOL, "boolean"), (JsonTypes::OBJ, "object"), (JsonTypes::ARR, "array"), (JsonTypes::STR, "string")] {
        if bits.intersects(b) {
            v.push(json!(n));
        }
    }
    if bits.intersects(JsonTypes::FRAC) {
        v.push(json!("number"));
    } else if bits.intersects(JsonTypes::INT) {
        v.push(json!("integer"));
    }
    Some(Value::Array(v))
}

fn neg_value(cx: &mut Compiler, at: &Conjunct, v: Value, depth: usize, walk: &mut Walk) -> CompileResult<Value> {
    if depth > 32 {
        return Err(unsupported("not", "negation nested too deeply", at.at.clone()));
    }
    walk.visited += 1;
    if walk.visited > NEGATION_BUDGET {
        return Err(unsupported("not", format!("the negation would visit more than {NEGATION_BUDGET} subschemas"), at.at.clone()));
    }
    let o = match v {
        Value::Bool(b) => return Ok(Value::Bool(!b)),
        Value::Object(o) => o,
        _ => return Err(unsupported("not", "a schema must be an object or a boolean", at.at.clone())),
    };
    let draft4_excl = |k: &str| o.get(k).is_some_and(|x| x.is_boolean());
    let mut alts: Vec<Value> = Vec::new();
    let ref_only = cx.draft(at).ref_overrides_siblings() && o.contains_key("$ref");
    for (k, x) in &o {
        if ref_only && k != "$ref" {
            continue;
        }
        let kw = k.as_str();
        if IGNORED.contains(&kw) {
            continue;
        }
        match kw {
            "type" => {
                let bits = type_bits(x).ok_or_else(|| unsupported("type", "bad type", at.at.clone()))?;
                let c = JsonTypes::all() & !bits;
                match types_value(c) {
                    Some(t) => alts.push(json!({ "type": t })),
                    None => {
                        // Non-integral numbers have no type name: a number part that
                        // excludes integers, beside the other types.
                        if let Some(t) = types_value(c & !JsonTypes::FRAC).filter(|t| t.as_array().is_some_and(|a| !a.is_empty())) {
                            alts.push(json!({ "type": t }));
                        }
                        alts.push(json!({"type": "number", "x-formwork-non-integral": true}));
                    }
                }
            }
            "const" => alts.push(json!({ "x-formwork-not-values": [x] })),
            "enum" => alts.push(json!({ "x-formwork-not-values": x })),
            "required" => {
                for r in x.as_array().into_iter().flatten() {
                    let r = r.as_str().ok_or_else(|| unsupported("required", "names must be strings", at.at.clone()))?;
                    alts.push(json!({"type": "object", "properties": { r: false }}));
                }
            }
            "properties" => {
                for (name, sub) in x.as_object().into_iter().flatten() {
                    let n = nested(walk, |walk| neg_value(cx, at, sub.clone(), depth + 1, walk))?;
                    if n == Value::Bool(false) {
                        continue;
                    }
                    alts.push(obj([("type", "object".into()), ("required", json!([name])), ("properties", obj([(name.as_str(), n)]))]));
                }
            }
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" => {
                if x.is_boolean() {
                    continue; // draft-4 modifier, read with its partner
                }
                let excl = match kw {
                    "minimum" => draft4_excl("exclusiveMinimum") && o["exclusiveMinimum"] == Value::Bool(true),
                    "maximum" => draft4_excl("exclusiveMaximum") && o["exclusiveMaximum"] == Value::Bool(true),
                    _ => true,
                };
                let lower = kw.ends_with("inimum");
                let key = match (lower, excl) {
                    (true, false) => "exclusiveMaximum",
                    (true, true) => "maximum",
                    (false, false) => "exclusiveMinimum",
                    (false, true) => "minimum",
                };
                alts.push(json!({"type": "number", key: x}));
            }
            "minLength" | "maxLength" | "minItems" | "maxItems" | "minProperties" | "maxProperties" => {
                let n = x.as_u64().ok_or_else(|| unsupported(kw, "must be a non-negative integer", at.at.clone()))?;
                let (ty, other) = match kw {
                    "minLength" => ("string", "maxLength"),
                    "maxLength" => ("string", "minLength"),
                    "minItems" => ("array", "maxItems"),
                    "maxItems" => ("array", "minItems"),
                    "minProperties" => ("object", "maxProperties"),
                    _ => ("object", "minProperties"),
                };
                if kw.starts_with("min") {
                    if n > 0 {
                        alts.push(json!({"type": ty, other: n - 1}));
                    }
                } else {
                    alts.push(json!({"type": ty, other: n + 1}));
                }
            }
            "uniqueItems" if x == &Value::Bool(false) => {}
            "anyOf" => {
                let mut all = Vec::new();
                for s in x.as_array().into_iter().flatten() {
                    all.push(neg_value(cx, at, s.clone(), depth + 1, walk)?);
                }
                alts.push(obj([("allOf", Value::Array(all))]));
            }
            "allOf" => {
                for s in x.as_array().into_iter().flatten() {
                    alts.push(neg_value(cx, at, s.clone(), depth + 1, walk)?);
                }
            }
            "not" => {
                // A copy of the original: its `$ref`s resolve against the root base of the
                // document the negation is built in. Within a `$ref` target of that document
                // they resolve the same (the `$ref` arm refuses a target whose base is not
                // the root's); in another document they would not.
                if at.doc != walk.doc && contains_ref(x) {
                    return Err(unsupported("not", "negating a `not` with `$ref`s from another document", at.at.clone()));
                }
                alts.push(x.clone());
            }
            // Some item fails the items schema: `contains` its negation. (Only the
            // one-schema form that covers every item: positional items shift which items it
            // covers.)
            "items" if (x.is_object() || x.is_boolean()) && !o.contains_key("prefixItems") => {
                let n = nested(walk, |walk| neg_value(cx, at, x.clone(), depth + 1, walk))?;
                if n != Value::Bool(false) {
                    alts.push(obj([("type", "array".into()), ("contains", n)]));
                }
            }
            // The tuple form (no `prefixItems` beside it): some position `j` it lists holds an
            // item its schema rejects, i.e. an array of at least `j + 1` items whose item `j`
            // matches the negation (the positions before and after it stay free).
            "items" if x.is_array() && !o.contains_key("prefixItems") => {
                let schemas = x.as_array().cloned().unwrap_or_default();
                for (j, sub) in schemas.into_iter().enumerate() {
                    let n = nested(walk, |walk| neg_value(cx, at, sub, depth + 1, walk))?;
                    if n == Value::Bool(false) {
                        continue;
                    }
                    let mut tuple = vec![Value::Bool(true); j];
                    tuple.push(n);
                    alts.push(obj([("type", "array".into()), ("minItems", json!(j + 1)), ("items", Value::Array(tuple))]));
                }
            }
            // No item matches (with `minContains: 0` it asks nothing, so nothing; a count
            // above one has no form).
            "contains" if !o.contains_key("maxContains") && o.get("minContains").is_none_or(|m| m.as_u64().is_some_and(|m| m <= 1)) => {
                if o.get("minContains").and_then(Value::as_u64) != Some(0) {
                    let n = nested(walk, |walk| neg_value(cx, at, x.clone(), depth + 1, walk))?;
                    alts.push(obj([("type", "array".into()), ("items", n)]));
                }
            }
            "minContains" | "maxContains" if o.contains_key("contains") => {} // read with `contains`
            // Beside a tuple of `n` schemas: `false` allows no item after them, so its
            // negation is more than `n` items; `true` allows every item, so nothing. (A
            // schema would need "some item after position `n` fails it", which has no form.)
            // Without a tuple it applies to nothing, so it adds nothing.
            "additionalItems" if !o.get("items").is_some_and(Value::is_array) || x.is_boolean() || x.as_object().is_some_and(|m| m.is_empty()) => {
                if let (Some(tuple), Value::Bool(false)) = (o.get("items").and_then(Value::as_array), x) {
                    if !o.contains_key("prefixItems") {
                        alts.push(json!({"type": "array", "minItems": tuple.len() + 1}));
                    }
                }
            }
            // None of the branches matches, or two that may overlap both do (branches proven
            // disjoint never match together).
            "oneOf" => {
                let branches: Vec<Value> = x.as_array().cloned().unwrap_or_default();
                // The disjointness proof reads the branches' `$ref` targets, resolved against
                // the document's root base: sound only where no inner `$id` moves the base.
                // (A real document knows whether it has any below its root: no walk.)
                let doc = &cx.res.docs[at.doc];
                let real_root = std::sync::Arc::ptr_eq(&at.root, &doc.value);
                let inner_ids = (!real_root || doc.ids_below_root) && at.root.as_object().is_some_and(|o| o.iter().any(|(k, v)| k != "$id" && k != "id" && has_id(v)));
                if inner_ids && contains_ref(x) {
                    return Err(unsupported("oneOf", "its negation is not expressible as a grammar (`$ref`s in a document with inner `$id`s)", at.at.clone()));
                }
                let conj: Vec<Conjunct> = branches.iter().map(|b| cx.synth(b.clone(), at, "oneOf")).collect();
                let mut sigs = Vec::new();
                for c in &conj {
                    sigs.push(signature(cx, &[], c)?);
                }
                let mut both = Vec::new();
                for a in 0..sigs.len() {
                    for b in a + 1..sigs.len() {
                        if !sigs[a].empty && !sigs[b].empty && !disjoint(cx, &sigs[a], &sigs[b]) {
                            // Copies of the originals, as for `not` below.
                            if at.doc != walk.doc && (contains_ref(&branches[a]) || contains_ref(&branches[b])) {
                                return Err(unsupported("oneOf", format!("its negation (branches {a} and {b} may both match) copies `$ref`s from another document"), at.at.clone()));
                            }
                            both.push(json!({"allOf": [branches[a], branches[b]]}));
                        }
                    }
                }
                let mut all = Vec::new();
                for b in branches {
                    all.push(neg_value(cx, at, b, depth + 1, walk)?);
                }
                alts.push(obj([("allOf", Value::Array(all))]));
                alts.extend(both);
            }
            "$ref" => {
                let root = std::sync::Arc::new(Value::Object(o.clone()));
                let probe = Conjunct { node: Conjunct::locate(&root, ""), root, ptr: String::new(), ..at.clone() };
                let target = cx.resolve_ref(&probe, "$ref")?;
                let tv = target.value().clone();
                // Targets are followed as far as they go; one met again below itself is a
                // recursive schema. The `$ref`s inside a target are resolved against its
                // document's root base, which is its own base only when no `$id` lies on
                // the way to it or inside it: otherwise it must not contain `$ref`s.
                let root_base = cx.res.base_at(&crate::resolve::Loc { doc: target.doc, ptr: String::new() });
                let own_base = cx.res.base_at(&crate::resolve::Loc { doc: target.doc, ptr: target.ptr.clone() });
                if (own_base != root_base || (cx.res.docs[target.doc].ids && has_id(&tv))) && contains_ref(&tv) {
                    return Err(unsupported("not", "negating a schema with `$ref`s under an `$id`", at.at.clone()));
                }
                // Below the negated instance (a property's value, an item), "not this
                // `$ref`" is left as that, whether or not the target is recursive: the
                // compiler negates the target where it compiles that value, once per target
                // (`Conjunct::key`), instead of once per negation that reaches it. The
                // negations of a `oneOf` whose branches share their targets (each branch's
                // value a `$ref` to the same definitions, which may hold the `oneOf`
                // itself) then share one rule per target. A recursive target is cut here too:
                // the compiler's memo of conjunctions closes the recursion. The copied `$ref`
                // resolves against the document root, as the other copies do.
                if walk.level > 0 && at.doc == walk.doc && walk.universe.is_none() {
                    alts.push(json!({"not": {"$ref": x}}));
                    continue;
                }
                let key = format!("{}#{}", target.doc, target.ptr);
                if walk.refs.contains(&key) {
                    // A recursive schema, met again below itself where the reference is not
                    // left as one (above): at the same instance, where the recursion would
                    // not move down the input, or in a value of another document. Refused.
                    return Err(unsupported("not", format!("negating a recursive schema (`$ref` to {:?} inside itself, at the same instance or through another document)", target.ptr), at.at.clone()));
                }
                walk.refs.push(key);
                let n = neg_value(cx, &target, tv, depth + 1, walk);
                walk.refs.pop();
                alts.push(n?);
            }
            "x-formwork-not-values" => return Err(unsupported("not", "double negation of values", at.at.clone())),
            // Strings that do not match (`pattern` constrains only strings).
            "pattern" => alts.push(json!({"type": "string", "x-formwork-not-pattern": [x]})),
            // (Not `format`: formwork's grammar of a format may be narrower than the
            // validator's notion of it, and the complement of a narrower language is wider.)
            // Within a closed universe of keys: one it does not list is present, with a value
            // its `additionalProperties` rejects.
            "additionalProperties" if walk.universe.is_some() && !o.contains_key("patternProperties") => {
                let listed: Vec<&String> = o.get("properties").and_then(Value::as_object).map(|m| m.keys().collect()).unwrap_or_default();
                let n = nested(walk, |walk| neg_value(cx, at, x.clone(), depth + 1, walk))?;
                if n != Value::Bool(false) {
                    let universe = walk.universe.clone().unwrap_or_default();
                    for k in universe.iter().filter(|k| !listed.contains(k)) {
                        alts.push(obj([("type", "object".into()), ("required", json!([k])), ("properties", obj([(k.as_str(), n.clone())]))]));
                    }
                }
            }
            // Outside a closed universe (or beside `patternProperties`): some key the
            // keyword applies to (not listed in `properties`, matching none of the
            // `patternProperties`) is present, with a value it rejects: a key witness
            // ([`SOME_KEY`], which the object compiler expands).
            "additionalProperties" => {
                let n = nested(walk, |walk| neg_value(cx, at, x.clone(), depth + 1, walk))?;
                if n != Value::Bool(false) {
                    let listed: Vec<&String> = o.get("properties").and_then(Value::as_object).map(|m| m.keys().collect()).unwrap_or_default();
                    let pats: Vec<&String> = o.get("patternProperties").and_then(Value::as_object).map(|m| m.keys().collect()).unwrap_or_default();
                    let mut key = json!({"type": "string"});
                    if !listed.is_empty() {
                        key["x-formwork-not-values"] = json!(listed);
                    }
                    if !pats.is_empty() {
                        key["x-formwork-not-pattern"] = json!(pats);
                    }
                    let props: Map<String, Value> = listed.iter().map(|k| ((*k).clone(), Value::Bool(true))).collect();
                    let pps: Map<String, Value> = pats.iter().map(|k| ((*k).clone(), Value::Bool(true))).collect();
                    let std = json!({"not": {"properties": props, "patternProperties": pps, "additionalProperties": x}});
                    alts.push(obj([("type", "object".into()), (SOME_KEY, obj([("kw", kw.into()), ("key", key), ("value", n), ("std", std)]))]));
                }
            }
            // Some key that matches a pattern has a value its schema rejects.
            "patternProperties" => {
                for (pat, sub) in x.as_object().into_iter().flatten() {
                    let n = nested(walk, |walk| neg_value(cx, at, sub.clone(), depth + 1, walk))?;
                    if n != Value::Bool(false) {
                        let std = json!({"not": {"patternProperties": { pat.clone(): sub }}});
                        alts.push(obj([("type", "object".into()), (SOME_KEY, obj([("kw", kw.into()), ("key", json!({"type": "string", "pattern": pat})), ("value", n), ("std", std)]))]));
                    }
                }
            }
            // Some key fails the schema: one of finitely many names is present, or with
            // `false` any key is, or else a key witness.
            "propertyNames" => {
                let n = nested(walk, |walk| neg_value(cx, at, x.clone(), depth + 1, walk))?;
                match &n {
                    Value::Bool(false) => {}
                    Value::Bool(true) => alts.push(json!({"type": "object", "minProperties": 1})),
                    _ => match finite_strings(&n) {
                        Some(names) => {
                            for k in names {
                                alts.push(json!({"type": "object", "required": [k]}));
                            }
                        }
                        None => alts.push(json!({"type": "object", SOME_KEY: {"kw": kw, "key": n, "value": true, "std": {"not": {"propertyNames": x}}}})),
                    },
                }
            }
            SOME_KEY => {
                let kw = x.get("kw").and_then(Value::as_str).unwrap_or("not");
                return Err(unsupported(kw, "the negation of a negated keyword that needs a key witness", at.at.clone()));
            }
            // (Before draft 7 `if`/`then`/`else` are unknown keywords: nothing.) Else
            // `¬(if A then B else C)` = `(A ∧ ¬B) ∨ (¬A ∧ ¬C)`, a missing `then` or `else`
            // being `true` (so its side adds nothing).
            "if" if matches!(cx.draft(at), crate::Draft::Draft4 | crate::Draft::Draft6) => {}
            "if" => {
                if at.doc != walk.doc && contains_ref(x) {
                    return Err(unsupported("if", "its negation copies `$ref`s from another document", at.at.clone()));
                }
                if let Some(b) = o.get("then") {
                    let nb = neg_value(cx, at, b.clone(), depth + 1, walk)?;
                    if nb != Value::Bool(false) {
                        alts.push(obj([("allOf", Value::Array(vec![x.clone(), nb]))]));
                    }
                }
                if let Some(c) = o.get("else") {
                    let nc = neg_value(cx, at, c.clone(), depth + 1, walk)?;
                    if nc != Value::Bool(false) {
                        let na = neg_value(cx, at, x.clone(), depth + 1, walk)?;
                        alts.push(obj([("allOf", Value::Array(vec![na, nc]))]));
                    }
                }
            }
            "then" | "else" => {} // read with `if`; alone they constrain nothing
            // A key is present and one of the names it brings is not (objects only).
            "dependentRequired" | "dependencies" | "dependentSchemas" => {
                for (k, d) in x.as_object().into_iter().flatten() {
                    match d {
                        Value::Array(names) if kw != "dependentSchemas" => {
                            for n in names.iter().filter_map(Value::as_str).filter(|n| n != k) {
                                alts.push(json!({"type": "object", "required": [k], "properties": { n: false }}));
                            }
                        }
                        _ if kw != "dependentRequired" => {
                            // The key is present and the instance fails the schema.
                            let n = neg_value(cx, at, d.clone(), depth + 1, walk)?;
                            if n != Value::Bool(false) {
                                alts.push(obj([("type", "object".into()), ("required", json!([k])), ("allOf", Value::Array(vec![n]))]));
                            }
                        }
                        _ => return Err(unsupported(kw, "must map names to arrays of names (dependentRequired) or to schemas", at.at.clone())),
                    }
                }
            }
            // Back from non-integral numbers: integers (the keyword constrains only numbers).
            "x-formwork-non-integral" => alts.push(json!({"type": "integer"})),
            // Back from a negated pattern: strings that match one of them.
            "x-formwork-not-pattern" => {
                for p in x.as_array().into_iter().flatten() {
                    alts.push(json!({"type": "string", "pattern": p}));
                }
            }
            // An annotation constrains nothing, so it adds nothing to the negation.
            "format" if cx.opts.formats_as_annotations => {}
            "format" if cx.opts.unknown_formats_as_annotations && x.as_str().is_some_and(|f| crate::format::regex_for(f).is_none()) => {}
            // Numbers that are not multiples of an integer (a decimal step stays refused).
            "multipleOf" if x.as_u64().is_some_and(|m| m > 0) => alts.push(json!({"type": "number", NOT_MULTIPLE_OF: x})),
            NOT_MULTIPLE_OF => alts.push(json!({"type": "number", "multipleOf": x})),
            "format" | "items" | "prefixItems" | "additionalItems" | "contains" | "minContains" | "maxContains" | "uniqueItems" | "multipleOf"
            | "unevaluatedProperties" | "unevaluatedItems" | "$dynamicRef" | "$recursiveRef" => {
                return Err(unsupported(kw, "its negation is not expressible as a grammar", at.at.clone()));
            }
            _ => {} // unknown keywords are annotations
        }
    }
    merge_absent_or_failing(&mut alts);
    Ok(match alts.len() {
        0 => Value::Bool(false),
        1 => alts.pop().unwrap_or(Value::Bool(false)),
        _ => obj([("anyOf", Value::Array(alts))]),
    })
}


/// Merges, for each key `r` that the negated schema both requires and describes, the two
/// reasons about it into one: "`r` is absent" (from `required`) or "`r` is present with a
/// value its schema rejects" (from `properties`) is exactly "`r`, if present, has such a
/// value", which is `properties: {r: ¬S}` alone. The same set of instances, one alternative
/// fewer: a conjunction of negations (the exact form of `oneOf`) distributes into the
/// product of their alternatives, so each negated branch that discriminates by one required
/// key costs one alternative instead of two (eight such branches: 1 part instead of 256).
fn merge_absent_or_failing(alts: &mut Vec<Value>) {
    // The key `r` of an alternative `{type: object, properties: {r: false}}`.
    fn absent_key(v: &Value) -> Option<&str> {
        let o = v.as_object()?;
        let props = o.get("properties")?.as_object()?;
        if o.len() != 2 || o.get("type")? != "object" || props.len() != 1 {
            return None;
        }
        let (k, s) = props.iter().next()?;
        (s == &Value::Bool(false)).then_some(k.as_str())
    }
    // The key and value negation of `{type: object, required: [r], properties: {r: n}}`.
    fn failing_key(v: &Value) -> Option<(&str, &Value)> {
        let o = v.as_object()?;
        let props = o.get("properties")?.as_object()?;
        let req = o.get("required")?.as_array()?;
        if o.len() != 3 || o.get("type")? != "object" || props.len() != 1 || req.len() != 1 {
            return None;
        }
        let (k, n) = props.iter().next()?;
        (req[0].as_str() == Some(k.as_str())).then_some((k.as_str(), n))
    }
    let mut i = 0;
    while i < alts.len() {
        let Some(r) = absent_key(&alts[i]).map(str::to_string) else {
            i += 1;
            continue;
        };
        if let Some(j) = alts.iter().position(|a| failing_key(a).is_some_and(|(k, _)| k == r)) {
            let mut failing = alts.remove(j);
            if j < i {
                i -= 1;
            }
            let n = failing.get_mut("properties").and_then(|p| p.get_mut(r.as_str())).map(Value::take).unwrap_or(Value::Bool(false));
            alts[i] = obj([("type", "object".into()), ("properties", obj([(r.as_str(), n)]))]);
        }
        i += 1;
    }
}

/// A schema object from its members, moved in (`json!` would copy each value through the
/// serializer: a negation wraps the negations below it level by level, so copies would
/// cost the size of the subtree at every level).
fn obj<'k>(members: impl IntoIterator<Item = (&'k str, Value)>) -> Value {
    Value::Object(members.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

/// The strings a schema accepts when they are finitely many and read off its `const` or
/// `enum` (all its other keywords annotations).
fn finite_strings(v: &Value) -> Option<Vec<String>> {
    let o = v.as_object()?;
    if o.keys().any(|k| !IGNORED.contains(&k.as_str()) && k != "const" && k != "enum" && k != "type") {
        return None;
    }
    if o.contains_key("const") && o.contains_key("enum") {
        return None;
    }
    let vals = consts_of(o)?;
    if o.get("type").is_some_and(|t| type_bits(t).is_none_or(|b| !b.intersects(JsonTypes::STR))) {
        return Some(Vec::new());
    }
    Some(vals.iter().filter_map(|v| v.as_str().map(String::from)).collect())
}

/// Runs `f` for a value that describes another instance (a property's value, an item),
/// where the universe of keys does not apply.
fn nested<T>(walk: &mut Walk, f: impl FnOnce(&mut Walk) -> T) -> T {
    let universe = walk.universe.take();
    walk.level += 1;
    let r = f(walk);
    walk.level -= 1;
    walk.universe = universe;
    r
}

/// The keys of the closed object `p` describes (`additionalProperties: false`, no
/// `patternProperties`), through `$ref`s; `None` when it is not closed that way.
pub(crate) fn closed_keys(cx: &mut Compiler, p: &Conjunct) -> CompileResult<Option<Vec<String>>> {
    let p = deref(cx, p.clone(), 8)?;
    let Some(o) = p.obj() else { return Ok(None) };
    if o.get("additionalProperties") != Some(&Value::Bool(false)) || o.contains_key("patternProperties") {
        return Ok(None);
    }
    Ok(Some(o.get("properties").and_then(Value::as_object).map(|m| m.keys().cloned().collect()).unwrap_or_default()))
}

/// Whether `v` holds a `$ref` keyword anywhere.
pub(crate) fn contains_ref(v: &Value) -> bool {
    match v {
        Value::Object(o) => o.get("$ref").is_some_and(Value::is_string) || o.values().any(contains_ref),
        Value::Array(a) => a.iter().any(contains_ref),
        _ => false,
    }
}

/// Whether `v` sets a base URI anywhere (`$id`, or draft 4's `id` with a string value; a
/// property named `id` maps to a schema, not a string).
fn has_id(v: &Value) -> bool {
    match v {
        Value::Object(o) => ["$id", "id"].iter().any(|k| o.get(*k).is_some_and(Value::is_string)) || o.values().any(has_id),
        Value::Array(a) => a.iter().any(has_id),
        _ => false,
    }
}

/// What a `oneOf` branch can match, coarsely: necessary conditions on its instances, read
/// off its keywords (and those of its `allOf` members and `$ref` targets, a few levels
/// deep), enough to prove two branches disjoint.
#[derive(Debug, Clone)]
pub(crate) struct Sig {
    /// The branch itself (to check another branch's constant values against it).
    pub at: Conjunct,
    pub types: JsonTypes,
    /// `(property, allowed values, required)`; property `None` means the instance itself.
    pub consts: Vec<(Option<String>, Vec<Value>, bool)>,
    /// Keys an object instance must have.
    pub required: Vec<String>,
    /// Keys an object instance must not have: `properties: {k: false}`.
    pub forbidden: Vec<String>,
    /// Per member with `additionalProperties: false`: the only keys it allows.
    pub closed: Vec<Closed>,
    /// The fewest keys an object instance has (`minProperties`, and at least one when it
    /// requires a key).
    pub min_keys: u64,
    /// `(property, its types, its schema)` for every property a member describes.
    pub props: Vec<(String, JsonTypes, Conjunct)>,
    /// `(pattern, its types)` for every `patternProperties` entry of a member: a key that
    /// matches the pattern must have a value of these types.
    pub pattern_props: Vec<(String, JsonTypes)>,
    /// Per `anyOf`/`oneOf` of the branch (or of its `allOf` members and `$ref` targets, up to
    /// [`SIG_ALT_DEPTH`] combinators deep): the signatures of its branches, each read alone
    /// (so each holds at least the instances of the branch that take it). An instance of
    /// the branch matches one branch of each.
    pub alts: Vec<Vec<Sig>>,
    pub empty: bool,
}

/// The keys a closed object (`additionalProperties: false`) allows: its `properties` and the
/// keys its `patternProperties` match.
#[derive(Debug, Clone, Default)]
pub(crate) struct Closed {
    pub names: Vec<String>,
    pub patterns: Vec<String>,
}

impl Closed {
    /// Is key `k` surely not allowed? (A pattern formwork cannot run may allow it.)
    fn excludes(&self, cx: &Compiler, k: &str) -> bool {
        !self.names.iter().any(|a| a == k) && self.patterns.iter().all(|p| cx.pattern_matches(p, k) == Some(false))
    }

    /// Is no key allowed by both `self` and `other`? Names are checked against the other's
    /// names and patterns; two sets of patterns by the intersection of their languages
    /// (`regex::patterns_disjoint`).
    fn disjoint(&self, cx: &mut Compiler, other: &Closed) -> bool {
        self.names.iter().all(|k| other.excludes(cx, k))
            && other.names.iter().all(|k| self.excludes(cx, k))
            && (self.patterns.is_empty() || other.patterns.is_empty() || crate::regex::patterns_disjoint(cx, &self.patterns, &other.patterns))
    }
}

impl Sig {
    /// Can an object instance of this signature not have key `k`?
    fn excludes_key(&self, cx: &Compiler, k: &str) -> bool {
        self.forbidden.iter().any(|f| f == k) || self.closed.iter().any(|c| c.excludes(cx, k))
    }
}

/// True when no instance can match both `a` and `b`. Each rule uses only necessary
/// conditions of each side, so a `true` is a proof; `false` means "not proven".
/// - their types do not meet;
/// - a constant-valued part (the instance, or a property one of them requires) has no
///   value in common with the other's constants for it, or none that the other's schema
///   for it accepts (checked exactly, through `jsonschema`);
/// - one side is (or holds in an `allOf`, through `$ref`s) an `anyOf`/`oneOf` each of
///   whose branches is disjoint from the other side;
/// - objects only: one requires a key the other forbids (a closed object that neither
///   lists it nor matches it with a `patternProperties` pattern, `not: {required: [k]}`,
///   or the key's schema `false`); both are closed with no key allowed by both (names
///   checked by the patterns, patterns by the intersection of their languages) and one
///   has a key (`required` or `minProperties`); or a key one requires has types that do not meet in the two
///   (the other's types for it from `properties`, or from a `patternProperties` entry whose
///   pattern matches the key).
pub(crate) fn disjoint(cx: &mut Compiler, a: &Sig, b: &Sig) -> bool {
    disjoint_at(cx, a, b, 0)
}

/// Most levels of properties [`disjoint`] descends into (the value of a key both sides
/// describe, one requiring it).
const DISJOINT_PROPERTY_DEPTH: usize = 2;

/// [`disjoint`] of the values of properties `depth` levels down.
fn disjoint_at(cx: &mut Compiler, a: &Sig, b: &Sig, depth: usize) -> bool {
    if !a.types.intersects(b.types) {
        return true;
    }
    // One side's instances all take a branch of one of its combinators: disjoint when
    // every such branch is disjoint from the other side.
    for (x, y) in [(a, b), (b, a)] {
        if x.alts.iter().any(|group| group.iter().all(|s| s.empty || disjoint_at(cx, s, y, depth))) {
            return true;
        }
    }
    let only_objects = !(a.types & b.types).intersects(!JsonTypes::OBJ);
    for (x, y) in [(a, b), (b, a)] {
        for (k, vals, rx) in &x.consts {
            // Against the other's constants for the same part.
            for (k2, vals2, ry) in &y.consts {
                if k == k2 && (*rx || *ry) && !vals.iter().any(|v| vals2.iter().any(|w| crate::json_types::json_eq(v, w))) && (k.is_none() || only_objects) {
                    return true;
                }
            }
            // Against the other's schema for it: no constant is valid there.
            let none_valid = |cx: &mut Compiler, at: &Conjunct| vals.iter().all(|v| matches!(cx.validate_at(at, v), Ok(false)));
            match k {
                None => {
                    if none_valid(cx, &y.at) {
                        return true;
                    }
                }
                Some(k) if only_objects && (*rx || x.required.contains(k) || y.required.contains(k)) => {
                    for (k2, _, at) in &y.props {
                        if k2 == k && none_valid(cx, at) {
                            return true;
                        }
                    }
                }
                Some(_) => {}
            }
        }
        if only_objects {
            if x.required.iter().any(|k| y.excludes_key(cx, k)) {
                return true;
            }
            // Both closed, with no key allowed by both, and one side has a key: an instance
            // of it has a key the other does not allow.
            if x.min_keys > 0 && x.closed.iter().any(|a| y.closed.iter().any(|b| a.disjoint(cx, b))) {
                return true;
            }
            for (k, tx, _) in &x.props {
                if x.required.contains(k) || y.required.contains(k) {
                    if y.props.iter().any(|(k2, ty, _)| k2 == k && !tx.intersects(*ty)) {
                        return true;
                    }
                }
                // A key `x` requires, whose value `y`'s `patternProperties` give types that
                // do not meet `x`'s for it (a pattern applies beside `properties`).
                if x.required.contains(k)
                    && y.pattern_props.iter().any(|(pat, ty)| !tx.intersects(*ty) && cx.pattern_matches(pat, k) == Some(true))
                {
                    return true;
                }
            }
        }
    }
    // A key one side requires, whose value no schema of the one side for it and schema of
    // the other for it both accept (the same rules one level of the instance down: two
    // `annotation` objects told apart by their own `type` constants). Each side's value
    // meets every one of its schemas for the key (each read within the others, which give
    // it their types and required keys), so one disjoint pair is a proof.
    if depth < DISJOINT_PROPERTY_DEPTH && !(a.types & b.types).intersects(!JsonTypes::OBJ) {
        let mut keys: Vec<&String> = a.required.iter().chain(&b.required).collect();
        keys.sort();
        keys.dedup();
        for k in keys {
            let of = |s: &Sig| -> Vec<Conjunct> { s.props.iter().filter(|(kk, _, _)| kk == k).map(|(_, _, at)| at.clone()).collect() };
            let (xs, ys) = (of(a), of(b));
            if xs.is_empty() || ys.is_empty() {
                continue;
            }
            let sigs = |cx: &mut Compiler, all: &[Conjunct]| -> Vec<Sig> { all.iter().filter_map(|at| signature_at(cx, all, at, 0).ok()).collect() };
            let (sx, sy) = (sigs(cx, &xs), sigs(cx, &ys));
            for x in &sx {
                for y in &sy {
                    if !x.empty && !y.empty && disjoint_at(cx, x, y, depth + 1) {
                        return true;
                    }
                }
            }
        }
    }
    false
}

fn deref(cx: &mut Compiler, p: Conjunct, hops: usize) -> CompileResult<Conjunct> {
    let mut p = p;
    for _ in 0..hops {
        let Some(o) = p.obj() else { break };
        if o.contains_key("$ref") && (o.len() == 1 || cx.draft(&p).ref_overrides_siblings()) {
            p = cx.resolve_ref(&p, "$ref")?;
        } else {
            break;
        }
    }
    Ok(p)
}

/// The types `vals` fall in (an integral value also counts as a number with a fraction, as
/// `1.0` is the same number as `1`).
fn types_of_values(vals: &[Value]) -> JsonTypes {
    vals.iter().fold(JsonTypes::empty(), |acc, v| acc | value_type(v) | if value_type(v) == JsonTypes::INT { JsonTypes::FRAC } else { JsonTypes::empty() })
}

fn consts_of(v: &Map<String, Value>) -> Option<Vec<Value>> {
    if let Some(c) = v.get("const") {
        return Some(vec![c.clone()]);
    }
    v.get("enum").and_then(|e| e.as_array()).cloned()
}

/// The signature of `branch` within the conjunction `parts`.
pub(crate) fn signature(cx: &mut Compiler, parts: &[Conjunct], branch: &Conjunct) -> CompileResult<Sig> {
    signature_at(cx, parts, branch, 0)
}

/// Most nested `anyOf`/`oneOf` levels a signature reads ([`Sig::alts`]), and most branches
/// it reads of one.
const SIG_ALT_DEPTH: usize = 2;
const SIG_ALT_BRANCHES: usize = 16;

/// [`signature`] of a branch `nest` combinators deep.
fn signature_at(cx: &mut Compiler, parts: &[Conjunct], branch: &Conjunct, nest: usize) -> CompileResult<Sig> {
    let mut types = JsonTypes::all();
    for p in parts {
        if let Some(t) = p.get("type").and_then(type_bits) {
            types &= t;
        }
    }
    let mut sig = Sig {
        at: branch.clone(),
        types,
        consts: Vec::new(),
        required: Vec::new(),
        forbidden: Vec::new(),
        closed: Vec::new(),
        min_keys: 0,
        props: Vec::new(),
        pattern_props: Vec::new(),
        alts: Vec::new(),
        empty: false,
    };
    // The branch and its allOf members / $ref targets, a few levels deep.
    let mut stack = vec![(branch.clone(), 0usize)];
    while let Some((b, d)) = stack.pop() {
        let b = deref(cx, b, 8)?;
        match b.value() {
            Value::Bool(false) => sig.empty = true,
            Value::Object(o) => {
                if let Some(t) = o.get("type").and_then(type_bits) {
                    sig.types &= t;
                }
                if let Some(vals) = consts_of(o) {
                    sig.types &= types_of_values(&vals);
                    sig.consts.push((None, vals, true));
                }
                let required: Vec<String> = o.get("required").and_then(|r| r.as_array()).map(|r| r.iter().filter_map(|x| x.as_str().map(String::from)).collect()).unwrap_or_default();
                let props = o.get("properties").and_then(|p| p.as_object());
                if let Some(props) = props {
                    for k in props.keys() {
                        let sub = deref(cx, b.sub(&format!("/properties/{}", crate::resolve::escape_ptr(k))), 8)?;
                        match sub.value() {
                            Value::Bool(false) => sig.forbidden.push(k.clone()),
                            Value::Object(so) => {
                                let mut t = so.get("type").and_then(type_bits).unwrap_or(JsonTypes::all());
                                if let Some(vals) = consts_of(so) {
                                    t &= types_of_values(&vals);
                                    sig.consts.push((Some(k.clone()), vals, required.contains(k)));
                                }
                                sig.props.push((k.clone(), t, sub.clone()));
                            }
                            _ => {}
                        }
                    }
                }
                if let Some(pp) = o.get("patternProperties").and_then(Value::as_object) {
                    for pat in pp.keys() {
                        let sub = deref(cx, b.sub(&format!("/patternProperties/{}", crate::resolve::escape_ptr(pat))), 8)?;
                        let t = match sub.value() {
                            Value::Bool(false) => JsonTypes::empty(),
                            Value::Object(so) => {
                                let mut t = so.get("type").and_then(type_bits).unwrap_or(JsonTypes::all());
                                if let Some(vals) = consts_of(so) {
                                    t &= types_of_values(&vals);
                                }
                                t
                            }
                            _ => JsonTypes::all(),
                        };
                        if t != JsonTypes::all() {
                            sig.pattern_props.push((pat.clone(), t));
                        }
                    }
                }
                if o.get("additionalProperties") == Some(&Value::Bool(false)) {
                    sig.closed.push(Closed {
                        names: props.map(|p| p.keys().cloned().collect()).unwrap_or_default(),
                        patterns: o.get("patternProperties").and_then(Value::as_object).map(|p| p.keys().cloned().collect()).unwrap_or_default(),
                    });
                }
                if let Some(n) = o.get("minProperties").and_then(Value::as_u64) {
                    sig.min_keys = sig.min_keys.max(n);
                }
                // `not: {required: [k]}`: key `k` is absent.
                if let Some(n) = o.get("not").and_then(Value::as_object) {
                    if let Some([Value::String(k)]) = n.get("required").and_then(Value::as_array).map(Vec::as_slice) {
                        if n.keys().all(|kw| kw == "required" || IGNORED.contains(&kw.as_str())) {
                            sig.forbidden.push(k.clone());
                        }
                    }
                }
                sig.required.extend(required);
                if d < 4 {
                    if let Some(all) = o.get("allOf").and_then(|a| a.as_array()) {
                        for i in 0..all.len() {
                            stack.push((b.sub(&format!("/allOf/{i}")), d + 1));
                        }
                    }
                }
                if nest < SIG_ALT_DEPTH {
                    for kw in ["anyOf", "oneOf"] {
                        let Some(n) = o.get(kw).and_then(Value::as_array).map(Vec::len).filter(|&n| n <= SIG_ALT_BRANCHES) else { continue };
                        let mut group = Vec::with_capacity(n);
                        for i in 0..n {
                            group.push(signature_at(cx, parts, &b.sub(&format!("/{kw}/{i}")), nest + 1)?);
                        }
                        sig.alts.push(group);
                    }
                }
            }
            _ => {}
        }
    }
    // Keys the rest of the conjunction requires: every instance that matters has them
    // (one that lacks them fails the conjunction whatever the branches say).
    for p in parts {
        if let Some(r) = p.get("required").and_then(Value::as_array) {
            sig.required.extend(r.iter().filter_map(|x| x.as_str().map(String::from)));
        }
    }
    if !sig.required.is_empty() {
        sig.min_keys = sig.min_keys.max(1);
    }
    for (k, _, required) in &mut sig.consts {
        if k.as_ref().is_some_and(|k| sig.required.contains(k)) {
            *required = true;
        }
    }
    if sig.types.is_empty() {
        sig.empty = true;
    }
    Ok(sig)
}
