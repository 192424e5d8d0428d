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

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use http_body_util::Full;
use hyper::body::Bytes;

use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use serde_json::{json, Value};

mod client;
mod report;
use client::*;
use report::*;

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

#[cfg(test)]
mod tests;
