//! `formwork bench serve`: many concurrent clients against an OpenAI-compatible server.
//!
//! Drives `formwork serve`, llama.cpp's `llama-server` (`./scripts/peer-llama-server` builds
//! one) or any server with `POST /v1/chat/completions`, at several concurrency levels one after
//! another (`--clients 1,4,16`), each with and without a JSON Schema (`--mode both`).
//!
//! **The load.** At a level of C clients, C tasks start together; each sends `--requests` chat
//! requests one after another, the next as soon as the previous answer has ended. Request `r`
//! of client `c` is request number `i = c * requests + r` of one deterministic list
//! ([`prompt`]: "Invent a person: a {job} who lives in {place}...", seed `--seed + i`), so
//! every server gets the same requests, and a level of 4 clients repeats the first requests
//! of a level of 1. In `schema` mode the request carries [`person_schema`] (four required
//! keys, no others) as OpenAI `response_format: {type: json_schema, json_schema: {name,
//! schema, strict: true}}`, which llama.cpp's server also understands; in `free` mode it
//! carries nothing. Every request streams (`stream: true`, server-sent events) and asks for
//! `stream_options: {include_usage: true}`. Before the levels, one warm-up request per mode
//! (not counted) checks the URL and model, loads a lazily loaded model and lets a server
//! compile and cache the schema.
//!
//! **The figures**, per level and mode:
//! - *gen tok/s*: the completion tokens of all answered requests divided by the wall time of
//!   the level (first request sent to last answer ended): the throughput all clients see
//!   together. Tokens come from the stream's final `usage`; a server that sends none is
//!   counted by content chunks instead (one per token on formwork and llama.cpp), and the
//!   output says so.
//! - *req/s*: answered requests over the same wall time.
//! - *TTFT* p50/p99: from sending a request to the first chunk with content (or reasoning)
//!   text; *latency* p50/p99: to the end of the stream. Nearest-rank percentiles
//!   ([`percentile`]) over the answered requests.
//! - *errors*: requests that got no complete answer: a transport failure, an HTTP error
//!   status, an error event in the stream, a stream that ended early or ran past `--timeout`.
//!   The first few distinct messages are listed under the table.
//! - *invalid* (schema mode): answers that are not JSON or do not validate against the
//!   schema ([`formwork_schema::validate`]); *cut off*: answers that ended with
//!   `finish_reason: length` (in both modes; a cut-off answer in schema mode is usually
//!   invalid too, unless the server closed the JSON in time).
//!
//! The table goes to stdout (markdown), progress to stderr; `--json` prints the same figures
//! as one JSON object instead of the table.
//!
//! The client side is one tokio thread with hyper's plain HTTP/1.1 client (no TLS, one
//! connection per request), so on a small machine the benchmark itself takes little CPU from
//! the server it measures.

use std::error::Error as StdError;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::header::{ACCEPT, CONTENT_TYPE};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use serde_json::{json, Value};

/// The HTTP client: HTTP/1.1, request bodies sent whole.
type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// A new connection for every request, none kept idle: llama.cpp's server (build 11434) can
/// close a connection after a streamed answer although it announced keep-alive, and a pooled
/// client then lost its next request to that race ("connection closed before message
/// completed"). A connection on the same machine costs well under a millisecond, nothing
/// beside a generated answer.
fn http_client() -> HttpClient {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    connector.set_connect_timeout(Some(Duration::from_secs(10)));
    Client::builder(hyper_util::rt::TokioExecutor::new()).pool_max_idle_per_host(0).build(connector)
}

/// Flags of `bench serve`.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// The server: its base URL (`http://HOST:PORT`, or with `/v1`).
    #[arg(long, default_value = "http://127.0.0.1:11434")]
    pub url: String,
    /// Concurrency levels to run one after another, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16")]
    pub clients: Vec<usize>,
    /// Requests each client sends, one after another.
    #[arg(long, default_value_t = 3)]
    pub requests: usize,
    /// `max_tokens` of every request.
    #[arg(long, default_value_t = 160)]
    pub max_tokens: u32,
    /// With the JSON Schema (`schema`), without (`free`), or each level in both modes.
    #[arg(long, value_enum, default_value_t = ModeArg::Both)]
    pub mode: ModeArg,
    /// Only with the schema (short for `--mode schema`).
    #[arg(long, conflicts_with_all = ["mode", "no_schema"])]
    pub schema: bool,
    /// Only without a schema (short for `--mode free`).
    #[arg(long, conflicts_with = "mode")]
    pub no_schema: bool,
    /// The `model` field of the requests (llama.cpp's server ignores it).
    #[arg(long, default_value = "smollm2")]
    pub model: String,
    /// Sampling temperature.
    #[arg(long, default_value_t = 0.7)]
    pub temperature: f64,
    /// Seed of request 0; request `i` gets seed + i.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Seconds one request may take before it counts as an error.
    #[arg(long, default_value_t = 600)]
    pub timeout: u64,
    /// The server's name in the table (default: the URL).
    #[arg(long)]
    pub label: Option<String>,
    /// Print the figures as one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// `--mode`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModeArg {
    /// Every request carries the JSON Schema.
    Schema,
    /// No request carries a schema.
    Free,
    /// Each level twice: with the schema, then without.
    Both,
}

