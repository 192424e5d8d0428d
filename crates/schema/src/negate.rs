//! `not` pushed down into schemas, and the disjointness analysis behind `oneOf`.
//!
//! A negation is built as a new (synthetic) schema value: `not {required:[a,b]}` becomes
//! `anyOf[{type:object, properties:{a:false}}, {type:object, properties:{b:false}}]`, and so
//! on keyword by keyword (a schema is the conjunction of its keywords, so its negation is the
//! disjunction of theirs). Keywords whose negation is not a schema we can compile are refused.

use crate::compiler::{Compiler, CompileResult};
use crate::conjunct::Conjunct;
use crate::exprs::unsupported;
use crate::json_types::{type_bits, value_type, JsonTypes};
use serde_json::{json, Map, Value};

/// Keywords that never constrain (annotations and structure).
pub(crate) const IGNORED: &[&str] = &[
    "title", "description", "default", "examples", "$comment", "deprecated", "readOnly", "writeOnly", "$schema", "$id", "id",
    "$anchor", "$dynamicAnchor", "$defs", "definitions", "contentMediaType", "contentEncoding", "contentSchema", "$vocabulary",
];

/// The negation of `p`, as a synthetic part.
pub(crate) fn negate(cx: &mut Compiler, p: &Conjunct) -> CompileResult<Conjunct> {
    let v = neg_value(cx, p, p.value().clone(), 0)?;
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

fn neg_value(cx: &mut Compiler, at: &Conjunct, v: Value, depth: usize) -> CompileResult<Value> {
    if depth > 32 {
        return Err(unsupported("not", "negation nested too deeply", at.at.clone()));
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
                let t = types_value(c).ok_or_else(|| unsupported("not", "the negation of `integer` (non-integral numbers) has no type name", at.at.clone()))?;
                alts.push(json!({ "type": t }));
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
                    let n = neg_value(cx, at, sub.clone(), depth + 1)?;
                    if n == Value::Bool(false) {
                        continue;
                    }
                    alts.push(json!({"type": "object", "required": [name], "properties": { name.clone(): n }}));
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
                    all.push(neg_value(cx, at, s.clone(), depth + 1)?);
                }
                alts.push(json!({ "allOf": all }));
            }
            "allOf" => {
                for s in x.as_array().into_iter().flatten() {
                    alts.push(neg_value(cx, at, s.clone(), depth + 1)?);
                }
            }
            "not" => alts.push(x.clone()),
            "$ref" => {
                let root = std::rc::Rc::new(Value::Object(o.clone()));
                let probe = Conjunct { node: Conjunct::locate(&root, ""), root, ptr: String::new(), ..at.clone() };
                let target = cx.resolve_ref(&probe, "$ref")?;
                let tv = target.value().clone();
                if serde_json::to_string(&tv).unwrap_or_default().contains("\"$ref\"") {
                    return Err(unsupported("not", "negating a schema that contains `$ref`s", at.at.clone()));
                }
                alts.push(neg_value(cx, &target, tv, depth + 1)?);
            }
            "x-formwork-not-values" => return Err(unsupported("not", "double negation of values", at.at.clone())),
            // An annotation constrains nothing, so it adds nothing to the negation.
            "format" if cx.opts.formats_as_annotations => {}
            "format" if cx.opts.unknown_formats_as_annotations && x.as_str().is_some_and(|f| crate::format::regex_for(f).is_none()) => {}
            "pattern" | "format" | "items" | "prefixItems" | "additionalItems" | "additionalProperties" | "patternProperties"
            | "propertyNames" | "contains" | "minContains" | "maxContains" | "uniqueItems" | "multipleOf" | "oneOf" | "if"
            | "then" | "else" | "dependentRequired" | "dependentSchemas" | "dependencies" | "unevaluatedProperties"
            | "unevaluatedItems" | "$dynamicRef" | "$recursiveRef" => {
                return Err(unsupported(kw, "its negation is not expressible as a grammar", at.at.clone()));
            }
            _ => {} // unknown keywords are annotations
        }
    }
    Ok(match alts.len() {
        0 => Value::Bool(false),
        1 => alts.pop().unwrap_or(Value::Bool(false)),
        _ => json!({ "anyOf": alts }),
    })
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
    /// Per member with `additionalProperties: false` (and no `patternProperties`): the only
    /// keys it allows.
    pub closed: Vec<Vec<String>>,
    /// `(property, its types, its schema)` for every property a member describes.
    pub props: Vec<(String, JsonTypes, Conjunct)>,
    pub empty: bool,
}

impl Sig {
    /// Can an object instance of this signature not have key `k`?
    fn excludes_key(&self, k: &str) -> bool {
        self.forbidden.iter().any(|f| f == k) || self.closed.iter().any(|allowed| !allowed.iter().any(|a| a == k))
    }
}

/// True when no instance can match both `a` and `b`. Each rule uses only necessary
/// conditions of each side, so a `true` is a proof; `false` means "not proven".
/// - their types do not meet;
/// - a constant-valued part (the instance, or a property one of them requires) has no
///   value in common with the other's constants for it, or none that the other's schema
///   for it accepts (checked exactly, through `jsonschema`);
/// - objects only: one requires a key the other forbids (a closed object without it, or
///   the key's schema `false`), or a key one requires has types that do not meet in the two.
pub(crate) fn disjoint(cx: &mut Compiler, a: &Sig, b: &Sig) -> bool {
    if !a.types.intersects(b.types) {
        return true;
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
            if x.required.iter().any(|k| y.excludes_key(k)) {
                return true;
            }
            for (k, tx, _) in &x.props {
                if x.required.contains(k) || y.required.contains(k) {
                    if y.props.iter().any(|(k2, ty, _)| k2 == k && !tx.intersects(*ty)) {
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

fn consts_of(v: &Map<String, Value>) -> Option<Vec<Value>> {
    if let Some(c) = v.get("const") {
        return Some(vec![c.clone()]);
    }
    v.get("enum").and_then(|e| e.as_array()).cloned()
}

/// The signature of `branch` within the conjunction `parts`.
pub(crate) fn signature(cx: &mut Compiler, parts: &[Conjunct], branch: &Conjunct) -> CompileResult<Sig> {
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
        props: Vec::new(),
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
                    sig.types &= vals.iter().fold(JsonTypes::empty(), |acc, v| acc | value_type(v) | if value_type(v) == JsonTypes::INT { JsonTypes::FRAC } else { JsonTypes::empty() });
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
                                    t &= vals.iter().fold(JsonTypes::empty(), |acc, v| acc | value_type(v) | if value_type(v) == JsonTypes::INT { JsonTypes::FRAC } else { JsonTypes::empty() });
                                    sig.consts.push((Some(k.clone()), vals, required.contains(k)));
                                }
                                sig.props.push((k.clone(), t, sub.clone()));
                            }
                            _ => {}
                        }
                    }
                }
                if o.get("additionalProperties") == Some(&Value::Bool(false)) && !o.contains_key("patternProperties") {
                    sig.closed.push(props.map(|p| p.keys().cloned().collect()).unwrap_or_default());
                }
                sig.required.extend(required);
                if d < 4 {
                    if let Some(all) = o.get("allOf").and_then(|a| a.as_array()) {
                        for i in 0..all.len() {
                            stack.push((b.sub(&format!("/allOf/{i}")), d + 1));
                        }
                    }
                }
            }
            _ => {}
        }
    }
    if sig.types.is_empty() {
        sig.empty = true;
    }
    Ok(sig)
}
