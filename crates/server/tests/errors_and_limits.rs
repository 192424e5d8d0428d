//! Error shapes, limits, panics, cancellation, queueing and graceful shutdown.

mod common;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use common::*;
use formwork_server::testing::Script;
use formwork_server::ServerConfig;
use http_body_util::BodyExt;
use serde_json::json;
use std::time::{Duration, Instant};
use tower::ServiceExt;

#[tokio::test]
async fn malformed_json_in_each_dialect() {
    let (app, _) = router(|_| text("x"));
    let (s, _, b) = send(&app, Method::POST, "/api/chat", "{\"model\": ").await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let v: serde_json::Value = serde_json::from_str(&b).unwrap();
    assert_ollama_error(&v);
    assert!(v["error"].as_str().unwrap().contains("truncated"), "{v}");
    let (s, _, b) = send(&app, Method::POST, "/v1/chat/completions", "not json").await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let v: serde_json::Value = serde_json::from_str(&b).unwrap();
    assert_openai_error(&v);
    assert_eq!(v["error"]["type"], "invalid_request_error");
    // well-formed JSON of the wrong shape names the field
    let (s, v) = post(&app, "/v1/chat/completions", json!({"model": "smollm2", "messages": "hi"})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(v["error"]["message"].as_str().unwrap().contains("does not fit"), "{v}");
    let (s, v) = post(&app, "/api/generate", json!({"prompt": "x"})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(v["error"].as_str().unwrap().contains("model"), "{v}");
}

#[tokio::test]
async fn unknown_model_is_404_in_each_dialect() {
    let (app, _) = router(|_| text("x"));
    let (s, v) = post(&app, "/api/chat", json!({"model": "llama9", "messages": [{"role": "user", "content": "x"}]})).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert!(v["error"].as_str().unwrap().contains("llama9"));
    let (s, v) = post(&app, "/v1/chat/completions", json!({"model": "gpt-9", "messages": [{"role": "user", "content": "x"}]})).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_openai_error(&v);
    assert_eq!(v["error"]["code"], "model_not_found");
    assert_eq!(v["error"]["param"], "model");
    let (s, v) = get(&app, "/v1/models/gpt-9").await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_openai_error(&v);
    let (s, v) = get(&app, "/v1/nothing").await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_openai_error(&v);
}

#[tokio::test]
async fn oversized_body_is_413_and_big_schema_is_400() {
    let cfg = ServerConfig { max_body_bytes: 1000, max_schema_bytes: 200, ..Default::default() };
    let (app, _) = router_with(cfg, |_| text("ok"));
    let big = "x".repeat(5000);
    let (s, v) = post(&app, "/api/generate", json!({"model": "smollm2", "prompt": big})).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE);
    assert_ollama_error(&v);
    let (s, v) = post(&app, "/v1/completions", json!({"model": "smollm2", "prompt": big})).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE);
    assert_openai_error(&v);
    let props: serde_json::Map<_, _> = (0..20).map(|i| (format!("p{i}"), json!({"type": "string"}))).collect();
    let schema = json!({"type": "object", "properties": props});
    let (s, v) = post(&app, "/api/chat", json!({"model": "smollm2", "messages": [{"role": "user", "content": "x"}], "format": schema})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(v["error"].as_str().unwrap().contains("max_schema_bytes"), "{v}");
    // still serving
    let (s, v) = post(&app, "/api/generate", json!({"model": "smollm2", "prompt": "hi", "stream": false})).await;
    assert_eq!((s, v["response"].as_str()), (StatusCode::OK, Some("ok")));
}

#[tokio::test]
async fn a_panic_fails_one_request_only() {
    let (app, _) = router(|job| {
        if formwork_server::testing::prompt_text(job).contains("boom") {
            Script::Panic("scripted panic".into())
        } else {
            text("fine")
        }
    });
    let (s, v) = post(&app, "/api/generate", json!({"model": "smollm2", "prompt": "boom", "stream": false})).await;
    assert_eq!(s, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(v["error"].as_str().unwrap().contains("scripted panic"));
    let (s, v) = post(&app, "/v1/completions", json!({"model": "smollm2", "prompt": "boom"})).await;
    assert_eq!(s, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(v["error"]["type"], "server_error");
    let (s, v) = post(&app, "/api/generate", json!({"model": "smollm2", "prompt": "calm", "stream": false})).await;
    assert_eq!((s, v["response"].as_str()), (StatusCode::OK, Some("fine")));
}

#[tokio::test]
async fn client_disconnect_stops_generation() {
    let many: Vec<String> = (0..200).map(|i| format!("w{i} ")).collect();
    let (app, obs) = router(move |_| Script::Slow(many.clone(), Duration::from_millis(10)));
    let req = Request::post("/api/generate").body(Body::from(json!({"model": "smollm2", "prompt": "x"}).to_string())).unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let mut body = resp.into_body();
    let first = body.frame().await.unwrap().unwrap();
    assert!(first.is_data());
    drop(body); // the client goes away
    tokio::time::sleep(Duration::from_millis(150)).await;
    let emitted = *obs.emitted.lock().unwrap();
    assert!(emitted < 30, "generation went on after the client left: {emitted} pieces");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(*obs.emitted.lock().unwrap() <= emitted + 1, "generation did not stop");
}

#[tokio::test]
async fn wall_time_limit_is_504() {
    let cfg = ServerConfig { max_wall_time: Duration::from_millis(100), ..Default::default() };
    let many: Vec<String> = (0..100).map(|i| format!("w{i} ")).collect();
    let (app, _) = router_with(cfg, move |_| Script::Slow(many.clone(), Duration::from_millis(10)));
    let t = Instant::now();
    let (s, v) = post(&app, "/api/generate", json!({"model": "smollm2", "prompt": "x", "stream": false})).await;
    assert_eq!(s, StatusCode::GATEWAY_TIMEOUT, "{v}");
    assert!(v["error"].as_str().unwrap().contains("wall-time"));
    assert!(t.elapsed() < Duration::from_millis(900));
}

#[tokio::test]
async fn concurrent_requests_queue_and_all_finish() {
    let (app, obs) = router(|job| Script::Slow(vec![formwork_server::testing::prompt_text(job)], Duration::from_millis(2)));
    let mut handles = Vec::new();
    for i in 0..40 {
        let app = app.clone();
        handles.push(tokio::spawn(async move {
            post(&app, "/api/generate", json!({"model": "smollm2", "prompt": format!("p{i}"), "stream": false})).await
        }));
    }
    for (i, h) in handles.into_iter().enumerate() {
        let (s, v) = h.await.unwrap();
        assert_eq!(s, StatusCode::OK);
        assert_eq!(v["response"], format!("p{i}"));
    }
    assert_eq!(obs.jobs.lock().unwrap().len(), 40);
}

#[tokio::test]
async fn serves_on_a_socket_and_shuts_down_gracefully() {
    let (w, _) = formwork_server::testing::spawn_scripted("smollm2", |_| text("hello"));
    let state = formwork_server::AppState::new(ServerConfig::default(), vec![w]);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(formwork_server::serve(listener, state, async move {
        let _ = stop_rx.await;
    }));
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /api/version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert!(out.contains("\"version\""));
    stop_tx.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), server).await.expect("server stops").unwrap().unwrap();
}
