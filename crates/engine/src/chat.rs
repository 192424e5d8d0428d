//! The chat's data: messages and tool calls, as chat templates see them (used by the
//! template, the generation loop and the APIs; it depends on nothing else in the crate).

use serde::{Deserialize, Serialize};

/// One message of a chat, as the chat template sees it (`message.role`, `message.content`,
/// `message.tool_calls`, `message.thinking`, `message.tool_name`; empty optional fields are
/// left out, so templates' `if message.tool_calls` tests work).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// The text.
    pub content: String,
    /// An assistant's reasoning, for templates that render it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    /// Tool calls an assistant made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For `tool` messages: which tool produced this result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
}

impl ChatMessage {
    /// A message with just a role and content.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        ChatMessage { role: role.into(), content: content.into(), ..Default::default() }
    }
}

/// A tool call in the shape chat templates expect: `{"function": {"name", "arguments"}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The called function.
    pub function: ToolCallFunction,
}

/// The function part of a [`ToolCall`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCallFunction {
    /// Function name.
    pub name: String,
    /// Arguments, as a JSON object.
    pub arguments: serde_json::Value,
}

impl ToolCall {
    /// A call of `name` with `arguments`.
    pub fn new(name: impl Into<String>, arguments: serde_json::Value) -> Self {
        ToolCall { function: ToolCallFunction { name: name.into(), arguments } }
    }
}
