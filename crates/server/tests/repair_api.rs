//! `POST /api/repair`: JSON recovered from free text, validation, and 400s on bad input.

mod common;
use axum::http::{Method, StatusCode};
use common::*;
use formwork_server::ServerConfig;
use serde_json::json;

#[tokio::test]
async fn fenced_json_with_faults_is_repaired_and_the_fixes_named() {
    let (app, _) = router(|_| text("unused"));
    let t = "Sure! Here it is:\n```json\n{'name': 'Ada', age: 36, 'tags': ['x',],}\n```\nAnything else?";
    let (s, v) = post(&app, "/api/repair", json!({"text": t})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["json"], json!({"name": "Ada", "age": 36, "tags": ["x"]}));
    assert_eq!(v["valid"], true);
    assert_eq!(v["errors"], json!([]));
    let fixes: Vec<&str> = v["fixes"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
    for f in ["code_fence", "prose_removed", "single_quotes", "unquoted_keys", "trailing_comma"] {
        assert!(fixes.contains(&f), "{f} missing from {fixes:?}");
    }
}

#[tokio::test]
async fn schema_picks_the_valid_candidate_or_reports_errors() {
    let (app, _) = router(|_| text("unused"));
    let schema = json!({"type": "object", "properties": {"n": {"type": "integer", "minimum": 10}}, "required": ["n"]});
    let (s, v) = post(&app, "/api/repair", json!({"text": "first {\"n\": 1} then {\"n\": 12}", "schema": schema})).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["json"], json!({"n": 12}));
    assert_eq!(v["valid"], true);
    let (s, v) = post(&app, "/api/repair", json!({"text": "{\"n\": 3}", "schema": schema})).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["json"], json!({"n": 3}));
    assert_eq!(v["valid"], false);
    assert!(v["errors"][0].as_str().unwrap().contains("minimum of 10"), "{v}");
}

#[tokio::test]
async fn text_without_json_is_a_result_not_an_error() {
    let (app, _) = router(|_| text("unused"));
    let (s, v) = post(&app, "/api/repair", json!({"text": "I cannot do that."})).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["json"], json!(null));
    assert_eq!(v["valid"], false);
    assert!(v["errors"][0].as_str().unwrap().contains("no JSON found"), "{v}");
}

#[tokio::test]
async fn bad_requests_are_400_in_the_ollama_shape() {
    let cfg = ServerConfig { max_schema_bytes: 200, ..Default::default() };
    let (app, _) = router_with(cfg, |_| text("unused"));
    for (body, needle) in [
        (json!({"schema": {}}), "text"),
        (json!({"text": "{}", "schema": {"type": 5}}), "schema"),
        (json!({"text": "{}", "schema": "object"}), "schema"),
        (json!({"text": "{}", "schema": {"description": "x".repeat(300)}}), "max_schema_bytes"),
        (json!({"text": "{}", "extra": 1}), "extra"),
        (json!({"text": "x".repeat((1 << 20) + 1)}), "repair limit"),
    ] {
        let (s, v) = post(&app, "/api/repair", body).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
        assert_ollama_error(&v);
        assert!(v["error"].as_str().unwrap().contains(needle), "{needle}: {v}");
    }
    let (s, _, b) = send(&app, Method::POST, "/api/repair", "{\"text\": ").await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
}
