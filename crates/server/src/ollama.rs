//! Ollama API handlers: `/api/chat`, `/api/generate`, `/api/tags`, `/api/show`,
//! `/api/version` and `/`.

use crate::backend::{ChatTurn, ConstraintRequest, DoneReason, Outcome, PromptSpec, Sampling, Think, TokenLogprob, ToolCall, ToolDef};
use crate::error::{ApiError, ApiJson, Flavor, OllamaApi};
use crate::exec::{self, Started};
use crate::tools::{self, ToolMode};
use crate::util::rfc3339_now;
use crate::wire::ollama as w;
use crate::worker::{Event, ModelWorker};
use crate::{AppState, ServerConfig};
use axum::body::Body;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

const FL: Flavor = Flavor::Ollama;

/// `GET /` and `HEAD /`.
pub async fn root() -> &'static str {
    "Ollama is running"
}

/// `GET /api/version`.
pub async fn version(State(state): State<AppState>) -> Json<Value> {
    Json(json!({ "version": state.config().ollama_version }))
}

fn details(worker: &ModelWorker) -> w::ModelDetails {
    let m = worker.meta();
    w::ModelDetails {
        parent_model: String::new(),
        format: "gguf".into(),
        family: m.family.clone(),
        families: if m.family.is_empty() { vec![] } else { vec![m.family.clone()] },
        parameter_size: m.parameter_size.clone(),
        quantization_level: m.quantization_level.clone(),
    }
}

fn modified_at(worker: &ModelWorker) -> String {
    worker
        .meta()
        .path
        .as_ref()
        .and_then(|p| std::fs::metadata(p).ok())
        .and_then(|m| m.modified().ok())
        .map(crate::util::rfc3339)
        .unwrap_or_else(rfc3339_now)
}

/// `GET /api/tags`: the served models, then the store's ([`crate::store`]).
pub async fn tags(State(state): State<AppState>) -> Json<w::TagsResponse> {
    let mut models: Vec<w::ModelEntry> = state
        .models()
        .iter()
        .map(|wk| {
            let m = wk.meta();
            let name = format!("{}:latest", m.name);
            w::ModelEntry {
                name: name.clone(),
                model: name,
                modified_at: modified_at(wk),
                size: m.size,
                digest: digest(m),
                details: details(wk),
            }
        })
        .collect();
    let served: Vec<String> = models.iter().map(|m| m.name.clone()).collect();
    models.extend(crate::store::tag_entries(&state, &served).await);
    Json(w::TagsResponse { models })
}

/// When a loaded model expires: never (the server keeps its models until it stops).
const NEVER_EXPIRES: &str = "2318-08-09T00:00:00Z";

/// `GET /api/ps`: the loaded models (all served models: formwork loads them at start), with
/// their context per slot and how many slots are busy and requests queued.
pub async fn ps(State(state): State<AppState>) -> Json<w::PsResponse> {
    let models = state
        .models()
        .iter()
        .map(|wk| {
            let m = wk.meta();
            let name = format!("{}:latest", m.name);
            w::PsEntry {
                name: name.clone(),
                model: name,
                size: m.size,
                digest: digest(m),
                details: details(wk),
                expires_at: NEVER_EXPIRES.into(),
                size_vram: 0,
                context_length: m.context_length,
                slots: wk.slots(),
                slots_busy: wk.metrics().running_now().min(wk.slots()),
                queued: wk.queue_len(),
            }
        })
        .collect();
    Json(w::PsResponse { models })
}

/// A stable 64-hex-digit identifier of a served model (FNV-1a of its name, path and size;
/// not a content hash: formwork does not hash multi-GB files at startup).
fn digest(m: &crate::backend::ModelMeta) -> String {
    digest_of(&format!("{}\0{:?}\0{}", m.name, m.path, m.size))
}

