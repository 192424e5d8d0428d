//! Between the OpenAI wire types and the backend's: message content to text, messages to
//! turns, tools and `response_format` to one constraint, reasoning effort, and an outcome
//! back to a message, its tool calls, finish reason and usage.

use crate::backend::{ChatMessage, ConstraintRequest, DoneReason, Outcome, Think, ToolCall, ToolDef};
use crate::error::ApiError;
use crate::jobs;
use crate::tools::{self, ToolMode};
use crate::stamps::new_id;
use crate::wire::openai as w;
use crate::ServerConfig;
use serde_json::{json, Value};
use std::sync::Arc;

pub(super) fn text_of(content: Option<w::Content>) -> Result<String, ApiError> {
    match content {
        None => Ok(String::new()),
        Some(w::Content::Text(s)) => Ok(s),
        Some(w::Content::Parts(parts)) => {
            let mut out = String::new();
            for p in parts {
                match (p.kind.as_str(), p.text) {
                    ("text", Some(t)) => out.push_str(&t),
                    (kind, _) => {
                        return Err(ApiError::bad_request(format!(
                            "content parts of type {kind:?} are not supported by this model; send text parts only"
                        ))
                        .param("messages"))
                    }
                }
            }
            Ok(out)
        }
    }
}

pub(super) fn turns(messages: Vec<w::RequestMessage>) -> Result<Vec<ChatMessage>, ApiError> {
    let mut call_names: Vec<(String, String)> = Vec::new();
    let mut out = Vec::with_capacity(messages.len());
    for m in messages {
        let role = match m.role.as_str() {
            "system" | "developer" => "system",
            "user" => "user",
            "assistant" => "assistant",
            "tool" | "function" => "tool",
            other => {
                return Err(ApiError::bad_request(format!(
                    "invalid message role {other:?}: use system, developer, user, assistant or tool"
                ))
                .param("messages"))
            }
        };
        let mut tool_calls = Vec::new();
        for c in m.tool_calls.unwrap_or_default() {
            let arguments = serde_json::from_str(&c.function.arguments).unwrap_or(Value::String(c.function.arguments));
            call_names.push((c.id.clone(), c.function.name.clone()));
            tool_calls.push(ToolCall::new(c.function.name, arguments));
        }
        let tool_name = match (&m.tool_call_id, role) {
            (Some(id), "tool") => call_names.iter().find(|(i, _)| i == id).map(|(_, n)| n.clone()).or(m.name.clone()),
            _ => None,
        };
        out.push(ChatMessage { role: role.into(), content: text_of(m.content)?, thinking: None, tool_calls, tool_name });
    }
    if out.is_empty() {
        return Err(ApiError::bad_request("messages is empty; send at least one message").param("messages"));
    }
    Ok(out)
}

/// Tools, the tool mode, and the constraint they imply together with `response_format`.
pub(crate) fn tools_and_constraint(
    req_tools: Option<Vec<w::Tool>>,
    choice: Option<w::ToolChoice>,
    parallel: Option<bool>,
    format: Option<w::ResponseFormat>,
    cfg: &ServerConfig,
) -> Result<(Vec<ToolDef>, ToolMode, ConstraintRequest), ApiError> {
    let mut tools = Vec::new();
    for t in req_tools.unwrap_or_default() {
        if t.kind != "function" {
            return Err(ApiError::bad_request(format!("tool type {:?} is not supported; use \"function\"", t.kind)).param("tools"));
        }
        let parameters = t.function.parameters.unwrap_or_else(|| json!({"type": "object", "properties": {}}));
        jobs::check_schema(&parameters, cfg, "tools")?;
        tools.push(ToolDef { name: t.function.name, description: t.function.description, parameters });
    }
    let mode = match choice {
        None if tools.is_empty() => ToolMode::None,
        None => ToolMode::Auto,
        Some(w::ToolChoice::Mode(m)) => match m.as_str() {
            "none" => ToolMode::None,
            "auto" if tools.is_empty() => ToolMode::None,
            "auto" => ToolMode::Auto,
            "required" => ToolMode::Required,
            other => {
                return Err(ApiError::bad_request(format!(
                    "invalid tool_choice {other:?}: use \"auto\", \"none\", \"required\" or {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}"
                ))
                .param("tool_choice"))
            }
        },
        Some(w::ToolChoice::Named { function, .. }) => ToolMode::Named(function.name),
    };
    let forced: Vec<&ToolDef> = match &mode {
        ToolMode::Required => tools.iter().collect(),
        ToolMode::Named(n) => tools.iter().filter(|t| &t.name == n).collect(),
        _ => vec![],
    };
    match &mode {
        ToolMode::Required | ToolMode::Named(_) if tools.is_empty() => {
            return Err(ApiError::bad_request("tool_choice asks for a tool call but no tools were given; add `tools`").param("tool_choice"))
        }
        ToolMode::Named(n) if forced.is_empty() => {
            return Err(ApiError::bad_request(format!("tool_choice names function {n:?}, which is not in `tools`")).param("tool_choice"))
        }
        _ => {}
    }
    let format_constraint = match format {
        None | Some(w::ResponseFormat::Text) => ConstraintRequest::None,
        Some(w::ResponseFormat::JsonObject) => ConstraintRequest::Json,
        Some(w::ResponseFormat::JsonSchema { json_schema }) => match json_schema.schema {
            None => ConstraintRequest::Json,
            Some(s) => jobs::schema_constraint(s, json_schema.strict.unwrap_or(false), cfg, "response_format")?,
        },
        #[cfg(feature = "engine")]
        Some(w::ResponseFormat::Sql { database }) => {
            let db = crate::sql::configured(cfg, &database).map_err(|e| e.param("response_format"))?;
            ConstraintRequest::Custom(crate::backend::CustomConstraint(db.format.clone()))
        }
        #[cfg(not(feature = "engine"))]
        Some(w::ResponseFormat::Sql { .. }) => {
            return Err(ApiError::bad_request("response_format sql needs a server built with the engine").param("response_format"))
        }
    };
    let max_calls = tools::max_calls(parallel);
    let schema_of = |t: &[&ToolDef]| tools::call_schema(t).map(Arc::new).map_err(|e| ApiError::bad_request(e).param("tools"));
    let constraint = match &mode {
        // The envelope closes itself (additionalProperties: false); the arguments follow the
        // function's schema as written.
        ToolMode::Required | ToolMode::Named(_) => ConstraintRequest::ToolCalls { call_schema: schema_of(&forced)?, max_calls },
        ToolMode::Auto if format_constraint == ConstraintRequest::None => {
            let refs: Vec<&ToolDef> = tools.iter().collect();
            ConstraintRequest::TextOrCall { call_schema: schema_of(&refs)?, max_calls }
        }
        _ => format_constraint,
    };
    let offered = if mode == ToolMode::None { vec![] } else { tools };
    Ok((offered, mode, constraint))
}

