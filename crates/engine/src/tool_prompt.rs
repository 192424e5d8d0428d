//! Tools for models whose chat template cannot show them.
//!
//! A chat template that supports tools renders the `tools` variable itself (Llama 3.x, Qwen,
//! ...). Many do not: SmolLM2's template ignores `tools`, so the prompt is the same with or
//! without tool definitions and the model never learns it could call one. For such templates
//! [`ChatTemplate::render`](crate::ChatTemplate::render) writes the tool definitions into the
//! system message itself, in the format below, and renders the chat without `tools` (a
//! template that refuses tools with `raise_exception` then renders too). Whether a template
//! shows tools is decided by rendering it once with a probe tool
//! ([`ChatTemplate::shows_tools`](crate::ChatTemplate::shows_tools)): it does when the
//! probe's name appears in the prompt.
//!
//! ## The format
//! Appended to the first message when it is a `system` message (after a blank line), else
//! put in a new `system` message at the start:
//!
//! ```text
//! You can call these functions:
//!
//! ### get_weather
//! Get the current weather in a city.
//! Parameters (JSON Schema): {"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}
//!
//! To call a function, reply with only a JSON object of the form {"name": "<function name>", "arguments": {<arguments>}}. When the request needs several calls, write them all, one object per line. Otherwise reply in plain text.
//! ```
//!
//! One `### name` section per function, in the order given; the description line is left out
//! when the function has none, and the parameters are printed compactly (`{}` when absent).
//! Each definition may be OpenAI's and Ollama's shape (`{"type": "function", "function":
//! {...}}`) or the bare function object.
//!
//! The call format is the one the server reads and constrains: an output that starts with
//! `{` is a call and is generated under the call grammar (the envelope `{"name", "arguments"}`
//! with the function's parameters), so what the model writes after this instruction is always
//! either text or well-formed calls.
//!
//! Earlier calls in the history are shown the same way: an assistant message's `tool_calls`
//! become envelopes, one per line, after its text (the template would drop them). `tool`
//! messages (results) are passed through as they are.

use crate::chat::ChatMessage;
use serde_json::Value;

/// The first line of the instruction.
const HEADER: &str = "You can call these functions:";

/// The last paragraph: how to call.
const HOW_TO_CALL: &str = "To call a function, reply with only a JSON object of the form \
{\"name\": \"<function name>\", \"arguments\": {<arguments>}}. When the request needs several calls, write them all, one object per line. Otherwise reply in plain text.";

/// The instruction for `tools` (a JSON array of tool definitions; see the module docs for
/// the format). `None` when there are no function definitions in it.
pub fn tools_instruction(tools: &Value) -> Option<String> {
    let defs = tools.as_array()?;
    let mut out = String::from(HEADER);
    let mut any = false;
    for def in defs {
        let f = def.get("function").unwrap_or(def);
        let Some(name) = f.get("name").and_then(Value::as_str) else { continue };
        any = true;
        out.push_str("\n\n### ");
        out.push_str(name);
        if let Some(d) = f.get("description").and_then(Value::as_str).map(str::trim).filter(|d| !d.is_empty()) {
            out.push('\n');
            out.push_str(d);
        }
        let params = f.get("parameters").filter(|p| !p.is_null()).map_or_else(|| "{}".to_string(), Value::to_string);
        out.push_str("\nParameters (JSON Schema): ");
        out.push_str(&params);
    }
    if !any {
        return None;
    }
    out.push_str("\n\n");
    out.push_str(HOW_TO_CALL);
    Some(out)
}

/// `messages` with the tool instruction in the system message and earlier calls written as
/// envelopes (see the module docs). `None` when `tools` defines no function.
pub fn messages_with_tools(messages: &[ChatMessage], tools: &Value) -> Option<Vec<ChatMessage>> {
    let instruction = tools_instruction(tools)?;
    let mut out: Vec<ChatMessage> = messages.iter().map(calls_as_text).collect();
    match out.first_mut() {
        Some(first) if first.role == "system" => {
            if !first.content.trim().is_empty() {
                first.content.push_str("\n\n");
            }
            first.content.push_str(&instruction);
        }
        _ => out.insert(0, ChatMessage::new("system", instruction)),
    }
    Some(out)
}

/// An assistant message's calls as envelopes after its text, one per line.
fn calls_as_text(m: &ChatMessage) -> ChatMessage {
    let mut m = m.clone();
    if m.tool_calls.is_empty() {
        return m;
    }
    let calls: Vec<String> = m
        .tool_calls
        .drain(..)
        .map(|c| format!(r#"{{"name":{},"arguments":{}}}"#, Value::from(c.function.name), c.function.arguments))
        .collect();
    if !m.content.trim().is_empty() {
        m.content.push('\n');
    }
    m.content.push_str(&calls.join("\n"));
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn weather() -> Value {
        json!([{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])
    }

    #[test]
    fn the_documented_format() {
        let text = tools_instruction(&weather()).unwrap();
        assert_eq!(
            text,
            "You can call these functions:\n\n### get_weather\nGet the current weather in a city.\n\
             Parameters (JSON Schema): {\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}\n\n\
             To call a function, reply with only a JSON object of the form {\"name\": \"<function name>\", \"arguments\": \
             {<arguments>}}. When the request needs several calls, write them all, one object per line. Otherwise reply in plain text."
        );
    }

    #[test]
    fn bare_functions_without_description_or_parameters() {
        let text = tools_instruction(&json!([{"name": "now"}])).unwrap();
        assert!(text.contains("### now\nParameters (JSON Schema): {}\n\n"), "{text}");
        assert_eq!(tools_instruction(&json!([])), None);
        assert_eq!(tools_instruction(&json!([{"type": "web_search"}])), None);
        assert_eq!(tools_instruction(&json!({"name": "x"})), None);
    }

    #[test]
    fn goes_into_the_system_message() {
        let m = messages_with_tools(&[ChatMessage::new("user", "Hi")], &weather()).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].role, "system");
        assert!(m[0].content.starts_with(HEADER));
        let m = messages_with_tools(&[ChatMessage::new("system", "Be terse."), ChatMessage::new("user", "Hi")], &weather()).unwrap();
        assert_eq!(m.len(), 2);
        assert!(m[0].content.starts_with("Be terse.\n\nYou can call these functions:"), "{}", m[0].content);
    }

    #[test]
    fn earlier_calls_become_envelopes() {
        let mut a = ChatMessage::new("assistant", "");
        a.tool_calls = vec![crate::ToolCall::new("get_weather", json!({"city": "Oslo"}))];
        let m = messages_with_tools(&[ChatMessage::new("user", "Hi"), a], &weather()).unwrap();
        assert_eq!(m[2].content, r#"{"name":"get_weather","arguments":{"city":"Oslo"}}"#);
        assert!(m[2].tool_calls.is_empty());
    }
}