/// One of the two request kinds of a level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Schema,
    Free,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Schema => "schema",
            Mode::Free => "free",
        }
    }
}

/// The flags resolved and checked.
struct Settings {
    /// The URL as given, for messages.
    url: String,
    /// `.../v1/chat/completions`.
    endpoint: hyper::Uri,
    label: String,
    levels: Vec<usize>,
    modes: Vec<Mode>,
    requests: usize,
    max_tokens: u32,
    model: String,
    temperature: f64,
    seed: u64,
    timeout: Duration,
    json: bool,
}

impl Settings {
    fn new(a: ServeArgs) -> Result<Settings> {
        if a.clients.is_empty() || a.clients.contains(&0) {
            bail!("--clients needs one or more concurrency levels of at least 1, e.g. --clients 1,4,16");
        }
        if a.requests == 0 {
            bail!("--requests must be at least 1");
        }
        if a.max_tokens == 0 {
            bail!("--max-tokens must be at least 1");
        }
        let mode = if a.schema {
            ModeArg::Schema
        } else if a.no_schema {
            ModeArg::Free
        } else {
            a.mode
        };
        let modes = match mode {
            ModeArg::Schema => vec![Mode::Schema],
            ModeArg::Free => vec![Mode::Free],
            ModeArg::Both => vec![Mode::Schema, Mode::Free],
        };
        Ok(Settings {
            endpoint: endpoint(&a.url)?,
            label: a.label.unwrap_or_else(|| a.url.clone()),
            url: a.url,
            levels: a.clients,
            modes,
            requests: a.requests,
            max_tokens: a.max_tokens,
            model: a.model,
            temperature: a.temperature,
            seed: a.seed,
            timeout: Duration::from_secs(a.timeout.max(1)),
            json: a.json,
        })
    }
}

/// The chat-completions endpoint of a base URL: `http://h:p`, `http://h:p/` and
/// `http://h:p/v1` all give `http://h:p/v1/chat/completions`.
fn endpoint(url: &str) -> Result<hyper::Uri> {
    let e = endpoint_text(url)?;
    e.parse().with_context(|| format!("--url {url:?} is not a valid URL"))
}

fn endpoint_text(url: &str) -> Result<String> {
    let base = url.trim().trim_end_matches('/');
    if !base.starts_with("http://") && !base.starts_with("https://") {
        bail!("--url {url:?} is not an http:// URL (e.g. http://127.0.0.1:11434)");
    }
    if base.starts_with("https://") {
        bail!("--url {url:?}: this benchmark speaks plain HTTP only (no TLS); use the server's http:// address");
    }
    if base.ends_with("/chat/completions") {
        return Ok(base.to_string());
    }
    let base = base.strip_suffix("/v1").unwrap_or(base);
    Ok(format!("{base}/v1/chat/completions"))
}

// ---------------------------------------------------------------------------------------
// The requests.

const JOBS: [&str; 16] = [
    "baker",
    "nurse",
    "pilot",
    "teacher",
    "plumber",
    "chemist",
    "librarian",
    "farmer",
    "architect",
    "journalist",
    "firefighter",
    "dentist",
    "gardener",
    "violinist",
    "carpenter",
    "translator",
];
const PLACES: [&str; 4] = ["a small town", "a big city", "the mountains", "a village by the sea"];

/// The user message of request `i` (64 different ones, then they repeat).
fn prompt(i: usize) -> String {
    let job = JOBS[i % JOBS.len()];
    let place = PLACES[(i / JOBS.len()) % PLACES.len()];
    format!("Invent a person: a {job} who lives in {place}. Give their name, age, city and email as a JSON object.")
}

/// The schema of `schema` mode: a person with four required keys and no others.
fn person_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer"},
            "city": {"type": "string"},
            "email": {"type": "string"}
        },
        "required": ["name", "age", "city", "email"],
        "additionalProperties": false
    })
}

/// The body of request `i` in `mode`.
fn request_body(s: &Settings, mode: Mode, i: usize, max_tokens: u32) -> Value {
    let mut body = json!({
        "model": s.model,
        "messages": [{"role": "user", "content": prompt(i)}],
        "max_tokens": max_tokens,
        "temperature": s.temperature,
        "seed": s.seed.wrapping_add(i as u64),
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    if mode == Mode::Schema {
        body["response_format"] = json!({
            "type": "json_schema",
            "json_schema": {"name": "person", "schema": person_schema(), "strict": true}
        });
    }
    body
}

// ---------------------------------------------------------------------------------------
// One request: the stream and what came out of it.

/// Splits a server-sent-event stream into the `data` of its events, whatever the chunking.
///
/// An event ends at a blank line (`\n\n` or `\r\n\r\n`); its `data:` lines (one optional
/// space after the colon) are joined with `\n`; comments (`:...`) and other fields are ignored.
#[derive(Default)]
struct SseParser {
    buf: Vec<u8>,
}

impl SseParser {
    /// Feeds bytes; returns the `data` of each event they complete.
    fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some((end, sep)) = event_end(&self.buf) {
            let event: Vec<u8> = self.buf.drain(..end + sep).take(end).collect();
            out.extend(event_data(&event));
        }
        out
    }

    /// The end of the stream: an event left without its blank line, if any.
    fn finish(&mut self) -> Option<String> {
        let rest = std::mem::take(&mut self.buf);
        event_data(&rest)
    }
}

/// Where the first event in `buf` ends, and the length of the blank line that ends it.
fn event_end(buf: &[u8]) -> Option<(usize, usize)> {
    (0..buf.len()).find_map(|i| {
        let tail = &buf[i..];
        if tail.starts_with(b"\n\n") {
            Some((i, 2))
        } else if tail.starts_with(b"\r\n\r\n") {
            Some((i, 4))
        } else {
            None
        }
    })
}

/// The joined `data:` lines of one event, if it has any.
fn event_data(event: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(event);
    let mut data: Option<String> = None;
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if let Some(d) = line.strip_prefix("data:") {
            let d = d.strip_prefix(' ').unwrap_or(d);
            match &mut data {
                Some(s) => {
                    s.push('\n');
                    s.push_str(d);
                }
                None => data = Some(d.to_string()),
            }
        }
    }
    data
}