/// 64 hex digits naming `key` (FNV-1a, four salts).
pub(crate) fn digest_of(key: &str) -> String {
    (0u64..4)
        .map(|salt| {
            let h = key.bytes().fold(0xcbf2_9ce4_8422_2325u64 ^ salt, |h, x| (h ^ u64::from(x)).wrapping_mul(0x100_0000_01b3));
            format!("{h:016x}")
        })
        .collect()
}

/// `POST /api/show`.
pub async fn show(
    State(state): State<AppState>,
    ApiJson(req, _): ApiJson<w::ShowRequest, OllamaApi>,
) -> Result<Json<w::ShowResponse>, ApiError> {
    let name = req.model.or(req.name).unwrap_or_default();
    let (wk, defaults) = state.model_and_defaults(&name).map_err(|e| e.flavor(FL))?;
    let m = wk.meta();
    let mut info = serde_json::Map::new();
    info.insert("general.architecture".into(), json!(m.family));
    info.insert(format!("{}.context_length", m.family), json!(m.context_length));
    if let Some(p) = &m.path {
        info.insert("general.file".into(), json!(p.display().to_string()));
    }
    let mut capabilities = vec!["completion".to_string()];
    if m.supports_tools {
        capabilities.push("tools".into());
    }
    if m.supports_thinking {
        capabilities.push("thinking".into());
    }
    // Every llama.cpp model embeds (mean-pooled hidden states for a decoder, as Ollama does).
    if wk.can_embed() {
        capabilities.push("embedding".into());
    }
    Ok(Json(w::ShowResponse {
        modelfile: format!(
            "# served by formwork\n{}",
            formwork_models::Modelfile::render(&m.path.as_ref().map_or(m.name.clone(), |p| p.display().to_string()), &defaults)
        ),
        parameters: defaults.parameters.lines().iter().map(|(k, v)| format!("{k:<30} {v}")).collect::<Vec<_>>().join("\n"),
        template: m.template.clone().unwrap_or_default(),
        details: details(wk),
        model_info: info,
        capabilities,
        modified_at: modified_at(wk),
    }))
}

/// Options to sampling settings, token budget, stop strings and context length.
fn options(o: Option<w::Options>, cfg: &ServerConfig) -> (Sampling, u32, Vec<String>, Option<u32>) {
    let o = o.unwrap_or_default();
    let sampling = Sampling {
        temperature: o.temperature,
        top_k: o.top_k,
        top_p: o.top_p,
        min_p: o.min_p,
        seed: exec::seed(o.seed),
        repeat_penalty: o.repeat_penalty,
        repeat_last_n: o.repeat_last_n,
        presence_penalty: o.presence_penalty,
        frequency_penalty: o.frequency_penalty,
    };
    (sampling, exec::num_predict(o.num_predict, cfg), o.stop.map(w::StopField::into_vec).unwrap_or_default(), o.num_ctx)
}

/// `o` with every option it leaves unset taken from a model's own parameters (an alias's).
fn with_defaults(o: Option<w::Options>, p: &formwork_models::Parameters) -> Option<w::Options> {
    if p.is_empty() {
        return o;
    }
    let mut o = o.unwrap_or_default();
    o.temperature = o.temperature.or(p.temperature);
    o.top_k = o.top_k.or(p.top_k.and_then(|k| i32::try_from(k).ok()));
    o.top_p = o.top_p.or(p.top_p);
    o.min_p = o.min_p.or(p.min_p);
    o.seed = o.seed.or(p.seed.and_then(|s| i64::try_from(s).ok()));
    o.num_predict = o.num_predict.or(p.num_predict.map(i64::from));
    o.repeat_penalty = o.repeat_penalty.or(p.repeat_penalty);
    o.repeat_last_n = o.repeat_last_n.or(p.repeat_last_n.and_then(|n| i32::try_from(n).ok()));
    o.num_ctx = o.num_ctx.or(p.num_ctx);
    if o.stop.is_none() && !p.stop.is_empty() {
        o.stop = Some(w::StopField::Many(p.stop.clone()));
    }
    Some(o)
}

