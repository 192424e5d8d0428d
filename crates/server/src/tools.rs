//! Tool calls: the schema a forced call is generated under, and reading calls out of output.
//!
//! A call is generated as `{"name": <function>, "arguments": {...}}`. With `tool_choice`
//! `required` or a named function the output is constrained to that envelope, with
//! `arguments` under the function's `parameters` schema. With `auto` the model writes freely
//! and a call is recognised when the whole output (or a `<tool_call>…</tool_call>` section)
//! is such an envelope naming an offered function.

use crate::backend::{ToolCall, ToolDef};
use serde_json::{json, Value};

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

/// The JSON Schema of a call to one of `tools`.
pub fn call_schema(tools: &[&ToolDef]) -> Value {
    let one = |t: &ToolDef| {
        json!({
            "type": "object",
            "properties": {
                "name": { "const": t.name },
                "arguments": t.parameters,
            },
            "required": ["name", "arguments"],
            "additionalProperties": false,
        })
    };
    match tools {
        [t] => one(t),
        many => json!({ "anyOf": many.iter().map(|t| one(t)).collect::<Vec<_>>() }),
    }
}

/// Reads a call to one of `tools` from `text`: the whole text, or the inside of
/// `<tool_call>…</tool_call>`, must be `{"name", "arguments"}` naming an offered function
/// (`arguments` may also be a JSON string holding the object, as some models write it).
pub fn parse_call(text: &str, tools: &[ToolDef]) -> Option<ToolCall> {
    let trimmed = text.trim();
    let inner = match trimmed.find("<tool_call>") {
        Some(i) => {
            let rest = &trimmed[i + "<tool_call>".len()..];
            rest.find("</tool_call>").map_or(rest, |j| &rest[..j]).trim()
        }
        None => trimmed,
    };
    let v: Value = serde_json::from_str(inner).ok()?;
    let obj = v.as_object()?;
    let name = obj.get("name")?.as_str()?;
    if !tools.iter().any(|t| t.name == name) {
        return None;
    }
    let arguments = match obj.get("arguments").or_else(|| obj.get("parameters"))? {
        Value::String(s) => serde_json::from_str::<Value>(s).ok()?,
        other => other.clone(),
    };
    arguments.is_object().then(|| ToolCall { name: name.to_string(), arguments })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weather() -> ToolDef {
        ToolDef {
            name: "get_weather".into(),
            description: None,
            parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
        }
    }

    #[test]
    fn schema_for_one_and_many() {
        let w = weather();
        let mut t = weather();
        t.name = "get_time".into();
        let s = call_schema(&[&w]);
        assert_eq!(s["properties"]["name"]["const"], "get_weather");
        assert_eq!(s["properties"]["arguments"]["required"][0], "city");
        let s = call_schema(&[&w, &t]);
        assert_eq!(s["anyOf"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn parses_plain_tagged_and_string_arguments() {
        let tools = [weather()];
        let c = parse_call(r#"{"name":"get_weather","arguments":{"city":"Paris"}}"#, &tools).unwrap();
        assert_eq!(c.arguments, json!({"city": "Paris"}));
        let c = parse_call("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>", &tools).unwrap();
        assert_eq!(c.arguments["city"], "Oslo");
        let c = parse_call(r#"{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}"#, &tools).unwrap();
        assert_eq!(c.arguments["city"], "Rome");
    }

    #[test]
    fn rejects_text_and_unknown_functions() {
        let tools = [weather()];
        assert!(parse_call("It is sunny.", &tools).is_none());
        assert!(parse_call(r#"{"name":"launch","arguments":{}}"#, &tools).is_none());
        assert!(parse_call(r#"{"name":"get_weather","arguments":[1]}"#, &tools).is_none());
    }
}
