//! Embeddings on both APIs: Ollama's `POST /api/embed` (batch) and legacy
//! `POST /api/embeddings`, and OpenAI's `POST /v1/embeddings`.
//!
//! ## The path of a request
//! 1. The handler reads `input` (a string, a list of strings; on OpenAI also token ids or
//!    lists of them) into [`EmbedInput`]s, refusing with a 400 that names the element at
//!    fault: an empty string, a wrong type, more than [`ServerConfig::max_embed_inputs`]
//!    inputs or more than [`ServerConfig::max_embed_bytes`] in all.
//! 2. A model without an embedder ([`Backend::embedder`](crate::Backend::embedder)) is refused
//!    at once (400, `param: model`).
//! 3. The [`EmbedJob`] waits in the model's queue like a generation and takes a slot: its
//!    worker thread runs `EmbedJob::run`, which tokenizes each input, truncates it to the model's
//!    embedding context (or refuses it: Ollama `truncate: false`, and always on OpenAI, whose
//!    service refuses over-long inputs), embeds it and, for `dimensions`, keeps the first
//!    dimensions and normalizes again. The embedder evaluates in its own context (for
//!    llama.cpp: a second context over the same weights), so running generations are not
//!    touched.
//!
//! ## Vectors
//! Every vector has unit L2 norm, on every endpoint (the legacy `/api/embeddings` included).
//! With llama.cpp the pooling is the model's own (GGUF `{arch}.pooling_type`), and mean
//! pooling for models that name none: decoders such as SmolLM2 embed too, as on Ollama, so
//! `/api/show` lists `embedding` for every llama.cpp model. Such vectors serve similarity
//! search less well than a model trained for embeddings.
//!
//! Ollama quirks kept: `/api/embed` with no input (or an empty list) answers an empty
//! `embeddings` list, and `/api/embeddings` with an empty prompt an empty `embedding` (clients
//! use both to load a model). OpenAI refuses empty input, as the service does.

use crate::backend::{BackendError, EmbedInput, EmbedJob, Embeddings};
use crate::error::{ApiError, ApiJson, Flavor, OllamaApi, OpenAiApi};
use crate::jobs::{self, kind_of, nanos, DEADLINE_SLACK};
use crate::wire::{ollama as wo, openai as wa};
use crate::worker::ModelWorker;
use crate::{AppState, ServerConfig};
use axum::extract::State;
use axum::Json;
use serde_json::Value;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// `POST /api/embed`.
pub async fn ollama_embed(
    State(state): State<AppState>,
    ApiJson(req, _): ApiJson<wo::EmbedRequest, OllamaApi>,
) -> Result<Json<wo::EmbedResponse>, ApiError> {
    let received = Instant::now();
    let inner = async {
        let wk = state.model(&req.model)?.clone();
        let inputs = match req.input {
            None | Some(Value::Null) => vec![],
            Some(v) => texts(v, state.config())?,
        };
        if inputs.is_empty() {
            return Ok(wo::EmbedResponse { model: req.model, embeddings: vec![], total_duration: 0, load_duration: 0, prompt_eval_count: 0 });
        }
        let dimensions = dimensions(req.dimensions)?;
        let job = EmbedJob { inputs, truncate: req.truncate.unwrap_or(true), dimensions, deadline: received + state.config().max_wall_time };
        let e = embed(&wk, job).await?;
        Ok(wo::EmbedResponse {
            model: req.model,
            embeddings: e.vectors,
            total_duration: nanos(received.elapsed()),
            load_duration: 0,
            prompt_eval_count: e.prompt_tokens,
        })
    };
    inner.await.map(Json).map_err(|e: ApiError| e.flavor(Flavor::Ollama))
}

/// `POST /api/embeddings` (legacy): one prompt, one vector.
pub async fn ollama_embeddings(
    State(state): State<AppState>,
    ApiJson(req, _): ApiJson<wo::EmbeddingsRequest, OllamaApi>,
) -> Result<Json<wo::EmbeddingsResponse>, ApiError> {
    let received = Instant::now();
    let inner = async {
        let wk = state.model(&req.model)?.clone();
        let prompt = req.prompt.unwrap_or_default();
        if prompt.is_empty() {
            return Ok(wo::EmbeddingsResponse { embedding: vec![] });
        }
        let inputs = texts(Value::String(prompt), state.config())?;
        let job = EmbedJob { inputs, truncate: true, dimensions: None, deadline: received + state.config().max_wall_time };
        let mut e = embed(&wk, job).await?;
        Ok(wo::EmbeddingsResponse { embedding: e.vectors.pop().unwrap_or_default() })
    };
    inner.await.map(Json).map_err(|e: ApiError| e.flavor(Flavor::Ollama))
}