/// `format` as a constraint.
fn format(f: Option<w::Format>, cfg: &ServerConfig) -> Result<ConstraintRequest, ApiError> {
    match f {
        None | Some(w::Format::Schema(Value::Null)) => Ok(ConstraintRequest::None),
        Some(w::Format::Named(s)) if s.is_empty() => Ok(ConstraintRequest::None),
        Some(w::Format::Named(s)) if s == "json" => Ok(ConstraintRequest::Json),
        Some(w::Format::Named(s)) => Err(ApiError::bad_request(format!(
            "invalid format {s:?}: use \"json\" or a JSON Schema object"
        ))
        .param("format")),
        Some(w::Format::Schema(v)) => exec::schema_constraint(v, false, cfg, "format"),
    }
}

/// `think`: absent or `null` = the model's default, `false` = answer directly, `true` or an
/// effort (`"high"`, `"medium"`, `"low"`) = reason first (400 for a model without reasoning).
fn think(think: &Option<Value>, wk: &ModelWorker) -> Result<Option<Think>, ApiError> {
    let t = match think {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Bool(false)) => Think::Off,
        Some(Value::Bool(true)) => Think::On { effort: None },
        Some(Value::String(s)) if matches!(s.as_str(), "high" | "medium" | "low") => Think::On { effort: Some(s.clone()) },
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "invalid think value {other}: use true, false, \"high\", \"medium\" or \"low\""
            ))
            .param("think"))
        }
    };
    if !wk.meta().supports_thinking {
        if t == Think::Off {
            return Ok(None);
        }
        return Err(ApiError::bad_request(format!("\"{}\" does not support thinking", wk.meta().name)).param("think"));
    }
    Ok(Some(t))
}

fn no_images(images: &Option<Vec<String>>) -> Result<(), ApiError> {
    match images {
        Some(v) if !v.is_empty() => Err(ApiError::bad_request(
            "this model does not accept images; send text only",
        )
        .param("images")),
        _ => Ok(()),
    }
}

fn tool_def(t: w::Tool) -> ToolDef {
    ToolDef {
        name: t.function.name,
        description: t.function.description,
        parameters: t.function.parameters.unwrap_or_else(|| json!({"type": "object", "properties": {}})),
    }
}

fn turn(m: w::Message) -> Result<ChatTurn, ApiError> {
    no_images(&m.images)?;
    if !matches!(m.role.as_str(), "system" | "user" | "assistant" | "tool") {
        return Err(ApiError::bad_request(format!(
            "invalid message role {:?}: use system, user, assistant or tool",
            m.role
        ))
        .param("messages"));
    }
    Ok(ChatTurn {
        role: m.role,
        content: m.content,
        tool_calls: m
            .tool_calls
            .unwrap_or_default()
            .into_iter()
            .map(|c| ToolCall { name: c.function.name, arguments: c.function.arguments })
            .collect(),
        tool_name: m.tool_name,
    })
}

fn stats(o: &Outcome, received: Instant) -> w::Stats {
    let total = received.elapsed();
    w::Stats {
        total_duration: exec::nanos(total),
        load_duration: exec::nanos(total.saturating_sub(o.prompt_eval_duration + o.eval_duration)),
        prompt_eval_count: o.prompt_tokens,
        prompt_eval_duration: exec::nanos(o.prompt_eval_duration),
        eval_count: o.eval_tokens,
        eval_duration: exec::nanos(o.eval_duration),
    }
}

fn reason(r: DoneReason) -> String {
    match r {
        DoneReason::Stop => "stop",
        DoneReason::Length => "length",
    }
    .into()
}

