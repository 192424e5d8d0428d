//! Tool calls: the schema calls are generated under, and reading calls out of output.
//!
//! A call is generated as `{"name": <function>, "arguments": {...}}` (the *envelope*), with
//! `arguments` under the function's `parameters` schema, moved into the envelope by
//! [`relocate`] so that its `$ref`s still resolve. Several calls in one turn
//! (`parallel_tool_calls`, on by default as in OpenAI's API) are envelopes one after another,
//! separated by whitespace, at most [`MAX_PARALLEL_CALLS`]; with `parallel_tool_calls: false`
//! exactly one.
//!
//! With `tool_choice` `required` or a named function the output is constrained to calls
//! ([`ConstraintRequest::ToolCalls`](crate::ConstraintRequest::ToolCalls)). With `auto` the
//! model writes freely and output that starts like a call ([`detect::starts_call`]) is read
//! as calls ([`parse_calls`]); the engine backend then generates the calls constrained.
//!
//! A model whose chat template cannot show tools is asked for an envelope instead, in every
//! mode, and generates under its grammar; [`envelope::EnvelopeReader`] turns it back into
//! text or calls as above, so handlers read both kinds of model alike.
//!
//! Streaming: [`detect::CallDetector`] tells text from calls as output arrives, and
//! [`scan::CallScanner`] reads calls while they are generated (for OpenAI's argument
//! fragments).

pub mod detect;
pub mod envelope;
pub mod relocate;
pub mod scan;

use crate::backend::{ToolCall, ToolDef};
use serde_json::{json, Value};

/// Most calls in one turn when parallel calls are allowed.
pub const MAX_PARALLEL_CALLS: u32 = 8;

/// How tools are used by one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolMode {
    /// No tools offered, or `tool_choice: none`.
    None,
    /// The model chooses between text and a call.
    Auto,
    /// The model must call one of the tools.
    Required,
    /// The model must call this function.
    Named(String),
}

/// Most calls in one turn: `parallel_tool_calls` (absent = allowed, as in OpenAI's API).
pub fn max_calls(parallel: Option<bool>) -> u32 {
    if parallel == Some(false) {
        1
    } else {
        MAX_PARALLEL_CALLS
    }
}

/// The JSON Schema of one call to one of `tools`: the envelope, each tool's parameters
/// relocated into it. Fails (a message for a 400 naming `tools`) when two tools declare the
/// same anchor or `$id`, which would make a reference in the envelope ambiguous.
pub fn call_schema(tools: &[&ToolDef]) -> Result<Value, String> {
    if tools.len() > 1 {
        let mut seen: Vec<(String, &str)> = Vec::new();
        for t in tools {
            for id in relocate::identifiers(&t.parameters) {
                if let Some((_, other)) = seen.iter().find(|(s, n)| *s == id && *n != t.name) {
                    return Err(format!(
                        "tools {other:?} and {:?} both declare {id:?} in their parameters; rename one, since in one request \
                         their references could not be told apart",
                        t.name
                    ));
                }
                seen.push((id, &t.name));
            }
        }
    }
    let one = |t: &ToolDef, at: &str| {
        json!({
            "type": "object",
            "properties": {
                "name": { "const": t.name },
                "arguments": relocate::relocate(&declared_only(&t.parameters), at),
            },
            "required": ["name", "arguments"],
            "additionalProperties": false,
        })
    };
    Ok(match tools {
        [t] => one(t, "/properties/arguments"),
        many => json!({
            "anyOf": many.iter().enumerate().map(|(i, t)| one(t, &format!("/anyOf/{i}/properties/arguments"))).collect::<Vec<_>>()
        }),
    })
}

/// Keywords next to which `additionalProperties: false` would change what `properties`
/// means, or that already say what other keys may be.
const OPEN_ENDED: &[&str] = &[
    "additionalProperties", "patternProperties", "unevaluatedProperties", "allOf", "anyOf", "oneOf", "not", "$ref",
    "$dynamicRef", "if", "then", "else", "dependentSchemas", "dependencies", "propertyNames",
];

