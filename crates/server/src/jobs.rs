//! Running jobs from handlers: request options to a [`Job`], submit, wait, collect, and
//! backend errors to [`ApiError`]s.

use crate::backend::{BackendError, ConstraintRequest, Job, Outcome, PromptSpec, Sampling};
use crate::error::{ApiError, ErrorKind};
use crate::metrics::Metrics;
use crate::worker::{Event, ModelWorker, SubmitError};
use std::sync::atomic::Ordering;
use crate::ServerConfig;
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedReceiver;

/// The `Retry-After` (seconds) of a 503 for a full queue.
const QUEUE_FULL_RETRY_AFTER_SECS: u64 = 2;

/// Extra time a handler waits past a job's deadline for the worker's own timeout answer.
pub(crate) const DEADLINE_SLACK: Duration = Duration::from_secs(2);

/// A submitted job whose first event has arrived (and was not an error).
pub(crate) struct Started {
    pub rx: UnboundedReceiver<Event>,
    pub first: Option<Event>,
    pub deadline: Instant,
    /// Where its time to first token, latency and tokens are counted.
    metrics: Arc<Metrics>,
    queued_at: Instant,
    output_seen: bool,
}

impl Started {
    /// The next event; `Done(Err)` on timeout or a vanished worker.
    pub async fn next(&mut self) -> Event {
        if let Some(e) = self.first.take() {
            return e;
        }
        let e = match tokio::time::timeout_at((self.deadline + DEADLINE_SLACK).into(), self.rx.recv()).await {
            Ok(Some(e)) => e,
            Ok(None) => Event::Done(Err(BackendError::Internal("the model worker dropped the request".into()))),
            Err(_) => Event::Done(Err(BackendError::Timeout(Duration::ZERO))),
        };
        self.count(&e);
        e
    }

