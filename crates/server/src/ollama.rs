//! Ollama API handlers: `/api/chat`, `/api/generate`, `/api/tags`, `/api/show`,
//! `/api/version` and `/`.

use crate::backend::{ChatMessage, ConstraintRequest, Outcome, PromptSpec, ToolDef};
use crate::error::{ApiError, ApiJson, Flavor, OllamaApi};
use crate::jobs::{self};
use crate::tools::{self, ToolMode};
use crate::stamps::rfc3339_now;
use crate::wire::ollama as w;
use crate::AppState;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use std::sync::Arc;
use std::time::Instant;

mod models;
mod stream;
mod translate;
pub use models::{ps, root, show, tags, version};
use stream::*;
use translate::*;

/// The error shape of this API.
const FL: Flavor = Flavor::Ollama;

/// `POST /api/chat`.
pub async fn chat(
    State(state): State<AppState>,
    ApiJson(req, _): ApiJson<w::ChatRequest, OllamaApi>,
) -> Result<Response, ApiError> {
    chat_inner(state, req).await.map_err(|e| e.flavor(FL))
}

async fn chat_inner(state: AppState, req: w::ChatRequest) -> Result<Response, ApiError> {
    let received = Instant::now();
    let cfg = state.config();
    let (wk, defaults) = state.model_and_defaults(&req.model)?;
    let wk = wk.clone();
    let think = think(&req.think, &wk)?;
    if req.messages.is_empty() {
        return Ok(load_response(&req.model, true));
    }
    let mut messages = req.messages.into_iter().map(turn).collect::<Result<Vec<_>, _>>()?;
    // An alias's system prompt, unless the conversation has its own.
    if let Some(system) = defaults.system.as_ref().filter(|_| !messages.iter().any(|m| m.role == "system")) {
        messages.insert(0, ChatMessage { role: "system".into(), content: system.clone(), ..Default::default() });
    }
    let tools: Vec<ToolDef> = req.tools.unwrap_or_default().into_iter().map(tool_def).collect();
    for t in &tools {
        jobs::check_schema(&t.parameters, cfg, "tools")?;
    }
    let mut constraint = format(req.format, cfg)?;
    // Ollama has no tool_choice: tools mean "auto", unless a format fixes the output.
    let mode = if tools.is_empty() || constraint != ConstraintRequest::None { ToolMode::None } else { ToolMode::Auto };
    if mode == ToolMode::Auto {
        let refs: Vec<&ToolDef> = tools.iter().collect();
        let call_schema = tools::call_schema(&refs).map_err(|e| ApiError::bad_request(e).param("tools"))?;
        // Ollama has no `parallel_tool_calls`: several calls are always allowed.
        constraint = ConstraintRequest::TextOrCall { call_schema: Arc::new(call_schema), max_calls: tools::MAX_PARALLEL_CALLS };
    }
    let (sampling, num_predict, stop, num_ctx) = options(with_defaults(req.options, &defaults.parameters), cfg);
    let mut job = jobs::job(
        cfg,
        received,
        PromptSpec::Chat { messages, tools: tools.clone() },
        constraint,
        sampling,
        num_predict,
        stop,
        num_ctx,
    );
    job.schema_in_prompt = jobs::schema_in_prompt(req.schema_in_prompt.as_ref())?;
    job.whitespace = jobs::whitespace(req.whitespace.as_ref())?;
    job.think = think;
    job.logprobs = logprobs(req.logprobs, req.top_logprobs)?;
    let asked = job.logprobs.is_some();
    let started = jobs::start(&wk, job).await?;
    let model = req.model;
    let auto = mode == ToolMode::Auto;
    // The calls in the output (none for text).
    let calls = move |o: &Outcome| -> Option<Vec<w::ToolCall>> {
        let calls = if auto { tools::parse_calls(&o.text, &tools) } else { vec![] };
        let calls: Vec<w::ToolCall> = calls
            .into_iter()
            .map(|c| w::ToolCall { function: w::ToolCallFunction { name: c.function.name, arguments: c.function.arguments } })
            .collect();
        (!calls.is_empty()).then_some(calls)
    };
    if req.stream.unwrap_or(true) {
        let m2 = model.clone();
        let piece = move |p: StreamPiece, logprobs: Option<Vec<w::Logprob>>| w::ChatResponse {
            model: m2.clone(),
            created_at: rfc3339_now(),
            message: match p {
                StreamPiece::Text(content) => w::Message { role: "assistant".into(), content, ..Default::default() },
                StreamPiece::Thinking(t) => w::Message { role: "assistant".into(), thinking: Some(t), ..Default::default() },
            },
            done: false,
            done_reason: None,
            stats: None,
            logprobs,
        };
        // As Ollama streams calls: text as it comes; calls in a line of their own once read,
        // then the closing line (the reasoning was streamed already).
        let last = move |o: &Outcome, unsent: &str, mut logprobs: Option<Vec<w::Logprob>>| {
            let line = |message: w::Message, done: bool, logprobs: Option<Vec<w::Logprob>>| w::ChatResponse {
                model: model.clone(),
                created_at: rfc3339_now(),
                message,
                done,
                done_reason: done.then(|| reason(o.done_reason)),
                stats: done.then(|| stats(o, received)),
                logprobs,
            };
            let mut out = Vec::new();
            let mut closing = w::Message { role: "assistant".into(), ..Default::default() };
            match calls(o) {
                Some(calls) => out.push(line(
                    w::Message { role: "assistant".into(), tool_calls: Some(calls), ..Default::default() },
                    false,
                    logprobs.take(),
                )),
                None => closing.content = unsent.to_string(),
            }
            out.push(line(closing, true, logprobs));
            out
        };
        Ok(ndjson(started, auto, piece, last))
    } else {
        let o = jobs::collect(started).await?;
        let mut message = w::Message { role: "assistant".into(), thinking: o.thinking.clone(), ..Default::default() };
        match calls(&o) {
            Some(calls) => message.tool_calls = Some(calls),
            None => message.content = o.text.clone(),
        }
        Ok(Json(w::ChatResponse {
            model,
            created_at: rfc3339_now(),
            message,
            done: true,
            done_reason: Some(reason(o.done_reason)),
            stats: Some(stats(&o, received)),
            logprobs: asked.then(|| wire_logprobs(o.logprobs.as_deref().unwrap_or_default())),
        })
        .into_response())
    }
}

