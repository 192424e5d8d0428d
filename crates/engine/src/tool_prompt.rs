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
//! Reply with one JSON object and nothing else: either {"tool_calls": [{"name": "<function name>", "arguments": {<arguments>}}]} to call one or more functions, or {"response": "<your reply>"} to answer the user directly.
//! ```
//!
//! One `### name` section per function, in the order given; the description line is left out
//! when the function has none, and the parameters are printed compactly (`{}` when absent).
//! Each definition may be OpenAI's and Ollama's shape (`{"type": "function", "function":
//! {...}}`) or the bare function object.
//!
//! ## Why every reply is one JSON object
//! The reply is always an *envelope*: `{"tool_calls": [...]}` or `{"response": "..."}`, and the
//! server generates it under that grammar (`tool_calls` only when a call is required; laid
//! out pretty, so every whitespace token is forced) and hands the client plain text or calls
//! (`formwork_server`'s `tools::envelope`). The choice between answering and calling is then one
//! key, right after a forced `{"`, where the instruction has just named both, instead of the
//! first token of a free reply, where text always wins on a model never trained to call. On
//! SmolLM2-135M the first token of a free reply opened a call with at most 0.8 % probability
//! even when the system message said to call the function; as the envelope's key, `tool`
//! took 50–70 % on the same requests (on a bench of 20 other requests, 10 needing a tool:
//! greedy, calls when needed 0 → 10 of 10, text when not 10 → 4 of 10; the README has the
//! figures). The same design is llama.cpp's generic tool format for
//! templates it does not know (`tool_call` / `response` keys). The cost: a text answer is
//! written as a JSON string (escapes for newlines and quotes).
//!
//! Earlier turns are shown the same way: an assistant message's `tool_calls` become one
//! `{"tool_calls": [...]}` envelope after its text (the template would drop them), and an
//! assistant's text without calls becomes `{"response": "..."}`, so the model sees its own
//! replies in the form it is asked to write. `tool` messages (results) are passed through as
//! they are.

use crate::chat::ChatMessage;
use serde_json::Value;

/// The first line of the instruction.
const HEADER: &str = "You can call these functions:";

/// The last paragraph: how to reply (see the module docs).
const HOW_TO_REPLY: &str = "Reply with one JSON object and nothing else: either {\"tool_calls\": [{\"name\": \
\"<function name>\", \"arguments\": {<arguments>}}]} to call one or more functions, or {\"response\": \"<your reply>\"} \
to answer the user directly.";

/// The key of an envelope's calls (an array of `{"name", "arguments"}` objects).
pub const CALLS_KEY: &str = "tool_calls";
/// The key of an envelope's text answer (a string).
pub const RESPONSE_KEY: &str = "response";

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
    out.push_str(HOW_TO_REPLY);
    Some(out)
}

/// `messages` with the tool instruction in the system message and earlier calls written as
/// envelopes (see the module docs). `None` when `tools` defines no function.
pub fn messages_with_tools(messages: &[ChatMessage], tools: &Value) -> Option<Vec<ChatMessage>> {
    let instruction = tools_instruction(tools)?;
    let mut out: Vec<ChatMessage> = messages.iter().map(as_envelope).collect();
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

/// An assistant message as an envelope: its calls as `{"tool_calls": [...]}` after its text,
/// or its text as `{"response": "..."}` (see the module docs).
fn as_envelope(m: &ChatMessage) -> ChatMessage {
    let mut m = m.clone();
    if m.role != "assistant" {
        return m;
    }
    if m.tool_calls.is_empty() {
        m.content = format!(r#"{{"{RESPONSE_KEY}":{}}}"#, Value::from(m.content.as_str()));
        return m;
    }
    // Written by hand so that `name` comes before `arguments`, as the instruction shows.
    let calls: Vec<String> = m
        .tool_calls
        .drain(..)
        .map(|c| format!(r#"{{"name":{},"arguments":{}}}"#, Value::from(c.function.name), c.function.arguments))
        .collect();
    if !m.content.trim().is_empty() {
        m.content.push('\n');
    }
    m.content.push_str(&format!(r#"{{"{CALLS_KEY}":[{}]}}"#, calls.join(",")));
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
             Reply with one JSON object and nothing else: either {\"tool_calls\": [{\"name\": \"<function name>\", \
             \"arguments\": {<arguments>}}]} to call one or more functions, or {\"response\": \"<your reply>\"} to answer the \
             user directly."
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
        assert_eq!(m[2].content, r#"{"tool_calls":[{"name":"get_weather","arguments":{"city":"Oslo"}}]}"#);
        assert!(m[2].tool_calls.is_empty());
    }

    #[test]
    fn earlier_answers_become_response_envelopes() {
        let a = ChatMessage::new("assistant", "It is \"sunny\".\nWarm too.");
        let m = messages_with_tools(&[ChatMessage::new("user", "Hi"), a, ChatMessage::new("tool", "{}")], &weather()).unwrap();
        assert_eq!(m[2].content, r#"{"response":"It is \"sunny\".\nWarm too."}"#);
        assert_eq!(serde_json::from_str::<Value>(&m[2].content).unwrap()["response"], "It is \"sunny\".\nWarm too.");
        assert_eq!(m[3].content, "{}", "tool results pass through");
    }
}
