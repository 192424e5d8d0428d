//! Moving a tool's `parameters` schema into the call envelope without breaking its `$ref`s.
//!
//! A tool's parameters are a schema document of their own: `"$ref": "#/$defs/Table"` points
//! at *its* root. Placed under `properties.arguments` of the envelope (see
//! [`super::call_schema`]), the same pointer would be read against the envelope's root, where
//! there is no `$defs`. [`relocate`] rewrites every same-document JSON-pointer reference
//! (`#`, `#/...`) to the place the document now sits (`#/properties/arguments/$defs/Table`),
//! so the envelope means exactly what each tool's schema meant on its own: the grammar then
//! accepts what the schema allows and nothing more.
//!
//! What is rewritten is found by a schema-aware walk (the subschema keywords of drafts 4 to
//! 2020-12, as `formwork_schema` resolves them), so a `{"$ref": ...}` inside `const`, `enum`
//! or `default` data, or a property *named* `$ref`, is left alone. A subschema with its own
//! `$id` is a resource of its own: its pointers are relative to it, and it is not entered
//! (a document whose root has an `$id` is left as it is).
//!
//! Anchors (`$anchor`, `$dynamicAnchor`, `"$id": "#name"`) and nested `$id`s are names, not
//! pointers: they keep working after the move, but two tools naming the same one would make
//! a reference ambiguous in the envelope, so [`identifiers`] lists them for the caller to
//! refuse such a pair.

use serde_json::{Map, Value};

use formwork_schema::keywords::{ARR_KW, MAP_KW, ONE_KW};

/// `$id` that starts a new resource (not a fragment-only anchor of drafts 6-7).
fn resource_id(o: &Map<String, Value>) -> Option<&str> {
    o.get("$id").and_then(Value::as_str).filter(|id| !id.starts_with('#'))
}

/// Calls `f` on every subschema object of `schema`, skipping those (and what is below them)
/// for which `stop` holds.
fn walk_mut(schema: &mut Value, stop: &dyn Fn(&Map<String, Value>) -> bool, f: &mut dyn FnMut(&mut Map<String, Value>)) {
    let mut stack: Vec<&mut Value> = vec![schema];
    while let Some(v) = stack.pop() {
        let Value::Object(o) = v else { continue };
        if stop(o) {
            continue;
        }
        f(o);
        for (k, sub) in o.iter_mut() {
            let k = k.as_str();
            if MAP_KW.contains(&k) {
                if let Value::Object(m) = sub {
                    stack.extend(m.values_mut());
                }
            } else if ARR_KW.contains(&k) && sub.is_array() {
                if let Value::Array(a) = sub {
                    stack.extend(a.iter_mut());
                }
            } else if ONE_KW.contains(&k) {
                stack.push(sub);
            }
        }
    }
}

/// `schema` as it must be written when placed at JSON pointer `at` of a larger document:
/// same-document pointer references get `at` put in front of their pointer.
pub fn relocate(schema: &Value, at: &str) -> Value {
    let mut out = schema.clone();
    // Pointers inside a resource (an object with its own `$id`) are relative to it.
    let stop = |o: &Map<String, Value>| resource_id(o).is_some();
    walk_mut(&mut out, &stop, &mut |o| {
        if let Some(Value::String(r)) = o.get_mut("$ref") {
            if let Some(rest) = r.strip_prefix('#') {
                if rest.is_empty() || rest.starts_with('/') {
                    *r = format!("#{at}{rest}");
                }
            }
        }
    });
    out
}

/// The names `schema` declares for references to find it by: anchors (as `#name`) outside
/// nested resources, and the `$id` of every resource.
pub fn identifiers(schema: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut copy = schema.clone();
    // A nested resource's own anchors are scoped to it; its `$id` is what could collide.
    let stop = |o: &Map<String, Value>| resource_id(o).is_some();
    walk_mut(&mut copy, &|_| false, &mut |o| {
        if let Some(id) = resource_id(o) {
            out.push(id.to_string());
        }
    });
    walk_mut(&mut copy, &stop, &mut |o| {
        for k in ["$anchor", "$dynamicAnchor"] {
            if let Some(a) = o.get(k).and_then(Value::as_str) {
                out.push(format!("#{a}"));
            }
        }
        if let Some(a) = o.get("$id").and_then(Value::as_str).filter(|id| id.starts_with('#')) {
            out.push(a.to_string());
        }
    });
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointer_refs_get_the_new_location() {
        let s = json!({
            "type": "object",
            "properties": {"t": {"$ref": "#/$defs/Table"}, "self": {"$ref": "#"}, "old": {"$ref": "#/definitions/Old"}},
            "$defs": {"Table": {"properties": {"legs": {"items": {"$ref": "#/$defs/Leg"}}}}, "Leg": {"type": "integer"}},
            "definitions": {"Old": {"anyOf": [{"$ref": "#/$defs/a~1b"}, {"$ref": "#/$defs/x%25y"}]}}
        });
        let r = relocate(&s, "/anyOf/1/properties/arguments");
        assert_eq!(r["properties"]["t"]["$ref"], "#/anyOf/1/properties/arguments/$defs/Table");
        assert_eq!(r["properties"]["self"]["$ref"], "#/anyOf/1/properties/arguments");
        assert_eq!(r["properties"]["old"]["$ref"], "#/anyOf/1/properties/arguments/definitions/Old");
        assert_eq!(r["$defs"]["Table"]["properties"]["legs"]["items"]["$ref"], "#/anyOf/1/properties/arguments/$defs/Leg");
        // Escapes in the pointer are kept as written.
        assert_eq!(r["definitions"]["Old"]["anyOf"][0]["$ref"], "#/anyOf/1/properties/arguments/$defs/a~1b");
        assert_eq!(r["definitions"]["Old"]["anyOf"][1]["$ref"], "#/anyOf/1/properties/arguments/$defs/x%25y");
    }

    #[test]
    fn data_names_anchors_and_resources_are_left_alone() {
        let s = json!({
            "properties": {
                "$ref": {"const": {"$ref": "#/x"}},
                "a": {"$ref": "#anchor"},
                "b": {"$ref": "other.json#/y"},
                "c": {"$id": "https://example.com/c.json", "$defs": {"d": {}}, "$ref": "#/$defs/d"}
            },
            "default": {"$ref": "#/z"}
        });
        let r = relocate(&s, "/p");
        assert_eq!(r["properties"]["$ref"]["const"], json!({"$ref": "#/x"}));
        assert_eq!(r["properties"]["a"]["$ref"], "#anchor");
        assert_eq!(r["properties"]["b"]["$ref"], "other.json#/y");
        assert_eq!(r["properties"]["c"]["$ref"], "#/$defs/d");
        assert_eq!(r["default"], json!({"$ref": "#/z"}));
        let rooted = json!({"$id": "https://example.com/t.json", "$ref": "#/$defs/d", "$defs": {"d": {}}});
        assert_eq!(relocate(&rooted, "/p"), rooted);
    }

    #[test]
    fn identifiers_are_anchors_and_resource_ids() {
        let s = json!({
            "$defs": {
                "a": {"$anchor": "addr"},
                "b": {"$id": "#legacy"},
                "c": {"$id": "https://example.com/c.json", "$defs": {"inner": {"$anchor": "scoped"}}}
            },
            "const": {"$anchor": "data"}
        });
        assert_eq!(identifiers(&s), vec!["#addr", "#legacy", "https://example.com/c.json"]);
    }
}
