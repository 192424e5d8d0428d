//! The client side of one request: a streamed chat completion sent over hyper's HTTP/1.1
//! client, its server-sent events parsed, and what it gave ([`Outcome`]): text, timings,
//! tokens, and why it failed, in words.

use super::HttpClient;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::header::{ACCEPT, CONTENT_TYPE};
use serde_json::Value;
use std::error::Error as StdError;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// Splits a server-sent-event stream into the `data` of its events, whatever the chunking.
///
/// An event ends at a blank line (`\n\n` or `\r\n\r\n`); its `data:` lines (one optional
/// space after the colon) are joined with `\n`; comments (`:...`) and other fields are ignored.
#[derive(Default)]
pub(super) struct SseParser {
    pub(super) buf: Vec<u8>,
}

impl SseParser {
    /// Feeds bytes; returns the `data` of each event they complete.
    pub(super) fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some((end, sep)) = event_end(&self.buf) {
            let event: Vec<u8> = self.buf.drain(..end + sep).take(end).collect();
            out.extend(event_data(&event));
        }
        out
    }

    /// The end of the stream: an event left without its blank line, if any.
    pub(super) fn finish(&mut self) -> Option<String> {
        let rest = std::mem::take(&mut self.buf);
        event_data(&rest)
    }
}

/// Where the first event in `buf` ends, and the length of the blank line that ends it.
pub(super) fn event_end(buf: &[u8]) -> Option<(usize, usize)> {
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
pub(super) fn event_data(event: &[u8]) -> Option<String> {
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
pub(super) struct Outcome {
    /// From sending the request to the first chunk with text.
    pub(super) ttft: Option<Duration>,
    /// From sending the request to the end of the answer (or the error).
    pub(super) latency: Duration,
    /// The answer's content.
    pub(super) content: String,
    /// Chunks that carried content or reasoning text.
    pub(super) chunks: u64,
    pub(super) finish_reason: Option<String>,
    /// `usage.completion_tokens`, when the server sent it.
    pub(super) completion_tokens: Option<u64>,
    /// `data: [DONE]` arrived.
    pub(super) done: bool,
    /// Why the request got no complete answer.
    pub(super) error: Option<String>,
    /// The error was a failed connection (nothing listening, host unreachable).
    pub(super) unreachable: bool,
}

impl Outcome {
    pub(super) fn fail(&mut self, e: String) {
        self.error.get_or_insert(e);
    }

    /// Applies one event's `data` of a chat-completion stream, received `at` after sending.
    pub(super) fn apply(&mut self, data: &str, at: Duration) {
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
    pub(super) fn apply_completion(&mut self, body: &str, at: Duration) {
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
    pub(super) fn tokens(&self) -> (u64, bool) {
        match self.completion_tokens {
            Some(n) => (n, true),
            None => (self.chunks, false),
        }
    }
}

/// The message of an OpenAI-style `error` value (an object with `message`, or a string).
pub(super) fn error_message(err: &Value) -> String {
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
pub(super) fn body_message(body: &str) -> String {
    match serde_json::from_str::<Value>(body) {
        Ok(v) if v.get("error").is_some() => error_message(&v["error"]),
        _ => clip(body.trim(), 300),
    }
}

/// `s` with each run of whitespace (newlines included) as one space, for a one-line list item.
pub(super) fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `s`, shortened to `n` characters and an ellipsis if longer.
pub(super) fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n).collect::<String>())
    }
}

/// An error with its causes, `a: b: c` (hyper's own message alone says little).
pub(super) fn chain(e: &dyn StdError) -> String {
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
pub(super) async fn one_request(client: &HttpClient, endpoint: &hyper::Uri, body: &Value, timeout: Duration) -> Outcome {
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
pub(super) async fn exchange(client: &HttpClient, endpoint: &hyper::Uri, body: &Value, start: Instant, o: &mut Outcome) -> Result<(), String> {
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