/// What one request gave.
#[derive(Debug, Default, Clone)]
struct Outcome {
    /// From sending the request to the first chunk with text.
    ttft: Option<Duration>,
    /// From sending the request to the end of the answer (or the error).
    latency: Duration,
    /// The answer's content.
    content: String,
    /// Chunks that carried content or reasoning text.
    chunks: u64,
    finish_reason: Option<String>,
    /// `usage.completion_tokens`, when the server sent it.
    completion_tokens: Option<u64>,
    /// `data: [DONE]` arrived.
    done: bool,
    /// Why the request got no complete answer.
    error: Option<String>,
    /// The error was a failed connection (nothing listening, host unreachable).
    unreachable: bool,
}

impl Outcome {
    fn fail(&mut self, e: String) {
        self.error.get_or_insert(e);
    }

    /// Applies one event's `data` of a chat-completion stream, received `at` after sending.
    fn apply(&mut self, data: &str, at: Duration) {
        let data = data.trim();
        if data == "[DONE]" {
            self.done = true;
            return;
        }
        if data.is_empty() {
            return;
        }
        let v: Value = match serde_json::from_str(data) {
            Ok(v) => v,
            Err(e) => return self.fail(format!("a stream event is not JSON ({e}): {}", clip(data, 200))),
        };
        if let Some(err) = v.get("error") {
            return self.fail(format!("error event in the stream: {}", error_message(err)));
        }
        if let Some(n) = v.get("usage").and_then(|u| u.get("completion_tokens")).and_then(Value::as_u64) {
            self.completion_tokens = Some(n);
        }
        for c in v.get("choices").and_then(Value::as_array).into_iter().flatten() {
            let delta = c.get("delta");
            let text = |k: &str| delta.and_then(|d| d.get(k)).and_then(Value::as_str).unwrap_or("");
            let (content, reasoning) = (text("content"), text("reasoning_content"));
            if !content.is_empty() || !reasoning.is_empty() {
                self.ttft.get_or_insert(at);
                self.chunks += 1;
                self.content.push_str(content);
            }
            if let Some(f) = c.get("finish_reason").and_then(Value::as_str) {
                self.finish_reason = Some(f.to_string());
            }
        }
    }

    /// Applies a whole (non-streamed) chat completion, for a server that ignored `stream`.
    fn apply_completion(&mut self, body: &str, at: Duration) {
        let v: Value = match serde_json::from_str(body) {
            Ok(v) => v,
            Err(e) => return self.fail(format!("the answer is neither an event stream nor JSON ({e}): {}", clip(body, 200))),
        };
        if let Some(err) = v.get("error") {
            return self.fail(error_message(err));
        }
        let choice = v.get("choices").and_then(|c| c.get(0));
        let content = choice.and_then(|c| c.pointer("/message/content")).and_then(Value::as_str).unwrap_or("");
        self.content = content.to_string();
        self.finish_reason = choice.and_then(|c| c.get("finish_reason")).and_then(Value::as_str).map(str::to_string);
        self.completion_tokens = v.pointer("/usage/completion_tokens").and_then(Value::as_u64);
        self.ttft = Some(at);
        self.chunks = u64::from(!content.is_empty());
        self.done = true;
    }

    /// Completion tokens: the server's count, else the content chunks. The flag says which.
    fn tokens(&self) -> (u64, bool) {
        match self.completion_tokens {
            Some(n) => (n, true),
            None => (self.chunks, false),
        }
    }
}

/// The message of an OpenAI-style `error` value (an object with `message`, or a string).
fn error_message(err: &Value) -> String {
    match err {
        Value::String(s) => s.clone(),
        Value::Object(o) => match o.get("message").and_then(Value::as_str) {
            Some(m) => m.to_string(),
            None => clip(&err.to_string(), 300),
        },
        other => clip(&other.to_string(), 300),
    }
}

/// The message in an HTTP error body: its `error`, or the text itself, shortened.
fn body_message(body: &str) -> String {
    match serde_json::from_str::<Value>(body) {
        Ok(v) if v.get("error").is_some() => error_message(&v["error"]),
        _ => clip(body.trim(), 300),
    }
}