/// `POST /v1/embeddings`.
pub async fn openai_embeddings(
    State(state): State<AppState>,
    ApiJson(req, _): ApiJson<wa::EmbeddingsRequest, OpenAiApi>,
) -> Result<Json<wa::EmbeddingList>, ApiError> {
    let received = Instant::now();
    let inner = async {
        let wk = state.model(&req.model)?.clone();
        let base64 = match req.encoding_format.as_deref() {
            None | Some("float") => false,
            Some("base64") => true,
            Some(other) => {
                return Err(ApiError::bad_request(format!("encoding_format {other:?} is not supported; use \"float\" or \"base64\""))
                    .param("encoding_format"))
            }
        };
        let inputs = match req.input {
            None | Some(Value::Null) => return Err(ApiError::bad_request("input is required: a string, a list of strings, a list of token ids or a list of such lists").param("input")),
            Some(v) => openai_inputs(v, state.config())?,
        };
        let dimensions = dimensions(req.dimensions)?;
        let job = EmbedJob { inputs, truncate: false, dimensions, deadline: received + state.config().max_wall_time };
        let e = embed(&wk, job).await?;
        let data = e
            .vectors
            .into_iter()
            .enumerate()
            .map(|(index, v)| wa::EmbeddingObject {
                object: "embedding".into(),
                index,
                embedding: if base64 { wa::EmbeddingVector::Base64(base64_f32(&v)) } else { wa::EmbeddingVector::Float(v) },
            })
            .collect();
        Ok(wa::EmbeddingList {
            object: "list".into(),
            data,
            model: wk.meta().name.clone(),
            usage: wa::EmbeddingUsage { prompt_tokens: e.prompt_tokens, total_tokens: e.prompt_tokens },
        })
    };
    inner.await.map(Json).map_err(|e: ApiError| e.flavor(Flavor::OpenAi))
}

/// Queues `job` on the model and waits for it, counting it in the model's metrics.
async fn embed(wk: &ModelWorker, job: EmbedJob) -> Result<Embeddings, ApiError> {
    if !wk.can_embed() {
        return Err(jobs::backend_error(BackendError::cannot_embed(&wk.meta().name)));
    }
    let deadline = job.deadline;
    let queued_at = Instant::now();
    let rx = wk.submit_embed(job).map_err(jobs::submit_error)?;
    let result = match tokio::time::timeout_at((deadline + DEADLINE_SLACK).into(), rx).await {
        Ok(Ok(r)) => r,
        Ok(Err(_)) => Err(BackendError::Internal("the model worker dropped the request".into())),
        Err(_) => Err(BackendError::Timeout(queued_at.elapsed())),
    };
    let m = wk.metrics();
    m.latency.observe(queued_at.elapsed());
    match &result {
        Ok(e) => {
            m.succeeded.fetch_add(1, Ordering::Relaxed);
            m.prompt_tokens.fetch_add(u64::from(e.prompt_tokens), Ordering::Relaxed);
        }
        Err(_) => {
            m.failed.fetch_add(1, Ordering::Relaxed);
        }
    }
    result.map_err(jobs::backend_error)
}

/// Checks `dimensions` (positive when given; the upper bound is the model's, checked in `run`).
fn dimensions(d: Option<i64>) -> Result<Option<usize>, ApiError> {
    match d {
        None => Ok(None),
        Some(d) if d >= 1 => Ok(Some(usize::try_from(d).unwrap_or(usize::MAX))),
        Some(d) => Err(ApiError::bad_request(format!("dimensions must be at least 1, got {d}")).param("dimensions")),
    }
}

/// Counts inputs and bytes against the server's limits.
struct Budget<'a> {
    cfg: &'a ServerConfig,
    bytes: usize,
}

impl Budget<'_> {
    fn count(&mut self, n_inputs: usize) -> Result<(), ApiError> {
        if n_inputs > self.cfg.max_embed_inputs {
            return Err(ApiError::bad_request(format!(
                "input has {n_inputs} entries; this server embeds at most {} per request (ServerConfig::max_embed_inputs); send several requests",
                self.cfg.max_embed_inputs
            ))
            .param("input"));
        }
        Ok(())
    }

    fn add(&mut self, bytes: usize) -> Result<(), ApiError> {
        self.bytes = self.bytes.saturating_add(bytes);
        if self.bytes > self.cfg.max_embed_bytes {
            return Err(ApiError::bad_request(format!(
                "input is over {} bytes in all, this server's limit per embedding request (ServerConfig::max_embed_bytes; 4 bytes per token id); send several requests",
                self.cfg.max_embed_bytes
            ))
            .param("input"));
        }
        Ok(())
    }
}

