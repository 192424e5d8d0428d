//! `input` items to chat turns: messages (`user`, `system`, `developer`, `assistant`; content
//! as a string or `input_text` / `output_text` parts), `function_call` items (the calls an
//! earlier answer made, joined to the assistant turn before them) and `function_call_output`
//! items (a `tool` turn naming the function its `call_id` called). `reasoning` items are
//! skipped; any other item, or a part that is not text, is a 400 naming `input`.

use super::store::Conversation;
use crate::backend::{ChatMessage, ToolCall};
use crate::error::ApiError;
use crate::wire::responses::{Input, InputItem, MessageContent};
use serde_json::Value;

/// Appends `input` to `conv`.
pub(crate) fn append(conv: &mut Conversation, input: Option<Input>) -> Result<(), ApiError> {
    let items = match input {
        None => return Ok(()),
        Some(Input::Text(s)) => {
            conv.turns.push(ChatMessage { role: "user".into(), content: s, ..Default::default() });
            return Ok(());
        }
        Some(Input::Items(items)) => items,
    };
    for (i, item) in items.into_iter().enumerate() {
        let kind = item.kind.clone().unwrap_or_else(|| "message".into());
        match kind.as_str() {
            "message" => message(conv, item, i)?,
            "function_call" => {
                let (Some(call_id), Some(name)) = (item.call_id, item.name) else {
                    return Err(bad(i, "a function_call item needs call_id and name"));
                };
                let text = item.arguments.unwrap_or_else(|| "{}".into());
                let arguments = serde_json::from_str(&text).unwrap_or(Value::String(text));
                conv.call_names.push((call_id, name.clone()));
                let call = ToolCall::new(name, arguments);
                match conv.turns.last_mut() {
                    Some(t) if t.role == "assistant" => t.tool_calls.push(call),
                    _ => conv.turns.push(ChatMessage { role: "assistant".into(), tool_calls: vec![call], ..Default::default() }),
                }
            }
            "function_call_output" => {
                let Some(call_id) = item.call_id else {
                    return Err(bad(i, "a function_call_output item needs the call_id of the call it answers"));
                };
                let tool_name = conv.call_names.iter().rev().find(|(id, _)| *id == call_id).map(|(_, n)| n.clone());
                if tool_name.is_none() {
                    return Err(bad(
                        i,
                        &format!("function_call_output answers call_id {call_id:?}, which no function_call in this conversation made"),
                    ));
                }
                let content = text_of(item.output, i)?;
                conv.turns.push(ChatMessage { role: "tool".into(), content, tool_name, ..Default::default() });
            }
            // Reasoning is not shown to the model again (as chat templates drop it).
            "reasoning" => {}
            other => {
                return Err(bad(
                    i,
                    &format!("input items of type {other:?} are not supported; send message, function_call and function_call_output items"),
                ))
            }
        }
    }
    Ok(())
}

fn message(conv: &mut Conversation, item: InputItem, i: usize) -> Result<(), ApiError> {
    let role = match item.role.as_deref() {
        Some("user") => "user",
        Some("system" | "developer") => "system",
        Some("assistant") => "assistant",
        Some(other) => return Err(bad(i, &format!("invalid role {other:?}: use user, system, developer or assistant"))),
        None => return Err(bad(i, "a message item needs a role")),
    };
    let content = text_of(item.content, i)?;
    conv.turns.push(ChatMessage { role: role.into(), content, ..Default::default() });
    Ok(())
}

/// The text of a content or output field: a string, or text parts joined.
fn text_of(content: Option<MessageContent>, i: usize) -> Result<String, ApiError> {
    match content {
        None => Ok(String::new()),
        Some(MessageContent::Text(s)) => Ok(s),
        Some(MessageContent::Parts(parts)) => {
            let mut out = String::new();
            for p in parts {
                match (p.kind.as_str(), p.text) {
                    ("input_text" | "output_text" | "text", Some(t)) => out.push_str(&t),
                    // A refusal has no text to show; formwork never writes one.
                    ("refusal", _) => {}
                    (kind, _) => {
                        return Err(bad(i, &format!("content parts of type {kind:?} are not supported by this model; send input_text parts")))
                    }
                }
            }
            Ok(out)
        }
    }
}

fn bad(i: usize, what: &str) -> ApiError {
    ApiError::bad_request(format!("input[{i}]: {what}")).param("input")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::responses::ContentPart;

    fn item(v: Value) -> InputItem {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn messages_calls_and_outputs() {
        let mut conv = Conversation::default();
        let items = vec![
            item(serde_json::json!({"role": "developer", "content": "Be brief."})),
            item(serde_json::json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather "}, {"type": "input_text", "text": "in Oslo?"}]})),
            item(serde_json::json!({"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"})),
            item(serde_json::json!({"type": "function_call_output", "call_id": "call_1", "output": "sunny"})),
        ];
        append(&mut conv, Some(Input::Items(items))).unwrap();
        let roles: Vec<&str> = conv.turns.iter().map(|t| t.role.as_str()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "tool"]);
        assert_eq!(conv.turns[1].content, "Weather in Oslo?");
        assert_eq!(conv.turns[2].tool_calls[0].function.arguments["city"], "Oslo");
        assert_eq!(conv.turns[3].tool_name.as_deref(), Some("get_weather"));
    }

    #[test]
    fn refusals_name_the_item() {
        let mut conv = Conversation::default();
        let e = append(&mut conv, Some(Input::Items(vec![item(serde_json::json!({"type": "function_call_output", "call_id": "x", "output": "1"}))]))).unwrap_err();
        assert!(e.message.contains("input[0]") && e.message.contains("\"x\""), "{}", e.message);
        let img = InputItem {
            role: Some("user".into()),
            content: Some(MessageContent::Parts(vec![ContentPart { kind: "input_image".into(), text: None }])),
            ..Default::default()
        };
        let e = append(&mut conv, Some(Input::Items(vec![img]))).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("input"));
        let e = append(&mut conv, Some(Input::Items(vec![item(serde_json::json!({"type": "item_reference", "id": "msg_1"}))]))).unwrap_err();
        assert!(e.message.contains("item_reference"));
    }
}
