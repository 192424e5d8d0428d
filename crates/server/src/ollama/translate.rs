//! Between Ollama's wire types and the backend's: options and a model's defaults to sampling,
//! `format` to a constraint, `think`, messages to turns, and an outcome's stats and reason.

use crate::backend::{ChatMessage, ConstraintRequest, DoneReason, Outcome, Sampling, Think, ToolCall, ToolDef};
use crate::error::ApiError;
use crate::jobs::{self};
use crate::stamps::rfc3339_now;
use crate::wire::ollama as w;
use crate::worker::ModelWorker;
use crate::ServerConfig;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use std::time::Instant;

/// Options to sampling settings, token budget, stop strings and context length.
pub(super) fn options(o: Option<w::Options>, cfg: &ServerConfig) -> (Sampling, u32, Vec<String>, Option<u32>) {
    let o = o.unwrap_or_default();
    let sampling = Sampling {
        temperature: o.temperature,
        top_k: o.top_k,
        top_p: o.top_p,
        min_p: o.min_p,
        seed: jobs::seed(o.seed),
        repeat_penalty: o.repeat_penalty,
        repeat_last_n: o.repeat_last_n,
        presence_penalty: o.presence_penalty,
        frequency_penalty: o.frequency_penalty,
    };
    (sampling, jobs::num_predict(o.num_predict, cfg), o.stop.map(w::StopField::into_vec).unwrap_or_default(), o.num_ctx)
}

/// `o` with every option it leaves unset taken from a model's own parameters (an alias's).
pub(super) fn with_defaults(o: Option<w::Options>, p: &formwork_models::Parameters) -> Option<w::Options> {
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
pub(super) fn format(f: Option<w::Format>, cfg: &ServerConfig) -> Result<ConstraintRequest, ApiError> {
    match f {
        None | Some(w::Format::Schema(Value::Null)) => Ok(ConstraintRequest::None),
        Some(w::Format::Named(s)) if s.is_empty() => Ok(ConstraintRequest::None),
        Some(w::Format::Named(s)) if s == "json" => Ok(ConstraintRequest::Json),
        Some(w::Format::Named(s)) => Err(ApiError::bad_request(format!(
            "invalid format {s:?}: use \"json\" or a JSON Schema object"
        ))
        .param("format")),
        Some(w::Format::Schema(v)) => jobs::schema_constraint(v, false, cfg, "format"),
    }
}

/// `think`: absent or `null` = the model's default, `false` = answer directly, `true` or an
/// effort (`"high"`, `"medium"`, `"low"`) = reason first (400 for a model without reasoning).
pub(super) fn think(think: &Option<Value>, wk: &ModelWorker) -> Result<Option<Think>, ApiError> {
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

pub(super) fn no_images(images: &Option<Vec<String>>) -> Result<(), ApiError> {
    match images {
        Some(v) if !v.is_empty() => Err(ApiError::bad_request(
            "this model does not accept images; send text only",
        )
        .param("images")),
        _ => Ok(()),
    }
}

pub(super) fn tool_def(t: w::Tool) -> ToolDef {
    ToolDef {
        name: t.function.name,
        description: t.function.description,
        parameters: t.function.parameters.unwrap_or_else(|| json!({"type": "object", "properties": {}})),
    }
}

pub(super) fn turn(m: w::Message) -> Result<ChatMessage, ApiError> {
    no_images(&m.images)?;
    if !matches!(m.role.as_str(), "system" | "user" | "assistant" | "tool") {
        return Err(ApiError::bad_request(format!(
            "invalid message role {:?}: use system, user, assistant or tool",
            m.role
        ))
        .param("messages"));
    }
    Ok(ChatMessage {
        role: m.role,
        content: m.content,
        thinking: None,
        tool_calls: m
            .tool_calls
            .unwrap_or_default()
            .into_iter()
            .map(|c| ToolCall::new(c.function.name, c.function.arguments))
            .collect(),
        tool_name: m.tool_name,
    })
}

pub(super) fn stats(o: &Outcome, received: Instant) -> w::Stats {
    let total = received.elapsed();
    w::Stats {
        total_duration: jobs::nanos(total),
        load_duration: jobs::nanos(total.saturating_sub(o.prompt_eval_duration + o.eval_duration)),
        prompt_eval_count: o.prompt_tokens,
        prompt_eval_duration: jobs::nanos(o.prompt_eval_duration),
        eval_count: o.eval_tokens,
        eval_duration: jobs::nanos(o.eval_duration),
    }
}

pub(super) fn reason(r: DoneReason) -> String {
    match r {
        DoneReason::Stop => "stop",
        DoneReason::Length => "length",
    }
    .into()
}

/// The answer when there is nothing to generate (Ollama's "load the model" request).
pub(super) fn load_response(model: &str, chat: bool) -> Response {
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
