//! Helpers shared by the CLI's integration tests.

use std::path::PathBuf;
use std::sync::OnceLock;

/// The default model's GGUF, resolved once per test binary (pulled on first use); the tests
/// that run the real model need it, and fail saying so when it cannot be had.
pub fn model_path() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        formwork_models::resolve(formwork_models::DEFAULT_MODEL)
            .unwrap_or_else(|e| panic!("the default model is needed for these tests and could not be resolved: {e}"))
    })
    .clone()
}