/// Ollama's `input`: a string or a list of strings; an empty list is no input.
fn texts(v: Value, cfg: &ServerConfig) -> Result<Vec<EmbedInput>, ApiError> {
    let mut budget = Budget { cfg, bytes: 0 };
    let items = match v {
        Value::String(s) => vec![Value::String(s)],
        Value::Array(items) => items,
        other => {
            return Err(ApiError::bad_request(format!("input must be a string or a list of strings, got {}", kind_of(&other))).param("input"))
        }
    };
    budget.count(items.len())?;
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| match item {
            Value::String(s) if s.is_empty() => Err(empty(i)),
            Value::String(s) => budget.add(s.len()).map(|()| EmbedInput::Text(s)),
            other => Err(ApiError::bad_request(format!("input[{i}] must be a string, got {}", kind_of(&other))).param("input")),
        })
        .collect()
}

/// OpenAI's `input`: a string, a list of strings, a list of token ids or a list of lists of
/// token ids; never empty.
fn openai_inputs(v: Value, cfg: &ServerConfig) -> Result<Vec<EmbedInput>, ApiError> {
    let mut budget = Budget { cfg, bytes: 0 };
    let bad = |what: String| ApiError::bad_request(format!("{what}; input must be a string, a list of strings, a list of token ids or a list of such lists")).param("input");
    let token = |i: Option<usize>, j: usize, v: &Value| -> Result<u32, ApiError> {
        v.as_u64().and_then(|t| u32::try_from(t).ok()).ok_or_else(|| {
            let at = i.map_or(format!("input[{j}]"), |i| format!("input[{i}][{j}]"));
            bad(format!("{at} must be a token id (a non-negative integer), got {v}"))
        })
    };
    match v {
        Value::String(s) if s.is_empty() => Err(ApiError::bad_request("input is an empty string; send text to embed").param("input")),
        Value::String(s) => {
            budget.add(s.len())?;
            Ok(vec![EmbedInput::Text(s)])
        }
        Value::Array(items) if items.is_empty() => Err(ApiError::bad_request("input is an empty list; send at least one input").param("input")),
        // A list of token ids is one input.
        Value::Array(items) if items[0].is_number() => {
            budget.add(items.len().saturating_mul(4))?;
            let tokens = items.iter().enumerate().map(|(j, t)| token(None, j, t)).collect::<Result<Vec<_>, _>>()?;
            Ok(vec![EmbedInput::Tokens(tokens)])
        }
        Value::Array(items) => {
            budget.count(items.len())?;
            items
                .into_iter()
                .enumerate()
                .map(|(i, item)| match item {
                    Value::String(s) if s.is_empty() => Err(empty(i)),
                    Value::String(s) => budget.add(s.len()).map(|()| EmbedInput::Text(s)),
                    Value::Array(ts) if ts.is_empty() => Err(empty(i)),
                    Value::Array(ts) => {
                        budget.add(ts.len().saturating_mul(4))?;
                        ts.iter().enumerate().map(|(j, t)| token(Some(i), j, t)).collect::<Result<Vec<_>, _>>().map(EmbedInput::Tokens)
                    }
                    other => Err(bad(format!("input[{i}] is {}", kind_of(&other)))),
                })
                .collect()
        }
        other => Err(bad(format!("input is {}", kind_of(&other)))),
    }
}

fn empty(i: usize) -> ApiError {
    ApiError::bad_request(format!("input[{i}] is empty; every input needs some text")).param("input")
}

/// `v`'s little-endian bytes in standard base64 (with padding), as OpenAI's
/// `encoding_format: "base64"` sends them.
pub fn base64_f32(v: &[f32]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for k in 0..4 {
            if k <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * k)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_known_encodings() {
        assert_eq!(base64_f32(&[]), "");
        // 1.0f32 = 00 00 80 3f (little-endian).
        assert_eq!(base64_f32(&[1.0]), "AACAPw==");
        assert_eq!(base64_f32(&[1.0, -2.0]), "AACAPwAAAMA=");
        assert_eq!(base64_f32(&[0.0, 0.0, 0.0]), "AAAAAAAAAAAAAAAA");
    }
}