/// The answer when there is nothing to generate (Ollama's "load the model" request).
fn load_response(model: &str, chat: bool) -> Response {
    if chat {
        Json(w::ChatResponse {
            model: model.into(),
            created_at: rfc3339_now(),
            message: w::Message { role: "assistant".into(), ..Default::default() },
            done: true,
            done_reason: Some("load".into()),
            stats: None,
            logprobs: None,
        })
        .into_response()
    } else {
        Json(w::GenerateResponse {
            model: model.into(),
            created_at: rfc3339_now(),
            response: String::new(),
            thinking: None,
            done: true,
            done_reason: Some("load".into()),
            stats: None,
            logprobs: None,
        })
        .into_response()
    }
}

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
        messages.insert(0, ChatTurn { role: "system".into(), content: system.clone(), ..Default::default() });
    }
    let tools: Vec<ToolDef> = req.tools.unwrap_or_default().into_iter().map(tool_def).collect();
    for t in &tools {
        exec::check_schema(&t.parameters, cfg, "tools")?;
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
    let mut job = exec::job(
        cfg,
        received,
        PromptSpec::Chat { messages, tools: tools.clone() },
        constraint,
        sampling,
        num_predict,
        stop,
        num_ctx,
    );
    job.schema_in_prompt = exec::schema_in_prompt(req.schema_in_prompt.as_ref())?;
    job.whitespace = exec::whitespace(req.whitespace.as_ref())?;
    job.think = think;
    job.logprobs = logprobs(req.logprobs, req.top_logprobs)?;
    let asked = job.logprobs.is_some();
    let started = exec::start(&wk, job).await?;
    let model = req.model;
    let auto = mode == ToolMode::Auto;
    // The calls in the output (none for text).
    let calls = move |o: &Outcome| -> Option<Vec<w::ToolCall>> {
        let calls = if auto { tools::parse_calls(&o.text, &tools) } else { vec![] };
        let calls: Vec<w::ToolCall> = calls
            .into_iter()
            .map(|c| w::ToolCall { function: w::ToolCallFunction { name: c.name, arguments: c.arguments } })
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
        let o = exec::collect(started).await?;
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
            messages.push(ChatTurn { role: "system".into(), content: system, ..Default::default() });
        }
        messages.push(ChatTurn { role: "user".into(), content: req.prompt, ..Default::default() });
        PromptSpec::Chat { messages, tools: vec![] }
    };
    let constraint = format(req.format, cfg)?;
    let (sampling, num_predict, stop, num_ctx) = options(with_defaults(req.options, &defaults.parameters), cfg);
    let mut job = exec::job(cfg, received, prompt, constraint, sampling, num_predict, stop, num_ctx);
    job.schema_in_prompt = exec::schema_in_prompt(req.schema_in_prompt.as_ref())?;
    job.whitespace = exec::whitespace(req.whitespace.as_ref())?;
    job.think = think;
    job.logprobs = logprobs(req.logprobs, req.top_logprobs)?;
    let asked = job.logprobs.is_some();
    let started = exec::start(&wk, job).await?;
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
        let o = exec::collect(started).await?;
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

/// A streamed piece for a line of an NDJSON response.
enum StreamPiece {
    Text(String),
    Thinking(String),
}

