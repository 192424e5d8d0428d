//! The server over a batched model (the engine backend's slots on a `Batcher` of the
//! scripted batch model): concurrent schema-constrained requests are all answered and valid,
//! a full queue answers 503 with `Retry-After`, a client that goes away frees its slot, and
//! `/metrics` counts what happened.
#![cfg(feature = "engine")]

mod common;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::{post, send};
use formwork_engine::batch::{Batcher, BatcherOptions};
use formwork_engine::testing::{ScriptedBatchModel, ScriptedModel};
use formwork_server::engine_backend::{EngineBackend, ConstraintCache};
use formwork_server::testing::fake_meta;
use formwork_server::{app, AppState, ModelWorker, ServerConfig};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tower::ServiceExt;

/// A byte-level vocabulary (printable ASCII, newline) with ChatML specials.
fn model(script: &str, slots: usize, delay: Duration) -> ScriptedBatchModel {
    let tokens: Vec<String> = (0x20u8..0x7f).map(|b| (b as char).to_string()).chain(["\n".to_string()]).collect();
    let mut m = ScriptedModel::new(&tokens, &["<|im_end|>", "<|im_start|>"]);
    m.script_text(script);
    ScriptedBatchModel::from_model(m, slots).with_step_delay(delay)
}

fn router(script: &str, slots: usize, max_queue: usize, delay: Duration) -> (axum::Router, Batcher) {
    let batcher = Batcher::new(Box::new(model(script, slots, delay)), BatcherOptions::default());
    let backends = EngineBackend::slots(&batcher, Arc::new(ConstraintCache::new(8)), formwork_grammar::Limits::default());
    let w = ModelWorker::spawn_pool(fake_meta("smollm2"), backends, Duration::ZERO, max_queue).unwrap();
    (app(AppState::new(ServerConfig::default(), vec![w])), batcher)
}

fn person_schema() -> Value {
    json!({"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}, "age": {"type": "integer"}},
           "required": ["name", "age"], "additionalProperties": false})
}

fn request(i: usize) -> Value {
    json!({"model": "smollm2", "messages": [{"role": "user", "content": format!("person {i}")}],
           "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": person_schema(), "strict": true}},
           "temperature": 0})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_concurrent_constrained_requests_are_all_answered_and_valid() {
    let (app, batcher) = router(r#"{"name":"Ada","age":36}"#, 8, 256, Duration::from_millis(1));
    let tasks: Vec<_> = (0..64)
        .map(|i| {
            let app = app.clone();
            tokio::spawn(async move { post(&app, "/v1/chat/completions", request(i)).await })
        })
        .collect();
    let mut answered = 0;
    for t in tasks {
        let (status, v) = t.await.unwrap();
        assert_eq!(status, StatusCode::OK, "{v}");
        let content = v["choices"][0]["message"]["content"].as_str().unwrap();
        let doc: Value = serde_json::from_str(content).unwrap_or_else(|e| panic!("not JSON ({e}): {content}"));
        assert_eq!(doc, json!({"name": "Ada", "age": 36}));
        answered += 1;
    }
    assert_eq!(answered, 64);
    let stats = batcher.stats();
    assert!(stats.max_batch_sequences >= 4, "requests were not batched: {stats:?}");
    assert_eq!(stats.in_use, 0, "every slot is free again");

    let (status, ctype, text) = send(&app, axum::http::Method::GET, "/metrics", Body::empty()).await;
    assert_eq!(status, StatusCode::OK);
    assert!(ctype.starts_with("text/plain"), "{ctype}");
    assert!(text.contains("formwork_requests_succeeded_total{model=\"smollm2\"} 64"), "{text}");
    assert!(text.contains("formwork_slots{model=\"smollm2\"} 8"), "{text}");
    assert!(text.contains("formwork_time_to_first_token_seconds_count{model=\"smollm2\"} 64"), "{text}");
    assert!(text.contains("formwork_requests_running{model=\"smollm2\"} 0"), "{text}");
    // The batcher's own counters, as the batcher has them.
    let stats = batcher.stats();
    assert!(stats.steps > 0);
    for (name, value) in [
        ("formwork_batch_steps_total", stats.steps),
        ("formwork_batch_tokens_total", stats.tokens),
        ("formwork_batch_sequences_max", stats.max_batch_sequences as u64),
        ("formwork_sequence_moves_total", stats.moves),
        ("formwork_prefix_copies_total", stats.prefix_copies),
    ] {
        assert!(text.contains(&format!("{name}{{model=\"smollm2\"}} {value}\n")), "{name} {value}: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_queue_answers_503_with_retry_after() {
    // One slot, one place in the queue, slow steps: the third concurrent request is refused.
    let (app, _b) = router(&"x".repeat(200), 1, 1, Duration::from_millis(20));
    let body = |i: usize| json!({"model": "smollm2", "messages": [{"role": "user", "content": format!("q{i}")}], "max_tokens": 20});
    let a1 = app.clone();
    let first = tokio::spawn(async move { post(&a1, "/v1/chat/completions", body(1)).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let a2 = app.clone();
    let second = tokio::spawn(async move { post(&a2, "/v1/chat/completions", body(2)).await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let req = Request::builder()
        .method("POST")
        .uri("/v1/chat/completions")
        .header("content-type", "application/json")
        .body(Body::from(body(3).to_string()))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(resp.headers().get("retry-after").and_then(|v| v.to_str().ok()), Some("2"));
    let bytes = http_body_util::BodyExt::collect(resp.into_body()).await.unwrap().to_bytes();
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    assert!(v["error"]["message"].as_str().unwrap().contains("--max-queue"), "{v}");
    assert_eq!(first.await.unwrap().0, StatusCode::OK);
    assert_eq!(second.await.unwrap().0, StatusCode::OK);
    let (_, _, text) = send(&app, axum::http::Method::GET, "/metrics", Body::empty()).await;
    assert!(text.contains("formwork_requests_rejected_total{model=\"smollm2\"} 1"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_client_that_goes_away_frees_its_slot() {
    let (app, batcher) = router(&"x".repeat(2000), 1, 16, Duration::from_millis(2));
    let req = Request::builder()
        .method("POST")
        .uri("/api/generate")
        .header("content-type", "application/json")
        .body(Body::from(json!({"model": "smollm2", "prompt": "go", "stream": true, "options": {"num_predict": 2000}}).to_string()))
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    // Read a little of the stream, then hang up.
    let mut body = resp.into_body();
    let _ = http_body_util::BodyExt::frame(&mut body).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(batcher.stats().in_use, 1, "the request is generating");
    drop(body);
    let mut freed = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        if batcher.stats().in_use == 0 {
            freed = true;
            break;
        }
    }
    assert!(freed, "the slot was not freed after the client left");
    // The slot serves the next request.
    let (status, v) = post(&app, "/api/generate", json!({"model": "smollm2", "prompt": "go", "stream": false, "options": {"num_predict": 5}})).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["response"], "xxxxx");
}