/// `reasoning_effort` for a model with (`thinking`) or without a reasoning section.
pub(crate) fn reasoning_effort(effort: Option<&str>, thinking: bool) -> Result<Option<Think>, ApiError> {
    let t = match effort {
        None => return Ok(None),
        Some("none") => Think::Off,
        Some(e @ ("minimal" | "low" | "medium" | "high")) => Think::On { effort: Some(e.to_string()) },
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "invalid reasoning_effort {other:?}: use \"none\", \"minimal\", \"low\", \"medium\" or \"high\""
            ))
            .param("reasoning_effort"))
        }
    };
    Ok(thinking.then_some(t))
}

pub(crate) fn finish_reason(r: DoneReason) -> &'static str {
    match r {
        DoneReason::Stop => "stop",
        DoneReason::Length => "length",
    }
}

/// The calls in a finished choice's output (none for text); an error when calls were forced
/// and cannot be read (cut off by the token budget).
pub(crate) fn calls(o: &Outcome, mode: &ToolMode, tools: &[ToolDef]) -> Result<Vec<w::ToolCall>, ApiError> {
    let calls = match mode {
        ToolMode::None => vec![],
        _ => tools::parse_calls(&o.text, tools),
    };
    if matches!(mode, ToolMode::Required | ToolMode::Named(_)) && calls.is_empty() {
        return Err(ApiError::internal(format!(
            "the model's forced tool call could not be read (finish reason {}); raise max_tokens",
            finish_reason(o.done_reason)
        )));
    }
    Ok(calls
        .into_iter()
        .map(|c| w::ToolCall {
            id: new_id("call_"),
            kind: "function".into(),
            function: w::FunctionCall { name: c.function.name, arguments: c.function.arguments.to_string() },
        })
        .collect())
}

/// The message and finish reason of one finished choice.
pub(super) fn answer(o: &Outcome, mode: &ToolMode, tools: &[ToolDef]) -> Result<(w::ResponseMessage, String), ApiError> {
    let calls = calls(o, mode, tools)?;
    let text = calls.is_empty();
    let message = w::ResponseMessage {
        role: "assistant".into(),
        content: text.then(|| o.text.clone()),
        refusal: None,
        reasoning_content: o.thinking.clone(),
        tool_calls: (!text).then_some(calls),
    };
    let finish = if text { finish_reason(o.done_reason) } else { "tool_calls" };
    Ok((message, finish.into()))
}

pub(super) fn usage(prompt: u32, completion: u32) -> w::Usage {
    w::Usage { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion }
}

pub(super) fn choices(n: Option<u32>, cfg: &ServerConfig) -> Result<u32, ApiError> {
    match n.unwrap_or(1) {
        0 => Err(ApiError::bad_request("n must be at least 1").param("n")),
        n if n > cfg.max_choices => Err(ApiError::bad_request(format!(
            "n is {n}; this server allows at most {} choices per request",
            cfg.max_choices
        ))
        .param("n")),
        n => Ok(n),
    }
}
