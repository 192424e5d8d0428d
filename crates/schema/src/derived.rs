//! Derived schemas: the extension keywords that negations and other rewrites write into the
//! schemas they build (`x-formwork-not-values`, `x-formwork-not-pattern`,
//! `x-formwork-non-integral`, [`NOT_MULTIPLE_OF`], the key witness [`SOME_KEY`]), and those schemas in standard
//! keywords for a validator ([`standard`], [`absolute_refs`]). Below both the negation
//! (`negate`) that writes them and the compiler's value checks that read them.

use serde_json::{json, Map, Value};

/// Keywords that never constrain (annotations and structure).
pub(crate) const IGNORED: &[&str] = &[
    "title", "description", "default", "examples", "$comment", "deprecated", "readOnly", "writeOnly", "$schema", "$id", "id",
    "$anchor", "$dynamicAnchor", "$defs", "definitions", "contentMediaType", "contentEncoding", "contentSchema", "$vocabulary",
];

/// The keyword of a key witness: "some key the witness admits is present, with a value
/// that `value` accepts". It is what the negations of `additionalProperties`,
/// `patternProperties` and `propertyNames` leave in an object whose keys are not a known
/// finite set. `key` is a string schema of the keys it admits (the grammar of the additional
/// keys that meet it, and the exact check of the listed names that do); `std` is the
/// negation it stands for in standard keywords (for validators, [`standard`]); `kw` is the
/// negated keyword, named in refusals. The object compiler expands it
/// (`compile/object.rs`, `some_keys`).
pub(crate) const SOME_KEY: &str = "x-formwork-some-key";

/// A number must not be a multiple of this positive integer (a negated `multipleOf`; it
/// constrains only numbers).
pub(crate) const NOT_MULTIPLE_OF: &str = "x-formwork-not-multiple-of";

/// `v` (a schema a negation or another derivation built) in standard keywords, for a
/// validator: `x-formwork-not-values` becomes `not: {enum}`, `x-formwork-not-pattern` "not a
/// string matching one of them", `x-formwork-non-integral` `not: {type: integer}`, and a key
/// witness the negation it stands for (its `std`), each added under `allOf` beside the rest;
/// subschemas are translated where they are.
pub(crate) fn standard(v: &Value) -> Value {
    use crate::keywords::{ARR_KW, MAP_KW, ONE_KW};
    let Value::Object(o) = v else { return v.clone() };
    let mut out = Map::new();
    let mut extra: Vec<Value> = Vec::new();
    for (k, x) in o {
        match k.as_str() {
            "x-formwork-not-values" => extra.push(json!({"not": {"enum": x}})),
            "x-formwork-not-pattern" => {
                let pats: Vec<Value> = x.as_array().into_iter().flatten().map(|p| json!({"type": "string", "pattern": p})).collect();
                extra.push(json!({"not": {"anyOf": pats}}));
            }
            "x-formwork-non-integral" => extra.push(json!({"not": {"type": "integer"}})),
            NOT_MULTIPLE_OF => extra.push(json!({"not": {"type": "number", "multipleOf": x}})),
            SOME_KEY => extra.push(x.get("std").cloned().unwrap_or(Value::Bool(false))),
            "x-formwork-first" => {}
            _ if MAP_KW.contains(&k.as_str()) && x.is_object() => {
                let m: Map<String, Value> = x.as_object().into_iter().flatten().map(|(n, s)| (n.clone(), if s.is_array() { s.clone() } else { standard(s) })).collect();
                out.insert(k.clone(), Value::Object(m));
            }
            _ if ARR_KW.contains(&k.as_str()) && x.is_array() => {
                out.insert(k.clone(), Value::Array(x.as_array().into_iter().flatten().map(standard).collect()));
            }
            _ if ONE_KW.contains(&k.as_str()) => {
                out.insert(k.clone(), standard(x));
            }
            _ => {
                out.insert(k.clone(), x.clone());
            }
        }
    }
    if !extra.is_empty() {
        match out.get_mut("allOf").and_then(Value::as_array_mut) {
            Some(all) => all.extend(extra),
            None => {
                out.insert("allOf".into(), Value::Array(extra));
            }
        }
    }
    Value::Object(out)
}

/// Makes every `$ref` in the schema `v` absolute against `base` (schema positions only: a
/// `const` or `enum` value is data).
pub(crate) fn absolute_refs(v: &mut Value, base: &str) {
    use crate::keywords::{ARR_KW, MAP_KW, ONE_KW};
    let Value::Object(o) = v else { return };
    for (k, x) in o.iter_mut() {
        match k.as_str() {
            "$ref" => {
                if let Value::String(r) = x {
                    *r = crate::resolve::join(base, r);
                }
            }
            _ if MAP_KW.contains(&k.as_str()) => {
                for s in x.as_object_mut().into_iter().flat_map(|m| m.values_mut()) {
                    absolute_refs(s, base);
                }
            }
            _ if ARR_KW.contains(&k.as_str()) && x.is_array() => {
                for s in x.as_array_mut().into_iter().flatten() {
                    absolute_refs(s, base);
                }
            }
            _ if ONE_KW.contains(&k.as_str()) => absolute_refs(x, base),
            _ => {}
        }
    }
}
