//! Targeted behaviour of the schema compiler: what is accepted, what is rejected, what is
//! refused and why.

mod common;

use formwork_grammar::matcher::accepts;
use formwork_schema::{compile, compile_with_warnings, validate, validate_with, KeyOrder, SchemaOptions, Whitespace};
use serde_json::json;

fn check(schema: serde_json::Value, yes: &[&str], no: &[&str]) {
    let opts = SchemaOptions::default();
    let g = compile(&schema, &opts).unwrap_or_else(|e| panic!("{schema}: {e}"));
    for s in yes {
        assert!(accepts(&g, s.as_bytes(), &opts.limits).unwrap(), "{schema} should accept {s}");
        assert!(validate(&schema, s).is_ok(), "test bug: {s} is not valid for {schema}");
    }
    for s in no {
        assert!(!accepts(&g, s.as_bytes(), &opts.limits).unwrap(), "{schema} should reject {s}");
    }
}

#[test]
fn objects_follow_property_order_and_exclude_listed_keys_from_additional_ones() {
    check(
        json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["b"]}),
        &[r#"{"b":"x"}"#, r#"{"a":1,"b":"x"}"#, r#"{ "a" : 1 , "b" : "x" , "c" : null }"#, r#"{"b":"x","ab":[]}"#],
        &[r#"{"a":1}"#, r#"{"a":"1","b":"x"}"#, r#"{"b":"x","a":1}"#, r#"{"b":"x","b":"y"}"#],
    );
    check(json!({"properties": {"a": {}}, "additionalProperties": false}), &[r#"{}"#, r#"{"a":[1]}"#, "3"], &[r#"{"b":1}"#]);
}

#[test]
fn recursive_refs_become_recursive_rules() {
    let s = json!({"$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}, "additionalProperties": false}}, "$ref": "#/$defs/node"});
    check(s, &[r#"{}"#, r#"{"next":{"next":{}}}"#], &[r#"{"next":1}"#, r#"{"x":{}}"#]);
}

#[test]
fn patterns_lower_to_json_escaped_characters() {
    check(json!({"type": "string", "pattern": "^a\"b\\\\c\\n$"}), &[r#""a\"b\\c\n""#], &[r#""a"b\c""#, r#""a\"b\\c""#]);
    check(json!({"type": "string", "pattern": "\\d{3}"}), &[r#""x123y""#, r#""123""#], &[r#""12""#, r#""١٢٣""#]);
    check(json!({"type": "string", "pattern": "^[a-z]+$", "maxLength": 3}), &[r#""abc""#], &[r#""abcd""#, r#""""#]);
}

#[test]
fn numbers_respect_bounds_and_multiples() {
    check(json!({"type": "integer", "minimum": -5, "exclusiveMaximum": 10}), &["-5", "0", "9", "9.0"], &["-6", "10", "1.5", "01"]);
    check(json!({"type": "number", "minimum": 0, "maximum": 1}), &["0", "0.5", "1", "1.0"], &["-0.5", "1.5", "2"]);
    check(json!({"type": "integer", "multipleOf": 7}), &["0", "14", "-21"], &["15", "1"]);
}

#[test]
fn combinators() {
    check(json!({"oneOf": [{"type": "string"}, {"type": "integer"}]}), &[r#""a""#, "1"], &["null"]);
    check(json!({"not": {"type": "string"}}), &["1", "null", "{}"], &[r#""a""#]);
    check(
        json!({"type": "object", "properties": {"k": {"enum": ["a", "b"]}, "x": {}}, "required": ["k"],
               "if": {"properties": {"k": {"const": "a"}}}, "then": {"required": ["x"]}}),
        &[r#"{"k":"a","x":1}"#, r#"{"k":"b"}"#],
        &[r#"{"k":"a"}"#],
    );
    check(json!({"type": "array", "items": {"enum": [1, 2, 3]}, "uniqueItems": true}), &["[]", "[1,3]", "[3,2,1]"], &["[1,1]", "[1,2,1]"]);
}

#[test]
fn refusals_name_the_keyword_and_pointer() {
    let e = compile(&json!({"properties": {"t": {"type": "array", "uniqueItems": true}}}), &SchemaOptions::default()).unwrap_err();
    assert_eq!(e.keyword(), Some("uniqueItems"));
    assert!(e.to_string().starts_with("unsupported keyword `uniqueItems` at /properties/t"), "{e}");
    let e = compile(&json!({"type": "string", "pattern": "(?=a)"}), &SchemaOptions::default()).unwrap_err();
    assert_eq!(e.keyword(), Some("pattern"));
    let e = compile(&json!({"oneOf": [{"type": "string"}, {"format": "date"}]}), &SchemaOptions::default()).unwrap_err();
    assert_eq!(e.keyword(), Some("oneOf"));
    // Overlapping branches whose negations are expressible are exact.
    check(json!({"oneOf": [{"type": "string"}, {"minLength": 2}]}), &[r#""a""#, "3"], &[r#""ab""#]);
    check(json!({"oneOf": [{"type": "string"}, {"pattern": "a"}]}), &[r#""b""#, "3"], &[r#""a""#, r#""bab""#]);
    let (_, w) = compile_with_warnings(&json!({"type": "string", "format": "x-custom"}), &SchemaOptions { lenient: true, ..Default::default() }).unwrap();
    assert_eq!(w[0].keyword, "format");
}

#[test]
fn canonical_integers_option_drops_the_zero_fraction() {
    let s = json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0},
                                                     "x": {"type": "number"}}});
    let g = compile(&s, &SchemaOptions::default()).unwrap();
    let l = SchemaOptions::default().limits;
    // JSON Schema counts `3.0` as an integer: accepted by default.
    assert!(accepts(&g, br#"{"n":3.0}"#, &l).unwrap());
    let opts = SchemaOptions { canonical_integers: true, ..Default::default() };
    let g = compile(&s, &opts).unwrap();
    assert!(accepts(&g, br#"{"n":3}"#, &l).unwrap());
    assert!(!accepts(&g, br#"{"n":3.0}"#, &l).unwrap());
    // Numbers keep their fractions.
    assert!(accepts(&g, br#"{"n":3,"x":3.0}"#, &l).unwrap());
}

#[test]
fn strict_and_compact_options() {
    let s = json!({"type": "object", "properties": {"a": {"type": "boolean"}}});
    let opts = SchemaOptions { strict: true, whitespace: Whitespace::Compact, ..Default::default() };
    let g = compile(&s, &opts).unwrap();
    assert!(accepts(&g, br#"{"a":true}"#, &opts.limits).unwrap());
    assert!(!accepts(&g, br#"{ "a":true}"#, &opts.limits).unwrap());
    assert!(!accepts(&g, br#"{}"#, &opts.limits).unwrap());
    assert!(!accepts(&g, br#"{"a":true,"b":1}"#, &opts.limits).unwrap());
}

#[test]
fn limits_are_reported() {
    let mut deep = json!({"type": "integer"});
    for _ in 0..300 {
        deep = json!({"type": "array", "items": deep});
    }
    let e = common::big_stack(move || compile(&deep, &SchemaOptions::default()).unwrap_err());
    assert!(e.to_string().contains("max_nesting"), "{e}");
}

#[test]
fn key_order_can_be_chosen_by_the_schema() {
    // `propertyOrdering` puts listed keys first, in that order; they stay optional.
    check(
        json!({"type": "object", "properties": {"answer": {"type": "integer"}, "reasoning": {"type": "string"}},
               "propertyOrdering": ["reasoning", "answer"], "additionalProperties": false}),
        &[r#"{"reasoning":"r","answer":1}"#, r#"{"answer":1}"#, r#"{}"#],
        &[r#"{"answer":1,"reasoning":"r"}"#],
    );
    // `x-formwork-first` forces a key first and makes it required, at any depth.
    let inner = json!({"type": "object", "properties": {"answer": {"type": "integer"}, "reasoning": {"type": "string"}},
                       "required": ["answer"], "x-formwork-first": "reasoning"});
    check(inner.clone(), &[r#"{"reasoning":"because","answer":2}"#], &[r#"{"answer":2}"#, r#"{"answer":2,"reasoning":"r"}"#]);
    check(json!({"type": "array", "items": inner}), &[r#"[{"reasoning":"","answer":2}]"#], &[r#"[{"answer":2}]"#]);
}

#[test]
fn key_order_errors_name_the_keyword() {
    let opts = SchemaOptions::default();
    let e = compile(&json!({"properties": {"a": {}}, "propertyOrdering": ["b"]}), &opts).unwrap_err();
    assert!(e.to_string().contains("propertyOrdering") && e.to_string().contains("`b`"), "{e}");
    let e = compile(&json!({"properties": {"a": {}}, "x-formwork-first": "b"}), &opts).unwrap_err();
    assert!(e.to_string().contains("x-formwork-first"), "{e}");
    let opts = SchemaOptions { force_first_key: Some("reasoning".into()), ..Default::default() };
    let g = compile(&json!({"properties": {"answer": {}, "reasoning": {"type": "string"}}}), &opts).unwrap();
    assert!(accepts(&g, br#"{"reasoning":"x","answer":1}"#, &opts.limits).unwrap());
    assert!(!accepts(&g, br#"{"answer":1}"#, &opts.limits).unwrap());
}

#[test]
fn many_bounded_strings_and_open_objects_stay_within_the_grammar_limits() {
    // 300 properties with `maxLength: 255` (one shared bounded repetition, not 300 copies of
    // 255 helper rules) and 40 open objects with many keys (one key trie per key set).
    let props: serde_json::Map<String, serde_json::Value> =
        (0..300).map(|i| (format!("field_number_{i}"), json!({"type": ["string", "null"], "maxLength": 255}))).collect();
    let obj: serde_json::Map<String, serde_json::Value> = (0..40)
        .map(|i| {
            let inner: serde_json::Map<String, serde_json::Value> = (0..60).map(|j| (format!("key_{i}_{j}_long_name"), json!({"type": "string"}))).collect();
            (format!("object_{i}"), json!({"type": "object", "properties": inner}))
        })
        .collect();
    let mut all = props;
    all.extend(obj);
    let long = "x".repeat(255);
    check(
        json!({"type": "object", "properties": all, "additionalProperties": false}),
        &[&format!(r#"{{"field_number_3":"{long}","object_7":{{"key_7_1_long_name":"a","other":1}}}}"#)],
        &[&format!(r#"{{"field_number_3":"{long}x"}}"#), r#"{"object_7":{"key_7_1_long_name":1}}"#],
    );
}

#[test]
fn additional_keys_exclude_every_encoding_of_listed_keys() {
    check(
        json!({"type": "object", "properties": {"a/b": {"type": "integer"}, "é": {"type": "integer"}, "ab": {"type": "integer"}}}),
        &[r#"{"a/b":1,"é":2,"ab":3,"a/c":"x","éx":[],"a":{},"éé":1,"abc":"","a\/":null,"\/":1,"\"":2}"#],
        &[r#"{"a\/b":"x"}"#, r#"{"a/b":1,"a\/b":"x"}"#, r#"{"é":"x"}"#, r#"{"ab":"x"}"#],
    );
}

#[test]
fn pattern_keys_stay_allowed_next_to_listed_keys_they_match() {
    // `line1` is required (so listed) and matched by the pattern: the other pattern keys are
    // still additional keys, `line1` is not one again.
    check(
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "patternProperties": {"^line[1-3]$": {"type": "string"}},
               "additionalProperties": false, "required": ["city", "line1"]}),
        &[r#"{"city":"a","line1":"b","line2":"c","line3":"d"}"#, r#"{"city":"a","line1":"b"}"#],
        &[r#"{"city":"a","line1":"b","line1":"c"}"#, r#"{"city":"a","line1":"b","line\u0031":"c"}"#, r#"{"city":"a","line1":"b","line4":"c"}"#, r#"{"city":"a","line1":"b","line2":1}"#],
    );
    // An unanchored pattern that matches every listed key.
    check(
        json!({"type": "object", "properties": {"id": {"type": "string"}}, "patternProperties": {".*": {"type": ["integer", "string"]}}}),
        &[r#"{"id":"x","a":1,"idx":2}"#, r#"{"ids":3}"#],
        &[r#"{"id":"x","id":1}"#, r#"{"id":"x","i\u0064":1}"#, r#"{"id":1}"#, r#"{"a":null}"#],
    );
}

#[test]
fn pattern_properties_values_follow_the_patterns_each_key_matches() {
    // Disjoint patterns with different value types (a conjunction of both would be empty).
    check(
        json!({"type": "object", "patternProperties": {"^/": {"type": "string"}, "^[^/]": {"type": "object"}}, "properties": {"P": {"type": "object"}}}),
        &[r#"{"P":{},"/a":"x","b":{},"/":"y"}"#, r#"{"Q":{"z":1}}"#],
        &[r#"{"/a":{}}"#, r#"{"b":"x"}"#, r#"{"P":{},"P":{}}"#],
    );
    // Overlapping patterns: a key matched by both needs a value valid for both.
    check(
        json!({"type": "object", "patternProperties": {".*": {"type": "array"}, "additionalProperties": false}, "additionalProperties": false}),
        &[r#"{"tray1":["a"],"tray2":[]}"#, r#"{"additional":[]}"#],
        &[r#"{"additionalProperties":[]}"#, r#"{"xadditionalPropertiesx":[]}"#, r#"{"a":1}"#],
    );
    // Keys no pattern matches follow `additionalProperties` (here the default, anything).
    check(
        json!({"type": "object", "properties": {"a": {"type": "integer"}}, "patternProperties": {"^x": {"type": "string"}}}),
        &[r#"{"a":1,"xy":"s","b":null}"#, r#"{"y":[1],"x":""}"#],
        &[r#"{"xy":1}"#, r#"{"\u0078y":1}"#, r#"{"a":"1"}"#],
    );
    check(
        json!({"type": "object", "patternProperties": {"^x": {"type": "string"}}, "additionalProperties": {"type": "integer"}}),
        &[r#"{"xa":"s","b":1}"#, r#"{"b":2,"x":"t"}"#],
        &[r#"{"b":"s"}"#, r#"{"xa":1}"#, r#"{"\u0062":"s"}"#],
    );
}

#[test]
fn listed_names_no_pattern_matches_are_never_additional_keys_in_any_spelling() {
    // `c` and `a/b` match neither pattern, so only the keys no pattern matches (written
    // canonically) had to leave them out; `xa` matches `^x`, so every spelling of it is left
    // out of that pattern's keys.
    check(
        json!({"type": "object", "properties": {"a/b": {"type": "integer"}, "xa": {"type": "integer"}, "c": {"type": "integer"}},
               "patternProperties": {"^x": {"type": "integer"}, "y$": {"type": "string"}}}),
        &[r#"{"a/b":1,"xa":2,"c":3}"#, r#"{"xz":5,"qy":"s","d":null}"#, r#"{"c":1,"xz":7}"#],
        &[
            r#"{"c":"s"}"#,
            r#"{"\u0063":"s"}"#,
            r#"{"a\/b":"s"}"#,
            r#"{"a/b":"s"}"#,
            r#"{"xa":"s"}"#,
            r#"{"\u0078a":"s"}"#,
            r#"{"c":1,"c":2}"#,
            r#"{"xa":1,"x\u0061":2}"#,
        ],
    );
}

#[test]
fn enum_values_under_one_of_and_any_of_branches_stay_exact() {
    // Disjoint branches (an enum behind a `$ref`, or null): each value is checked against its
    // branch, the `oneOf` decided by it.
    check(
        json!({"oneOf": [{"$ref": "#/$defs/E"}, {"type": "null"}], "$defs": {"E": {"enum": ["a", "b", 1]}}}),
        &[r#""a""#, "1", "null"],
        &[r#""c""#, "true", "2"],
    );
    // A sibling keyword of `anyOf` still applies to the branch's values.
    check(json!({"anyOf": [{"enum": ["a", "bb"]}, {"type": "null"}], "maxLength": 1}), &[r#""a""#, "null"], &[r#""bb""#]);
    // Overlapping branches: a value both allow matches two, so `oneOf` refuses it.
    check(json!({"oneOf": [{"enum": ["a", "b"]}, {"enum": ["b", "c"]}]}), &[r#""a""#, r#""c""#], &[r#""b""#]);
}

#[test]
fn whole_string_patterns_are_regions_of_their_own() {
    // As protobuf's JSON Schema generators write a field's other name: `^name$` patterns
    // (built without a DFA), closed...
    check(
        json!({"type": "object", "properties": {"billingId": {"type": "string"}},
               "patternProperties": {"^billing_id$": {"type": "string"}, "^project_id$": {"type": "integer"}}, "additionalProperties": false}),
        &[r#"{"billingId":"a"}"#, r#"{"billing_id":"a","project_id":3}"#, r#"{"billing\u005fid":"x"}"#, r#"{}"#],
        &[r#"{"billing_id":1}"#, r#"{"project_id":"x"}"#, r#"{"other":1}"#, r#"{"billingId":"a","billingId":"b"}"#],
    );
    // ...and open: a key spelled with an escape is still the pattern's key.
    check(
        json!({"type": "object", "properties": {"b": {"type": "string"}}, "patternProperties": {"^a$": {"type": "integer"}}}),
        &[r#"{"a":1,"c":"x"}"#, r#"{"b":"s","z":null}"#, r#"{"\u0061":2}"#, r#"{"ab":"x"}"#],
        &[r#"{"a":"x"}"#, r#"{"\u0061":"x"}"#, r#"{"b":1}"#],
    );
}

#[test]
fn decimal_bounds_are_exact_where_decimal_and_binary_comparisons_agree() {
    check(
        json!({"type": "number", "minimum": 0.1}),
        &["0.1", "0.10", "0.5", "0.11", "1", "1.5", "123456.25", "0.10000000000001"],
        &["0.09", "0.0999999999", "0", "-1", "0.05"],
    );
    check(
        json!({"type": "number", "exclusiveMinimum": 0.1, "maximum": 0.25}),
        &["0.2", "0.25", "0.11", "0.250", "0.1000001"],
        &["0.1", "0.10", "0.251", "0.3", "0.0999", "1"],
    );
    check(
        json!({"type": "number", "minimum": -2.5, "exclusiveMaximum": -0.5}),
        &["-2.5", "-1", "-0.51", "-2.49", "-1.0"],
        &["-2.51", "-0.5", "-0.50", "0", "0.1", "-3"],
    );
    // Past 15 significant digits a decimal may round onto the bound: not generated.
    check(json!({"type": "number", "exclusiveMaximum": 1}), &["0.99", "0.999999999999"], &["0.99999999999999999999", "1", "1.0"]);
    check(json!({"type": "number", "minimum": 0, "maximum": 1, "multipleOf": 0.01}), &["0.5", "0.25", "1", "0"], &["0.255", "1.01"]);
}

#[test]
fn keys_outside_an_unanchored_pattern_next_to_many_listed_names() {
    let names = ["ActiveFine", "BoostUsed", "CockpitBreach", "Factions", "FuelLevel", "FuelUsed", "JumpDist", "Latitude", "Longitude", "StarPos", "StarSystem", "SystemAddress", "Wanted", "event", "timestamp"];
    let props: serde_json::Map<String, serde_json::Value> = names.iter().map(|n| (n.to_string(), json!({"type": "integer"}))).collect();
    check(
        json!({"type": "object", "properties": props, "patternProperties": {"_Localised$": false}}),
        &[r#"{"StarSystem":1,"StationName":"x","Name_Localisedx":2}"#, r#"{"Station_Localise":[]}"#],
        &[r#"{"Name_Localised":"x"}"#, r#"{"StarSystem":"x"}"#, r#"{"StarSystem":1,"StarSystem":1}"#],
    );
}

fn check_with(opts: &SchemaOptions, schema: serde_json::Value, yes: &[&str], no: &[&str]) {
    let g = compile(&schema, opts).unwrap_or_else(|e| panic!("{schema}: {e}"));
    for s in yes {
        assert!(accepts(&g, s.as_bytes(), &opts.limits).unwrap(), "{schema} should accept {s}");
        assert!(validate_with(&schema, s, opts).is_ok(), "{s} should validate against {schema}");
    }
    for s in no {
        assert!(!accepts(&g, s.as_bytes(), &opts.limits).unwrap(), "{schema} should reject {s}");
    }
}

#[test]
fn any_key_order_accepts_each_key_once_in_any_order() {
    let any = SchemaOptions { key_order: KeyOrder::Any, ..Default::default() };
    let s = json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {}}, "required": ["b"], "maxProperties": 3});
    check_with(
        &any,
        s,
        &[r#"{"b":"x"}"#, r#"{"b":"x","a":1}"#, r#"{ "c" : null , "a" : 1 , "b" : "x" }"#, r#"{"z":0,"b":"x"}"#],
        &[r#"{"a":1}"#, r#"{"b":"x","b":"y"}"#, r#"{"a":1,"b":"x","a":2}"#, r#"{"a":"1","b":"x"}"#, r#"{"a":1,"b":"x","c":2,"d":3}"#],
    );
    // Closed objects, minProperties, and constant objects in any order.
    check_with(&any, json!({"properties": {"p": {}, "q": {}}, "additionalProperties": false, "minProperties": 2}), &[r#"{"q":1,"p":2}"#], &[r#"{"q":1}"#, r#"{"q":1,"r":2}"#]);
    check_with(&any, json!({"const": {"x": 1, "y": [true]}}), &[r#"{"y":[true],"x":1}"#, r#"{"x":1.0,"y":[true]}"#], &[r#"{"y":[true]}"#, r#"{"x":1,"y":[true],"x":1}"#]);
    // dependentRequired: the dependency may come before the key that needs it.
    check_with(&any, json!({"dependentRequired": {"bar": ["foo"]}}), &[r#"{"foo":1,"bar":2}"#, r#"{"bar":2,"foo":1}"#, r#"{"foo":1}"#], &[r#"{"bar":2}"#]);
    // The listed order stays the default.
    check(json!({"properties": {"a": {}, "b": {}}}), &[r#"{"a":1,"b":2}"#], &[r#"{"b":2,"a":1}"#]);
}

#[test]
fn formats_as_annotations_constrain_nothing_and_say_so() {
    let opts = SchemaOptions { formats_as_annotations: true, ..Default::default() };
    let s = json!({"type": "string", "format": "email"});
    check_with(&opts, s.clone(), &[r#""not an email""#, r#""a@b.c""#], &["1"]);
    let (_, w) = compile_with_warnings(&s, &opts).unwrap();
    assert!(w.iter().any(|w| w.keyword == "format" && w.why.contains("annotation")), "{w:?}");
    // Asserted by default.
    check(s, &[r#""a@b.c""#], &[r#""not an email""#]);
    // `not` of an annotation-only schema is false: a grammar that matches nothing.
    let n = json!({"not": {"format": "email"}});
    let g = compile(&n, &opts).unwrap();
    assert!(!matches!(accepts(&g, br#""x""#, &opts.limits), Ok(true)));
}

#[test]
fn unknown_formats_are_annotations_by_default() {
    // JSON Schema: an unknown format must not make validation fail.
    let s = json!({"type": "object", "properties": {"home": {"type": "string", "format": "url"}}, "required": ["home"]});
    check(s.clone(), &[r#"{"home":"anything at all"}"#, r#"{"home":""}"#], &[r#"{"home":1}"#, "{}"]);
    let (_, w) = compile_with_warnings(&s, &SchemaOptions::default()).unwrap();
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!((w[0].keyword.as_str(), w[0].pointer.as_str()), ("format", "/properties/home/format"));
    assert_eq!(w[0].why, "unknown format `url` treated as an annotation");
    // Known formats stay asserted, with no warning.
    let (g, w) = compile_with_warnings(&json!({"format": "date", "type": "string"}), &SchemaOptions::default()).unwrap();
    assert!(w.is_empty(), "{w:?}");
    assert!(!accepts(&g, br#""2024-02-30""#, &SchemaOptions::default().limits).unwrap());
    // `not` of an unknown format negates an annotation: nothing is valid.
    let g = compile(&json!({"not": {"format": "semver"}}), &SchemaOptions::default()).unwrap();
    assert!(!matches!(accepts(&g, br#""1.0.0""#, &SchemaOptions::default().limits), Ok(true)));
    assert!(validate(&json!({"not": {"format": "semver"}}), r#""1.0.0""#).is_err());
    // Refusing them is still an option, naming the keyword and its pointer.
    let refuse = SchemaOptions { unknown_formats_as_annotations: false, ..Default::default() };
    let e = compile(&s, &refuse).unwrap_err();
    assert_eq!((e.keyword(), e.pointer.as_str()), (Some("format"), "/properties/home/format"));
    let (_, w) = compile_with_warnings(&s, &SchemaOptions { lenient: true, ..refuse }).unwrap();
    assert_eq!(w[0].keyword, "format");
}

/// Options whose remotes hold `http://localhost:1234/meta-no-validation.json`, a metaschema
/// without the validation vocabulary.
fn without_validation() -> SchemaOptions {
    let meta = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "http://localhost:1234/meta-no-validation.json",
        "$vocabulary": {"https://json-schema.org/draft/2020-12/vocab/applicator": true, "https://json-schema.org/draft/2020-12/vocab/core": true},
    });
    let mut opts = SchemaOptions::default();
    opts.remotes.insert("http://localhost:1234/meta-no-validation.json".into(), meta);
    opts
}

#[test]
fn a_metaschema_without_the_validation_vocabulary_turns_validation_keywords_off() {
    let opts = without_validation();
    let s = json!({"$schema": "http://localhost:1234/meta-no-validation.json", "properties": {"bad": false, "n": {"minimum": 10, "type": "integer"}}});
    let g = compile(&s, &opts).unwrap();
    for yes in [r#"{"n":20}"#, r#"{"n":1}"#, r#"{"n":"x"}"#] {
        assert!(accepts(&g, yes.as_bytes(), &opts.limits).unwrap(), "{yes}");
        assert_eq!(validate_with(&s, yes, &opts), Ok(()), "final validation agrees: {yes}");
    }
    // The applicator vocabulary still applies.
    assert!(!accepts(&g, br#"{"bad":1}"#, &opts.limits).unwrap());
}

/// `compile_lazy_shared` keeps the caller's document instead of a copy: its grammar gives
/// `compile_lazy`'s verdicts (deferred rules built from the shared document), and the
/// caller's value is left as it was, even where a metaschema without the validation
/// vocabulary has validation keywords stripped (from a copy made then, not the shared one).
#[test]
fn a_shared_schema_compiles_as_a_copied_one_and_is_left_as_it_was() {
    use formwork_grammar::{CompiledGrammar, TokenIndex};
    use std::sync::Arc;
    let stripped = without_validation();
    // Deep enough that the lazy compile defers `$defs` (built when first reached).
    let item = json!({"type": "object", "properties": {"id": {"type": "integer", "minimum": 3}, "tags": {"type": "array", "items": {"type": "string", "maxLength": 2}}}, "required": ["id"]});
    let plain = json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/item"}, "b": {"type": "array", "items": {"$ref": "#/$defs/item"}}}, "$defs": {"item": item}});
    let mut unvalidated = plain.clone();
    unvalidated["$schema"] = json!("http://localhost:1234/meta-no-validation.json");
    let bytes: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let index = TokenIndex::for_vocab(&Arc::new(formwork_vocab::Vocabulary::from_strings(&bytes, &[])));
    let texts = [r#"{"a":{"id":5}}"#, r#"{"a":{"id":1}}"#, r#"{"a":{"id":"x"}}"#, r#"{"b":[{"id":4,"tags":["ab"]},{"id":9}]}"#, r#"{"b":[{"id":4,"tags":["abc"]}]}"#, r#"{"a":{}}"#];
    for (schema, opts) in [(&plain, SchemaOptions::default()), (&unvalidated, stripped)] {
        let shared = Arc::new(schema.clone());
        let (copied, _) = formwork_schema::compile_lazy(schema, &opts).unwrap();
        let (kept, _) = formwork_schema::compile_lazy_shared(shared.clone(), &opts).unwrap();
        // (A document with a metaschema of its own is compiled whole, nothing deferred.)
        if schema.get("$schema").is_none() {
            assert!(!kept.deferred.is_empty(), "nothing deferred: the test would not build a rule from the shared document");
        }
        let copied = CompiledGrammar::lazy(copied, index.clone(), &opts.limits).unwrap();
        let kept = CompiledGrammar::lazy(kept, index.clone(), &opts.limits).unwrap();
        for t in texts {
            let verdict = |g: &Arc<CompiledGrammar>| {
                let mut m = g.matcher();
                m.commit_bytes(t.as_bytes()).is_ok() && m.is_accepting()
            };
            assert_eq!(verdict(&kept), verdict(&copied), "{t}");
        }
        // Validation off: the id below 3 and the long tag are accepted; on, refused.
        let mut m = kept.matcher();
        let lax = m.commit_bytes(br#"{"a":{"id":1}}"#).is_ok() && m.is_accepting();
        assert_eq!(lax, schema.get("$schema").is_some(), "validation keywords applied as the metaschema says");
        drop((kept, copied));
        assert_eq!(*shared, *schema, "the shared document was changed");
        assert_eq!(Arc::strong_count(&shared), 1, "the grammar still holds the document after it is dropped");
    }
}

/// More patterns than the exact region construction takes: a key that one pattern alone
/// matches takes that pattern's schema (before, every such key had to satisfy every
/// pattern's schema, so a valid document was refused — found on MaskBench once unknown
/// formats stopped refusing the schema). A key several patterns match still has to satisfy
/// all of them at once: narrower than the schema there, never wider.
#[test]
fn many_pattern_properties_give_each_key_its_own_pattern_schema() {
    let s = json!({"type": "object", "additionalProperties": false, "patternProperties": {
        "^a:(en|nl)$": {"type": "string"}, "^b:(en|nl)$": {"type": "string"}, "^c:(en|nl)$": {"type": "string"},
        "^d:(en|nl)$": {"type": "integer"}, "^e:[1-4]$": {"type": "string", "enum": ["x", "y"]}, "^[ae]:": {"type": "string", "maxLength": 3}}});
    let accepted = [r#"{"b:nl":"hello"}"#, r#"{"d:en":5}"#, r#"{"b:en":"q","c:nl":"r","d:nl":-2}"#, r#"{"e:5":"x"}"#];
    check(
        s.clone(),
        &accepted,
        &[r#"{"d:en":"5"}"#, r#"{"b:en":7}"#, r#"{"a:en":"abcd"}"#, r#"{"e:2":"z"}"#, r#"{"f:en":"q"}"#, r#"{"e:5":"long"}"#],
    );
    for doc in accepted {
        assert!(validate(&s, doc).is_ok(), "{doc}");
    }
}

/// Every object over `keys` whose values come from `values` (each key absent or one of
/// them), plus a few non-objects: the instances the `oneOf` disjointness checks below are
/// compared with the validator on.
fn small_objects(keys: &[&str], values: &[serde_json::Value]) -> Vec<String> {
    let mut out = vec!["null".to_string(), "3".to_string(), r#""s""#.to_string(), "[]".to_string()];
    let choices = values.len() + 1;
    for mut code in 0..choices.pow(keys.len() as u32) {
        let mut o = serde_json::Map::new();
        for k in keys {
            let c = code % choices;
            code /= choices;
            if c > 0 {
                o.insert(k.to_string(), values[c - 1].clone());
            }
        }
        out.push(serde_json::Value::Object(o).to_string());
    }
    out
}

#[test]
fn one_of_branches_proven_disjoint_by_keys_and_property_types_agree_with_the_validator() {
    let values = [json!("x"), json!(1), json!(true), json!(["deleted"]), json!(["size"]), json!(null), json!("http://a.b/"), json!({"t": "x"}), json!({"t": "y"}), json!({})];
    let schemas = [
        // A key one branch requires and the other's closed object forbids.
        json!({"oneOf": [
            {"type": "object", "properties": {"a": {"type": "string"}, "b": {}}, "required": ["a", "b"], "additionalProperties": false, "uniqueItems": true},
            {"type": "object", "properties": {"a": {}, "c": {}}, "required": ["c"], "additionalProperties": false}]}),
        // The same through `$ref`s and `allOf`, and a key whose schema is `false`.
        json!({"oneOf": [{"$ref": "#/$defs/P"}, {"allOf": [{"required": ["a"]}, {"properties": {"b": false}}]}],
               "$defs": {"P": {"type": "object", "required": ["b"], "uniqueItems": true}}}),
        // A key both may have, required by one, with types that do not meet.
        json!({"oneOf": [
            {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "required": ["a"], "uniqueItems": true},
            {"type": "object", "properties": {"a": {"type": "boolean"}, "c": {"type": "integer"}}}]}),
        // A constant-valued key whose values the other branch's schema for it rejects.
        json!({"oneOf": [
            {"type": "object", "properties": {"a": {"type": "array", "items": {"enum": ["size", "mode"]}, "minItems": 1}, "b": {"minLength": 1}}, "required": ["a", "b"]},
            {"type": "object", "properties": {"a": {"enum": [["deleted"]]}}, "required": ["a"]}]}),
        // An instance-level constant the other branch rejects.
        json!({"oneOf": [{"const": "x"}, {"type": "string", "maxLength": 0}, {"type": "object", "required": ["a"]}]}),
        // A key one branch requires, whose value the other's `patternProperties` give types
        // that do not meet (the xAPI identifier's shape: each branch requires its own key and
        // lets the others be present only as null).
        json!({"oneOf": [
            {"type": "object", "properties": {"a": {"type": "string", "format": "uri"}}, "required": ["a"], "patternProperties": {"^(b|c)$": {"type": "null"}}},
            {"type": "object", "properties": {"b": {"type": "string", "format": "uri"}}, "required": ["b"], "patternProperties": {"^(a|c)$": {"type": "null"}}}]}),
        // Constant values of a key that the object around the `oneOf` requires (GeoJSON's
        // `type`): the branches do not require it themselves.
        json!({"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}, "oneOf": [
            {"properties": {"a": {"enum": ["x"]}, "b": {"type": "string", "format": "uri"}}},
            {"properties": {"a": {"const": "http://a.b/"}, "c": {"type": "string", "format": "uri"}}}]}),
        // A key one branch requires that the other's closed object matches with none of its
        // `patternProperties` (Tabris's color selectors).
        json!({"oneOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": false, "uniqueItems": true},
            {"type": "object", "patternProperties": {"^[bc]$": {}}, "additionalProperties": false}]}),
        // A key one branch requires and the other says is absent (`not: {required: [k]}`).
        json!({"oneOf": [
            {"type": "object", "required": ["a"], "uniqueItems": true},
            {"type": "object", "not": {"required": ["a"], "description": "no a"}}]}),
        // Two closed objects whose `patternProperties` allow no key in common, one with at
        // least one key.
        json!({"oneOf": [
            {"type": "object", "patternProperties": {"^a": {}}, "additionalProperties": false, "minProperties": 1, "uniqueItems": true},
            {"type": "object", "patternProperties": {"^[bc]": {"type": "string"}}, "properties": {"d": {}}, "additionalProperties": false}]}),
        // A key both describe and one requires, whose values are told apart one level
        // down: by the constants of a key they both require, through a `oneOf` and an
        // `allOf` (MARPL's relational atoms and their annotations).
        json!({"oneOf": [
            {"type": "object", "required": ["a"], "uniqueItems": true, "allOf": [{"properties": {"a": {"type": "object"}}}, {"properties": {"a": {"required": ["t"], "properties": {"t": {"const": "x"}}}}}]},
            {"type": "object", "properties": {"a": {"oneOf": [{"required": ["t"], "properties": {"t": {"const": "y"}}}, {"type": "object", "required": ["t"], "properties": {"t": {"const": "z"}}}]}}}]}),
    ];
    // Each has a branch whose negation formwork cannot express (`uniqueItems`, `items`,
    // `maxLength` of a string, `format`... ), so it compiles only through the disjointness
    // proof.
    // Keys in any order, as the validator takes them (the default puts listed keys first).
    let opts = SchemaOptions { key_order: KeyOrder::Any, ..Default::default() };
    for schema in schemas {
        let g = compile(&schema, &opts).unwrap_or_else(|e| panic!("{schema} should compile without negations: {e}"));
        let mut valid = 0;
        for s in small_objects(&["a", "b", "c"], &values) {
            let want = validate(&schema, &s).is_ok();
            valid += usize::from(want);
            assert_eq!(accepts(&g, s.as_bytes(), &opts.limits).unwrap(), want, "{schema} on {s}: the validator says {want}");
        }
        assert!(valid > 0, "{schema}: the test should see valid instances");
    }
}

/// Closed objects whose keys may overlap are not proven disjoint by their key languages:
/// each `oneOf` below has an instance that matches both branches, which the grammar must
/// reject (the exact form), as the validator does.
#[test]
fn one_of_closed_objects_with_overlapping_keys_are_not_taken_as_disjoint() {
    let values = [json!("x"), json!(1), json!({}), json!({"t": "x"})];
    let schemas = [
        // `b` matches both patterns.
        json!({"oneOf": [
            {"type": "object", "patternProperties": {"^[ab]$": {}}, "additionalProperties": false, "minProperties": 1},
            {"type": "object", "patternProperties": {"^[bc]$": {}}, "additionalProperties": false, "minProperties": 1}]}),
        // A listed name of one that the other's pattern matches; and an empty object.
        json!({"oneOf": [
            {"type": "object", "properties": {"b": {}}, "additionalProperties": false},
            {"type": "object", "patternProperties": {"^[bc]$": {}}, "additionalProperties": false, "minProperties": 1}]}),
        json!({"oneOf": [
            {"type": "object", "patternProperties": {"^a$": {}}, "additionalProperties": false},
            {"type": "object", "patternProperties": {"^[bc]$": {}}, "additionalProperties": false}]}),
        // Values told apart one level down only where the inner key is present: `{"a": {}}`
        // matches both.
        json!({"oneOf": [
            {"type": "object", "required": ["a"], "properties": {"a": {"type": "object", "properties": {"t": {"const": "x"}}}}},
            {"type": "object", "properties": {"a": {"type": "object", "properties": {"t": {"const": "y"}}}}}]}),
    ];
    let opts = SchemaOptions { key_order: KeyOrder::Any, ..Default::default() };
    for schema in schemas {
        let g = compile(&schema, &opts).unwrap_or_else(|e| panic!("{schema} should compile (the exact form): {e}"));
        let (mut valid, mut both) = (0, 0);
        for s in small_objects(&["a", "b", "c"], &values) {
            let want = validate(&schema, &s).is_ok();
            valid += usize::from(want);
            let branches = schema["oneOf"].as_array().unwrap();
            both += usize::from(branches.iter().all(|b| validate(b, &s).is_ok()));
            assert_eq!(accepts(&g, s.as_bytes(), &opts.limits).unwrap(), want, "{schema} on {s}: the validator says {want}");
        }
        assert!(valid > 0 && both > 0, "{schema}: the test should see valid instances ({valid}) and ones matching both branches ({both})");
    }
}

#[test]
fn one_of_branches_not_proven_disjoint_take_the_exact_form() {
    // Both may be `{"a": "x", "c": 1}`: `c` is allowed by the open first branch. The exact
    // form negates each: the second's `patternProperties` negation is "some key matching
    // `^z` has a value the schema rejects" (none: `{}` rejects nothing).
    let schema = json!({"oneOf": [
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "patternProperties": {"^z": {}}},
        {"type": "object", "properties": {"a": {"type": "string"}, "c": {"type": "array", "items": {"not": {"type": "string"}}}}, "required": ["c"]}]});
    let values = [json!("x"), json!(1), json!(["y"]), json!([1])];
    let instances_owned = small_objects(&["a", "c", "zz"], &values);
    let instances: Vec<&str> = instances_owned.iter().map(String::as_str).collect();
    assert_agrees_with_validator(&schema, &instances, &SchemaOptions { key_order: KeyOrder::Any, ..Default::default() });
}

/// Branches told apart by one required key each, in open objects (JSON Schema Store's
/// `{"==": ...}`, `{"!=": ...}` operators; helm-unittest's assertions): any two may match
/// one object holding both keys. Negating a branch gives "its key is absent" or "its key
/// holds a value its schema rejects", which is the one alternative "its key, if present,
/// holds such a value": eight branches take one part each, not 2^7, and agree with the
/// validator (a key present with a value of the wrong type does not make a second match).
#[test]
fn one_of_branches_discriminated_by_required_keys_take_one_part_each() {
    let keys = ["a", "b", "c", "d", "e", "f", "g", "h"];
    let branches: Vec<serde_json::Value> = keys
        .iter()
        .map(|k| json!({"type": "object", "required": [k], "properties": {*k: {"type": "integer"}}}))
        .collect();
    let schema = json!({"oneOf": branches});
    let values = [json!(1), json!("x")];
    let instances_owned = small_objects(&["a", "b", "h"], &values);
    let instances: Vec<&str> = instances_owned.iter().map(String::as_str).collect();
    assert_agrees_with_validator(&schema, &instances, &SchemaOptions { key_order: KeyOrder::Any, ..Default::default() });
    // A key required with no schema of its own stays "absent" alone.
    let schema = json!({"oneOf": [{"required": ["a"]}, {"required": ["b"], "properties": {"b": {"type": "string"}}}]});
    assert_agrees_with_validator(&schema, &instances, &SchemaOptions { key_order: KeyOrder::Any, ..Default::default() });
}

/// A recursive predicate language (JSON Schema Store's `component_spec` `PredicateType`):
/// a `oneOf` of open objects each requiring its operator, whose operands `$ref` shared
/// definitions that hold the `oneOf` again (`and`, `not`). The exact form negates each
/// branch, and a branch's negation reaches the operands' targets below the negated
/// object: those stay "not this `$ref`", negated once per target where the compiler meets
/// them (not once per branch negation that reaches them). Instances where a nested
/// predicate is valid, invalid, or matches two branches agree with the validator.
#[test]
fn one_of_of_recursive_operators_negates_each_shared_target_once_and_agrees() {
    let schema = json!({
        "$defs": {
            "pred": {"oneOf": [
                {"type": "object", "required": ["eq"], "properties": {"eq": {"$ref": "#/$defs/two"}}},
                {"type": "object", "required": ["lt"], "properties": {"lt": {"$ref": "#/$defs/two"}}},
                {"type": "object", "required": ["and"], "properties": {"and": {"$ref": "#/$defs/preds"}}},
                {"type": "object", "required": ["not"], "properties": {"not": {"$ref": "#/$defs/pred"}}}]},
            "two": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2},
            "preds": {"type": "array", "items": {"$ref": "#/$defs/pred"}, "minItems": 2, "maxItems": 2}},
        "$ref": "#/$defs/pred"});
    let leaves = [r#"{"eq":[1,2]}"#, r#"{"lt":[1]}"#, r#"{"eq":[1,2],"lt":[3,4]}"#, r#"{"eq":[1,2],"lt":"x"}"#, r#"{}"#, "1"];
    let mut owned: Vec<String> = leaves.iter().map(|s| s.to_string()).collect();
    for a in leaves {
        owned.push(format!(r#"{{"not":{a}}}"#));
        owned.push(format!(r#"{{"eq":[5,6],"not":{a}}}"#));
        for b in leaves {
            owned.push(format!(r#"{{"and":[{a},{b}]}}"#));
            owned.push(format!(r#"{{"not":{{"and":[{a},{b}]}},"lt":[0,0]}}"#));
        }
    }
    let instances: Vec<&str> = owned.iter().map(String::as_str).collect();
    assert_agrees_with_validator(&schema, &instances, &SchemaOptions { key_order: KeyOrder::Any, ..Default::default() });
}

/// A schema conjoined with its own negation matches nothing, written out (`allOf` of a
/// `$ref` and `not` of the same `$ref`) or arising in the exact form of a `oneOf` whose two
/// overlapping branches share a property's definition (each alternative holds that
/// definition and "it fails" from the other branch's negation).
#[test]
fn a_schema_and_its_negation_together_match_nothing() {
    let schema = json!({
        "$defs": {"term": {"oneOf": [
            {"type": "object", "required": ["v"], "properties": {"v": {"const": "x"}}},
            {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}]}},
        "type": "object",
        "properties": {
            "never": {"allOf": [{"$ref": "#/$defs/term"}, {"not": {"$ref": "#/$defs/term"}}]},
            "head": {"oneOf": [
                {"type": "object", "required": ["p"], "properties": {"p": {"$ref": "#/$defs/term"}, "k": {"const": 1}}},
                {"type": "object", "required": ["p"], "properties": {"p": {"$ref": "#/$defs/term"}, "k": {"const": 2}}}]}}});
    let instances = [
        r#"{}"#,
        r#"{"never":{"v":"x"}}"#,
        r#"{"never":1}"#,
        r#"{"head":{"p":{"v":"x"}}}"#,
        r#"{"head":{"p":{"v":"x"},"k":1}}"#,
        r#"{"head":{"p":{"n":3},"k":2}}"#,
        r#"{"head":{"p":{"v":"y"},"k":1}}"#,
        r#"{"head":{"p":{"v":"x","n":1},"k":1}}"#,
        r#"{"head":{"p":{"n":3},"k":3}}"#,
    ];
    assert_agrees_with_validator(&schema, &instances, &SchemaOptions { key_order: KeyOrder::Any, ..Default::default() });
}

/// A branch that is itself an `anyOf` (here through a `$ref`) is disjoint from another
/// when each of its branches is: proven without negating it (a `format` has no negation, so
/// the exact form was refused).
#[test]
fn one_of_branches_that_are_any_ofs_are_disjoint_when_each_of_their_branches_is() {
    let schema = json!({
        "$defs": {"other": {"anyOf": [
            {"type": "string", "format": "email"},
            {"type": "object", "required": ["a"], "properties": {"a": {"const": 2}}}]}},
        "oneOf": [
            {"type": "object", "required": ["a"], "properties": {"a": {"const": 1}}},
            {"$ref": "#/$defs/other"}]});
    let instances = [r#"{"a":1}"#, r#"{"a":2}"#, r#"{"a":3}"#, r#""x@y.org""#, r#""x""#, "1", r#"{"a":1,"b":2}"#];
    assert_agrees_with_validator(&schema, &instances, &SchemaOptions { key_order: KeyOrder::Any, ..Default::default() });
    // Still refused when a branch of the `anyOf` may overlap the other side.
    let overlapping = json!({"oneOf": [
        {"type": "object", "required": ["a"]},
        {"anyOf": [{"type": "string", "format": "email"}, {"type": "object", "required": ["b"]}]}]});
    assert_eq!(compile(&overlapping, &SchemaOptions::default()).unwrap_err().keyword(), Some("oneOf"));
}

/// `uniqueItems` over more values than one rule per set of them allows (here 12): in any
/// order an unordered group of the values, exact; in listed order (generation) the values
/// in the schema's order, each at most once, which accepts nothing invalid.
#[test]
fn unique_items_over_many_values_are_exact_in_any_order_and_ordered_when_generating() {
    let vals: Vec<serde_json::Value> = (0..12).map(|i| json!(format!("v{i}"))).collect();
    let schema = json!({"type": "array", "items": {"enum": vals}, "uniqueItems": true, "minItems": 2, "maxItems": 5});
    let mut instances_owned = vec!["[]".to_string(), r#"["v1"]"#.to_string(), r#"["v12","v1"]"#.to_string()];
    let mut rng = 7u64;
    for len in 1..=7 {
        for _ in 0..40 {
            let items: Vec<String> = (0..len)
                .map(|_| {
                    rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    // Mostly a few values, so that repeats come up.
                    format!("\"v{}\"", (rng >> 33) % if len % 2 == 0 { 4 } else { 12 })
                })
                .collect();
            instances_owned.push(format!("[{}]", items.join(",")));
        }
    }
    instances_owned.push(r#"["v0","v1","v2","v3","v4"]"#.into());
    instances_owned.push(r#"["v11","v10","v9","v8","v7"]"#.into());
    let instances: Vec<&str> = instances_owned.iter().map(String::as_str).collect();
    assert_agrees_with_validator(&schema, &instances, &SchemaOptions { key_order: KeyOrder::Any, ..Default::default() });
    let opts = SchemaOptions { key_order: KeyOrder::Listed, ..Default::default() };
    let g = compile(&schema, &opts).unwrap();
    for s in &instances {
        let got = accepts(&g, s.as_bytes(), &opts.limits).unwrap();
        assert!(!got || validate_with(&schema, s, &opts).is_ok(), "listed order accepted {s}");
    }
    assert!(accepts(&g, br#"["v0","v3","v11"]"#, &opts.limits).unwrap());
    assert!(!accepts(&g, br#"["v3","v0"]"#, &opts.limits).unwrap(), "listed order: the schema's order");
    // Values that are prefixes of each other (`1`, `10`, `1.5`).
    let nums = json!({"type": "array", "items": {"enum": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 1.5]}, "uniqueItems": true});
    let texts = ["[1,10]", "[10,1]", "[1,1]", "[10,10]", "[1.5,1,11]", "[1.0,1]", "[11,1,10,1.5]", "[12]", "[]"];
    assert_agrees_with_validator(&nums, &texts, &SchemaOptions { key_order: KeyOrder::Any, ..Default::default() });
    // A `maxItems` at or above the number of values says nothing more: 256 values compile
    // in listed order; with many counts to tell apart, refused naming the keyword.
    let all: Vec<serde_json::Value> = (0..256).map(|i| json!(i)).collect();
    let implied = json!({"type": "array", "items": {"enum": all}, "uniqueItems": true, "maxItems": 256});
    let g = compile(&implied, &SchemaOptions::default()).unwrap();
    assert!(accepts(&g, b"[1,2,255]", &SchemaOptions::default().limits).unwrap());
    assert!(!accepts(&g, b"[1,2,2]", &SchemaOptions::default().limits).unwrap());
    let counted = json!({"type": "array", "items": {"enum": all}, "uniqueItems": true, "maxItems": 200});
    let e = compile(&counted, &SchemaOptions::default()).unwrap_err();
    assert_eq!(e.keyword(), Some("uniqueItems"), "{e}");
    assert!(compile(&counted, &SchemaOptions { key_order: KeyOrder::Any, ..Default::default() }).is_ok());
    // Past the bound, still refused naming the keyword.
    let many: Vec<serde_json::Value> = (0..300).map(|i| json!(i)).collect();
    let refused = json!({"type": "array", "items": {"enum": many}, "uniqueItems": true});
    assert_eq!(compile(&refused, &SchemaOptions::default()).unwrap_err().keyword(), Some("uniqueItems"));
}

/// The negations of `additionalProperties`, `patternProperties` and `propertyNames` in an
/// object whose keys are not a known set: "some key the keyword applies to is present with
/// a value it rejects" (a key witness), met by a listed name or by an additional key. Every
/// object of up to four keys over two values agrees with the validator in any key order; in
/// listed order (the witness comes after the listed keys) nothing invalid is accepted.
#[test]
fn negations_that_need_some_key_agree_with_the_validator() {
    let values = [json!(1), json!("x")];
    let instances_owned = small_objects(&["a", "ab", "b", "zz"], &values);
    let instances: Vec<&str> = instances_owned.iter().map(String::as_str).collect();
    let schemas = [
        // Some key outside `a` (listed `b`, or an additional one) has a non-integer value.
        json!({"type": "object", "properties": {"b": {}}, "not": {"properties": {"a": {}}, "additionalProperties": {"type": "integer"}}}),
        // ... and none outside `a` may exist in the other branch: the exact `oneOf`.
        json!({"oneOf": [
            {"type": "object", "properties": {"a": {"type": "integer"}, "b": {}}, "additionalProperties": false},
            {"type": "object", "properties": {"a": {}}, "additionalProperties": {"type": "string"}}]}),
        // With `patternProperties` in the negated schema: keys matching `^a` are not additional there.
        json!({"type": "object", "not": {"patternProperties": {"^a": {}}, "additionalProperties": false}}),
        // Some key starting with `a` has a non-string value (listed `ab` must be a string).
        json!({"type": "object", "properties": {"ab": {"type": "string"}}, "not": {"patternProperties": {"^a": {"type": "string"}}}}),
        // Two witnesses, which one key may meet together (`ab`).
        json!({"type": "object", "allOf": [
            {"not": {"patternProperties": {"a": {"type": "string"}}}},
            {"not": {"patternProperties": {"b": {"type": "string"}}}}], "maxProperties": 2}),
        // Some key fails `propertyNames`: a pattern, a length, finitely many names, `false`.
        json!({"type": "object", "properties": {"a": {"type": "integer"}}, "not": {"propertyNames": {"pattern": "^a"}}}),
        json!({"type": "object", "not": {"propertyNames": {"maxLength": 1}}}),
        json!({"type": "object", "not": {"propertyNames": {"not": {"enum": ["ab", "zz", 3]}}}}),
        json!({"type": "object", "not": {"propertyNames": false}}),
        // `propertyNames` beside listed properties and additional ones.
        json!({"type": "object", "properties": {"a": {"type": "integer"}}, "propertyNames": {"pattern": "^[a-b]+$"}, "additionalProperties": {"type": "string"}}),
        // A witness beside the object's own `patternProperties`: in the key regions.
        json!({"type": "object", "patternProperties": {"^z": {"type": "integer"}}, "not": {"additionalProperties": false}}),
        json!({"type": "object", "patternProperties": {"b": {}}, "additionalProperties": false, "not": {"patternProperties": {"^a": {"type": "integer"}}}}),
        // `patternProperties` in several parts, each part's `additionalProperties` for the
        // keys none of its patterns matches.
        json!({"type": "object", "allOf": [
            {"patternProperties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "string"}},
            {"patternProperties": {"b": {"type": "string"}}}]}),
        json!({"type": "object", "allOf": [
            {"patternProperties": {"^a": true}, "additionalProperties": false},
            {"patternProperties": {"b$": {"type": "integer"}}, "additionalProperties": false}]}),
        // `patternProperties` with `propertyNames`.
        json!({"type": "object", "properties": {"b": {}}, "propertyNames": {"maxLength": 1}, "patternProperties": {"^[a-y]": {"type": "integer"}}}),
    ];
    for schema in &schemas {
        assert_agrees_with_validator(schema, &instances, &SchemaOptions { key_order: KeyOrder::Any, ..Default::default() });
        let opts = SchemaOptions { key_order: KeyOrder::Listed, ..Default::default() };
        let g = compile(schema, &opts).unwrap_or_else(|e| panic!("{schema}: {e}"));
        let mut valid_accepted = 0;
        for s in &instances {
            let want = validate_with(schema, s, &opts).is_ok();
            let got = accepts(&g, s.as_bytes(), &opts.limits).unwrap();
            assert!(want || !got, "{schema} in listed order accepted {s}, which the validator rejects");
            valid_accepted += usize::from(want && got);
        }
        assert!(valid_accepted > 0, "{schema} in listed order accepted no valid instance");
    }
    // More distinct patterns than the key regions take stay refused, naming the keyword.
    let refused = json!({"type": "object", "allOf": [{"patternProperties": {"a": {}, "b": {}, "c": {}}}, {"patternProperties": {"d": {}, "z": {}}}]});
    assert_eq!(compile(&refused, &SchemaOptions::default()).unwrap_err().keyword(), Some("patternProperties"));
}

/// Asserts that the grammar of `schema` accepts exactly the `instances` the validator
/// accepts (with `opts`), and that the instances include valid and invalid ones. Instances
/// with `\u` escapes only need not be accepted wrongly: formwork's pattern grammars take
/// the characters they match raw (a documented narrowing).
fn assert_agrees_with_validator(schema: &serde_json::Value, instances: &[&str], opts: &SchemaOptions) {
    let g = compile(schema, opts).unwrap_or_else(|e| panic!("{schema} should compile: {e}"));
    let (mut valid, mut invalid) = (0, 0);
    for s in instances {
        let want = validate_with(schema, s, opts).is_ok();
        let got = accepts(&g, s.as_bytes(), &opts.limits).unwrap();
        valid += usize::from(want);
        invalid += usize::from(!want);
        if s.contains("\\u") {
            assert!(!got || want, "{schema} accepts {s}, which the validator rejects");
        } else {
            assert_eq!(got, want, "{schema} on {s}: the validator says {want}");
        }
    }
    assert!(valid > 0 && invalid > 0, "{schema}: the test should see valid and invalid instances");
}

#[test]
fn one_of_negations_through_refs_items_and_disjoint_one_ofs_agree_with_the_validator() {
    let instances = [
        "null", "true", "3", "7", "1.5", r#""""#, r#""a""#, r#""ab""#, r#""a b""#, "[]", r#"["a"]"#, "[1]", r#"["a",1]"#, r#"["a","b"]"#, r#"["a",""]"#, r#"[""]"#,
        "[[]]", "{}", r#"{"c":{}}"#, r#"{"c":"x"}"#, r#"{"c":1}"#, r#"{"c":{"c":1}}"#,
        r#"{"c":{"c":{}}}"#, r#"{"c":{"c":"x"}}"#, r#"{"c":{"c":{"c":1}}}"#, r#"{"c":{"c":{"c":{}}}}"#, "[1,[2]]", r#"[["a"]]"#,
        "[[[1]]]", r#"[[["a"]]]"#, r#"[1,[2,["a"]]]"#,
    ];
    let schemas = [
        // A branch that is a chain of `$ref`s, overlapping a string branch: its negation
        // follows the chain.
        json!({"oneOf": [{"$ref": "#/$defs/A"}, {"type": "string"}], "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"type": "string", "minLength": 2}}}),
        // `$ref`s inside a target's properties.
        json!({"oneOf": [{"$ref": "#/$defs/O"}, {"type": "object"}],
               "$defs": {"O": {"type": "object", "required": ["c"], "properties": {"c": {"$ref": "#/$defs/N"}}}, "N": {"type": "string"}}}),
        // `items` negated: an array with an item the items schema rejects (`contains`).
        json!({"oneOf": [{"type": "array", "items": {"type": "string"}}, {"type": "array", "items": {"minLength": 1}}]}),
        // A `oneOf` negated: its branches are disjoint, so none of them matches.
        json!({"oneOf": [{"oneOf": [{"type": "string"}, {"type": "boolean"}]}, {"minimum": 5}]}),
        json!({"oneOf": [{"not": {"oneOf": [{"type": "string", "minLength": 2}, {"type": "array"}]}}, {"type": "string"}]}),
        // A `oneOf` whose branches overlap, negated: none matches, or two that may overlap both do.
        json!({"oneOf": [{"not": {"oneOf": [{"type": "string"}, {"minLength": 2}]}}, {"type": "string"}]}),
        json!({"not": {"oneOf": [{"type": "string"}, {"minLength": 2}, {"type": "integer"}]}}),
        // Recursive targets: their negation meets the `$ref` again one value down and leaves
        // "not this `$ref`" there, which the compiler closes into a recursive rule.
        json!({"oneOf": [{"$ref": "#/$defs/T"}, {"type": "object", "required": ["c"]}],
               "$defs": {"T": {"type": "object", "properties": {"c": {"$ref": "#/$defs/T"}}}}}),
        json!({"oneOf": [{"$ref": "#/$defs/T"}, {"type": "object"}], "$defs": {"T": {"type": "object", "properties": {"c": {"$ref": "#/$defs/T"}}, "required": ["c"]}}}),
        json!({"not": {"$ref": "#/$defs/L"}, "$defs": {"L": {"type": "array", "items": {"anyOf": [{"type": "integer"}, {"$ref": "#/$defs/L"}]}}}}),
        json!({"oneOf": [{"$ref": "#/$defs/L"}, {"type": "array", "items": {"type": "integer"}}], "$defs": {"L": {"type": "array", "items": {"anyOf": [{"type": "integer"}, {"$ref": "#/$defs/L"}]}}}}),
    ];
    let opts = SchemaOptions { key_order: KeyOrder::Any, ..Default::default() };
    for schema in schemas {
        assert_agrees_with_validator(&schema, &instances, &opts);
    }
    // Still refused, naming the keyword: a recursive target met again at the same instance
    // (its negation would not move down the input), `items` after positional items.
    for (schema, kw) in [
        (json!({"oneOf": [{"$ref": "#/$defs/T"}, {"type": "object"}], "$defs": {"T": {"anyOf": [{"type": "object", "required": ["c"]}, {"allOf": [{"$ref": "#/$defs/T"}]}]}}}), "oneOf"),
        (json!({"oneOf": [{"type": "array", "prefixItems": [{"type": "integer"}], "items": {"type": "string"}}, {"type": "array", "maxItems": 1}]}), "oneOf"),
    ] {
        let e = compile(&schema, &opts).unwrap_err();
        assert_eq!(e.keyword(), Some(kw), "{schema}: {e}");
    }
}

#[test]
fn negated_shorthands_inside_a_class_follow_ecma() {
    check(json!({"type": "string", "pattern": "^[\\S]+$"}), &[r#""ab""#, r#""é""#], &[r#""a b""#, r#""""#]);
    check(json!({"type": "string", "pattern": "^[^\\S]$"}), &[r#"" ""#, r#""\t""#], &[r#""x""#]);
}

#[test]
fn if_then_else_are_unknown_keywords_before_draft_7() {
    let s = |draft: &str| json!({"$schema": draft, "type": "object", "if": {"required": ["a"]}, "then": {"properties": {"b": {"type": "string"}}}});
    check(s("http://json-schema.org/draft-04/schema#"), &[r#"{"a":1,"b":2}"#, r#"{"b":"x"}"#], &["1"]);
    check(s("http://json-schema.org/draft-06/schema#"), &[r#"{"a":1,"b":2}"#], &["1"]);
    // (Listed keys first: the default key order.)
    check(s("http://json-schema.org/draft-07/schema#"), &[r#"{"b":"x","a":1}"#, r#"{"b":2}"#], &[r#"{"b":2,"a":1}"#]);
}

#[test]
fn several_patterns_formats_and_small_bounds_intersect_as_the_validator_says() {
    let instances = [
        r#""""#, r#""a""#, r#""ab""#, r#""abc""#, r#""a1""#, r#""1a""#, r#""abcdef""#, r#""ABC""#, r#""x-y""#, r#""0f0f""#, r#""zz0f""#,
        r#""2024-01-02""#, r#""2024-13-02""#, r#""2023-01-02""#, "1",
    ];
    let schemas = [
        // Two patterns on one string (through allOf), one unanchored.
        json!({"type": "string", "allOf": [{"pattern": "^[a-z]+$"}, {"pattern": "b"}]}),
        // A pattern and a format.
        json!({"type": "string", "format": "date", "pattern": "^2024"}),
        // Partly anchored patterns with small length bounds (their own grammar cannot carry
        // the bounds): the product with the bounds.
        json!({"type": "string", "pattern": "[0-9a-f]+", "minLength": 2, "maxLength": 4}),
        json!({"type": "string", "pattern": "^[A-Za-z][A-Za-z0-9_]*", "maxLength": 3}),
    ];
    // (Characters matched by a pattern are taken raw, not as `\u` escapes, with or without
    // an intersection: a narrowing formwork's pattern grammars already make.)
    for schema in schemas {
        assert_agrees_with_validator(&schema, &instances, &SchemaOptions::default());
    }
}

#[test]
fn anchors_inside_groups_at_a_patterns_edges_anchor_it() {
    let date = json!({"type": "string", "pattern": "^(\\d{4}(-\\d{2})?$)|(^\\d{4}-\\d{2}-\\d{2}T\\d{2}$)"});
    check(date, &[r#""2024""#, r#""2024-01""#, r#""2024-01-02T10""#], &[r#""x2024""#, r#""2024-01-02""#, r#""2024-0""#]);
    check(json!({"type": "string", "pattern": "(^a$|^bc$)"}), &[r#""a""#, r#""bc""#], &[r#""ab""#, r#""xbc""#]);
    check(json!({"type": "string", "pattern": "((^a))b"}), &[r#""ab""#, r#""abx""#], &[r#""xab""#]);
}

#[test]
fn negated_patterns_agree_with_the_validator_in_every_encoding() {
    let instances = [
        r#""""#, r#""a""#, r#""ab""#, r#""ba""#, r#""abc""#, r#""ABC""#, r#""cc""#, r#""a1""#, r#""zzzz""#, "1", "null",
        // Another encoding of "ab" and "ba": the grammar must not let an escaped forbidden
        // string through (it may refuse an escaped allowed one: a documented narrowing).
        r#""\u0061b""#, r#""b\u0061""#,
    ];
    let schemas = [
        json!({"type": "string", "not": {"pattern": "^a"}}),
        json!({"not": {"pattern": "b"}}),
        json!({"oneOf": [{"type": "string", "pattern": "^[a-z]+$"}, {"type": "string", "minLength": 3}]}),
        json!({"enum": ["ab", "ba", "cc", 1], "not": {"pattern": "a"}}),
        json!({"type": "string", "maxLength": 2, "not": {"pattern": "^[a-z]*$"}}),
    ];
    let opts = SchemaOptions::default();
    for schema in schemas {
        assert_agrees_with_validator(&schema, &instances, &opts);
    }
    // `format` is not negated: formwork's grammar of a format may be narrower than the
    // validator's notion of it, so its complement would be wider.
    let e = compile(&json!({"type": "string", "not": {"format": "date"}}), &opts).unwrap_err();
    assert_eq!(e.keyword(), Some("not"), "{e}");
}

#[test]
fn negated_integers_are_non_integral_numbers_without_an_exponent() {
    let instances = ["1.5", "-0.5", "2.50", "0.05", "1", "-3", "1.0", "0.0", "1e2", "1.5e1", r#""a""#, "null", "[]"];
    for schema in [
        json!({"not": {"type": "integer"}}),
        json!({"oneOf": [{"type": "integer"}, {"type": "number"}]}),
        json!({"type": "number", "not": {"type": "integer"}}),
        json!({"enum": [1, 1.5, "x", 2.0], "not": {"type": "integer"}}),
    ] {
        assert_agrees_with_validator(&schema, &instances, &SchemaOptions::default());
    }
    // The narrowing: a non-integral number written with an exponent is not accepted.
    let g = compile(&json!({"not": {"type": "integer"}}), &SchemaOptions::default()).unwrap();
    assert!(validate(&json!({"not": {"type": "integer"}}), "1.25e1").is_ok());
    assert!(!accepts(&g, b"1.25e1", &SchemaOptions::default().limits).unwrap());
    // With bounds it is refused, naming `not` (the negation that cannot carry them).
    let e = compile(&json!({"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 0}]}), &SchemaOptions::default()).unwrap_err();
    assert_eq!(e.keyword(), Some("not"), "{e}");
    assert!(e.to_string().contains("non-integral"), "{e}");
}

#[test]
fn a_negated_pattern_formwork_cannot_lower_is_refused_or_in_lenient_mode_dropped() {
    let schema = json!({"type": "string", "not": {"pattern": "(?=a)b"}});
    let e = compile(&schema, &SchemaOptions::default()).unwrap_err();
    assert_eq!(e.keyword(), Some("not"), "{e}");
    let opts = SchemaOptions { lenient: true, ..Default::default() };
    let (g, w) = compile_with_warnings(&schema, &opts).unwrap();
    assert!(w.iter().any(|w| w.keyword == "not"), "{w:?}");
    // Dropped, so the grammar is wider: every string.
    assert!(accepts(&g, br#""ab""#, &opts.limits).unwrap() && accepts(&g, br#""x""#, &opts.limits).unwrap());
}

#[test]
fn closed_object_branches_negate_additional_properties_within_their_keys() {
    let values = [json!(1), json!("x")];
    let instances_owned = small_objects(&["a", "b", "c"], &values);
    let instances: Vec<&str> = instances_owned.iter().map(String::as_str).collect();
    let opts = SchemaOptions { key_order: KeyOrder::Any, ..Default::default() };
    for schema in [
        // Both accept objects with only `a`: exactly one must match.
        json!({"oneOf": [
            {"type": "object", "properties": {"a": {}, "b": {}}, "additionalProperties": false},
            {"type": "object", "properties": {"a": {}, "c": {}}, "additionalProperties": false}]}),
        // Through `$ref`s.
        json!({"oneOf": [{"$ref": "#/$defs/P"}, {"$ref": "#/$defs/Q"}],
               "$defs": {"P": {"type": "object", "properties": {"b": {}}, "additionalProperties": false},
                         "Q": {"type": "object", "properties": {"c": {"type": "string"}}, "additionalProperties": false}}}),
    ] {
        assert_agrees_with_validator(&schema, &instances, &opts);
    }
}

/// Conditions on which keys an object has (`anyOf`/`oneOf` of `required` lists, `not:
/// {required}`, dependencies) are checked by the object's member group (any order) or its
/// member-by-member rules (listed order) instead of distributing the object: the grammar
/// accepts exactly what the validator does, for every set of keys.
/// Every order of `items`.
fn permutations<'a>(items: &[&'a str]) -> Vec<Vec<&'a str>> {
    if items.len() <= 1 {
        return vec![items.to_vec()];
    }
    let mut out = Vec::new();
    for i in 0..items.len() {
        let mut rest = items.to_vec();
        let first = rest.remove(i);
        for mut p in permutations(&rest) {
            p.insert(0, first);
            out.push(p);
        }
    }
    out
}

#[test]
fn presence_conditions_agree_with_the_validator() {
    // Every subset of five keys (values 1), a few with a string value, and non-objects.
    let keys = ["a", "b", "c", "d", "zz"];
    let mut instances: Vec<String> = (0u32..32)
        .map(|m| {
            let members: Vec<String> = keys.iter().enumerate().filter(|(i, _)| m >> i & 1 == 1).map(|(_, k)| format!("\"{k}\":1")).collect();
            format!("{{{}}}", members.join(","))
        })
        .collect();
    instances.extend([r#"{"a":"x"}"#, r#"{"b":1,"a":"x"}"#, r#"{"zz":"x","a":1}"#, r#"{"c":1,"b":1,"a":1}"#].map(String::from));
    instances.extend(["null", "1", r#""s""#, "[]"].map(String::from));
    let instances: Vec<&str> = instances.iter().map(String::as_str).collect();
    let schemas = [
        // At least one of: a; b and c.
        json!({"properties": {"a": {"type": "integer"}}, "anyOf": [{"required": ["a"]}, {"required": ["b", "c"], "description": "both"}]}),
        // Exactly one of a, b; a closed object.
        json!({"type": "object", "properties": {"a": {}, "b": {}, "c": {}}, "additionalProperties": false, "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}),
        // Never a and b together (non-objects fail the `not`).
        json!({"not": {"required": ["a", "b"]}}),
        json!({"type": "object", "not": {"anyOf": [{"required": ["a"]}, {"required": ["zz"]}]}}),
        // Dependencies, both spellings.
        json!({"$schema": "http://json-schema.org/draft-07/schema#", "dependencies": {"a": ["b", "c"], "d": ["zz"]}}),
        json!({"dependentRequired": {"a": ["b"], "b": ["c"]}, "properties": {"a": {"type": "integer"}}}),
        // Several at once, as real schemas combine them (allOf of anyOfs, dependencies, a not).
        json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
               "properties": {"a": {"type": "integer"}, "b": {}, "c": {}, "d": {}},
               "allOf": [{"anyOf": [{"required": ["a"]}, {"required": ["b"]}, {"required": ["c"]}]}, {"anyOf": [{"required": ["c"]}, {"required": ["d"]}]}],
               "dependencies": {"b": ["c"], "d": ["a"]}, "not": {"anyOf": [{"required": ["zz"]}]}}),
        // Room for at most two keys.
        json!({"maxProperties": 2, "anyOf": [{"required": ["a", "b"]}, {"required": ["c"]}], "dependentRequired": {"c": ["d"]}}),
        // A key the conditions name that only additionalProperties describes, and one that
        // can never be present.
        json!({"properties": {"a": {}}, "additionalProperties": {"type": "integer"}, "anyOf": [{"required": ["zz"]}, {"required": ["a"]}]}),
        json!({"properties": {"a": {}, "b": {}}, "additionalProperties": false, "anyOf": [{"required": ["zz"]}, {"required": ["b"]}]}),
        // Nested, and beside a required key.
        json!({"properties": {"o": {"anyOf": [{"required": ["a"]}, {"required": ["b"]}]}}, "required": ["c"], "oneOf": [{"required": ["a"]}, {"required": ["b", "d"]}]}),
    ];
    for schema in schemas {
        assert_agrees_with_validator(&schema, &instances, &SchemaOptions { key_order: KeyOrder::Any, ..Default::default() });
        // Listed order fixes the keys' order (a narrowing) and decides the members one by
        // one, carrying what is left of the conditions: nothing the validator rejects is
        // accepted, and every set of keys it accepts is accepted in some order (the listed
        // one); non-objects exactly as the validator says.
        let listed = SchemaOptions { key_order: KeyOrder::Listed, ..Default::default() };
        let g = compile(&schema, &listed).unwrap();
        for s in &instances {
            let valid = validate_with(&schema, s, &listed).is_ok();
            let Some(members) = s.strip_prefix('{').and_then(|x| x.strip_suffix('}')) else {
                assert_eq!(accepts(&g, s.as_bytes(), &listed.limits).unwrap(), valid, "{schema} in listed order on {s}");
                continue;
            };
            let members: Vec<&str> = if members.is_empty() { Vec::new() } else { members.split(',').collect() };
            let mut some = false;
            for order in permutations(&members) {
                let text = format!("{{{}}}", order.join(","));
                let ok = accepts(&g, text.as_bytes(), &listed.limits).unwrap();
                assert!(!ok || valid, "{schema} in listed order accepts {text}");
                some |= ok;
            }
            assert_eq!(some, valid, "{schema} in listed order: {s} in some order");
        }
        // In any order, the conditions stay with the object (one group, no copies).
        let g = compile(&schema, &SchemaOptions { key_order: KeyOrder::Any, ..Default::default() }).unwrap();
        assert!(formwork_grammar::gbnf::print(&g).contains("; present "), "{schema}: presence clauses expected");
    }
    // Twelve keys in thirteen clauses (the most one object takes this way): every subset.
    let keys: Vec<String> = "abcdefghijkl".chars().map(|c| c.to_string()).collect();
    let schema = json!({"type": "object",
        "properties": keys.iter().map(|k| (k.clone(), json!({}))).collect::<serde_json::Map<_, _>>(),
        "anyOf": [{"required": ["a", "b"]}, {"required": ["c", "d"]}, {"required": ["e", "f"]}, {"required": ["g"]}],
        "dependentRequired": {"a": ["h"], "c": ["i"], "e": ["j"], "g": ["k", "l"], "b": ["c"], "d": ["e"], "f": ["g"], "h": ["i"]},
        "not": {"anyOf": [{"required": ["l", "a"]}, {"required": ["k", "b"]}]}});
    let subsets: Vec<String> = (0u32..1 << 12)
        .map(|m| format!("{{{}}}", keys.iter().enumerate().filter(|(i, _)| m >> i & 1 == 1).map(|(_, k)| format!("\"{k}\":1")).collect::<Vec<_>>().join(",")))
        .collect();
    let subsets: Vec<&str> = subsets.iter().map(String::as_str).collect();
    assert_agrees_with_validator(&schema, &subsets, &SchemaOptions { key_order: KeyOrder::Any, ..Default::default() });
    let g = compile(&schema, &SchemaOptions { key_order: KeyOrder::Any, ..Default::default() }).unwrap();
    assert!(formwork_grammar::gbnf::print(&g).contains("; present "), "twelve keys still take the clauses");
    // In listed order (the keys' listed order is the subsets' order): exact on every subset,
    // and no dead ends: after every member the grammar takes, a comma is taken only when
    // the object can still end, and what it takes can always be completed.
    let listed = SchemaOptions { key_order: KeyOrder::Listed, ..Default::default() };
    assert_agrees_with_validator(&schema, &subsets, &listed);
    let g = compile(&schema, &listed).unwrap();
    let bytes: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let vocab = std::sync::Arc::new(formwork_vocab::Vocabulary::from_strings(&bytes, &[]));
    let cg = formwork_grammar::matcher::CompiledGrammar::new(&g, vocab, &listed.limits).unwrap();
    let mut viable = 0;
    for m in 1u32..1 << 12 {
        let members: Vec<String> = keys.iter().enumerate().filter(|(i, _)| m >> i & 1 == 1).map(|(_, k)| format!("\"{k}\":1")).collect();
        for k in 1..=members.len() {
            for tail in ["", ","] {
                let prefix = format!("{{{}{tail}", members[..k].join(","));
                let mut matcher = cg.matcher();
                if matcher.commit_bytes(prefix.as_bytes()).is_ok() {
                    viable += 1;
                    assert!(matcher.shortest_completion().is_some(), "a dead end after {prefix}");
                }
            }
        }
    }
    assert!(viable > 1000, "{viable} viable prefixes");
    // A key forced first (the object then keeps its listed order): the conditions stay with
    // it too. Every set of keys with `a` first, in every order of the rest, against the
    // validator.
    let schema = json!({"properties": {"a": {}, "b": {}, "c": {}, "d": {}}, "required": ["a"],
        "anyOf": [{"required": ["b"]}, {"required": ["c"]}], "dependentRequired": {"b": ["d"]}, "not": {"required": ["c", "d"]}});
    let first = SchemaOptions { force_first_key: Some("a".into()), ..Default::default() };
    let g = compile(&schema, &first).unwrap();
    for m in 0u32..8 {
        let rest: Vec<String> = ["b", "c", "d"].iter().enumerate().filter(|(i, _)| m >> i & 1 == 1).map(|(_, k)| format!("\"{k}\":1")).collect();
        let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
        let valid = validate_with(&schema, &format!("{{\"a\":1{}{}}}", if rest.is_empty() { "" } else { "," }, rest.join(",")), &first).is_ok();
        let some = permutations(&rest).iter().any(|order| {
            let text = format!("{{\"a\":1{}{}}}", if order.is_empty() { "" } else { "," }, order.join(","));
            let ok = accepts(&g, text.as_bytes(), &first.limits).unwrap();
            assert!(!ok || valid, "{schema} with a first accepts {text}");
            ok
        });
        assert_eq!(some, valid, "{schema} with a first: {rest:?}");
    }
    // Nested objects too: `{"o": {...}}` against the nested conditions.
    let schema = json!({"properties": {"o": {"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}}});
    let nested: Vec<String> = instances.iter().map(|i| format!("{{\"o\":{i}}}")).collect();
    let nested: Vec<&str> = nested.iter().map(String::as_str).collect();
    assert_agrees_with_validator(&schema, &nested, &SchemaOptions { key_order: KeyOrder::Any, ..Default::default() });
}

#[test]
fn a_pattern_repeated_at_many_places_means_the_same_and_is_warned_about_at_each() {
    // Computed once per schema (see `Compiler::shared_leaf`); every place keeps its language.
    let props = |n: usize, pattern: &str| {
        let p: serde_json::Map<String, serde_json::Value> =
            (0..n).map(|i| (format!("p{i}"), json!({"type": "string", "pattern": pattern}))).collect();
        json!({"type": "object", "properties": p})
    };
    let pattern = "[a-z]+@[a-z]+\\.(com|org)";
    check(props(3, pattern), &[r#"{"p0":"a@b.com","p2":"x y@z.org!"}"#], &[r#"{"p0":"a@b.net"}"#, r#"{"p1":"ab.com"}"#, r#"{"p2":"a@b.com","p1":1}"#]);
    check(props(2, "^[0-9]{2}$"), &[r#"{"p0":"12","p1":"34"}"#], &[r#"{"p0":"1"}"#, r#"{"p1":"123"}"#]);
    // A pattern lenient mode leaves out is reported at every place, not only the first.
    let (_, w) = compile_with_warnings(&props(3, "(?<=a)b"), &SchemaOptions { lenient: true, ..Default::default() }).unwrap();
    let mut at: Vec<&str> = w.iter().filter(|w| w.keyword == "pattern").map(|w| w.pointer.as_str()).collect();
    at.sort();
    assert_eq!(at, ["/properties/p0/pattern", "/properties/p1/pattern", "/properties/p2/pattern"], "{w:?}");
}

#[test]
fn length_bounds_above_the_repeat_limit_nest_and_stay_exact() {
    // With a repeat limit of 5, every bound here is split into blocks (recursively for the
    // larger ones); each length must be accepted exactly when it is within the bounds.
    let mut opts = SchemaOptions { whitespace: Whitespace::Compact, ..Default::default() };
    opts.limits.max_repeat = 5;
    for (min, max) in [(0u64, Some(7u64)), (3, Some(40)), (0, Some(26)), (0, Some(125)), (7, Some(131)), (2, None), (30, Some(30)), (0, Some(5)), (6, Some(6)), (26, Some(27))] {
        let mut schema = json!({"type": "string", "minLength": min});
        if let Some(m) = max {
            schema["maxLength"] = json!(m);
        }
        let g = compile(&schema, &opts).unwrap_or_else(|e| panic!("{schema}: {e}"));
        for len in 0..=max.unwrap_or(60) + 3 {
            let s = format!("\"{}\"", "ab".repeat(len as usize / 2) + if len % 2 == 1 { "é" } else { "" });
            let want = len >= min && max.is_none_or(|m| len <= m);
            assert_eq!(accepts(&g, s.as_bytes(), &opts.limits).unwrap(), want, "{schema}: {len} characters");
        }
    }
    // A bound as large as code generators write compiles with the default limits.
    for schema in [json!({"type": "string", "maxLength": 2147483647u64}), json!({"type": "array", "maxItems": 4294967295u64, "items": {"type": "integer"}})] {
        let g = compile(&schema, &SchemaOptions::default()).unwrap_or_else(|e| panic!("{schema}: {e}"));
        let ok = if schema["type"] == "string" { r#""abc""# } else { "[1,2,3]" };
        assert!(accepts(&g, ok.as_bytes(), &SchemaOptions::default().limits).unwrap(), "{schema}");
    }
}

#[test]
fn a_pattern_every_key_matches_is_a_complement_of_the_listed_names() {
    // `.*` and `^[a-z]*` match every key; listed names take both schemas, any other key the
    // pattern's; no key is left for `additionalProperties`.
    for pattern in [".*", "^[a-z]*", ""] {
        check(
            json!({"type": "object", "properties": {"a": {"type": "string"}, "n/m": {"type": "integer"}},
                   "patternProperties": {pattern: {"type": ["integer", "string"]}}, "additionalProperties": false}),
            &[r#"{"a":"x","n/m":2,"b":1}"#, r#"{"é日":"y","ab":3}"#, r#"{"":1}"#],
            &[r#"{"a":1}"#, r#"{"b":null}"#, r#"{"n/m":"s"}"#, r#"{"n\/m":"s"}"#, r#"{"\u0061":1}"#, r#"{"a":"x","a":"y"}"#],
        );
    }
}

/// Every array of up to three items drawn from `values`, and a few other values.
fn small_arrays(values: &[serde_json::Value]) -> Vec<String> {
    let mut out = vec!["null".to_string(), "3".to_string(), r#""s""#.to_string(), "{}".to_string()];
    let mut level = vec![Vec::new()];
    for _ in 0..=3 {
        let mut next = Vec::new();
        for a in &level {
            out.push(serde_json::Value::Array(a.clone()).to_string());
            for v in values {
                let mut b = a.clone();
                b.push(v.clone());
                next.push(b);
            }
        }
        level = next;
    }
    out
}

#[test]
fn negations_of_tuple_items_additional_items_and_contains_agree_with_the_validator() {
    let values = [json!(1), json!("x"), json!(true)];
    let draft7 = |mut s: serde_json::Value| {
        s["$schema"] = json!("http://json-schema.org/draft-07/schema#");
        s
    };
    let schemas = [
        json!({"not": {"items": [{"type": "integer"}, {"type": "string"}]}}),
        json!({"not": {"items": [{"type": "integer"}], "additionalItems": false}}),
        json!({"not": {"items": [{}, {"type": "string"}], "additionalItems": true}}),
        json!({"not": {"items": {"type": "integer"}, "additionalItems": false}}),
        json!({"not": {"contains": {"type": "string"}}}),
        // "Must not contain": beside other item constraints.
        json!({"type": "array", "items": {"type": ["integer", "string"]}, "not": {"contains": {"const": 1}}}),
        // Overlapping branches: each is negated beside the other.
        json!({"type": "array", "oneOf": [
            {"items": [{"type": "integer"}], "additionalItems": false},
            {"minItems": 1, "items": [{"type": "integer"}, {"type": "string"}]}]}),
    ];
    let opts = SchemaOptions::default();
    for schema in schemas.map(draft7) {
        let instances = small_arrays(&values);
        let refs: Vec<&str> = instances.iter().map(String::as_str).collect();
        assert_agrees_with_validator(&schema, &refs, &opts);
    }
    // A schema after the tuple still has no negation formwork can write.
    let e = compile(&draft7(json!({"not": {"items": [{}], "additionalItems": {"type": "string"}}})), &opts).unwrap_err();
    assert_eq!(e.keyword(), Some("not"), "{e}");
    assert!(e.to_string().contains("`additionalItems`"), "{e}");
    let e = compile(&draft7(json!({"not": {"contains": {}, "minContains": 2}})), &opts).unwrap_err();
    assert!(e.to_string().contains("`contains`") || e.to_string().contains("`minContains`"), "{e}");
}

/// Excluded strings beside a pattern, a length or a negated pattern: one more pattern not to
/// match (their alternation, escaped), in the same product automaton. Names with regex
/// syntax characters stay literal.
#[test]
fn excluded_strings_beside_patterns_and_lengths_agree_with_the_validator() {
    let strings = ["", "a", "b", "ab", "a.c", "abc", "a+", "aa", "(a)", "a|b", "ba", "abcd", "x"];
    let instances_owned: Vec<String> = strings.iter().map(|s| json!(s).to_string()).chain(["1".to_string(), "null".to_string()]).collect();
    let instances: Vec<&str> = instances_owned.iter().map(String::as_str).collect();
    let opts = SchemaOptions::default();
    for schema in [
        json!({"type": "string", "pattern": "^[a-c.+|()]+$", "not": {"enum": ["ab", "a.c", "a+", "(a)", "a|b"]}}),
        json!({"type": "string", "minLength": 2, "maxLength": 3, "not": {"const": "abc"}}),
        json!({"type": "string", "allOf": [{"not": {"pattern": "^b"}}, {"not": {"enum": ["a", "aa"]}}]}),
    ] {
        assert_agrees_with_validator(&schema, &instances, &opts);
    }
}

/// `enum`/`const` values below a negation (a property or an item of the derived schema) are
/// checked against the derived part exactly, not only against its simple keywords: before,
/// `{"a": 10}` passed `not: {properties: {a: {minimum: 5}}}` beside `a: {enum: [1, 10]}`.
#[test]
fn enum_values_below_a_negation_are_checked_against_it() {
    let values = [json!(1), json!(2), json!(10), json!("x"), json!(["zzz"]), json!(["x", "yy"])];
    let instances_owned = small_objects(&["a", "b"], &values);
    let instances: Vec<&str> = instances_owned.iter().map(String::as_str).collect();
    let opts = SchemaOptions { key_order: KeyOrder::Any, ..Default::default() };
    for schema in [
        json!({"properties": {"a": {"enum": [1, 10]}}, "required": ["a"], "not": {"properties": {"a": {"minimum": 5}}}}),
        json!({"type": "object", "properties": {"a": {"enum": [1, 2, 3]}}, "oneOf": [{"properties": {"a": {"maximum": 2}}}, {"properties": {"a": {"minimum": 2}}}]}),
        json!({"type": "object", "properties": {"b": {"enum": [1, "x"]}}, "not": {"additionalProperties": {"type": "integer"}}}),
        json!({"type": "object", "properties": {"a": {"type": "array", "items": {"enum": ["x", "yy", "zzz"]}}}, "required": ["a"], "not": {"properties": {"a": {"items": {"maxLength": 2}}}}}),
        // The disjointness proof of a negated `oneOf` checks constants against its (derived)
        // branches themselves, not against the document's root.
        json!({"type": "object", "properties": {"a": {"not": {"oneOf": [{"const": 1}, {"enum": [1, 2]}]}}}}),
        json!({"type": "object", "properties": {"a": {"not": {"oneOf": [{"const": 10}, {"enum": [1, 2]}, {"type": "array"}]}}}}),
    ] {
        assert_agrees_with_validator(&schema, &instances, &opts);
    }
}

/// The negations of `if`/`then`/`else` (`(A ∧ ¬B) ∨ (¬A ∧ ¬C)`) and of dependencies (the key
/// is present and a name it brings is absent, or the instance fails its schema), alone and
/// as the exact form of an overlapping `oneOf` needs them.
#[test]
fn negations_of_conditionals_and_dependencies_agree_with_the_validator() {
    let values = [json!(1), json!(10), json!("x")];
    let instances_owned = small_objects(&["a", "b", "c"], &values);
    let instances: Vec<&str> = instances_owned.iter().map(String::as_str).collect();
    let opts = SchemaOptions { key_order: KeyOrder::Any, ..Default::default() };
    for schema in [
        json!({"not": {"if": {"required": ["a"]}, "then": {"required": ["b"]}, "else": {"properties": {"b": {"type": "string"}}}}}),
        json!({"not": {"if": {"properties": {"a": {"maximum": 5}}}, "then": {"required": ["c"]}}}),
        json!({"not": {"if": {"properties": {"a": {"maximum": 5}}}, "else": {"maxProperties": 1}}}),
        json!({"not": {"dependentRequired": {"a": ["b", "c"]}}}),
        json!({"not": {"dependentSchemas": {"b": {"properties": {"a": {"type": "string"}}}}}}),
        json!({"oneOf": [{"dependentRequired": {"a": ["b"]}}, {"if": {"required": ["c"]}, "then": {"maxProperties": 2}}]}),
    ] {
        assert_agrees_with_validator(&schema, &instances, &opts);
    }
    // Draft 7's `dependencies`, both forms.
    let d7 = SchemaOptions { key_order: KeyOrder::Any, draft: formwork_schema::Draft::Draft7, ..Default::default() };
    let schema = json!({"$schema": "http://json-schema.org/draft-07/schema#", "not": {"dependencies": {"a": ["b"], "c": {"properties": {"a": {"minimum": 5}}}}}});
    assert_agrees_with_validator(&schema, &instances, &d7);
}

/// `multipleOf` negated for an integer step (numbers that are not multiples: integers by a
/// divisibility automaton, and every non-integral number), and excluded values beside
/// `multipleOf`, which were ignored before (`{"multipleOf": 5, "not": {"const": 10}}`
/// accepted 10): left out of a listed range, refused over a wide one.
#[test]
fn negated_multiples_and_excluded_multiples_agree_with_the_validator() {
    let nums: Vec<String> = (-12..=25).map(|i| i.to_string()).chain(["1.5", "-2.5", "10.0", "0.5", "\"x\"", "null"].map(String::from)).collect();
    let instances: Vec<&str> = nums.iter().map(String::as_str).collect();
    let opts = SchemaOptions::default();
    for schema in [
        json!({"not": {"multipleOf": 3}}),
        json!({"type": "integer", "not": {"multipleOf": 4}}),
        json!({"multipleOf": 2, "not": {"multipleOf": 3}}),
        json!({"type": "integer", "minimum": -5, "maximum": 20, "not": {"multipleOf": 5}}),
        json!({"not": {"anyOf": [{"multipleOf": 2}, {"multipleOf": 5}]}}),
        json!({"multipleOf": 5, "minimum": 0, "maximum": 20, "not": {"enum": [10, 15]}}),
    ] {
        assert_agrees_with_validator(&schema, &instances, &opts);
    }
    let e = compile(&json!({"multipleOf": 5, "not": {"const": 10}}), &opts).unwrap_err();
    assert_eq!(e.keyword(), Some("not"), "{e}");
}

/// `minProperties` above `maxProperties` admits no object: never the empty object, never
/// one in the range either bound allows. (Each beside an integer, so that the root matches
/// something.)
#[test]
fn objects_with_min_properties_above_max_properties_match_nothing() {
    let or_integer = |s: serde_json::Value| json!({"anyOf": [s, {"type": "integer"}]});
    check(or_integer(json!({"type": "object", "minProperties": 2, "maxProperties": 1})), &["1"], &["{}", r#"{"a":1}"#, r#"{"a":1,"b":2}"#]);
    check(or_integer(json!({"type": "object", "minProperties": 1, "maxProperties": 0})), &["1"], &["{}", r#"{"a":1}"#]);
    check(
        or_integer(json!({"type": "object", "patternProperties": {"^[0-9]x$": {}}, "additionalProperties": false, "minProperties": 2, "maxProperties": 1})),
        &["1"],
        &["{}", r#"{"2x":1}"#, r#"{"2x":1,"3x":2}"#],
    );
    // Two equal branches: exactly one can never hold. The first branch's exact form asks
    // for at least one member and, through the second's negation, none: no object (this
    // was an internal error, "unordered group with min > max").
    check(or_integer(json!({"oneOf": [{"minProperties": 1}, {"minProperties": 1}]})), &["1"], &["{}", r#"{"a":1}"#, r#"{"a":1,"b":2}"#, "\"s\""]);
}

/// An object under three negated closed objects, nested as the value of one of its own
/// properties, is distributed into about 30 object groups at each level; in any key order the
/// parser runs them side by side. Without joins (stacks that share their top frames kept as
/// one) the inner object needed more than the default 10,000 stacks (30,000); now it is
/// accepted at the default, and so is the same object nested in itself three times.
#[test]
fn nested_objects_under_three_negated_closed_objects_are_accepted_at_the_default_limit() {
    let negs = json!([{"not": {"type": "object", "required": ["ios", "android"], "additionalProperties": false}},{"not": {"type": "object", "required": ["ref"], "additionalProperties": false}},{"not": {"type": "object", "properties": {"inherit": {}}, "required": ["inherit"], "additionalProperties": false}}]);
    let sel = json!({"type":"object","allOf":negs});
    let outer = json!({"type":"object","properties":{"2x":sel},"allOf":negs});
    let opts = SchemaOptions { key_order: KeyOrder::Any, ..Default::default() };
    let g = compile(&outer, &opts).unwrap();
    let roomy = formwork_grammar::Limits { max_stacks: 1_000_000, ..opts.limits.clone() };
    for ok in [r#"{"2x": {"ab": 1}}"#, r#"{"2x": {"x": 1}}"#, r#"{"2x": {"ios": 1, "ab": 2}}"#] {
        assert!(validate(&outer, ok).is_ok(), "test bug: {ok}");
        assert_eq!(accepts(&g, ok.as_bytes(), &roomy), Ok(true), "{ok}");
        assert_eq!(accepts(&g, ok.as_bytes(), &opts.limits), Ok(true), "{ok}");
    }
    let nested = json!({"$defs": {"sel": {"type": "object", "properties": {"2x": {"$ref": "#/$defs/sel"}}, "allOf": negs}}, "$ref": "#/$defs/sel"});
    let gn = compile(&nested, &opts).unwrap();
    for ok in [r#"{"2x": {"2x": {"2x": {"ab": 1}, "c": 2}}}"#, r#"{"a": 1, "2x": {"ios": 1, "2x": {"x": []}}}"#] {
        assert!(validate(&nested, ok).is_ok(), "test bug: {ok}");
        assert_eq!(accepts(&gn, ok.as_bytes(), &opts.limits), Ok(true), "{ok}");
    }
    for bad in [r#"{"2x": {"2x": {"2x": {"inherit": 1}}}}"#, r#"{"2x": {"2x": 1}}"#] {
        assert!(validate(&nested, bad).is_err(), "test bug: {bad}");
        assert_eq!(accepts(&gn, bad.as_bytes(), &opts.limits), Ok(false), "{bad}");
    }
    for bad in [r#"{"2x": 1}"#, r#"{"inherit": 1}"#, r#"{"2x": {"inherit": 1}}"#] {
        assert!(validate(&outer, bad).is_err(), "test bug: {bad}");
        assert_eq!(accepts(&g, bad.as_bytes(), &roomy), Ok(false), "{bad}");
    }
}

/// Flexible whitespace: one bounded run in an empty container (not two side by side, which
/// doubled the bound and let a run of spaces split between them in every way), a run on
/// each side of a member, and the mask after an opening bracket builds a state per
/// whitespace token length at most once, not once per way of splitting it.
#[test]
fn flexible_whitespace_in_empty_containers_is_one_bounded_run() {
    let opts = SchemaOptions { whitespace: Whitespace::Flexible { max_run: Some(8) }, ..Default::default() };
    let ok = |schema: &serde_json::Value, s: &str| {
        let g = compile(schema, &opts).unwrap();
        accepts(&g, s.as_bytes(), &opts.limits).unwrap()
    };
    let arr = json!({"type": "array", "items": {"type": "integer"}});
    let obj = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
    let sp = |n: usize| " ".repeat(n);
    assert!(ok(&arr, &format!("[{}]", sp(8))));
    assert!(!ok(&arr, &format!("[{}]", sp(9))), "two runs of 8 side by side");
    assert!(ok(&arr, &format!("[{}1{}]", sp(8), sp(8))));
    assert!(ok(&arr, &format!("[{}1{},{}2{}]", sp(8), sp(8), sp(8), sp(8))));
    assert!(!ok(&arr, &format!("[{}1{}]", sp(8), sp(9))));
    assert!(ok(&obj, &format!("{{{}}}", sp(8))));
    assert!(!ok(&obj, &format!("{{{}}}", sp(9))));
    assert!(ok(&obj, &format!("{{{}\"a\"{}:{}1{}}}", sp(8), sp(8), sp(8), sp(8))));
    // The same with keys in any order (an unordered group, which may be empty).
    let any = SchemaOptions { key_order: KeyOrder::Any, ..opts.clone() };
    let ok_any = |s: &str| accepts(&compile(&obj, &any).unwrap(), s.as_bytes(), &any.limits).unwrap();
    assert!(ok_any(&format!("{{{}}}", sp(8))));
    assert!(!ok_any(&format!("{{{}}}", sp(9))), "two runs of 8 side by side (any key order)");
    assert!(ok_any(&format!("{{{}\"a\"{}:{}1{}}}", sp(8), sp(8), sp(8), sp(8))));
    assert!(!ok_any(&format!("{{{}\"a\":1{}}}", sp(8), sp(9))));

    // Tokens of 1 to 60 spaces, digits and brackets: after `[`, walking the space tokens
    // meets one state per length (before: one per length and split, about 2 per length).
    let mut toks: Vec<Vec<u8>> = (1..=60).map(|n| vec![b' '; n]).collect();
    toks.extend([b"[".to_vec(), b"]".to_vec(), b"1".to_vec(), b",".to_vec()]);
    let vocab = std::sync::Arc::new(formwork_vocab::Vocabulary::from_strings(&toks, &["</s>"]));
    let g = compile(&arr, &SchemaOptions::default()).unwrap();
    let cg = formwork_grammar::matcher::CompiledGrammar::new(&g, vocab.clone(), &SchemaOptions::default().limits).unwrap();
    let mut m = cg.matcher();
    m.commit_bytes(b"[").unwrap();
    let before = m.stats().states;
    let mut mask = formwork_vocab::TokenMask::new(vocab.len());
    m.compute_mask(&mut mask);
    let built = m.stats().states - before;
    assert!(built <= 20, "{built} states built for the mask after `[`");
    for n in 1..=60 {
        assert!(mask.contains(formwork_vocab::TokenId(n - 1)), "{n} spaces after `[`");
    }
}
