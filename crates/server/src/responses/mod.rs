//! The OpenAI Responses API: `POST /v1/responses` (a `response` object, or SSE events with
//! `stream: true`), `GET` and `DELETE /v1/responses/{id}`.
//!
//! A request becomes the same [`Job`](crate::Job) a chat completion does: `input` items
//! become chat turns (`input.rs`), `instructions` a system turn before them, `text.format`
//! and function `tools` / `tool_choice` the constraint (through the chat endpoint's own
//! `openai::tools_and_constraint`, so tool calls are generated
//! and read exactly as there), and the output is one `message` item or one `function_call`
//! item per call (with a `reasoning` item first when the model reasoned).
//!
//! `previous_response_id` continues a conversation kept in the bounded in-memory
//! [`store`] (for the server's lifetime; `store: false` keeps nothing); an unknown id is a
//! 404 naming `previous_response_id`. Parameters that would change the output and cannot
//! be honoured (`background`, `conversation`, `prompt`, hosted tools) are a 400 naming the
//! parameter; others (`store`, `metadata`, `user`, `truncation`, ...) are accepted.
//!
//! Logprobs: `include: ["message.output_text.logprobs"]` (or `top_logprobs`, 0 to 20
//! alternatives) puts each message token's logprob in `output_text.logprobs`, and, streamed,
//! each `output_text.delta` carries those of its own tokens.

mod input;
pub mod store;
mod stream;

use crate::backend::{ChatMessage, ConstraintRequest, DoneReason, Outcome, PromptSpec, Sampling, ToolCall, ToolDef};
use crate::error::{ApiError, ApiJson, ErrorKind, Flavor, OpenAiApi};
use crate::jobs;
use crate::openai;
use crate::tools::ToolMode;
use crate::stamps::{new_id, unix_now};
use crate::wire::openai as chat;
use crate::wire::responses as w;
use crate::AppState;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use std::time::Instant;
use store::{Conversation, Stored};

const FL: Flavor = Flavor::OpenAi;

/// `POST /v1/responses`.
pub async fn create(State(state): State<AppState>, ApiJson(req, _): ApiJson<w::CreateRequest, OpenAiApi>) -> Result<Response, ApiError> {
    create_inner(state, req).await.map_err(|e| e.flavor(FL))
}

/// `GET /v1/responses/{id}`: a kept response.
pub async fn retrieve(State(state): State<AppState>, Path(id): Path<String>) -> Result<Json<w::Response>, ApiError> {
    match state.responses().get(&id) {
        Some(s) => Ok(Json(s.response.clone())),
        None => Err(not_found(&id, "id").flavor(FL)),
    }
}

/// `DELETE /v1/responses/{id}`.
pub async fn delete(State(state): State<AppState>, Path(id): Path<String>) -> Result<Json<w::Deleted>, ApiError> {
    if state.responses().remove(&id) {
        Ok(Json(w::Deleted { id, object: "response".into(), deleted: true }))
    } else {
        Err(not_found(&id, "id").flavor(FL))
    }
}

fn not_found(id: &str, param: &str) -> ApiError {
    let mut e = ApiError::new(
        ErrorKind::NotFound,
        format!(
            "response {id:?} not found: this server keeps responses in memory for its lifetime (the most recent ones, \
             and only those created with store not false)"
        ),
    )
    .param(param);
    e.code = Some("previous_response_not_found");
    e
}

/// What a request fixed that the answer needs: how tools are used, and the conversation to
/// keep.
pub(crate) struct Plan {
    pub mode: ToolMode,
    pub tools: Vec<ToolDef>,
    /// Most calls the output may hold (`max_tool_calls`).
    pub max_calls: Option<u32>,
    /// The conversation through this request's input (without `instructions`).
    pub conversation: Conversation,
    /// Keep the response.
    pub store: bool,
    /// Report the message tokens' logprobs.
    pub logprobs: bool,
}

/// The include item that asks for the message tokens' logprobs.
const INCLUDE_LOGPROBS: &str = "message.output_text.logprobs";

/// How many alternatives per token the request asks for, `None` when it asks for no logprobs.
fn logprobs_request(req: &w::CreateRequest) -> Option<u8> {
    let included = req.include.iter().flatten().any(|i| i == INCLUDE_LOGPROBS);
    (included || req.top_logprobs.is_some_and(|n| n > 0)).then(|| req.top_logprobs.unwrap_or(0).min(20) as u8)
}

