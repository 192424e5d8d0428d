//! [`ServerConfig`]: every bound the server puts on untrusted requests, with its default.

use std::time::Duration;

/// Limits and settings of one server. Every request-controlled quantity that costs memory or
/// time is bounded here; a request over a limit gets a 4xx naming the limit.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Largest request body in bytes (413 above it).
    pub max_body_bytes: usize,
    /// Largest JSON Schema (serialized) in bytes, for `format` / `response_format` / tool
    /// parameters (400 above it).
    pub max_schema_bytes: usize,
    /// Largest number of tokens one request may ask to generate; larger `num_predict` /
    /// `max_tokens` values are clamped to it.
    pub max_num_predict: u32,
    /// Tokens generated when a request names no limit (Ollama's "until done" is bounded by this).
    pub default_num_predict: u32,
    /// Most choices (`n`) in one OpenAI request.
    pub max_choices: u32,
    /// Wall-clock budget for one request, queueing included; generation stops when it is spent.
    pub max_wall_time: Duration,
    /// Bounds for grammar and schema compilation, passed to the constraint engine.
    pub grammar_limits: formwork_grammar::Limits,
    /// Number of compiled grammars each model keeps (LRU).
    pub grammar_cache_entries: usize,
    /// The version reported by `GET /api/version` (Ollama clients compare it).
    pub ollama_version: String,
    /// Most responses `/v1/responses` keeps for `previous_response_id` and
    /// `GET /v1/responses/{id}` (the oldest are forgotten first).
    pub max_stored_responses: usize,
    /// Most bytes (text and response objects, roughly) the stored responses hold together.
    pub max_stored_response_bytes: usize,
    /// Most inputs in one embedding request (OpenAI's limit too).
    pub max_embed_inputs: usize,
    /// Most bytes of input in one embedding request: text bytes, and 4 per token id.
    pub max_embed_bytes: usize,
    /// The databases `POST /api/sql` may query, by the name clients use (opened when the
    /// server starts; a client can only name one of these, never a path or a URL).
    #[cfg(feature = "engine")]
    pub databases: Vec<(String, std::sync::Arc<formwork_sql::SqlDatabase>)>,
    /// The model store `/api/pull`, `/api/copy`, `/api/delete` and `/api/create` change and
    /// `/api/tags` lists (formwork's cache and aliases; Ollama's store and the Hugging Face
    /// cache read-only). Clients name models only, never paths: handlers use it
    /// [`names_only`](formwork_models::Cache::names_only). `None`: those routes answer 400.
    pub store: Option<formwork_models::Cache>,
    /// The Ollama registries `/api/pull` may pull from (`host` or `host:port`), chosen by
    /// the operator: a client names a model, and the server connects only to these
    /// (default: `registry.ollama.ai`; empty: no registry pulls). `insecure` (plain HTTP)
    /// is honoured for these only.
    pub pull_registries: Vec<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_body_bytes: 2 << 20,
            max_schema_bytes: 256 << 10,
            max_num_predict: 4096,
            default_num_predict: 1024,
            max_choices: 8,
            max_wall_time: Duration::from_secs(300),
            grammar_limits: formwork_grammar::Limits::default(),
            grammar_cache_entries: 64,
            ollama_version: "0.12.0".to_string(),
            max_stored_responses: 1000,
            max_stored_response_bytes: 64 << 20,
            max_embed_inputs: 2048,
            max_embed_bytes: 1 << 20,
            #[cfg(feature = "engine")]
            databases: Vec::new(),
            store: None,
            pull_registries: vec![formwork_models::ollama::DEFAULT_REGISTRY.to_string()],
        }
    }
}
