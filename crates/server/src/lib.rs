//! # formwork-server: Ollama- and OpenAI-compatible HTTP APIs
//!
//! Serves formwork's constrained generation to the official clients, unchanged: the Ollama
//! API (`/api/chat`, `/api/generate`, `/api/tags`, `/api/show`, `/api/version`, `/`) and
//! the OpenAI API (`/v1/chat/completions`, `/v1/responses` ([`responses`]), `/v1/completions`,
//! `/v1/models`); embeddings on both ([`embeddings`]: `/api/embed`, `/api/embeddings`,
//! `/v1/embeddings`); the model store ([`store`]: `/api/pull`, `/api/copy`, `/api/delete`,
//! `/api/create`, aliases usable at once); Ollama's System One questions
//! ([`systemone`]: `/v1/systemone`, option probabilities under a one-of constraint); and
//! `POST /api/repair` ([`repair`]), which recovers JSON from the output of other systems.
//!
//! ## Map
//! - [`app`] builds the axum [`Router`] from an [`AppState`]; tests drive it without a
//!   socket (`tower::ServiceExt::oneshot`), [`serve`] runs it on a listener with graceful
//!   shutdown.
//! - [`wire`]: the request/response types of both APIs (serde).
//! - [`ApiError`]: every failure, rendered as `{"error": "..."}` on `/api/*` and as
//!   `{"error": {"message", "type", "param", "code"}}` on `/v1/*`; [`ApiJson`] is the JSON
//!   extractor whose rejections are `ApiError`s (400 malformed, 413 too large).
//! - [`Backend`]: the seam to a model. Each model has a pool of worker threads, one per
//!   slot ([`ModelWorker`]), fed by one bounded FIFO queue: with the engine backend over a
//!   batched model the slots' decodes run together (continuous batching); a request past
//!   the queue's limit gets 503 with `Retry-After`; a dropped client stops its generation
//!   and frees its slot; a panic fails only its request.
//! - [`metrics`]: `GET /metrics`, Prometheus text (running, queued, slots, tokens, time to
//!   first token and latency histograms).
//! - [`ServerConfig`]: body size, schema size, token and wall-time limits.
//! - [`engine_backend`]: the real backend over `formwork_engine`, with the compiled-grammar
//!   LRU cache; [`capabilities`]: what a model can be asked for (tools); `testing` (feature):
//!   scripted fakes for tests.
//! - [`tools`]: the grammar tool calls are generated under (each tool's `parameters`, `$ref`s
//!   and all, inside one call envelope; several calls per turn), and telling text from calls
//!   while output streams.
//! - Every response has an `x-request-id` (the client's, else a fresh `req_…`); the access log
//!   has one line per request, a `warn` naming the reason for a 4xx.
//!
//! ## The loop a binary writes
//! ```text
//! let worker = ModelWorker::spawn(meta, Box::new(backend), load_time)?;
//! let state = AppState::new(ServerConfig::default(), vec![worker]);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:11434").await?;
//! formwork_server::serve(listener, state, formwork_server::shutdown_signal()).await?;
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod backend;
pub mod embeddings;
#[cfg(feature = "engine")]
pub mod capabilities;
mod config;
#[cfg(feature = "engine")]
pub mod engine_backend;
mod error;
mod jobs;
pub mod metrics;
pub mod ollama;
pub mod openai;
#[cfg(feature = "engine")]
pub mod repair;
pub mod responses;
#[cfg(feature = "engine")]
pub mod sql;
pub mod store;
pub mod systemone;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tools;
mod stamps;
pub mod wire;
pub mod worker;

pub use backend::{Backend, BackendError, ConstraintRequest, Job, JsonLayout, ModelMeta, Outcome, Piece, SchemaPlacement, Think};
pub use config::ServerConfig;
pub use error::{ApiError, ApiJson, Dialect, ErrorKind, Flavor, OllamaApi, OpenAiApi};
pub use worker::{ModelWorker, SubmitError};

use axum::extract::{DefaultBodyLimit, Request};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use std::any::Any;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;
use tower_http::catch_panic::CatchPanicLayer;

/// What every handler shares: the configuration and the served models.
#[derive(Clone, Debug)]
pub struct AppState(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    config: ServerConfig,
    models: Vec<ModelWorker>,
    responses: responses::store::Store,
}

impl AppState {
    /// A state serving `models` (the first is the default for `/v1/models` listings).
    pub fn new(config: ServerConfig, models: Vec<ModelWorker>) -> Self {
        let responses = responses::store::Store::new(config.max_stored_responses, config.max_stored_response_bytes);
        AppState(Arc::new(Inner { config, models, responses }))
    }