/// An NDJSON response: one `piece` line per text event (with `detect_calls`, only once the
/// output's start shows it is text, see [`tools::detect`]; reasoning is streamed either way),
/// then the lines `last` makes of the outcome and the answer text not yet sent.
/// Logprobs (when the job asked) ride on the next line sent after they arrive: each line
/// carries its tokens', and `last` gets those not yet sent.
/// An error after the first line is sent as a final `{"error": "..."}` line. The producer
/// is a task that ends (dropping the job's receiver, which stops generation) when the
/// client goes away.
fn ndjson<P, L, A, B>(mut started: Started, detect_calls: bool, piece: P, last: L) -> Response
where
    P: Fn(StreamPiece, Option<Vec<w::Logprob>>) -> A + Send + 'static,
    L: FnOnce(&Outcome, &str, Option<Vec<w::Logprob>>) -> Vec<B> + Send + 'static,
    A: Serialize,
    B: Serialize,
{
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<bytes::Bytes, Infallible>>(64);
    tokio::spawn(async move {
        fn line(v: &dyn erased::Ser) -> Result<bytes::Bytes, Infallible> {
            let mut b = v.to_vec();
            b.push(b'\n');
            Ok(bytes::Bytes::from(b))
        }
        let mut detector = tools::detect::CallDetector::new();
        let mut pending: Vec<TokenLogprob> = Vec::new();
        let take = |pending: &mut Vec<TokenLogprob>| (!pending.is_empty()).then(|| wire_logprobs(&std::mem::take(pending)));
        loop {
            match started.next().await {
                Event::Logprobs(l) => pending.extend(l),
                Event::Text(t) => {
                    let t = if !detect_calls {
                        t
                    } else {
                        match detector.push(&t) {
                            tools::detect::Route::Text(t) => t,
                            // Calls are sent whole once read (in `last`).
                            tools::detect::Route::Hold | tools::detect::Route::Call(_) => continue,
                        }
                    };
                    let l = line(&piece(StreamPiece::Text(t), take(&mut pending)));
                    if tx.send(l).await.is_err() {
                        return;
                    }
                }
                Event::Thinking(t) => {
                    let l = line(&piece(StreamPiece::Thinking(t), take(&mut pending)));
                    if tx.send(l).await.is_err() {
                        return;
                    }
                }
                Event::Done(Ok(o)) => {
                    let unsent = if detect_calls { detector.unsent(&o.text) } else { "" };
                    let lines: Vec<_> = last(&o, unsent, take(&mut pending)).iter().map(|l| line(l)).collect();
                    for l in lines {
                        if tx.send(l).await.is_err() {
                            return;
                        }
                    }
                    return;
                }
                Event::Done(Err(e)) => {
                    let e = exec::backend_error(e).flavor(FL);
                    tracing::warn!("stream ended with an error: {}", e.message);
                    let l = line(&e.body());
                    let _ = tx.send(l).await;
                    return;
                }
            }
        }
    });
    let body = Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx));
    ([(header::CONTENT_TYPE, "application/x-ndjson")], body).into_response()
}

/// `logprobs` / `top_logprobs` of a request: `None` when not asked; `Some(n)` alternatives.
fn logprobs(logprobs: Option<bool>, top: Option<i64>) -> Result<Option<u8>, ApiError> {
    match (logprobs.unwrap_or(false), top) {
        (_, Some(n)) if !(0..=20).contains(&n) => {
            Err(ApiError::bad_request(format!("top_logprobs is {n}; it must be between 0 and 20")).param("top_logprobs"))
        }
        (false, Some(n)) if n > 0 => {
            Err(ApiError::bad_request("top_logprobs needs logprobs: true; set both").param("top_logprobs"))
        }
        (false, _) => Ok(None),
        (true, n) => Ok(Some(n.unwrap_or(0) as u8)),
    }
}

/// Token logprobs in Ollama's shape.
fn wire_logprobs(l: &[TokenLogprob]) -> Vec<w::Logprob> {
    l.iter()
        .map(|e| w::Logprob {
            token: e.text(),
            logprob: e.logprob,
            bytes: e.bytes.clone(),
            top_logprobs: e.top.iter().map(|t| w::TopLogprob { token: t.text(), logprob: t.logprob, bytes: t.bytes.clone() }).collect(),
        })
        .collect()
}

/// Object-safe serialization to bytes, so one closure serves every line type.
mod erased {
    pub trait Ser {
        fn to_vec(&self) -> Vec<u8>;
    }
    impl<T: serde::Serialize> Ser for T {
        fn to_vec(&self) -> Vec<u8> {
            serde_json::to_vec(self).unwrap_or_else(|e| format!("{{\"error\":\"serialization failed: {e}\"}}").into_bytes())
        }
    }
}
