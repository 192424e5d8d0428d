//! `POST /api/repair`: recover JSON from the output of another system.
//!
//! Request: `{"text": "...", "schema": {...}?}`. The JSON in `text` is found (code fences,
//! prose around it) and its common faults fixed (trailing commas, single quotes, comments,
//! unquoted keys, Python literals, a cut-off end...) by `formwork_repair`; with
//! `schema`, it is validated too, and among several JSON values in the text the first that
//! validates is taken.
//!
//! Response (200): `{"json": VALUE|null, "valid": BOOL, "errors": [STRING], "fixes": [NAME]}`:
//! `json` is the recovered value (`null` when none could be recovered, with the reason in
//! `errors`); `valid` is true when a value was recovered and satisfies the schema (when one is
//! given); `fixes` are the stable names of the repairs made (`code_fence`, `prose_removed`,
//! `trailing_comma`, `single_quotes`, `comments`, `unquoted_keys`, `python_literals`,
//! `unterminated`, ...).
//!
//! Errors (400, Ollama shape `{"error": "..."}`): a malformed body, a missing `text`, a
//! `schema` that is not a valid JSON Schema or is over `ServerConfig::max_schema_bytes`, a
//! `text` over the repair limit (1 MiB).
//!
//! ```text
//! curl -s localhost:11434/api/repair -d '{"text": "Sure! ```json\n{\"a\": 1,}\n```"}'
//! {"json":{"a":1},"valid":true,"errors":[],"fixes":["code_fence","prose_removed","trailing_comma"]}
//! ```

use crate::error::{ApiError, ApiJson, OllamaApi};
use crate::AppState;
use axum::extract::State;
use axum::Json;
use formwork_repair::{repair_and_validate, repair_with, Checked, RepairError, RepairOptions};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The body of `POST /api/repair`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepairRequest {
    /// The text to recover JSON from.
    pub text: String,
    /// A JSON Schema to validate the result against.
    #[serde(default)]
    pub schema: Option<Value>,
}

/// The answer of `POST /api/repair`.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct RepairResponse {
    /// The recovered value (`null`: none).
    pub json: Value,
    /// Recovered, and valid against the schema when one was given.
    pub valid: bool,
    /// Validation errors, or why no JSON could be recovered.
    pub errors: Vec<String>,
    /// Names of the repairs made.
    pub fixes: Vec<String>,
}

/// `POST /api/repair`.
pub async fn repair(
    State(state): State<AppState>,
    ApiJson(req, _): ApiJson<RepairRequest, OllamaApi>,
) -> Result<Json<RepairResponse>, ApiError> {
    if let Some(s) = &req.schema {
        if !(s.is_object() || s.is_boolean()) {
            return Err(ApiError::bad_request("schema must be a JSON Schema (an object or a boolean)").param("schema"));
        }
        let max = state.config().max_schema_bytes;
        let len = s.to_string().len();
        if len > max {
            return Err(ApiError::bad_request(format!(
                "schema is {len} bytes, over this server's limit of {max} bytes (ServerConfig::max_schema_bytes)"
            ))
            .param("schema"));
        }
    }
    // Linear in the text, but up to a megabyte plus validation: off the async threads.
    let result = tokio::task::spawn_blocking(move || run(&req))
        .await
        .map_err(|e| ApiError::internal(format!("the repair task failed: {e}")))?;
    result.map(Json)
}

fn run(req: &RepairRequest) -> Result<RepairResponse, ApiError> {
    let opts = RepairOptions::default();
    let result = match &req.schema {
        Some(s) => repair_and_validate(&req.text, s, &opts),
        None => repair_with(&req.text, &opts).map(|repaired| Checked { repaired, errors: Vec::new() }),
    };
    match result {
        Ok(c) => Ok(RepairResponse {
            valid: c.is_valid(),
            fixes: c.repaired.fixes.iter().map(|f| f.name().to_string()).collect(),
            json: c.repaired.value,
            errors: c.errors,
        }),
        Err(e @ RepairError::InvalidSchema(_)) => Err(ApiError::bad_request(e.to_string()).param("schema")),
        Err(e @ RepairError::TooLarge { .. }) => Err(ApiError::bad_request(e.to_string()).param("text")),
        Err(e) => Ok(RepairResponse { json: Value::Null, valid: false, errors: vec![e.to_string()], fixes: Vec::new() }),
    }
}