    /// The configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.0.config
    }

    /// The served models.
    pub fn models(&self) -> &[ModelWorker] {
        &self.0.models
    }

    /// The responses kept for `previous_response_id`.
    pub(crate) fn responses(&self) -> &responses::store::Store {
        &self.0.responses
    }

    /// Finds a model by the name a client sends: `smollm2`, `smollm2:latest`, or an alias of
    /// a served model (see [`AppState::model_and_defaults`]).
    pub fn model(&self, name: &str) -> Result<&ModelWorker, ApiError> {
        self.model_and_defaults(name).map(|(w, _)| w)
    }

    /// The served model called `name` (`smollm2`, `smollm2:latest`), if any.
    pub fn served(&self, name: &str) -> Option<&ModelWorker> {
        let base = name.strip_suffix(":latest").unwrap_or(name);
        self.0.models.iter().find(|m| m.meta().name == base || m.meta().name == name)
    }

    /// A served model by name, or an alias in the store over one (following aliases of
    /// aliases), with the alias's system prompt and parameters to use as defaults. A model
    /// in the store that is not served is a 404 saying to restart the server with it.
    pub fn model_and_defaults(&self, name: &str) -> Result<(&ModelWorker, formwork_models::Defaults), ApiError> {
        if name.trim().is_empty() {
            return Err(ApiError::bad_request("model is required; name one of the served models (GET /api/tags)").param("model"));
        }
        if let Some(w) = self.served(name) {
            return Ok((w, w.meta().defaults.clone()));
        }
        let served: Vec<String> = self.0.models.iter().map(|m| m.meta().name.clone()).collect();
        let Ok(cache) = self.store() else { return Err(ApiError::model_not_found(name, &served)) };
        let mut defaults = formwork_models::Defaults::default();
        let mut next = name.to_string();
        for _ in 0..formwork_models::alias::MAX_ALIAS_DEPTH {
            let Ok(Some(a)) = cache.alias(&next) else { break };
            defaults = defaults.or(&a.defaults);
            next = a.from;
            if let Some(w) = self.served(&next).or_else(|| self.served_from(&next)) {
                return Ok((w, defaults.or(&w.meta().defaults)));
            }
        }
        if let Ok(Some(m)) = cache.find(name) {
            let mut e = ApiError::new(
                ErrorKind::NotFound,
                format!(
                    "model '{name}' is on this server's machine ({}) but not loaded: this server serves {}; restart `formwork serve --model {name}` to serve it",
                    m.source,
                    served.join(", ")
                ),
            )
            .param("model");
            e.code = Some("model_not_found");
            return Err(e);
        }
        Err(ApiError::model_not_found(name, &served))
    }

    /// The served model loaded from the file at `path` (an alias made over a path).
    fn served_from(&self, path: &str) -> Option<&ModelWorker> {
        let path = std::path::Path::new(path);
        if !path.is_absolute() {
            return None;
        }
        let want = std::fs::canonicalize(path).ok()?;
        self.0.models.iter().find(|m| m.meta().path.as_ref().and_then(|p| std::fs::canonicalize(p).ok()).as_ref() == Some(&want))
    }

    /// The model store, names only (what clients may use); 400 when the server has none.
    pub fn store(&self) -> Result<formwork_models::Cache, ApiError> {
        self.trusted_store().map(formwork_models::Cache::names_only)
    }

    /// The model store as configured, paths allowed: for the server's own choices only.
    pub(crate) fn trusted_store(&self) -> Result<formwork_models::Cache, ApiError> {
        self.0.config.store.clone().ok_or_else(|| {
            ApiError::bad_request("this server has no model store (ServerConfig::store); `formwork serve` sets one up").flavor(Flavor::Ollama)
        })
    }
}

/// The router: both APIs, the body limit, panic catching, `x-request-id` on every response
/// and one log line per request (with the reason, for a 4xx).
pub fn app(state: AppState) -> Router {
    let ollama = Router::new()
        .route("/", get(ollama::root))
        .route("/api/chat", post(ollama::chat))
        .route("/api/generate", post(ollama::generate))
        .route("/api/tags", get(ollama::tags))
        .route("/api/ps", get(ollama::ps))
        .route("/api/show", post(ollama::show))
        .route("/api/pull", post(store::pull))
        .route("/api/copy", post(store::copy))
        .route("/api/delete", axum::routing::delete(store::delete))
        .route("/api/create", post(store::create))
        .route("/api/version", get(ollama::version))
        .route("/api/embed", post(embeddings::ollama_embed))
        .route("/api/embeddings", post(embeddings::ollama_embeddings))
        .route("/v1/systemone", post(systemone::systemone))
        .route("/metrics", get(metrics_text));
    #[cfg(feature = "engine")]
    let ollama = ollama.route("/api/repair", post(repair::repair)).route("/api/sql", post(sql::sql));
    let ollama = ollama.layer(CatchPanicLayer::custom(|p| panic_response(p, Flavor::Ollama)));
    let openai = Router::new()
        .route("/v1/chat/completions", post(openai::chat_completions))
        .route("/v1/completions", post(openai::completions))
        .route("/v1/embeddings", post(embeddings::openai_embeddings))
        .route("/v1/responses", post(responses::create))
        .route("/v1/responses/{id}", get(responses::retrieve).delete(responses::delete))
        .route("/v1/models", get(openai::models))
        .route("/v1/models/{model}", get(openai::model))
        .layer(CatchPanicLayer::custom(|p| panic_response(p, Flavor::OpenAi)));
    let limit = state.config().max_body_bytes;
    ollama
        .merge(openai)
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(limit))
        .layer(middleware::from_fn(move |req, next| refuse_oversized(limit, req, next)))
        .layer(middleware::from_fn(log_request))
        .with_state(state)
}