/// A function's `parameters` as calls are generated under them: when they list `properties`
/// and say nothing about other keys, other keys are not generated (`additionalProperties:
/// false` at the top), as a function's signature means. JSON Schema would allow any other
/// key there, and a small model writes some (`{"a": 3, "b": 1, "c": false}`), which the
/// caller's `f(**arguments)` then refuses. Every call generated this way still matches the
/// parameters as given; nested objects are left as they are.
fn declared_only(parameters: &Value) -> Value {
    let mut p = parameters.clone();
    if let Some(o) = p.as_object_mut() {
        if o.get("properties").is_some_and(Value::is_object) && !OPEN_ENDED.iter().any(|k| o.contains_key(*k)) {
            o.insert("additionalProperties".into(), Value::Bool(false));
        }
    }
    p
}

/// Reads the calls in `text`: the inside of each `<tool_call>…</tool_call>` section when
/// there are any, else the whole text as one or more JSON values (whitespace between them),
/// each `{"name", "arguments"}` naming an offered function (`arguments` may also be a JSON
/// string holding the object, as some models write it; a JSON array of calls is read as its
/// calls). Empty when the text is not calls, entirely.
pub fn parse_calls(text: &str, tools: &[ToolDef]) -> Vec<ToolCall> {
    const OPEN: &str = "<tool_call>";
    const CLOSE: &str = "</tool_call>";
    let mut values = Vec::new();
    if text.contains(OPEN) {
        for section in text.split(OPEN).skip(1) {
            let inner = section.split(CLOSE).next().unwrap_or("");
            match serde_json::from_str::<Value>(inner.trim()) {
                Ok(v) => values.push(v),
                Err(_) => return vec![],
            }
        }
    } else {
        for v in serde_json::Deserializer::from_str(text.trim()).into_iter::<Value>() {
            match v {
                Ok(v) => values.push(v),
                Err(_) => return vec![],
            }
        }
    }
    let mut calls = Vec::new();
    for v in values {
        let items = match v {
            Value::Array(a) => a,
            other => vec![other],
        };
        for item in items {
            match call(&item, tools) {
                Some(c) => calls.push(c),
                None => return vec![],
            }
        }
    }
    calls
}

