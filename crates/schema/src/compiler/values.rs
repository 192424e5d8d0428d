//! Values in schemas: checking an `enum`/`const` value against the rest of its conjunction
//! (through `jsonschema` validators, of a subschema alone where it has no references, else of
//! its whole document), and a value as grammar.

use crate::compiler::{Compiler, CompileResult};
use crate::conjunct::{Conjunct, Consumed};
use crate::exprs::unsupported;
use crate::json_types::json_eq;
use crate::SchemaOptions;
use formwork_grammar::Expr;
use serde_json::Value;
use std::sync::Arc;

impl Compiler<'_> {
    /// Is `v` valid against every real part (exact, through `jsonschema`)?
    pub fn value_ok(&mut self, parts: &[Conjunct], v: &Value) -> CompileResult<bool> {
        for p in parts {
            if !p.real {
                // Derived parts come from real ones that stay in the list; only check the
                // simple keywords they carry.
                if let Some(Value::Array(ex)) = p.get("x-formwork-not-values") {
                    if ex.iter().any(|e| json_eq(e, v)) {
                        return Ok(false);
                    }
                }
                // Non-integral numbers only: an integer is out.
                if p.get("x-formwork-non-integral") == Some(&Value::Bool(true)) && crate::json_types::value_type(v) == crate::json_types::JsonTypes::INT {
                    return Ok(false);
                }
                // A negated pattern: a string that matches it is out.
                if let (Some(Value::Array(pats)), Value::String(s)) = (p.get("x-formwork-not-pattern"), v) {
                    for pat in pats.iter().filter_map(Value::as_str) {
                        // One compiled regex per pattern and schema (each enum value of each
                        // negation meets the same patterns).
                        let matched = self.pattern_matches(pat, s)
                            .ok_or_else(|| unsupported("not", format!("the negation of pattern {pat:?} cannot be checked against enum values"), p.at.clone()))?;
                        if matched {
                            return Ok(false);
                        }
                    }
                }
                // Any other keyword: the part in standard keywords, through a validator of its
                // own. (A derived part below the instance's top, a negation's property or
                // item, has no real part beside it that says the same.)
                let simple = ["type", "x-formwork-not-values", "x-formwork-non-integral", "x-formwork-not-pattern"];
                if p.obj().is_some_and(|o| o.keys().any(|k| !simple.contains(&k.as_str()) && !crate::derived::IGNORED.contains(&k.as_str()))) || matches!(p.value(), Value::Bool(false)) {
                    if !self.validate_derived(p, v)? {
                        return Ok(false);
                    }
                } else if let Some(t) = p.get("type").and_then(crate::json_types::type_bits) {
                    let vt = crate::json_types::value_type(v);
                    let ok = t.intersects(vt) || (vt == crate::json_types::JsonTypes::INT && t.intersects(crate::json_types::JsonTypes::FRAC));
                    if !ok {
                        return Ok(false);
                    }
                }
                continue;
            }
            let ok = self.validate_at(p, v)?;
            if !ok {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Is `v` valid against the derived part `p` (exact): its value in standard keywords
    /// ([`crate::derived::standard`]), its `$ref`s made absolute against its document, whose
    /// root the validator retrieves by that URI. Validators are kept by the schema's text.
    fn validate_derived(&mut self, p: &Conjunct, v: &Value) -> CompileResult<bool> {
        let doc_uri = self.res.base_at(&crate::resolve::Loc { doc: p.doc, ptr: String::new() });
        let mut std = crate::derived::standard(p.value());
        crate::derived::absolute_refs(&mut std, &doc_uri);
        let text = serde_json::to_string(&std).unwrap_or_default();
        let key = (usize::MAX, text, Consumed::empty());
        if let Some(Some(val)) = self.local_validators.get(&key) {
            return Ok(val.is_valid(v));
        }
        let mut wrapped = std;
        if let Value::Object(o) = &mut wrapped {
            o.insert("$id".into(), Value::String("urn:formwork:derived".into()));
        }
        let mut remotes = self.opts.remotes.clone();
        remotes.insert(crate::resolve::strip_fragment(&doc_uri).to_string(), (*self.res.docs[p.doc].value).clone());
        let opts = SchemaOptions { draft: self.draft(p), remotes, ..Default::default() };
        let val = crate::validator_options(&wrapped, &opts).ok().and_then(|o| o.build(&wrapped).ok()).map(Arc::new);
        self.local_validators.insert(key, val.clone());
        match val {
            Some(val) => Ok(val.is_valid(v)),
            None => Err(unsupported("enum", "cannot check enum values against a derived schema (a negation) that does not build as a validator", p.at.clone())),
        }
    }

    /// Is `v` valid against `p` alone (exact, through `jsonschema`)?
    pub(crate) fn validate_at(&mut self, p: &Conjunct, v: &Value) -> CompileResult<bool> {
        if !p.real {
            // A derived part is no location of its document: its own validator.
            return self.validate_derived(p, v);
        }
        if p.consumed.contains(Consumed::REF_ONLY) {
            // Drafts 4-7: the `$ref` replaced this object, and its target is a part of the
            // same conjunction (checked there).
            return Ok(true);
        }
        // The `$ref` target and `allOf` branches already expanded into this conjunction are
        // parts of their own, each checked against `v`: leave them out here, so that the
        // subschema can often be checked on its own instead of through the validator of
        // its whole document (which compiles every definition and every regex in it). So is
        // the `anyOf` branch this conjunction took (a value valid for it satisfies the
        // `anyOf`), and the `oneOf` branch when the branches are pairwise disjoint (a value
        // valid for it matches no other). An exact `oneOf` with overlapping branches keeps its
        // `oneOf`: the negations of the others are not checked here.
        let strip = match p.value() {
            Value::Object(o) if !o.contains_key("unevaluatedProperties") && !o.contains_key("unevaluatedItems") => {
                p.consumed & (Consumed::REF | Consumed::ALLOF | Consumed::ANYOF | Consumed::ONEOF_DISJOINT)
            }
            _ => Consumed::empty(),
        };
        // The keywords left out, checked elsewhere (definitions are reached only through
        // references).
        let stripped = |k: &str| match k {
            "$ref" => strip.contains(Consumed::REF),
            "allOf" => strip.contains(Consumed::ALLOF),
            "anyOf" => strip.contains(Consumed::ANYOF),
            "oneOf" => strip.contains(Consumed::ONEOF_DISJOINT),
            "$defs" | "definitions" => !strip.is_empty(),
            _ => false,
        };
        // Faster: a subschema of `enum`, `const` and `type` only (and annotations), as most
        // `enum`s are, is answered without building a validator.
        if let Some(ok) = trivially_valid(p.value(), v, self.draft(p), stripped) {
            return Ok(ok);
        }
        let ck = (p.doc, p.ptr.clone(), strip);
        match self.local_validators.get(&ck) {
            Some(Some(val)) => return Ok(val.is_valid(v)),
            Some(None) => return self.validate_in_document(p, v),
            None => {}
        }
        let mut sub = p.value().clone();
        if let Value::Object(o) = &mut sub {
            o.retain(|k, _| !stripped(k));
        }
        // Fast path: a subschema without references validates on its own.
        if !has_ref(&sub) {
            let draft = self.draft(p);
            let mut wrapped = sub;
            if let Value::Object(o) = &mut wrapped {
                o.remove("$id");
                o.remove("id");
            }
            let opts = SchemaOptions { draft, ..Default::default() };
            if let Ok(o) = crate::validator_options(&wrapped, &opts) {
                if let Ok(val) = o.build(&wrapped) {
                    let ok = val.is_valid(v);
                    self.local_validators.insert(ck, Some(Arc::new(val)));
                    return Ok(ok);
                }
            }
        }
        self.local_validators.insert(ck, None);
        self.validate_in_document(p, v)
    }

    /// Is `v` valid at `p`'s location, through the validator of its whole document?
    fn validate_in_document(&mut self, p: &Conjunct, v: &Value) -> CompileResult<bool> {
        if !self.validators.contains_key(&p.doc) {
            let root = self.res.docs[p.doc].value.clone();
            let map = crate::validator_options(&root, &self.opts).ok().and_then(|o| o.build_map(&root).ok()).map(Arc::new);
            self.validators.insert(p.doc, map);
        }
        let key = format!("#{}", p.ptr);
        if let Some(Some(m)) = self.validators.get(&p.doc) {
            if let Some(val) = m.get(&key) {
                return Ok(val.is_valid(v));
            }
        }
        Err(unsupported("enum", "cannot check enum values against this subschema", p.at.clone()))
    }

    /// A JSON value as grammar, laid out in the whitespace style at the current level.
    pub fn literal(&mut self, v: &Value) -> Expr {
        match v {
            Value::Array(a) => {
                let seps = self.seps();
                let items: Vec<Expr> = self.nested(|cx| a.iter().map(|x| cx.literal(x)).collect());
                let mut body = Vec::new();
                for (i, x) in items.into_iter().enumerate() {
                    if i > 0 {
                        body.push(seps.comma.clone());
                    }
                    body.push(x);
                }
                if a.is_empty() {
                    seps.empty("[", "]")
                } else {
                    seps.wrap("[", Expr::seq(body), false, "]")
                }
            }
            Value::Object(o) => {
                let seps = self.seps();
                let members: Vec<(String, Expr, bool)> = self.nested(|cx| o.iter().map(|(k, x)| (k.clone(), cx.literal(x), true)).collect());
                if self.opts.key_order == crate::KeyOrder::Any && o.len() > 1 {
                    let keyed: Vec<(Expr, bool)> = members.into_iter().map(|(k, x, req)| (Expr::seq([Expr::lit(serde_json::to_string(&k).unwrap_or_default()), seps.colon.clone(), x]), req)).collect();
                    return crate::layout::unordered(&seps, keyed, Vec::new(), 0, None, Vec::new());
                }
                let mut body = Vec::new();
                for (i, (k, x, _)) in members.into_iter().enumerate() {
                    if i > 0 {
                        body.push(seps.comma.clone());
                    }
                    body.extend([Expr::lit(serde_json::to_string(&k).unwrap_or_default()), seps.colon.clone(), x]);
                }
                if o.is_empty() {
                    seps.empty("{", "}")
                } else {
                    seps.wrap("{", Expr::seq(body), false, "}")
                }
            }
            Value::Number(n) => {
                // Integral floats print as `1.0`; accept the integer spelling too.
                let s = n.to_string();
                if n.is_i64() || n.is_u64() {
                    Expr::seq([Expr::lit(s), crate::exprs::zero_fraction()])
                } else if let Some(f) = n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 1e15) {
                    Expr::alt([Expr::seq([Expr::lit(format!("{}", f as i64)), crate::exprs::zero_fraction()]), Expr::lit(s)])
                } else {
                    Expr::lit(s)
                }
            }
            v => Expr::lit(serde_json::to_string(v).unwrap_or_default()),
        }
    }
}

/// Whether `v` has a `$ref`, `$dynamicRef` or `$recursiveRef` keyword anywhere (a conservative
/// test: a property that happens to be named `$ref` counts too, which only sends the value to
/// the document's validator).
fn has_ref(v: &Value) -> bool {
    match v {
        Value::Object(o) => o.iter().any(|(k, x)| matches!(k.as_str(), "$ref" | "$dynamicRef" | "$recursiveRef") || has_ref(x)),
        Value::Array(a) => a.iter().any(has_ref),
        _ => false,
    }
}

/// Whether `v` is valid against `sub` (of `draft`) when `sub` holds only `enum` (of a few
/// values), `const` and `type` besides annotations and the keywords `stripped` says were
/// checked elsewhere (`None`: other keywords, a large enum, a float against `integer`, or
/// `const` in draft 4, where it is not a keyword). Exact: the same answer as the validator.
fn trivially_valid(sub: &Value, v: &Value, draft: crate::Draft, stripped: impl Fn(&str) -> bool) -> Option<bool> {
    const ANNOTATIONS: &[&str] = &["title", "description", "default", "examples", "$comment", "deprecated", "readOnly", "writeOnly"];
    // Most values an `enum` this check scans: each of an enum's values is checked in turn, so
    // a scan per check is quadratic in its size, where the validator (built once per place)
    // looks a value up at once.
    const MAX_SCANNED: usize = 32;
    let o = sub.as_object()?;
    let handled = |k: &str, x: &Value| match k {
        "enum" => x.as_array().is_some_and(|a| a.len() <= MAX_SCANNED),
        "const" => draft != crate::Draft::Draft4,
        "type" => crate::json_types::type_bits(x).is_some(),
        k => ANNOTATIONS.contains(&k) || k.starts_with("x-") || stripped(k),
    };
    if !o.iter().all(|(k, x)| handled(k, x)) {
        return None;
    }
    let mut ok = true;
    for (k, x) in o {
        match k.as_str() {
            "enum" => ok &= x.as_array()?.iter().any(|e| json_eq(e, v)),
            "const" => ok &= json_eq(x, v),
            "type" => {
                let allowed = crate::json_types::type_bits(x)?;
                let t = crate::json_types::value_type(v);
                // `1.0` is an integer for drafts 6 and later, not for draft 4.
                let float = v.as_number().is_some_and(|n| !n.is_i64() && !n.is_u64());
                if float && t == crate::json_types::JsonTypes::INT && !allowed.contains(crate::json_types::JsonTypes::FRAC) {
                    return None;
                }
                ok &= allowed.intersects(t);
            }
            _ => {}
        }
    }
    Some(ok)
}

#[cfg(test)]
mod tests {
    use super::trivially_valid;
    use crate::Draft;
    use serde_json::json;

    /// Wherever the shortcut answers, it answers as the validator does, in draft 4 (where
    /// `1.0` is not an integer) and in 2020-12.
    #[test]
    fn trivially_valid_agrees_with_the_validator() {
        let subs = [
            json!({"enum": ["a", 1, null, [1, 2], {"k": 1}]}),
            json!({"type": "string", "enum": ["a", "b"], "description": "d", "x-extra": 1}),
            json!({"type": ["integer", "null"], "enum": [1, 2.5, null, "1"]}),
            json!({"type": "integer", "enum": [1, 2]}),
            json!({"type": "number", "const": 1}),
            json!({"const": {"a": [1, 2.0]}, "title": "t"}),
            json!({"type": "boolean"}),
            json!({"enum": [1, 2], "minimum": 2}),
            json!({"enum": ["a"], "$ref": "#/x"}),
        ];
        let values = [json!("a"), json!("b"), json!(1), json!(1.0), json!(2.5), json!(2), json!(null), json!([1, 2]), json!({"k": 1}), json!({"a": [1, 2]}), json!(true), json!("1")];
        let mut answered = 0;
        for (draft, ours) in [(jsonschema::Draft::Draft4, Draft::Draft4), (jsonschema::Draft::Draft202012, Draft::Draft202012)] {
            for sub in &subs {
                let validator = jsonschema::options().with_draft(draft).build(sub);
                for v in &values {
                    let Some(quick) = trivially_valid(sub, v, ours, |_| false) else { continue };
                    let validator = validator.as_ref().expect("a schema the shortcut answers for is valid");
                    assert_eq!(quick, validator.is_valid(v), "{draft:?} {sub} {v}");
                    answered += 1;
                }
            }
        }
        assert!(answered > 100, "the shortcut answered only {answered} times");
        // Keywords it does not know, and floats against `integer`, go to the validator.
        let d = Draft::Draft202012;
        assert_eq!(trivially_valid(&json!({"enum": [1, 2], "minimum": 2}), &json!(1), d, |_| false), None);
        assert_eq!(trivially_valid(&json!({"type": "integer"}), &json!(1.0), d, |_| false), None);
        assert_eq!(trivially_valid(&json!({"const": 1}), &json!(2), Draft::Draft4, |_| false), None);
        let big: Vec<u32> = (0..100).collect();
        assert_eq!(trivially_valid(&json!({"enum": big}), &json!(7), d, |_| false), None, "a large enum is looked up by the validator");
        assert_eq!(trivially_valid(&json!({"enum": ["a"], "$ref": "#/x"}), &json!("a"), d, |k| k == "$ref"), Some(true));
    }
}