/// `s` with each run of whitespace (newlines included) as one space, for a one-line list item.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `s`, shortened to `n` characters and an ellipsis if longer.
fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}

/// An error with its causes, `a: b: c` (hyper's own message alone says little).
fn chain(e: &dyn StdError) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let m = c.to_string();
        if !s.contains(&m) {
            let _ = write!(s, ": {m}");
        }
        cur = c.source();
    }
    s
}

/// Sends one request and reads its answer to the end; never fails, the outcome says how it went.
async fn one_request(client: &HttpClient, endpoint: &hyper::Uri, body: &Value, timeout: Duration) -> Outcome {
    let start = Instant::now();
    let mut o = Outcome::default();
    match tokio::time::timeout(timeout, exchange(client, endpoint, body, start, &mut o)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => o.fail(e),
        Err(_) => o.fail(format!("no complete answer within {} s (--timeout)", timeout.as_secs())),
    }
    o.latency = start.elapsed();
    o
}

/// The HTTP exchange of [`one_request`]; an `Err` is a transport or protocol failure.
async fn exchange(client: &HttpClient, endpoint: &hyper::Uri, body: &Value, start: Instant, o: &mut Outcome) -> Result<(), String> {
    let bytes = serde_json::to_vec(body).map_err(|e| e.to_string())?;
    let request = hyper::Request::post(endpoint.clone())
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "text/event-stream")
        .body(Full::new(Bytes::from(bytes)))
        .map_err(|e| e.to_string())?;
    let (head, mut body) = client
        .request(request)
        .await
        .map_err(|e| {
            o.unreachable = e.is_connect();
            format!("sending the request: {}", chain(&e))
        })?
        .into_parts();
    let sse = head.headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("text/event-stream"));
    if !head.status.is_success() || !sse {
        let whole = body.collect().await.map_err(|e| format!("reading the answer: {}", chain(&e)))?.to_bytes();
        let text = String::from_utf8_lossy(&whole);
        if !head.status.is_success() {
            return Err(format!("HTTP {}: {}", head.status.as_u16(), body_message(&text)));
        }
        o.apply_completion(&text, start.elapsed());
        return Ok(());
    }
    let mut parser = SseParser::default();
    // Read to the end even after `[DONE]`: the answer ends when the server ends it.
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("reading the stream: {}", chain(&e)))?;
        let Ok(data) = frame.into_data() else { continue };
        for event in parser.push(&data) {
            o.apply(&event, start.elapsed());
            if o.error.is_some() {
                return Ok(());
            }
        }
    }
    if let Some(event) = parser.finish() {
        o.apply(&event, start.elapsed());
    }
    if o.error.is_none() && !o.done && o.finish_reason.is_none() {
        return Err("the stream ended without a finish_reason or [DONE]".into());
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// A level: its outcomes summed up.

/// The figures of one level in one mode.
#[derive(Debug, Default)]
struct LevelResult {
    clients: usize,
    mode: &'static str,
    requests: usize,
    answered: usize,
    errors: usize,
    /// The first few distinct error messages.
    error_messages: Vec<String>,
    /// Schema mode: answers that are not JSON or do not validate.
    invalid: usize,
    /// The first few invalid answers, with why.
    invalid_examples: Vec<String>,
    /// Answers that ended with `finish_reason: length`.
    cut_off: usize,
    completion_tokens: u64,
    /// Answered requests whose tokens were counted by content chunks (no `usage`).
    counted_by_chunks: usize,
    wall: Duration,
    /// Seconds, sorted.
    ttft: Vec<f64>,
    /// Seconds, sorted.
    latency: Vec<f64>,
}

const KEEP_MESSAGES: usize = 3;

impl LevelResult {
    fn tok_per_s(&self) -> f64 {
        self.completion_tokens as f64 / self.wall.as_secs_f64().max(1e-9)
    }

    fn req_per_s(&self) -> f64 {
        self.answered as f64 / self.wall.as_secs_f64().max(1e-9)
    }

    fn to_json(&self) -> Value {
        let opt = |x: f64| if x.is_nan() { Value::Null } else { json!(x) };
        json!({
            "clients": self.clients,
            "mode": self.mode,
            "requests": self.requests,
            "answered": self.answered,
            "errors": self.errors,
            "error_messages": self.error_messages,
            "invalid": if self.mode == "schema" { json!(self.invalid) } else { Value::Null },
            "invalid_examples": self.invalid_examples,
            "cut_off": self.cut_off,
            "completion_tokens": self.completion_tokens,
            "counted_by_chunks": self.counted_by_chunks,
            "wall_s": self.wall.as_secs_f64(),
            "tok_per_s": self.tok_per_s(),
            "req_per_s": self.req_per_s(),
            "ttft_p50_s": opt(percentile(&self.ttft, 0.5)),
            "ttft_p99_s": opt(percentile(&self.ttft, 0.99)),
            "latency_p50_s": opt(percentile(&self.latency, 0.5)),
            "latency_p99_s": opt(percentile(&self.latency, 0.99)),
        })
    }
}

/// Nearest-rank percentile of sorted values: the smallest value with at least a fraction `q`
/// of the values at or below it (`q` in (0, 1]); NaN when there are none.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Why an answer in `mode` is invalid, if it is: in schema mode, not JSON or not valid
/// against `schema`; a free answer is never invalid.
fn invalid_reason(mode: Mode, schema: &Value, content: &str) -> Option<String> {
    if mode == Mode::Free {
        return None;
    }
    formwork_schema::validate(schema, content).err().map(|errs| errs.join("; "))
}

/// Sums up the outcomes of a level that took `wall`.
fn summarize(clients: usize, mode: Mode, schema: &Value, outcomes: &[Outcome], wall: Duration) -> LevelResult {
    let mut r = LevelResult { clients, mode: mode.name(), requests: outcomes.len(), wall, ..Default::default() };
    for o in outcomes {
        if let Some(e) = &o.error {
            r.errors += 1;
            if r.error_messages.len() < KEEP_MESSAGES && !r.error_messages.contains(e) {
                r.error_messages.push(e.clone());
            }
            continue;
        }
        r.answered += 1;
        let (n, from_usage) = o.tokens();
        r.completion_tokens += n;
        r.counted_by_chunks += usize::from(!from_usage);
        if o.finish_reason.as_deref() == Some("length") {
            r.cut_off += 1;
        }
        if let Some(why) = invalid_reason(mode, schema, &o.content) {
            r.invalid += 1;
            if r.invalid_examples.len() < KEEP_MESSAGES {
                r.invalid_examples.push(format!("{} ({})", clip(&one_line(&o.content), 160), clip(&why, 160)));
            }
        }
        if let Some(t) = o.ttft {
            r.ttft.push(t.as_secs_f64());
        }
        r.latency.push(o.latency.as_secs_f64());
    }
    r.ttft.sort_by(f64::total_cmp);
    r.latency.sort_by(f64::total_cmp);
    r
}

// ---------------------------------------------------------------------------------------
// The run.

/// Runs `formwork bench serve`.
pub fn serve(a: ServeArgs) -> Result<()> {
    let s = Settings::new(a)?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("cannot start the async runtime")?;
    let results = rt.block_on(run(&s))?;
    if s.json {
        println!("{}", serde_json::to_string_pretty(&report_json(&s, &results))?);
    } else {
        print!("{}", report_table(&s, &results));
    }
    Ok(())
}

async fn run(s: &Settings) -> Result<Vec<LevelResult>> {
    let client = http_client();
    let schema = person_schema();
    eprintln!(
        "bench serve: {} ({}) · model {} · clients {} · {} request(s) per client · ≤{} tokens · temperature {} · modes {}",
        s.label,
        s.endpoint,
        s.model,
        s.levels.iter().map(usize::to_string).collect::<Vec<_>>().join(","),
        s.requests,
        s.max_tokens,
        s.temperature,
        s.modes.iter().map(|m| m.name()).collect::<Vec<_>>().join(",")
    );
    for &mode in &s.modes {
        warm_up(&client, s, mode).await?;
    }
    let mut results = Vec::new();
    for &clients in &s.levels {
        for &mode in &s.modes {
            let r = run_level(&client, s, &schema, mode, clients).await;
            eprintln!(
                "{clients} client(s) · {}: {} requests in {:.1} s · {:.1} tok/s · {} error(s) · {} invalid · {} cut off",
                mode.name(),
                r.requests,
                r.wall.as_secs_f64(),
                r.tok_per_s(),
                r.errors,
                r.invalid,
                r.cut_off
            );
            results.push(r);
        }
    }
    Ok(results)
}

/// One short request in `mode`, not counted: fails the run with a clear message when the
/// server cannot be reached or refuses the request (wrong model name, schema not supported).
/// While the server answers 503 (llama.cpp's server does so while it loads the model) it is
/// asked again each second, for up to [`WARM_UP_WAIT`].
async fn warm_up(client: &HttpClient, s: &Settings, mode: Mode) -> Result<()> {
    let body = request_body(s, mode, 0, s.max_tokens.min(16));
    let waiting = Instant::now();
    let o = loop {
        let o = one_request(client, &s.endpoint, &body, s.timeout).await;
        match &o.error {
            Some(e) if e.starts_with("HTTP 503") && waiting.elapsed() < WARM_UP_WAIT => {
                if waiting.elapsed() < Duration::from_secs(1) {
                    eprintln!("the server answers 503 ({e}); waiting until it is ready");
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            _ => break o,
        }
    };
    let Some(e) = o.error else { return Ok(()) };
    if o.unreachable {
        bail!(
            "cannot reach a server at {} ({e}).\nStart one first, for example `formwork serve --port 11434` \
             (formwork) or `llama-server -m MODEL.gguf --port 11434 --parallel 4` (llama.cpp; \
             ./scripts/peer-llama-server builds it), then pass its address with --url.",
            s.url
        );
    }
    bail!("the server at {} did not answer the warm-up request ({} mode, model {:?}): {e}", s.url, mode.name(), s.model)
}

/// How long [`warm_up`] waits for a server that answers 503.
const WARM_UP_WAIT: Duration = Duration::from_secs(120);

/// One level: `clients` tasks, each sending its requests one after another.
async fn run_level(client: &HttpClient, s: &Settings, schema: &Value, mode: Mode, clients: usize) -> LevelResult {
    let bar = indicatif::ProgressBar::new((clients * s.requests) as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} requests · {elapsed}")
            .expect("the progress template is valid")
            .progress_chars("=> "),
    );
    bar.set_prefix(format!("{clients} client(s) · {}", mode.name()));
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(clients);
    for c in 0..clients {
        let bodies: Vec<Value> = (0..s.requests).map(|r| request_body(s, mode, c * s.requests + r, s.max_tokens)).collect();
        let (client, endpoint, timeout, bar) = (client.clone(), s.endpoint.clone(), s.timeout, bar.clone());
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::with_capacity(bodies.len());
            for body in &bodies {
                out.push(one_request(&client, &endpoint, body, timeout).await);
                bar.inc(1);
            }
            out
        }));
    }
    let mut outcomes = Vec::with_capacity(clients * s.requests);
    for t in tasks {
        match t.await {
            Ok(o) => outcomes.extend(o),
            Err(e) => outcomes.push(Outcome { error: Some(format!("client task failed: {e}")), ..Default::default() }),
        }
    }
    let wall = start.elapsed();
    bar.finish_and_clear();
    summarize(clients, mode, schema, &outcomes, wall)
}