/// Puts `logprobs` into a message item's text part.
pub(crate) fn set_logprobs(item: &mut w::OutputItem, logprobs: Vec<serde_json::Value>) {
    if let w::OutputItem::Message { content, .. } = item {
        if let Some(part) = content.first_mut() {
            part.logprobs = logprobs;
        }
    }
}

/// Token logprobs as the Responses API's `logprobs` entries.
pub(crate) fn logprob_values(l: &[crate::backend::TokenLogprob]) -> Vec<serde_json::Value> {
    openai::token_logprobs(l).into_iter().map(|e| serde_json::to_value(e).unwrap_or_default()).collect()
}

async fn create_inner(state: AppState, mut req: w::CreateRequest) -> Result<Response, ApiError> {
    let received = Instant::now();
    let cfg = state.config().clone();
    let wk = state.model(&req.model)?.clone();
    refuse_unsupported(&req)?;
    let mut conversation = match &req.previous_response_id {
        None => Conversation::default(),
        Some(id) => state.responses().get(id).ok_or_else(|| not_found(id, "previous_response_id"))?.conversation.clone(),
    };
    input::append(&mut conversation, req.input.take())?;
    if conversation.turns.is_empty() {
        return Err(ApiError::bad_request("input is required: a string or a list of input items").param("input"));
    }
    let (chat_tools, chat_choice) = tools_for_chat(&req)?;
    let format = req.text.as_ref().and_then(|t| t.format.clone()).map(format_for_chat);
    let (tools, mode, mut constraint) =
        openai::tools_and_constraint(chat_tools, chat_choice, req.parallel_tool_calls, format, &cfg).map_err(rename_params)?;
    if let Some(m) = req.max_tool_calls {
        if m == 0 {
            return Err(ApiError::bad_request("max_tool_calls must be at least 1").param("max_tool_calls"));
        }
        if let ConstraintRequest::ToolCalls { max_calls, .. } | ConstraintRequest::TextOrCall { max_calls, .. } = &mut constraint {
            *max_calls = (*max_calls).min(m);
        }
    }
    let sampling = Sampling { temperature: req.temperature, top_p: req.top_p, seed: jobs::seed(req.seed), ..Default::default() };
    let num_predict = jobs::num_predict(req.max_output_tokens.map(i64::from), &cfg);
    let think = openai::reasoning_effort(req.reasoning.as_ref().and_then(|r| r.effort.as_deref()), wk.meta().supports_thinking)?;
    let mut messages = Vec::with_capacity(conversation.turns.len() + 1);
    if let Some(i) = req.instructions.as_ref().filter(|i| !i.is_empty()) {
        messages.push(ChatMessage { role: "system".into(), content: i.clone(), ..Default::default() });
    }
    messages.extend(conversation.turns.iter().cloned());
    let mut job = jobs::job(&cfg, received, PromptSpec::Chat { messages, tools: tools.clone() }, constraint, sampling, num_predict, vec![], None);
    job.think = think;
    let logprobs = logprobs_request(&req);
    job.logprobs = logprobs;
    let skeleton = skeleton(&req);
    let plan = Plan { mode, tools, max_calls: req.max_tool_calls, conversation, store: req.store != Some(false), logprobs: logprobs.is_some() };
    let first = jobs::start(&wk, job).await.map_err(rename_params)?;
    if req.stream.unwrap_or(false) {
        return Ok(stream::sse(state, first, skeleton, plan));
    }
    let o = jobs::collect(first).await.map_err(rename_params)?;
    let calls = calls(&o, &plan)?;
    let mut output = Vec::new();
    if let Some(t) = &o.thinking {
        output.push(reasoning_item(new_id("rs_"), t.clone()));
    }
    if calls.is_empty() {
        let mut item = message_item(new_id("msg_"), o.text.clone(), status_of(o.done_reason));
        if plan.logprobs {
            set_logprobs(&mut item, logprob_values(o.logprobs.as_deref().unwrap_or_default()));
        }
        output.push(item);
    } else {
        output.extend(calls.into_iter().map(|c| call_item(new_id("fc_"), c.id, c.function.name, c.function.arguments, "completed")));
    }
    Ok(Json(finish(&state, skeleton, output, &o, plan)).into_response())
}

