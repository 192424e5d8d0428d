//! `POST /v1/systemone` end to end: the real engine backend (one-of grammar, masked
//! logprobs) over the engine's scripted model, and the request's errors.
#![cfg(feature = "engine")]

mod common;
use axum::http::StatusCode;
use common::{assert_ollama_error, post};
use formwork_engine::testing::ScriptedModel;
use formwork_server::engine_backend::{ConstraintCache, EngineBackend};
use formwork_server::testing::fake_meta;
use formwork_server::{app, AppState, ModelWorker, ServerConfig};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// A byte-level vocabulary (printable ASCII, newline) with ChatML specials, preferring
/// `script` (and, once it is spent, still its last letters).
fn router(script: &str) -> axum::Router {
    let tokens: Vec<String> = (0x20u8..0x7f).map(|b| (b as char).to_string()).chain(["\n".to_string()]).collect();
    let mut m = ScriptedModel::new(&tokens, &["<|im_end|>", "<|im_start|>"]);
    m.script_text(script);
    let backend = EngineBackend::new(Box::new(m), Arc::new(ConstraintCache::new(8)), formwork_grammar::Limits::default());
    let w = ModelWorker::spawn(fake_meta("smollm2"), Box::new(backend), Duration::ZERO).unwrap();
    app(AppState::new(ServerConfig::default(), vec![w]))
}

fn sum(probabilities: &Value) -> f64 {
    probabilities.as_object().unwrap().values().map(|p| p.as_f64().unwrap()).sum()
}

#[tokio::test]
async fn answers_every_kind_with_a_distribution_over_its_options() {
    // The scripted model prefers "B": the second option of each question.
    let app = router("B");
    let body = json!({
        "model": "smollm2",
        "state": {"ticket": "I was charged twice. Please refund the extra payment."},
        "questions": {
            "team": {"type": "choice", "instructions": "Which team?", "criteria": {"billing": "Payments", "technical": "Bugs", "other": null}},
            "refund": {"type": "noul", "instructions": "Does the customer ask for a refund?"},
            "urgency": {"type": "score", "instructions": "How urgent?", "criteria": ["Routine", "Soon", "Urgent"]}
        },
        "keep_alive": "5m"
    });
    let (s, v) = post(&app, "/v1/systemone", body).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["model"], "smollm2");
    let answers = v["answers"].as_object().unwrap();
    assert_eq!(answers.keys().collect::<Vec<_>>(), vec!["team", "refund", "urgency"], "answers in question order");
    let team = &answers["team"];
    assert_eq!(team["type"], "choice");
    assert_eq!(team["choice"], "technical", "{team}");
    assert!((sum(&team["probabilities"]) - 1.0).abs() < 1e-6, "{team}");
    assert!(team["probabilities"]["technical"].as_f64().unwrap() > 0.5, "{team}");
    let c = team["confidence"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&c));
    // Letter B of a noul question is "No": the probability of true is low.
    let refund = answers["refund"]["noul"].as_f64().unwrap();
    assert!(refund < 0.5, "{v}");
    let urgency = &answers["urgency"];
    assert_eq!(urgency["legend"], json!({"0": "Routine", "1": "Soon", "2": "Urgent"}));
    assert!((sum(&urgency["probabilities"]) - 1.0).abs() < 1e-6);
    let score = urgency["score"].as_f64().unwrap();
    let expected: f64 = (0..3).map(|i| i as f64 * urgency["probabilities"][i.to_string()].as_f64().unwrap()).sum();
    assert!((score - expected).abs() < 1e-9 && (0.0..=2.0).contains(&score), "{urgency}");
    assert!(v["usage"]["input_tokens"].as_u64().unwrap() > 0);
    assert_eq!(v["usage"]["output_tokens"], 3, "one letter per question");
}

#[tokio::test]
async fn bad_requests_are_400s_saying_why() {
    let app = router("A");
    let cases = [
        (json!({"model": "smollm2", "state": "s", "questions": {}}), "at least one"),
        (json!({"model": "smollm2", "state": "", "questions": {"q": {"type": "noul", "instructions": "x"}}}), "state is empty"),
        (json!({"model": "smollm2", "state": 3, "questions": {"q": {"type": "noul", "instructions": "x"}}}), "state must be text"),
        (json!({"model": "smollm2", "state": "s", "questions": {"q": {"type": "choice", "instructions": "x", "criteria": {"a": null}}}}), "questions.q: has 1 criteria"),
        (json!({"model": "smollm2", "state": "s", "questions": {"q": {"type": "rank", "instructions": "x"}}}), "unknown type `rank`"),
    ];
    for (body, want) in cases {
        let (s, v) = post(&app, "/v1/systemone", body.clone()).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body} -> {v}");
        assert_ollama_error(&v);
        assert!(v["error"].as_str().unwrap().contains(want), "{body}: {v} lacks {want:?}");
    }
    let (s, v) = post(&app, "/v1/systemone", json!({"model": "nimble", "state": "s", "questions": {"q": {"type": "noul", "instructions": "x"}}})).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
    let many: serde_json::Map<String, Value> = (0..65).map(|i| (format!("q{i}"), json!({"type": "noul", "instructions": "x"}))).collect();
    let (s, v) = post(&app, "/v1/systemone", json!({"model": "smollm2", "state": "s", "questions": many})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
}