// ---------------------------------------------------------------------------------------
// Output.

fn report_json(s: &Settings, results: &[LevelResult]) -> Value {
    json!({
        "label": s.label,
        "url": s.url,
        "model": s.model,
        "requests_per_client": s.requests,
        "max_tokens": s.max_tokens,
        "temperature": s.temperature,
        "seed": s.seed,
        "schema": person_schema(),
        "levels": results.iter().map(LevelResult::to_json).collect::<Vec<_>>(),
    })
}

/// Seconds as `850 ms` or `9.52 s`.
fn fmt_secs(x: f64) -> String {
    if x.is_nan() {
        "-".into()
    } else if x < 1.0 {
        format!("{:.0} ms", x * 1000.0)
    } else {
        format!("{x:.2} s")
    }
}

fn report_table(s: &Settings, results: &[LevelResult]) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "\n## bench serve: {} · model {} · ≤{} tokens · temperature {} · {} request(s) per client\n",
        s.label, s.model, s.max_tokens, s.temperature, s.requests
    );
    t.push_str("| server | clients | mode | requests | errors | invalid | cut off | gen tok/s | req/s | TTFT p50 | TTFT p99 | latency p50 | latency p99 | tokens/answer |\n");
    t.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for r in results {
        let invalid = if r.mode == "schema" { format!("{} / {}", r.invalid, r.answered) } else { "-".into() };
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {} | {} | {} | {:.1} | {:.2} | {} | {} | {} | {} | {:.1} |",
            s.label,
            r.clients,
            r.mode,
            r.requests,
            r.errors,
            invalid,
            r.cut_off,
            r.tok_per_s(),
            r.req_per_s(),
            fmt_secs(percentile(&r.ttft, 0.5)),
            fmt_secs(percentile(&r.ttft, 0.99)),
            fmt_secs(percentile(&r.latency, 0.5)),
            fmt_secs(percentile(&r.latency, 0.99)),
            r.completion_tokens as f64 / r.answered.max(1) as f64
        );
    }
    for r in results {
        let at = format!("{} client(s), {}", r.clients, r.mode);
        if !r.error_messages.is_empty() {
            let _ = writeln!(t, "\nerrors at {at} ({} in all), first ones:", r.errors);
            for m in &r.error_messages {
                let _ = writeln!(t, "  - {}", clip(m, 300));
            }
        }
        if !r.invalid_examples.is_empty() {
            let _ = writeln!(t, "\ninvalid answers at {at} ({} in all), e.g.:", r.invalid);
            for m in &r.invalid_examples {
                let _ = writeln!(t, "  - {m}");
            }
        }
        if r.counted_by_chunks > 0 {
            let _ = writeln!(
                t,
                "\nat {at}: the server sent no usage for {} of {} answers; their tokens were counted as content chunks",
                r.counted_by_chunks, r.answered
            );
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn settings(url: &str) -> Settings {
        let a = ServeArgs {
            url: url.into(),
            clients: vec![1, 2],
            requests: 2,
            max_tokens: 40,
            mode: ModeArg::Both,
            schema: false,
            no_schema: false,
            model: "smollm2".into(),
            temperature: 0.7,
            seed: 1,
            timeout: 10,
            label: None,
            json: false,
        };
        Settings::new(a).unwrap()
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        assert!(percentile(&[], 0.5).is_nan());
        assert_eq!(percentile(&[3.0], 0.5), 3.0);
        assert_eq!(percentile(&[3.0], 0.99), 3.0);
        assert_eq!(percentile(&[1.0, 2.0], 0.5), 1.0);
        assert_eq!(percentile(&[1.0, 2.0], 0.99), 2.0);
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 50.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&v, 1.0), 100.0);
        let v: Vec<f64> = (1..=48).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.99), 48.0);
    }

    #[test]
    fn endpoints_from_base_urls() {
        let e = |u: &str| endpoint(u).unwrap().to_string();
        assert_eq!(e("http://127.0.0.1:11434"), "http://127.0.0.1:11434/v1/chat/completions");
        assert_eq!(e("http://127.0.0.1:11434/"), "http://127.0.0.1:11434/v1/chat/completions");
        assert_eq!(e("http://h:1/v1/"), "http://h:1/v1/chat/completions");
        assert_eq!(e("http://h:1/v1/chat/completions"), "http://h:1/v1/chat/completions");
        assert!(endpoint("127.0.0.1:11434").is_err());
        assert!(endpoint("http://a b").is_err());
        assert!(endpoint("https://example.com").unwrap_err().to_string().contains("plain HTTP"));
    }

    #[test]
    fn requests_are_the_same_list_for_every_server() {
        let s = settings("http://h:1");
        let a = request_body(&s, Mode::Schema, 5, 40);
        assert_eq!(a, request_body(&s, Mode::Schema, 5, 40));
        assert_eq!(a["seed"], 6);
        assert_eq!(a["stream"], true);
        assert_eq!(a["stream_options"]["include_usage"], true);
        assert_eq!(a["response_format"]["json_schema"]["strict"], true);
        assert_eq!(a["response_format"]["json_schema"]["schema"], person_schema());
        assert!(request_body(&s, Mode::Free, 5, 40).get("response_format").is_none());
        let prompts: std::collections::HashSet<String> = (0..64).map(prompt).collect();
        assert_eq!(prompts.len(), 64);
        assert_eq!(prompt(64), prompt(0));
        formwork_schema::check_schema(&person_schema()).unwrap();
    }

    #[test]
    fn sse_events_are_found_across_chunk_boundaries() {
        let stream = b"data: {\"a\":1}\n\n: a comment\n\nevent: x\ndata: [DO\r\n";
        let mut p = SseParser::default();
        let mut got = Vec::new();
        for b in stream.chunks(3) {
            got.extend(p.push(b));
        }
        got.extend(p.push(b"\r\ndata: one\ndata: two\n\ndata:tail"));
        assert_eq!(got, vec!["{\"a\":1}".to_string(), "[DO".into(), "one\ntwo".into()]);
        assert_eq!(p.finish().as_deref(), Some("tail"));
        assert_eq!(p.finish(), None);
    }

    #[test]
    fn a_stream_gives_content_ttft_finish_and_usage() {
        let events = [
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"{\"name\""},"finish_reason":null}],"usage":null}"#,
            r#"{"choices":[{"index":0,"delta":{"content":":1}"},"finish_reason":null}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":20,"completion_tokens":7,"total_tokens":27}}"#,
            "[DONE]",
        ];
        let mut o = Outcome::default();
        for (k, e) in events.iter().enumerate() {
            o.apply(e, Duration::from_millis(10 * k as u64));
        }
        assert_eq!(o.error, None);
        assert!(o.done);
        assert_eq!(o.content, "{\"name\":1}");
        assert_eq!(o.ttft, Some(Duration::from_millis(10)), "the role chunk with empty content is not the first token");
        assert_eq!(o.finish_reason.as_deref(), Some("length"));
        assert_eq!(o.tokens(), (7, true));

        // Without usage, tokens are counted by content chunks.
        let mut o = Outcome::default();
        for e in &events[..4] {
            o.apply(e, Duration::ZERO);
        }
        assert_eq!(o.tokens(), (2, false));

        // An error event, OpenAI- or llama.cpp-shaped.
        let mut o = Outcome::default();
        o.apply(r#"{"error":{"code":500,"message":"boom","type":"server_error"}}"#, Duration::ZERO);
        assert_eq!(o.error.as_deref(), Some("error event in the stream: boom"));
        let mut o = Outcome::default();
        o.apply("not json", Duration::ZERO);
        assert!(o.error.unwrap().contains("not JSON"));
    }

    #[test]
    fn a_non_streamed_completion_is_taken_whole() {
        let mut o = Outcome::default();
        o.apply_completion(
            r#"{"choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"completion_tokens":2}}"#,
            Duration::from_millis(5),
        );
        assert_eq!((o.content.as_str(), o.finish_reason.as_deref(), o.tokens(), o.done), ("hi", Some("stop"), (2, true), true));
        assert_eq!(body_message(r#"{"error":{"message":"model \"x\" not found"}}"#), "model \"x\" not found");
        assert_eq!(body_message("plain text\n"), "plain text");
    }

    fn answered(content: &str, finish: &str, tokens: Option<u64>, secs: u64) -> Outcome {
        Outcome {
            ttft: Some(Duration::from_millis(100 * secs)),
            latency: Duration::from_secs(secs),
            content: content.into(),
            chunks: 3,
            finish_reason: Some(finish.into()),
            completion_tokens: tokens,
            done: true,
            ..Default::default()
        }
    }

    #[test]
    fn levels_count_errors_invalid_and_cut_off_answers() {
        let schema = person_schema();
        let good = r#"{"name":"Ada","age":36,"city":"London","email":"ada@example.com"}"#;
        let outcomes = vec![
            answered(good, "stop", Some(20), 1),
            answered(r#"{"name":"Bo","age":"x","city":"Oslo","email":"b@o.no"}"#, "stop", Some(20), 2),
            answered("{\"name\":\"Cy\",\n  \"age\":4", "length", Some(10), 3),
            answered(good, "stop", None, 4),
            Outcome { error: Some("HTTP 503: busy".into()), ..Default::default() },
            Outcome { error: Some("HTTP 503: busy".into()), ..Default::default() },
            Outcome { error: Some("sending the request: connection refused".into()), ..Default::default() },
        ];
        let r = summarize(4, Mode::Schema, &schema, &outcomes, Duration::from_secs(2));
        assert_eq!((r.requests, r.answered, r.errors), (7, 4, 3));
        assert_eq!(r.error_messages, vec!["HTTP 503: busy".to_string(), "sending the request: connection refused".into()]);
        assert_eq!(r.invalid, 2, "a wrong type and a cut-off document");
        assert_eq!(r.invalid_examples.len(), 2);
        assert!(r.invalid_examples[1].starts_with(r#"{"name":"Cy", "age":4 (not JSON"#), "{:?}", r.invalid_examples);
        assert_eq!(r.cut_off, 1);
        assert_eq!((r.completion_tokens, r.counted_by_chunks), (53, 1));
        assert_eq!(r.tok_per_s(), 26.5);
        assert_eq!(r.req_per_s(), 2.0);
        assert_eq!(r.latency, vec![1.0, 2.0, 3.0, 4.0]);
        assert_eq!(percentile(&r.latency, 0.5), 2.0);

        // The same answers without a schema are never invalid; cut-off answers still count.
        let r = summarize(4, Mode::Free, &schema, &outcomes, Duration::from_secs(2));
        assert_eq!((r.invalid, r.cut_off), (0, 1));
        let j = r.to_json();
        assert_eq!(j["invalid"], Value::Null);
        assert_eq!(j["latency_p50_s"], 2.0);

        let s = settings("http://h:1");
        let table = report_table(&s, &[summarize(4, Mode::Schema, &schema, &outcomes, Duration::from_secs(2))]);
        assert!(table.contains("| http://h:1 | 4 | schema | 7 | 3 | 2 / 4 | 1 | 26.5 | 2.00 | 200 ms | 400 ms | 2.00 s | 4.00 s | 13.2 |"), "{table}");
        assert!(table.contains("HTTP 503: busy"), "{table}");
        assert!(table.contains("no usage for 1 of 4"), "{table}");
    }

    /// Serves one canned HTTP response per connection, `n` connections, on a free port.
    async fn canned_server(response: String, n: usize) -> hyper::Uri {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            for _ in 0..n {
                let (mut sock, _) = listener.accept().await.unwrap();
                let mut req = Vec::new();
                let mut buf = [0u8; 4096];
                // Read the head and the body (Content-Length) before answering.
                loop {
                    let k = sock.read(&mut buf).await.unwrap();
                    req.extend_from_slice(&buf[..k]);
                    let text = String::from_utf8_lossy(&req).to_string();
                    if let Some(head_end) = text.find("\r\n\r\n") {
                        let len: usize =
                            text.lines().find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap())).unwrap_or(0);
                        if req.len() >= head_end + 4 + len {
                            break;
                        }
                    }
                    if k == 0 {
                        break;
                    }
                }
                sock.write_all(response.as_bytes()).await.unwrap();
                sock.shutdown().await.unwrap();
            }
        });
        format!("http://{addr}/v1/chat/completions").parse().unwrap()
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
    }

    #[test]
    fn one_request_reads_a_real_event_stream() {
        block_on(async {
            let response = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n\
                data: {\"choices\":[{\"delta\":{\"content\":\"{}\"},\"finish_reason\":null}]}\n\n\
                data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n\
                data: {\"choices\":[],\"usage\":{\"completion_tokens\":1}}\n\ndata: [DONE]\n\n";
            let url = canned_server(response.to_string(), 1).await;
            let client = http_client();
            let o = one_request(&client, &url, &json!({"stream": true}), Duration::from_secs(10)).await;
            assert_eq!(o.error, None);
            assert_eq!((o.content.as_str(), o.tokens(), o.done), ("{}", (1, true), true));
            assert!(o.ttft.is_some() && o.latency >= o.ttft.unwrap());

            let body = r#"{"error":{"message":"model not found"}}"#;
            let response =
                format!("HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
            let url = canned_server(response.to_string(), 1).await;
            let o = one_request(&client, &url, &json!({}), Duration::from_secs(10)).await;
            assert_eq!(o.error.as_deref(), Some("HTTP 404: model not found"));

            let response = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n\
                data: {\"choices\":[{\"delta\":{\"content\":\"a\"},\"finish_reason\":null}]}\n\n";
            let url = canned_server(response.to_string(), 1).await;
            let o = one_request(&client, &url, &json!({}), Duration::from_secs(10)).await;
            assert!(o.error.unwrap().contains("ended without a finish_reason"));
        });
    }

    #[test]
    fn an_unreachable_server_is_named_with_a_hint() {
        block_on(async {
            // A port that was free a moment ago: nothing listens there now.
            let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            let s = settings(&format!("http://127.0.0.1:{port}"));
            let client = http_client();
            let e = warm_up(&client, &s, Mode::Free).await.unwrap_err().to_string();
            assert!(e.contains(&format!("cannot reach a server at http://127.0.0.1:{port}")), "{e}");
            assert!(e.contains("formwork serve") && e.contains("llama-server"), "{e}");
        });
    }
}
