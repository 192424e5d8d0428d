//! The model side of Ollama's API: `/`, `/api/version`, `/api/tags`, `/api/ps`, `/api/show`.

use super::FL;
use crate::error::{ApiError, ApiJson, OllamaApi};
use crate::stamps::{digest_of, rfc3339_now};
use crate::wire::ollama as w;
use crate::worker::ModelWorker;
use crate::AppState;
use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

/// `GET /` and `HEAD /`.
pub async fn root() -> &'static str {
    "Ollama is running"
}

/// `GET /api/version`.
pub async fn version(State(state): State<AppState>) -> Json<Value> {
    Json(json!({ "version": state.config().ollama_version }))
}

pub(super) fn details(worker: &ModelWorker) -> w::ModelDetails {
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

pub(super) fn modified_at(worker: &ModelWorker) -> String {
    worker
        .meta()
        .path
        .as_ref()
        .and_then(|p| std::fs::metadata(p).ok())
        .and_then(|m| m.modified().ok())
        .map(crate::stamps::rfc3339)
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
pub(super) const NEVER_EXPIRES: &str = "2318-08-09T00:00:00Z";

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
pub(super) fn digest(m: &crate::backend::ModelMeta) -> String {
    digest_of(&format!("{}\0{:?}\0{}", m.name, m.path, m.size))
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
