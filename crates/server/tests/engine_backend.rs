//! The real engine backend (formwork-engine + formwork-schema + the grammar matcher) behind
//! the HTTP layer, driven by the engine's scripted fake model: constrained output, schema
//! errors as 400s, the grammar cache, and forced tool calls.
#![cfg(feature = "engine")]

mod common;
use axum::http::StatusCode;
use common::{assert_openai_error, post};
use formwork_engine::testing::ScriptedModel;
use formwork_server::engine_backend::{EngineBackend, GrammarCache};
use formwork_server::testing::fake_meta;
use formwork_server::{app, AppState, ModelWorker, ServerConfig};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// A byte-level vocabulary (printable ASCII, newline) with ChatML specials.
fn model(script: &str) -> ScriptedModel {
    let tokens: Vec<String> = (0x20u8..0x7f).map(|b| (b as char).to_string()).chain(["\n".to_string()]).collect();
    let mut m = ScriptedModel::new(&tokens, &["<|im_end|>", "<|im_start|>"]);
    m.script_text(script);
    m
}

fn router(script: &str) -> (axum::Router, Arc<GrammarCache>) {
    let cache = Arc::new(GrammarCache::new(8));
    let backend = EngineBackend::new(Box::new(model(script)), cache.clone(), formwork_grammar::Limits::default());
    let w = ModelWorker::spawn(fake_meta("smollm2"), Box::new(backend), Duration::ZERO).unwrap();
    (app(AppState::new(ServerConfig::default(), vec![w])), cache)
}

fn person_schema() -> Value {
    json!({"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}, "age": {"type": "integer"}},
           "required": ["name", "age"], "additionalProperties": false})
}

#[tokio::test]
async fn schema_output_validates_and_grammar_is_cached() {
    let (app, cache) = router(r#"{"name":"Ada","age":36}"#);
    let req = json!({"model": "smollm2", "messages": [{"role": "user", "content": "who"}], "format": person_schema(),
                     "stream": false, "options": {"temperature": 0}});
    let (s, v) = post(&app, "/api/chat", req.clone()).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    // The scripted model's preferences and the grammar's forced tokens need not line up
    // step by step, so check what the server guarantees: the output validates.
    let content = v["message"]["content"].as_str().unwrap();
    formwork_schema::validate(&person_schema(), content).unwrap_or_else(|e| panic!("{content}: {e:?}"));
    assert_eq!(v["done_reason"], "stop");
    assert_eq!(cache.stats(), (0, 1));
    let (s, _) = post(&app, "/api/chat", req).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(cache.stats(), (1, 1), "a repeated schema is compiled once");
}

#[tokio::test]
async fn invalid_schema_is_400_naming_the_problem() {
    let (app, _) = router("{}");
    let bad = json!({"type": "object", "properties": {"a": {"type": "strnig"}}});
    let req = json!({"model": "smollm2", "messages": [{"role": "user", "content": "x"}],
                     "response_format": {"type": "json_schema", "json_schema": {"name": "b", "schema": bad}}});
    let (s, v) = post(&app, "/v1/chat/completions", req).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert_openai_error(&v);
    assert!(v["error"]["message"].as_str().unwrap().contains("type"), "{v}");
}

#[tokio::test]
async fn forced_tool_call_is_generated_under_the_parameters_schema() {
    let (app, _) = router(r#"{"name":"get_person","arguments":{"name":"Bo","age":7}}"#);
    let req = json!({"model": "smollm2", "messages": [{"role": "user", "content": "x"}], "temperature": 0,
        "tools": [{"type": "function", "function": {"name": "get_person", "parameters": person_schema()}}],
        "tool_choice": "required"});
    let (s, v) = post(&app, "/v1/chat/completions", req).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let call = &v["choices"][0]["message"]["tool_calls"][0]["function"];
    assert_eq!(call["name"], "get_person");
    let args = call["arguments"].as_str().unwrap();
    formwork_schema::validate(&person_schema(), args).unwrap_or_else(|e| panic!("{args}: {e:?}"));
}

#[tokio::test]
async fn json_mode_and_plain_text() {
    let (app, _) = router(r#"{"ok": true}"#);
    let (s, v) = post(&app, "/api/generate", json!({"model": "smollm2", "prompt": "x", "format": "json", "stream": false, "options": {"temperature": 0}})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(serde_json::from_str::<Value>(v["response"].as_str().unwrap()).unwrap(), json!({"ok": true}));
    let (_, v) = post(&app, "/api/generate", json!({"model": "smollm2", "prompt": "x", "stream": false, "options": {"temperature": 0}})).await;
    assert_eq!(v["response"], r#"{"ok": true}"#);
}

#[tokio::test]
async fn tight_budgets_close_the_document_and_too_small_ones_are_400() {
    // The script would write a long name; 24 tokens cannot hold it, so the engine closes the
    // document early: finish reason `length`, but the content validates.
    let (app, _) = router(r#"{"name":"Bartholomew Fitzgerald","age":36}"#);
    let req = json!({"model": "smollm2", "messages": [{"role": "user", "content": "who"}], "max_tokens": 24,
                     "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": person_schema()}}});
    let (s, v) = post(&app, "/v1/chat/completions", req.clone()).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let content = v["choices"][0]["message"]["content"].as_str().unwrap();
    formwork_schema::validate(&person_schema(), content).unwrap_or_else(|e| panic!("{content}: {e:?}"));
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    // `{"name":"","age":0}` is 19 one-byte tokens: 5 cannot hold any valid answer.
    let mut small = req;
    small["max_tokens"] = json!(5);
    let (s, v) = post(&app, "/v1/chat/completions", small).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert_openai_error(&v);
    assert!(v["error"]["message"].as_str().unwrap().contains("raise it to at least"), "{v}");
}
