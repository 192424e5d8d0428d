//! Shared helpers: a router over a scripted fake model, and one-shot requests.
#![allow(dead_code)]

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use axum::Router;
use formwork_server::testing::{spawn_scripted, Observed, Script};
use formwork_server::{app, AppState, Job, ServerConfig};
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

pub fn router(script: impl FnMut(&Job) -> Script + Send + 'static) -> (Router, Observed) {
    router_with(ServerConfig::default(), script)
}

pub fn router_with(cfg: ServerConfig, script: impl FnMut(&Job) -> Script + Send + 'static) -> (Router, Observed) {
    let (w, obs) = spawn_scripted("smollm2", script);
    (app(AppState::new(cfg, vec![w])), obs)
}

pub fn text(s: &str) -> Script {
    Script::Text(formwork_server::testing::pieces(s))
}

pub async fn send(app: &Router, method: Method, path: &str, body: impl Into<Body>) -> (StatusCode, String, String) {
    let req = Request::builder().method(method).uri(path).header("content-type", "application/json").body(body.into()).unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let ctype = resp.headers().get("content-type").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, ctype, String::from_utf8(bytes.to_vec()).unwrap())
}

pub async fn post(app: &Router, path: &str, body: Value) -> (StatusCode, Value) {
    let (s, _, b) = send(app, Method::POST, path, body.to_string()).await;
    (s, serde_json::from_str(&b).unwrap_or_else(|e| panic!("not JSON ({e}): {b}")))
}

pub async fn get(app: &Router, path: &str) -> (StatusCode, Value) {
    let (s, _, b) = send(app, Method::GET, path, Body::empty()).await;
    (s, serde_json::from_str(&b).unwrap_or_else(|e| panic!("not JSON ({e}): {b}")))
}

/// NDJSON lines as values.
pub fn lines(body: &str) -> Vec<Value> {
    body.lines().filter(|l| !l.is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// SSE `data:` payloads.
pub fn sse_data(body: &str) -> Vec<String> {
    body.lines().filter_map(|l| l.strip_prefix("data: ").or_else(|| l.strip_prefix("data:"))).map(str::to_string).collect()
}

pub fn assert_ollama_error(v: &Value) {
    assert!(v["error"].is_string(), "Ollama error shape expected: {v}");
}

pub fn assert_openai_error(v: &Value) {
    let e = &v["error"];
    assert!(e["message"].is_string() && e["type"].is_string(), "OpenAI error shape expected: {v}");
    assert!(e.get("param").is_some() && e.get("code").is_some(), "OpenAI error has param and code: {v}");
}

/// Sends a request with optional `x-request-id`; returns the status and the response's id.
pub async fn id_of(app: &axum::Router, method: Method, path: &str, body: &str, sent: Option<&str>) -> (StatusCode, String) {
    let mut b = Request::builder().method(method).uri(path).header("content-type", "application/json");
    if let Some(id) = sent {
        b = b.header("x-request-id", id);
    }
    let resp = app.clone().oneshot(b.body(Body::from(body.to_string())).unwrap()).await.unwrap();
    let status = resp.status();
    let id = resp.headers().get("x-request-id").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    // Read the whole body, so that streams finish.
    resp.into_body().collect().await.unwrap();
    (status, id)
}
