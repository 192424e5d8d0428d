//! The process-wide llama.cpp backend and where its log goes.

use formwork_model::ModelError;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::{send_logs_to_tracing, LogOptions};
use std::sync::OnceLock;

/// The environment variable that, when set, lets llama.cpp's own log through (to `tracing`,
/// target `llama-cpp-2`; the binary's subscriber filters it, e.g.
/// `FORMWORK_LOG=llama-cpp-2=info`). Unset, llama.cpp is silent.
pub const LOG_ENV: &str = "FORMWORK_LOG";

/// The llama.cpp backend, initialized once per process (llama.cpp allows only one).
pub(crate) fn backend() -> Result<&'static LlamaBackend, ModelError> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            // Before init, so that even the backend's first messages are routed (or dropped).
            let enabled = std::env::var_os(LOG_ENV).is_some_and(|v| !v.is_empty());
            send_logs_to_tracing(LogOptions::default().with_logs_enabled(enabled));
            LlamaBackend::init().map_err(|e| format!("llama.cpp backend initialization failed: {e}"))
        })
        .as_ref()
        .map_err(|e| ModelError::Load(e.clone()))
}