/// Refuses parameters that would change the output and cannot be honoured.
fn refuse_unsupported(req: &w::CreateRequest) -> Result<(), ApiError> {
    let refuse = |param: &str, why: &str| Err(ApiError::bad_request(format!("{param} is not supported: {why}")).param(param));
    if req.background == Some(true) {
        return refuse("background", "responses are generated while the request waits; send background: false or leave it out");
    }
    if req.conversation.as_ref().is_some_and(|c| !c.is_null()) {
        return refuse("conversation", "there is no Conversations API here; continue with previous_response_id");
    }
    if req.prompt.as_ref().is_some_and(|p| !p.is_null()) {
        return refuse("prompt", "stored prompt templates do not exist here; send instructions and input");
    }
    if let Some(n) = req.top_logprobs.filter(|&n| n > 20) {
        return Err(ApiError::bad_request(format!("Invalid 'top_logprobs': {n}; it must be an integer between 0 and 20")).param("top_logprobs"));
    }
    if let Some(t) = req.truncation.as_deref().filter(|t| !matches!(*t, "auto" | "disabled")) {
        return Err(ApiError::bad_request(format!("invalid truncation {t:?}: use \"auto\" or \"disabled\"")).param("truncation"));
    }
    Ok(())
}

/// The request's tools and tool choice in the chat endpoint's shape.
fn tools_for_chat(req: &w::CreateRequest) -> Result<(Option<Vec<chat::Tool>>, Option<chat::ToolChoice>), ApiError> {
    let tools = match &req.tools {
        None => None,
        Some(ts) => {
            let mut out = Vec::with_capacity(ts.len());
            for t in ts {
                if t.kind != "function" {
                    return Err(ApiError::bad_request(format!(
                        "tool type {:?} is not supported; formwork serves function tools ({{\"type\": \"function\", \"name\", \"parameters\"}})",
                        t.kind
                    ))
                    .param("tools"));
                }
                let Some(name) = t.name.clone().filter(|n| !n.is_empty()) else {
                    return Err(ApiError::bad_request("a function tool needs a name").param("tools"));
                };
                let function = chat::FunctionDef { name, description: t.description.clone(), parameters: t.parameters.clone(), strict: t.strict };
                out.push(chat::Tool { kind: "function".into(), function });
            }
            Some(out)
        }
    };
    let choice = match &req.tool_choice {
        None => None,
        Some(w::ToolChoice::Mode(m)) => Some(chat::ToolChoice::Mode(m.clone())),
        Some(w::ToolChoice::Named { kind, name: Some(name) }) if kind == "function" => {
            Some(chat::ToolChoice::Named { kind: kind.clone(), function: chat::NamedFunction { name: name.clone() } })
        }
        Some(w::ToolChoice::Named { kind, .. }) => {
            return Err(ApiError::bad_request(format!(
                "tool_choice of type {kind:?} is not supported; use \"auto\", \"none\", \"required\" or {{\"type\": \"function\", \"name\": ...}}"
            ))
            .param("tool_choice"))
        }
    };
    Ok((tools, choice))
}

/// `text.format` as a chat `response_format`.
fn format_for_chat(f: w::TextFormat) -> chat::ResponseFormat {
    match f {
        w::TextFormat::Text => chat::ResponseFormat::Text,
        w::TextFormat::JsonObject => chat::ResponseFormat::JsonObject,
        w::TextFormat::JsonSchema { name, description, schema, strict } => {
            chat::ResponseFormat::JsonSchema { json_schema: chat::JsonSchemaFormat { name, description, schema, strict } }
        }
    }
}

/// Errors name this API's fields: `text.format` (chat: `response_format`), `input`
/// (`messages`), `max_output_tokens` (`max_tokens`).
fn rename_params(mut e: ApiError) -> ApiError {
    let (ours, theirs) = match e.param.as_deref() {
        Some("response_format") => ("text.format", "response_format"),
        Some("format") => ("text.format", "format"),
        Some("messages") => ("input", "messages"),
        Some("max_tokens") => ("max_output_tokens", "max_tokens"),
        _ => return e,
    };
    e.param = Some(ours.into());
    e.message = e.message.replace(theirs, ours);
    e
}