/// One envelope as a call to an offered function.
fn call(v: &Value, tools: &[ToolDef]) -> Option<ToolCall> {
    let obj = v.as_object()?;
    let name = obj.get("name")?.as_str()?;
    if !tools.iter().any(|t| t.name == name) {
        return None;
    }
    let arguments = match obj.get("arguments").or_else(|| obj.get("parameters"))? {
        Value::String(s) => serde_json::from_str::<Value>(s).ok()?,
        other => other.clone(),
    };
    arguments.is_object().then(|| ToolCall::new(name.to_string(), arguments))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, parameters: Value) -> ToolDef {
        ToolDef { name: name.into(), description: None, parameters }
    }

    fn weather() -> ToolDef {
        tool("get_weather", json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}))
    }

    #[test]
    fn schema_for_one_and_many() {
        let w = weather();
        let t = tool("get_time", json!({"type": "object"}));
        let s = call_schema(&[&w]).unwrap();
        assert_eq!(s["properties"]["name"]["const"], "get_weather");
        assert_eq!(s["properties"]["arguments"]["required"][0], "city");
        let s = call_schema(&[&w, &t]).unwrap();
        assert_eq!(s["anyOf"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn calls_name_only_declared_arguments() {
        let w = weather();
        let s = call_schema(&[&w]).unwrap();
        assert_eq!(s["properties"]["arguments"]["additionalProperties"], false);
        let ok = |s: &Value, args: Value| {
            formwork_schema::validate(s, &json!({"name": "get_weather", "arguments": args}).to_string()).is_ok()
        };
        assert!(ok(&s, json!({"city": "Oslo"})));
        assert!(!ok(&s, json!({"city": "Oslo", "c": false})));
        // Parameters that say what other keys may be, or build the object from parts, as given.
        for open in [
            json!({"type": "object", "properties": {"city": {"type": "string"}}, "additionalProperties": {"type": "integer"}}),
            json!({"type": "object", "properties": {"city": {"type": "string"}}, "allOf": [{"properties": {"n": {}}}]}),
            json!({"type": "object"}),
        ] {
            let t = tool("get_weather", open.clone());
            let s = call_schema(&[&t]).unwrap();
            assert_eq!(s["properties"]["arguments"], open);
        }
    }

    #[test]
    fn each_tool_is_relocated_to_its_own_place() {
        let defs = |leaf: &str| json!({"properties": {"x": {"$ref": "#/$defs/X"}}, "$defs": {"X": {"type": leaf}}});
        let (a, b) = (tool("a", defs("string")), tool("b", defs("integer")));
        let s = call_schema(&[&a]).unwrap();
        assert_eq!(s["properties"]["arguments"]["properties"]["x"]["$ref"], "#/properties/arguments/$defs/X");
        let s = call_schema(&[&a, &b]).unwrap();
        assert_eq!(s["anyOf"][0]["properties"]["arguments"]["properties"]["x"]["$ref"], "#/anyOf/0/properties/arguments/$defs/X");
        assert_eq!(s["anyOf"][1]["properties"]["arguments"]["properties"]["x"]["$ref"], "#/anyOf/1/properties/arguments/$defs/X");
    }

    #[test]
    fn a_name_declared_by_two_tools_is_refused() {
        let a = tool("a", json!({"$defs": {"p": {"$anchor": "place"}}}));
        let b = tool("b", json!({"properties": {"q": {"$anchor": "place"}}}));
        let e = call_schema(&[&a, &b]).unwrap_err();
        assert!(e.contains("\"a\" and \"b\"") && e.contains("#place"), "{e}");
        assert!(call_schema(&[&a]).is_ok());
    }

    #[test]
    fn parses_plain_tagged_and_string_arguments() {
        let tools = [weather()];
        let c = parse_calls(r#"{"name":"get_weather","arguments":{"city":"Paris"}}"#, &tools);
        assert_eq!(c[0].function.arguments, json!({"city": "Paris"}));
        let c = parse_calls("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>", &tools);
        assert_eq!(c[0].function.arguments["city"], "Oslo");
        let c = parse_calls(r#"{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}"#, &tools);
        assert_eq!(c[0].function.arguments["city"], "Rome");
    }

    #[test]
    fn parses_several_calls() {
        let tools = [weather()];
        let one = |city: &str| format!(r#"{{"name":"get_weather","arguments":{{"city":"{city}"}}}}"#);
        let cities = |c: Vec<ToolCall>| c.into_iter().map(|c| c.function.arguments["city"].as_str().unwrap().to_string()).collect::<Vec<_>>();
        assert_eq!(cities(parse_calls(&format!("{}\n{} ", one("A"), one("B")), &tools)), ["A", "B"]);
        assert_eq!(cities(parse_calls(&format!("{}{}", one("A"), one("B")), &tools)), ["A", "B"]);
        let tagged = format!("<tool_call>\n{}\n</tool_call>\n<tool_call>\n{}\n</tool_call>", one("A"), one("C"));
        assert_eq!(cities(parse_calls(&tagged, &tools)), ["A", "C"]);
        assert_eq!(cities(parse_calls(&format!("[{}, {}]", one("A"), one("D")), &tools)), ["A", "D"]);
    }

    #[test]
    fn rejects_text_and_unknown_functions() {
        let tools = [weather()];
        assert!(parse_calls("It is sunny.", &tools).is_empty());
        assert!(parse_calls(r#"{"name":"launch","arguments":{}}"#, &tools).is_empty());
        assert!(parse_calls(r#"{"name":"get_weather","arguments":[1]}"#, &tools).is_empty());
        let half = r#"{"name":"get_weather","arguments":{"city":"A"}} and then"#;
        assert!(parse_calls(half, &tools).is_empty(), "a call followed by text is text");
    }
}
