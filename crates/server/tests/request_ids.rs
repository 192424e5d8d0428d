//! `x-request-id` on every response: the client's, echoed, or a fresh one.

mod common;
use axum::http::{Method, StatusCode};
use common::*;
use serde_json::json;

#[tokio::test]
async fn every_response_has_a_request_id_echoed_or_made_up() {
    let (app, _) = router(|_| text("hi there"));
    let chat = json!({"model": "smollm2", "messages": [{"role": "user", "content": "x"}]}).to_string();
    let (s, a) = id_of(&app, Method::GET, "/api/version", "", None).await;
    assert_eq!(s, StatusCode::OK);
    let (_, b) = id_of(&app, Method::GET, "/api/version", "", None).await;
    assert!(a.starts_with("req_") && b.starts_with("req_") && a != b, "{a} {b}");
    // Echoed on answers, streams and errors alike, in both APIs.
    for (method, path, body, status) in [
        (Method::POST, "/api/chat", chat.as_str(), StatusCode::OK),
        (Method::POST, "/v1/chat/completions", chat.as_str(), StatusCode::OK),
        (Method::POST, "/v1/chat/completions", "{", StatusCode::BAD_REQUEST),
        (Method::GET, "/v1/nothing", "", StatusCode::NOT_FOUND),
    ] {
        let (s, id) = id_of(&app, method, path, body, Some("client-id-42")).await;
        assert_eq!((s, id.as_str()), (status, "client-id-42"), "{path}");
    }
    // An id that is too long, or not printable, is replaced.
    let long = "x".repeat(500);
    let (_, id) = id_of(&app, Method::GET, "/api/version", "", Some(&long)).await;
    assert!(id.starts_with("req_"), "{id}");
    let (_, id) = id_of(&app, Method::GET, "/api/version", "", Some("a b")).await;
    assert!(id.starts_with("req_"), "{id}");
}
