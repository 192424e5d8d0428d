//! `POST /api/sql`: a question to a query over a database configured when the server
//! started (`formwork serve --database NAME=PATH|URL`), constrained by that database's
//! schema (`formwork-sql`), optionally run.
//!
//! Request: `{"model", "database": NAME, "question", "execute": false, "max_rows": 100,
//! "retries": 2}`. Response (200): `{"model", "database", "sql", "columns", "rows",
//! "truncated", "attempts", "error"}` — `columns`/`rows`/`truncated` are `null` unless
//! `execute`; with `execute`, a query the database refuses is shown to the model with the
//! database's message and generated again, up to `retries` more times; `error` is the last
//! database error when every attempt failed (then `rows` is `null`), else `null`.
//!
//! The same constraint is offered by `POST /v1/chat/completions` as an extension of
//! `response_format`: `{"type": "sql", "database": NAME}` (the schema is put first in the
//! conversation as a system message; the answer is the query, not run).
//!
//! A client names a database only by its configured name: an unknown name is a 400 listing
//! the configured ones, and no request can make the server open a path or a connection of
//! its choosing. Queries run read-only with a row cap (`max_rows` ≤ 1000) and a 10 s time
//! limit.
//!
//! ```text
//! curl -s localhost:11434/api/sql -d '{"model": "smollm2", "database": "shop",
//!   "question": "How many orders are paid?", "execute": true}'
//! ```

use crate::backend::{ChatMessage, ConstraintRequest, CustomConstraint, PromptSpec, Sampling};
use crate::error::{ApiError, ApiJson, OllamaApi};
use crate::{jobs, AppState};
use axum::extract::State;
use axum::Json;
use formwork_sql::{ExecOptions, SqlDatabase};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Most rows a request may ask for.
pub const MAX_ROWS: usize = 1000;
/// Most retries a request may ask for.
pub const MAX_RETRIES: usize = 5;
/// Longest question, in bytes.
pub const MAX_QUESTION_BYTES: usize = 8 << 10;
/// Most tokens of one query.
const QUERY_TOKENS: u32 = 256;
/// Time limit of one query on the database.
const QUERY_TIMEOUT: Duration = Duration::from_secs(10);

/// The body of `POST /api/sql`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SqlRequest {
    /// The model.
    pub model: String,
    /// A configured database's name.
    pub database: String,
    /// The question, in words.
    pub question: String,
    /// Run the query and return its rows.
    #[serde(default)]
    pub execute: bool,
    /// Most rows returned (default 100, at most [`MAX_ROWS`]).
    #[serde(default)]
    pub max_rows: Option<usize>,
    /// With `execute`: more attempts after a database error (default 2, at most
    /// [`MAX_RETRIES`]).
    #[serde(default)]
    pub retries: Option<usize>,
}

/// The answer of `POST /api/sql`.
#[derive(Debug, Serialize)]
pub struct SqlResponse {
    /// The model.
    pub model: String,
    /// The database's name.
    pub database: String,
    /// The last query generated.
    pub sql: String,
    /// Column names (with `execute` and a successful run).
    pub columns: Option<Vec<String>>,
    /// Rows, each value as JSON (with `execute` and a successful run).
    pub rows: Option<Vec<Vec<Value>>>,
    /// More rows existed than `max_rows` (with `execute` and a successful run).
    pub truncated: Option<bool>,
    /// Queries generated.
    pub attempts: usize,
    /// The database's last error, when every attempt failed.
    pub error: Option<String>,
}

/// The configured database called `name`, or a 400 listing the configured ones.
pub(crate) fn configured<'a>(cfg: &'a crate::ServerConfig, name: &str) -> Result<&'a Arc<SqlDatabase>, ApiError> {
    let dbs = &cfg.databases;
    dbs.iter().find(|(n, _)| n == name).map(|(_, d)| d).ok_or_else(|| {
        let names: Vec<&str> = dbs.iter().map(|(n, _)| n.as_str()).collect();
        let msg = if names.is_empty() {
            format!("unknown database `{name}`: this server has none (start it with --database NAME=PATH|URL)")
        } else {
            format!("unknown database `{name}`; this server has: {}", names.join(", "))
        };
        ApiError::bad_request(msg).param("database")
    })
}

/// `POST /api/sql` (see the module docs).
pub async fn sql(State(state): State<AppState>, ApiJson(req, _): ApiJson<SqlRequest, OllamaApi>) -> Result<Json<SqlResponse>, ApiError> {
    let received = Instant::now();
    let db = configured(state.config(), &req.database)?.clone();
    let worker = state.model(&req.model)?.clone();
    if req.question.trim().is_empty() {
        return Err(ApiError::bad_request("question is required").param("question"));
    }
    if req.question.len() > MAX_QUESTION_BYTES {
        return Err(ApiError::bad_request(format!("question is {} bytes, over the limit of {MAX_QUESTION_BYTES}", req.question.len())).param("question"));
    }
    let max_rows = req.max_rows.unwrap_or(100);
    if max_rows == 0 || max_rows > MAX_ROWS {
        return Err(ApiError::bad_request(format!("max_rows must be between 1 and {MAX_ROWS}")).param("max_rows"));
    }
    let retries = req.retries.unwrap_or(2);
    if retries > MAX_RETRIES {
        return Err(ApiError::bad_request(format!("retries must be at most {MAX_RETRIES}")).param("retries"));
    }
    let cfg = state.config();
    let formwork_engine::Prompt::Chat { messages, .. } = db.prompt(&req.question) else {
        unreachable!("SqlDatabase::prompt is a chat")
    };
    let mut turns = messages;
    let constraint = ConstraintRequest::Custom(CustomConstraint(db.format.clone()));
    let greedy = Sampling { temperature: Some(0.0), ..Default::default() };
    let mut attempts = 0;
    loop {
        attempts += 1;
        let prompt = PromptSpec::Chat { messages: turns.clone(), tools: Vec::new() };
        let job = jobs::job(cfg, received, prompt, constraint.clone(), greedy.clone(), QUERY_TOKENS, Vec::new(), None);
        let outcome = jobs::collect(jobs::start(&worker, job).await?).await?;
        let sql = outcome.text;
        let mut answer = SqlResponse {
            model: req.model.clone(),
            database: req.database.clone(),
            sql: sql.clone(),
            columns: None,
            rows: None,
            truncated: None,
            attempts,
            error: None,
        };
        if !req.execute {
            return Ok(Json(answer));
        }
        let runner = db.clone();
        let query = sql.clone();
        let opts = ExecOptions { max_rows, timeout: QUERY_TIMEOUT };
        let result = tokio::task::spawn_blocking(move || runner.db.execute(&query, opts.max_rows, opts.timeout))
            .await
            .map_err(|e| ApiError::internal(format!("the query's thread failed: {e}")))?;
        match result {
            Ok(rows) => {
                answer.columns = Some(rows.columns);
                answer.rows = Some(rows.rows);
                answer.truncated = Some(rows.truncated);
                return Ok(Json(answer));
            }
            Err(e) if attempts <= retries => {
                turns.push(ChatMessage { role: "assistant".into(), content: sql, ..Default::default() });
                turns.push(ChatMessage {
                    role: "user".into(),
                    content: format!("The database refused that query: {e}. Write a corrected query."),
                    ..Default::default()
                });
            }
            Err(e) => {
                answer.error = Some(e.to_string());
                return Ok(Json(answer));
            }
        }
    }
}
