//! Lenient mode only ever widens: a keyword it does not enforce is ignored with a warning, so
//! the grammar accepts every instance the validator accepts. Checked on `uniqueItems`, the
//! keyword whose lenient fallback once narrowed the grammar (to `[]`, or to nothing).

use formwork_grammar::matcher::accepts;
use formwork_schema::{compile, compile_with_warnings, SchemaOptions, Validator};
use serde_json::{json, Value};

fn lenient() -> SchemaOptions {
    SchemaOptions { lenient: true, ..Default::default() }
}

fn accepted(g: &formwork_grammar::Grammar, v: &Value) -> bool {
    let text = serde_json::to_string(v).unwrap();
    accepts(g, text.as_bytes(), &SchemaOptions::default().limits).unwrap()
}

/// Every array of at most three items drawn from `pool`.
fn arrays(pool: &[Value]) -> Vec<Value> {
    let mut out = vec![json!([])];
    let mut last = vec![Vec::new()];
    for _ in 0..3 {
        let next: Vec<Vec<Value>> = last.iter().flat_map(|a| pool.iter().map(move |v| [a.clone(), vec![v.clone()]].concat())).collect();
        out.extend(next.iter().cloned().map(Value::Array));
        last = next;
    }
    out
}

#[test]
fn unenforced_unique_items_widens_the_grammar() {
    let s = json!({"type": "array", "items": {"type": "string"}, "minItems": 1, "uniqueItems": true});
    let (g, w) = compile_with_warnings(&s, &lenient()).unwrap();
    assert_eq!((w.len(), w[0].keyword.as_str(), w[0].pointer.as_str()), (1, "uniqueItems", "/uniqueItems"), "{w:?}");
    for yes in [json!(["a"]), json!(["a", "b"]), json!(["a", "a"])] {
        assert!(accepted(&g, &yes), "lenient grammar should accept {yes}");
    }
    for no in [json!([]), json!([1]), json!("a")] {
        assert!(!accepted(&g, &no), "lenient grammar should reject {no}");
    }
    // Not lenient: refused, naming the keyword and its pointer.
    let e = compile(&s, &SchemaOptions::default()).unwrap_err();
    assert_eq!((e.keyword(), e.pointer.as_str()), (Some("uniqueItems"), "/uniqueItems"));
}

/// Past 256 values `uniqueItems` is not enforced: refused, or ignored when lenient.
fn many_values() -> Vec<Value> {
    (0..300).map(|i| json!(format!("{}", char::from_u32(0x61 + i).unwrap()))).collect()
}

#[test]
fn unique_items_over_more_than_256_values_is_ignored_when_lenient() {
    let s = json!({"type": "array", "items": {"enum": many_values()}, "uniqueItems": true});
    let (g, w) = compile_with_warnings(&s, &lenient()).unwrap();
    assert_eq!(w.iter().map(|w| (w.keyword.as_str(), w.pointer.as_str())).collect::<Vec<_>>(), [("uniqueItems", "/uniqueItems")]);
    for yes in [json!([]), json!(["a"]), json!(["i", "a"]), json!(["a", "a"])] {
        assert!(accepted(&g, &yes), "lenient grammar should accept {yes}");
    }
    assert!(!accepted(&g, &json!(["A"])));
    let e = compile(&s, &SchemaOptions::default()).unwrap_err();
    assert_eq!((e.keyword(), e.pointer.as_str()), (Some("uniqueItems"), "/uniqueItems"));
    assert!(e.to_string().contains("300 distinct item values"), "{e}");
    // Nine values are enforced in both modes: in listed order (generation) in the schema's
    // order, each at most once; in any order exactly.
    let s9 = json!({"type": "array", "items": {"enum": ["a", "b", "c", "d", "e", "f", "g", "h", "i"]}, "uniqueItems": true});
    for opts in [SchemaOptions::default(), lenient()] {
        let (g, w) = compile_with_warnings(&s9, &opts).unwrap();
        assert!(w.is_empty(), "{w:?}");
        assert!(accepted(&g, &json!(["a", "c", "i"])));
        assert!(!accepted(&g, &json!(["a", "c", "a"])));
        assert!(!accepted(&g, &json!(["i", "a"])), "listed order: the schema's");
        let any = SchemaOptions { key_order: formwork_schema::KeyOrder::Any, ..opts };
        let (g, _) = compile_with_warnings(&s9, &any).unwrap();
        assert!(accepted(&g, &json!(["i", "a"])));
        assert!(!accepted(&g, &json!(["i", "a", "i"])));
    }
    // Eight values are enforced exactly, in both modes.
    let s8 = json!({"type": "array", "items": {"enum": ["a", "b", "c", "d", "e", "f", "g", "h"]}, "uniqueItems": true});
    for opts in [SchemaOptions::default(), lenient()] {
        let (g, w) = compile_with_warnings(&s8, &opts).unwrap();
        assert!(w.is_empty(), "{w:?}");
        assert!(accepted(&g, &json!(["h", "a", "c"])));
        assert!(!accepted(&g, &json!(["a", "c", "a"])));
    }
}

/// For arrays with `uniqueItems`: in lenient mode every instance the validator accepts is
/// accepted; otherwise the schema is either enforced exactly (on the sampled instances) or
/// refused naming `uniqueItems` and its pointer.
#[test]
fn lenient_grammars_accept_every_valid_instance() {
    let many = many_values();
    let cases = [
        (json!({"type": "array", "items": {"type": "string"}, "minItems": 1, "uniqueItems": true}), "/uniqueItems"),
        (json!({"type": "array", "items": {"enum": many}, "uniqueItems": true}), "/uniqueItems"),
        (json!({"type": "array", "items": {"enum": ["a", "b", 1]}, "uniqueItems": true, "maxItems": 2}), ""),
        (json!({"type": "array", "items": {"type": "boolean"}, "uniqueItems": true}), ""),
        (json!({"type": "array", "uniqueItems": true, "maxItems": 3}), "/uniqueItems"),
        (json!({"type": "array", "prefixItems": [{"type": "integer"}], "items": {"type": "string"}, "uniqueItems": true}), "/uniqueItems"),
        (json!({"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 2}, "uniqueItems": true, "minItems": 2}), "/uniqueItems"),
        (json!({"type": "array", "contains": {"const": "a"}, "items": {"type": "string"}, "uniqueItems": true}), "/contains"),
        (json!({"allOf": [{"type": "array", "items": {"enum": ["a", "b"]}}, {"uniqueItems": true}]}), ""),
        (json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true, "maxItems": 1}), ""),
    ];
    let pool = [json!("a"), json!("b"), json!("i"), json!(0), json!(1), json!(2), json!(true), json!(false), json!(null)];
    let instances = arrays(&pool);
    for (s, refused_at) in cases {
        let validator = Validator::new(&s).unwrap();
        let lg = compile(&s, &lenient()).unwrap_or_else(|e| panic!("{s}: {e}"));
        let exact = compile(&s, &SchemaOptions::default());
        match &exact {
            Ok(_) => assert_eq!(refused_at, "", "{s} should be refused"),
            Err(e) => assert_eq!(e.pointer, refused_at, "{s}: {e}"),
        }
        let mut valid = 0;
        for v in &instances {
            let ok = validator.is_valid(v);
            valid += ok as usize;
            if ok {
                assert!(accepted(&lg, v), "{s}: the lenient grammar rejects the valid {v}");
            }
            if let Ok(g) = &exact {
                assert_eq!(accepted(g, v), ok, "{s}: the grammar disagrees with the validator on {v}");
            }
        }
        assert!(valid > 0, "{s}: no sampled instance is valid");
    }
}