/// `POST /api/generate`.
pub async fn generate(
    State(state): State<AppState>,
    ApiJson(req, _): ApiJson<w::GenerateRequest, OllamaApi>,
) -> Result<Response, ApiError> {
    generate_inner(state, req).await.map_err(|e| e.flavor(FL))
}

async fn generate_inner(state: AppState, req: w::GenerateRequest) -> Result<Response, ApiError> {
    let received = Instant::now();
    let cfg = state.config();
    let (wk, defaults) = state.model_and_defaults(&req.model)?;
    let wk = wk.clone();
    let think = think(&req.think, &wk)?;
    no_images(&req.images)?;
    if req.suffix.as_deref().is_some_and(|s| !s.is_empty()) {
        return Err(ApiError::bad_request(format!(
            "\"{}\" does not support insert (suffix); send the prompt without `suffix`",
            wk.meta().name
        ))
        .param("suffix"));
    }
    if req.template.as_deref().is_some_and(|t| !t.is_empty()) {
        tracing::warn!("ignoring a `template` override; formwork renders the model's own chat template");
    }
    if req.prompt.is_empty() {
        return Ok(load_response(&req.model, false));
    }
    let prompt = if req.raw.unwrap_or(false) {
        PromptSpec::Raw(req.prompt)
    } else {
        let mut messages = Vec::new();
        if let Some(system) = req.system.filter(|s| !s.is_empty()).or(defaults.system) {
            messages.push(ChatMessage { role: "system".into(), content: system, ..Default::default() });
        }
        messages.push(ChatMessage { role: "user".into(), content: req.prompt, ..Default::default() });
        PromptSpec::Chat { messages, tools: vec![] }
    };
    let constraint = format(req.format, cfg)?;
    let (sampling, num_predict, stop, num_ctx) = options(with_defaults(req.options, &defaults.parameters), cfg);
    let mut job = jobs::job(cfg, received, prompt, constraint, sampling, num_predict, stop, num_ctx);
    job.schema_in_prompt = jobs::schema_in_prompt(req.schema_in_prompt.as_ref())?;
    job.whitespace = jobs::whitespace(req.whitespace.as_ref())?;
    job.think = think;
    job.logprobs = logprobs(req.logprobs, req.top_logprobs)?;
    let asked = job.logprobs.is_some();
    let started = jobs::start(&wk, job).await?;
    let model = req.model;
    if req.stream.unwrap_or(true) {
        let m2 = model.clone();
        let piece = move |p: StreamPiece, logprobs: Option<Vec<w::Logprob>>| {
            let (response, thinking) = match p {
                StreamPiece::Text(t) => (t, None),
                StreamPiece::Thinking(t) => (String::new(), Some(t)),
            };
            w::GenerateResponse {
                model: m2.clone(),
                created_at: rfc3339_now(),
                response,
                thinking,
                done: false,
                done_reason: None,
                stats: None,
                logprobs,
            }
        };
        let last = move |o: &Outcome, _unsent: &str, logprobs: Option<Vec<w::Logprob>>| {
            vec![w::GenerateResponse {
                model: model.clone(),
                created_at: rfc3339_now(),
                response: String::new(),
                thinking: None,
                done: true,
                done_reason: Some(reason(o.done_reason)),
                stats: Some(stats(o, received)),
                logprobs,
            }]
        };
        Ok(ndjson(started, false, piece, last))
    } else {
        let o = jobs::collect(started).await?;
        Ok(Json(w::GenerateResponse {
            model,
            created_at: rfc3339_now(),
            response: o.text.clone(),
            thinking: o.thinking.clone(),
            done: true,
            done_reason: Some(reason(o.done_reason)),
            stats: Some(stats(&o, received)),
            logprobs: asked.then(|| wire_logprobs(o.logprobs.as_deref().unwrap_or_default())),
        })
        .into_response())
    }
}