    /// Counts an event in the model's metrics.
    fn count(&mut self, e: &Event) {
        let m = &self.metrics;
        match e {
            Event::Text(_) | Event::Thinking(_) if !self.output_seen => {
                self.output_seen = true;
                m.ttft.observe(self.queued_at.elapsed());
            }
            Event::Text(_) | Event::Thinking(_) | Event::Logprobs(_) => {}
            Event::Done(r) => {
                let elapsed = self.queued_at.elapsed();
                if !self.output_seen {
                    self.output_seen = true;
                    m.ttft.observe(elapsed);
                }
                m.latency.observe(elapsed);
                match r {
                    Ok(o) => {
                        m.succeeded.fetch_add(1, Ordering::Relaxed);
                        m.prompt_tokens.fetch_add(u64::from(o.prompt_tokens), Ordering::Relaxed);
                        m.generated_tokens.fetch_add(u64::from(o.eval_tokens), Ordering::Relaxed);
                    }
                    Err(_) => {
                        m.failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
    }
}

/// Submits `job` and waits for its first event, so that errors found before any output
/// (invalid schema, prompt too long, timeout in the queue) get a proper status code.
pub(crate) async fn start(worker: &ModelWorker, job: Job) -> Result<Started, ApiError> {
    let deadline = job.deadline;
    let rx = worker.submit(job).map_err(submit_error)?;
    let mut s = Started { rx, first: None, deadline, metrics: worker.metrics().clone(), queued_at: Instant::now(), output_seen: false };
    match s.next().await {
        Event::Done(Err(e)) => Err(backend_error(e)),
        e => {
            s.first = Some(e);
            Ok(s)
        }
    }
}

/// A job the queue refused, as an API error (503; `Retry-After` when the queue is full).
pub(crate) fn submit_error(e: SubmitError) -> ApiError {
    let retry = matches!(e, SubmitError::QueueFull { .. });
    let a = ApiError::new(ErrorKind::Unavailable, e.to_string());
    if retry {
        a.retry_after(QUEUE_FULL_RETRY_AFTER_SECS)
    } else {
        a
    }
}

/// Waits for the end of a started job.
pub(crate) async fn collect(mut s: Started) -> Result<Outcome, ApiError> {
    loop {
        match s.next().await {
            Event::Text(_) | Event::Thinking(_) | Event::Logprobs(_) => {}
            Event::Done(r) => return r.map_err(backend_error),
        }
    }
}

/// A backend error as an API error.
pub(crate) fn backend_error(e: BackendError) -> ApiError {
    match e {
        BackendError::BadRequest { message, param } => {
            let mut a = ApiError::bad_request(message);
            a.param = param;
            a
        }
        BackendError::Timeout(_) => ApiError::new(ErrorKind::Timeout, e.to_string()),
        BackendError::Internal(m) => ApiError::internal(m),
    }
}

/// A schema from a request as a constraint, bounded by `max_schema_bytes`.
pub(crate) fn schema_constraint(
    schema: Value,
    strict: bool,
    cfg: &ServerConfig,
    param: &str,
) -> Result<ConstraintRequest, ApiError> {
    check_schema(&schema, cfg, param)?;
    Ok(ConstraintRequest::Schema { schema: Arc::new(schema), strict })
}

/// Checks that `schema` is a schema (object or boolean) within the size limit.
pub(crate) fn check_schema(schema: &Value, cfg: &ServerConfig, param: &str) -> Result<(), ApiError> {
    if !(schema.is_object() || schema.is_boolean()) {
        return Err(ApiError::bad_request(format!(
            "{param} must be a JSON Schema (an object or a boolean), got {}",
            kind_of(schema)
        ))
        .param(param));
    }
    let size = serde_json::to_vec(schema).map(|v| v.len()).unwrap_or(usize::MAX);
    if size > cfg.max_schema_bytes {
        return Err(ApiError::bad_request(format!(
            "{param}: the schema is {size} bytes; this server accepts schemas up to {} bytes (ServerConfig::max_schema_bytes)",
            cfg.max_schema_bytes
        ))
        .param(param));
    }
    Ok(())
}

/// A JSON value's kind in words.
pub(crate) fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The token budget for a requested limit: `None` or negative is the default/cap, larger
/// values are clamped to the cap.
pub(crate) fn num_predict(requested: Option<i64>, cfg: &ServerConfig) -> u32 {
    match requested {
        None => cfg.default_num_predict.min(cfg.max_num_predict),
        Some(n) if n < 0 => cfg.max_num_predict,
        Some(n) => (n.min(i64::from(u32::MAX)) as u32).min(cfg.max_num_predict),
    }
}

/// A seed from a request (`-1` or negative: none, i.e. random).
pub(crate) fn seed(s: Option<i64>) -> Option<u64> {
    s.and_then(|s| u64::try_from(s).ok())
}

/// Assembles a job.
pub(crate) fn job(
    cfg: &ServerConfig,
    received: Instant,
    prompt: PromptSpec,
    constraint: ConstraintRequest,
    sampling: Sampling,
    num_predict: u32,
    stop: Vec<String>,
    num_ctx: Option<u32>,
) -> Job {
    Job {
        prompt,
        constraint,
        sampling,
        num_predict,
        stop,
        num_ctx,
        deadline: received + cfg.max_wall_time,
        schema_in_prompt: None,
        think: None,
        logprobs: None,
        whitespace: Default::default(),
    }
}

/// The `whitespace` request field: absent or `null` = flexible; `"flexible"`, `"compact"`
/// or `"pretty"`.
pub(crate) fn whitespace(v: Option<&serde_json::Value>) -> Result<crate::backend::JsonLayout, ApiError> {
    use serde_json::Value;
    match v {
        None | Some(Value::Null) => Ok(Default::default()),
        Some(Value::String(s)) if crate::backend::JsonLayout::from_name(s).is_some() => Ok(crate::backend::JsonLayout::from_name(s).unwrap_or_default()),
        Some(other) => Err(ApiError::bad_request(format!("invalid whitespace {other}: use \"flexible\", \"compact\" or \"pretty\"")).param("whitespace")),
    }
}

/// The `schema_in_prompt` request field: absent, `null` or `false` = off; `true` or `"user"`
/// = appended to the last user message; `"system"` = in the system message.
pub(crate) fn schema_in_prompt(v: Option<&serde_json::Value>) -> Result<Option<crate::backend::SchemaPlacement>, ApiError> {
    use crate::backend::SchemaPlacement;
    use serde_json::Value;
    match v {
        None | Some(Value::Null) | Some(Value::Bool(false)) => Ok(None),
        Some(Value::Bool(true)) => Ok(Some(SchemaPlacement::User)),
        Some(Value::String(s)) if s == "user" => Ok(Some(SchemaPlacement::User)),
        Some(Value::String(s)) if s == "system" => Ok(Some(SchemaPlacement::System)),
        Some(other) => Err(ApiError::bad_request(format!(
            "invalid schema_in_prompt {other}: use true, false, \"user\" or \"system\""
        ))
        .param("schema_in_prompt")),
    }
}

/// Nanoseconds, saturating.
pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