/// Bodies up to this size are read and discarded before a 413 is sent, so that a client still
/// sending its body gets the 413 instead of a reset connection; larger ones are cut off.
const DRAIN_LIMIT: usize = 64 << 20;

/// Answers 413 for a body whose declared length is over `limit`, after draining it.
async fn refuse_oversized(limit: usize, req: Request, next: Next) -> Response {
    let declared = req
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    let Some(len) = declared.filter(|&n| n > limit) else {
        return next.run(req).await;
    };
    let flavor = if req.uri().path().starts_with("/v1") { Flavor::OpenAi } else { Flavor::Ollama };
    if len <= DRAIN_LIMIT {
        use futures_util::StreamExt;
        let mut body = req.into_body().into_data_stream();
        while let Some(Ok(_)) = body.next().await {}
    }
    ApiError::new(
        ErrorKind::TooLarge,
        format!("request body is {len} bytes, over this server's limit of {limit} bytes (ServerConfig::max_body_bytes); send a smaller request"),
    )
    .flavor(flavor)
    .into_response()
}

/// `GET /metrics` (Prometheus text format).
async fn metrics_text(axum::extract::State(state): axum::extract::State<AppState>) -> Response {
    ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4")], metrics::render(&state.models().iter().map(ModelWorker::figures).collect::<Vec<_>>())).into_response()
}

async fn not_found(req: Request) -> Response {
    let flavor = if req.uri().path().starts_with("/v1") { Flavor::OpenAi } else { Flavor::Ollama };
    ApiError::new(ErrorKind::NotFound, format!("no route {} {}", req.method(), req.uri().path()))
        .flavor(flavor)
        .into_response()
}

fn panic_response(p: Box<dyn Any + Send + 'static>, flavor: Flavor) -> Response {
    let msg = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    tracing::error!("request handler panicked: {msg}");
    let mut r = ApiError::internal(format!("internal error while handling the request: {msg}")).flavor(flavor).into_response();
    *r.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
    r
}

/// The header that names a request: echoed when the client sent one, else made up.
const REQUEST_ID: &str = "x-request-id";

/// The id of a request: the client's `x-request-id` when it is a short printable one, else a
/// fresh `req_…`.
fn request_id(headers: &axum::http::HeaderMap) -> axum::http::HeaderValue {
    headers
        .get(REQUEST_ID)
        .filter(|v| !v.is_empty() && v.len() <= 200 && v.as_bytes().iter().all(|b| b.is_ascii_graphic()))
        .cloned()
        .unwrap_or_else(|| axum::http::HeaderValue::from_str(&stamps::new_id("req_")).expect("hex id is a header value"))
}

/// Sets `x-request-id` on the response and writes one access line per request: `info`, or
/// `warn` with the reason for a 4xx (the [`ApiError`] message, else the status's own words).
async fn log_request(req: Request, next: Next) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let id = request_id(req.headers());
    let start = Instant::now();
    let mut resp = next.run(req).await;
    let status = resp.status();
    let id_text = id.to_str().unwrap_or("").to_owned();
    resp.headers_mut().insert(REQUEST_ID, id);
    let elapsed = start.elapsed();
    if status.is_client_error() {
        let reason = match resp.extensions().get::<error::ErrorReason>() {
            Some(r) => r.0.clone(),
            None => status.canonical_reason().unwrap_or("client error").to_owned(),
        };
        tracing::warn!(target: "formwork_server::access", "{method} {path} {} {elapsed:.1?} {id_text}: {reason}", status.as_u16());
    } else {
        tracing::info!(target: "formwork_server::access", "{method} {path} {} {elapsed:.1?} {id_text}", status.as_u16());
    }
    resp
}

/// Serves `state` on `listener` until `shutdown` resolves, then finishes in-flight requests.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, app(state)).with_graceful_shutdown(shutdown).await
}

/// Resolves on ctrl-c or (on Unix) SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!("cannot listen for ctrl-c: {e}");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!("cannot listen for SIGTERM: {e}");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutting down: finishing in-flight requests");
}