/// The response object before any output: what the request asked for, echoed.
fn skeleton(req: &w::CreateRequest) -> w::Response {
    w::Response {
        id: new_id("resp_"),
        object: "response".into(),
        created_at: unix_now(),
        status: "in_progress".into(),
        error: None,
        incomplete_details: None,
        instructions: req.instructions.clone(),
        max_output_tokens: req.max_output_tokens,
        model: req.model.clone(),
        output: vec![],
        parallel_tool_calls: req.parallel_tool_calls.unwrap_or(true),
        previous_response_id: req.previous_response_id.clone(),
        reasoning: req.reasoning.clone(),
        store: req.store != Some(false),
        temperature: req.temperature,
        text: w::TextConfig { format: Some(req.text.as_ref().and_then(|t| t.format.clone()).unwrap_or(w::TextFormat::Text)) },
        tool_choice: req.tool_choice.clone().unwrap_or_else(|| w::ToolChoice::Mode("auto".into())),
        tools: req.tools.clone().unwrap_or_default(),
        top_p: req.top_p,
        truncation: req.truncation.clone().unwrap_or_else(|| "disabled".into()),
        usage: None,
        user: req.user.clone(),
        metadata: req.metadata.clone().filter(|m| !m.is_null()).unwrap_or_else(|| serde_json::json!({})),
    }
}

/// The calls in the output (none for text), at most `max_tool_calls`.
pub(crate) fn calls(o: &Outcome, plan: &Plan) -> Result<Vec<chat::ToolCall>, ApiError> {
    let mut calls = openai::calls(o, &plan.mode, &plan.tools).map_err(|mut e| {
        e.message = e.message.replace("max_tokens", "max_output_tokens");
        e
    })?;
    if let Some(m) = plan.max_calls {
        calls.truncate(m as usize);
    }
    Ok(calls)
}

/// `completed`, or `incomplete` when the token budget ran out.
pub(crate) fn status_of(r: DoneReason) -> &'static str {
    match r {
        DoneReason::Stop => "completed",
        DoneReason::Length => "incomplete",
    }
}

pub(crate) fn message_item(id: String, text: String, status: &str) -> w::OutputItem {
    w::OutputItem::Message { id, role: "assistant".into(), status: status.into(), content: vec![output_text(text)] }
}

pub(crate) fn output_text(text: String) -> w::OutputText {
    w::OutputText { kind: "output_text".into(), text, annotations: vec![], logprobs: vec![] }
}

pub(crate) fn call_item(id: String, call_id: String, name: String, arguments: String, status: &str) -> w::OutputItem {
    w::OutputItem::FunctionCall { id, call_id, name, arguments, status: status.into() }
}

pub(crate) fn reasoning_item(id: String, text: String) -> w::OutputItem {
    w::OutputItem::Reasoning {
        id,
        summary: vec![],
        content: vec![w::ReasoningText { kind: "reasoning_text".into(), text }],
        status: "completed".into(),
    }
}

/// The finished response: `output`, status and usage set; kept in the store (with the
/// conversation through its output) unless `store: false`.
pub(crate) fn finish(state: &AppState, mut response: w::Response, output: Vec<w::OutputItem>, o: &Outcome, plan: Plan) -> w::Response {
    let has_calls = output.iter().any(|i| matches!(i, w::OutputItem::FunctionCall { .. }));
    response.status = if has_calls { "completed" } else { status_of(o.done_reason) }.into();
    if response.status == "incomplete" {
        response.incomplete_details = Some(w::IncompleteDetails { reason: "max_output_tokens".into() });
    }
    response.output = output;
    response.usage = Some(w::Usage {
        input_tokens: o.prompt_tokens,
        input_tokens_details: w::InputTokensDetails::default(),
        output_tokens: o.eval_tokens,
        output_tokens_details: w::OutputTokensDetails::default(),
        total_tokens: o.prompt_tokens + o.eval_tokens,
    });
    if plan.store {
        let mut conversation = plan.conversation;
        let mut answer = ChatMessage { role: "assistant".into(), ..Default::default() };
        for item in &response.output {
            match item {
                w::OutputItem::Message { content, .. } => answer.content = content.iter().map(|c| c.text.as_str()).collect(),
                w::OutputItem::FunctionCall { call_id, name, arguments, .. } => {
                    let arguments = serde_json::from_str(arguments).unwrap_or_else(|_| serde_json::Value::String(arguments.clone()));
                    answer.tool_calls.push(ToolCall::new(name.clone(), arguments));
                    conversation.call_names.push((call_id.clone(), name.clone()));
                }
                w::OutputItem::Reasoning { .. } => {}
            }
        }
        conversation.turns.push(answer);
        state.responses().put(Stored { response: response.clone(), conversation });
    }
    response
}
