//! Reasoning models over both APIs: Ollama `think` and `message.thinking` / `thinking`,
//! OpenAI `reasoning_effort` and `reasoning_content` (message and stream deltas); with the
//! scripted fake, and with the real engine backend over a scripted model with a
//! DeepSeek-R1-style template (reasoning free, answer validated against the schema).

mod common;
use axum::http::{Method, StatusCode};
use common::{assert_ollama_error, assert_openai_error, lines, post, send, sse_data};
use formwork_server::testing::{fake_meta, pieces, spawn_scripted_meta, Observed, Script};
use formwork_server::{app, AppState, ServerConfig, Think};
use serde_json::{json, Value};

/// A fake reasoning model: thinks "Let me think {a}." then answers `{"ok":true}`.
fn thinking_router(supports_thinking: bool) -> (axum::Router, Observed) {
    let meta = formwork_server::ModelMeta { supports_thinking, ..fake_meta("r1") };
    let (w, obs) =
        spawn_scripted_meta(meta, |_| Script::Reasoned(pieces("Let me think {a}."), pieces("{\"ok\": true}")));
    (app(AppState::new(ServerConfig::default(), vec![w])), obs)
}

fn chat(extra: Value) -> Value {
    let mut v = json!({"model": "r1", "messages": [{"role": "user", "content": "hi"}], "stream": false});
    v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    v
}

#[tokio::test]
async fn ollama_chat_returns_thinking_beside_the_content() {
    let (app, obs) = thinking_router(true);
    let (s, v) = post(&app, "/api/chat", chat(json!({}))).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["message"]["thinking"], "Let me think {a}.");
    assert_eq!(v["message"]["content"], "{\"ok\": true}");
    assert_eq!(obs.jobs.lock().unwrap()[0].think, None, "no `think`: the model's default");
    let (_, v) = post(&app, "/api/chat", chat(json!({"think": "high"}))).await;
    assert_eq!(v["message"]["thinking"], "Let me think {a}.");
    assert_eq!(obs.jobs.lock().unwrap()[1].think, Some(Think::On { effort: Some("high".into()) }));
}

#[tokio::test]
async fn ollama_think_false_skips_reasoning() {
    let (app, obs) = thinking_router(true);
    let (s, v) = post(&app, "/api/chat", chat(json!({"think": false}))).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert!(v["message"].get("thinking").is_none(), "{v}");
    assert_eq!(v["message"]["content"], "{\"ok\": true}");
    assert_eq!(obs.jobs.lock().unwrap()[0].think, Some(Think::Off));
}

#[tokio::test]
async fn ollama_think_true_on_a_model_without_reasoning_is_400() {
    let (app, _) = thinking_router(false);
    let (s, v) = post(&app, "/api/chat", chat(json!({"think": true}))).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert_ollama_error(&v);
    assert!(v["error"].as_str().unwrap().contains("does not support thinking"), "{v}");
    // `think: false` asks for what such a model does anyway.
    let (s, _) = post(&app, "/api/chat", chat(json!({"think": false}))).await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test]
async fn ollama_streams_thinking_chunks_before_content_chunks() {
    let (app, _) = thinking_router(true);
    let (s, _, body) = send(&app, Method::POST, "/api/chat", chat(json!({"stream": true})).to_string()).await;
    assert_eq!(s, StatusCode::OK);
    let ls = lines(&body);
    let thinking: String = ls.iter().filter_map(|l| l["message"]["thinking"].as_str()).collect();
    let content: String = ls.iter().map(|l| l["message"]["content"].as_str().unwrap_or("")).collect();
    assert_eq!((thinking.as_str(), content.as_str()), ("Let me think {a}.", "{\"ok\": true}"));
    let first_content = ls.iter().position(|l| l["message"]["content"] != "").unwrap();
    assert!(ls[first_content..].iter().all(|l| l["message"].get("thinking").is_none()), "{body}");
    assert_eq!(ls.last().unwrap()["done"], true);
}

#[tokio::test]
async fn ollama_generate_has_a_thinking_field() {
    let (app, _) = thinking_router(true);
    let req = json!({"model": "r1", "prompt": "hi", "stream": false});
    let (s, v) = post(&app, "/api/generate", req).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!((v["thinking"].as_str(), v["response"].as_str()), (Some("Let me think {a}."), Some("{\"ok\": true}")));
    let req = json!({"model": "r1", "prompt": "hi"});
    let (_, _, body) = send(&app, Method::POST, "/api/generate", req.to_string()).await;
    let thinking: String = lines(&body).iter().filter_map(|l| l["thinking"].as_str()).collect();
    assert_eq!(thinking, "Let me think {a}.");
}

#[tokio::test]
async fn openai_reasoning_content_in_message_and_deltas() {
    let (app, obs) = thinking_router(true);
    let req = json!({"model": "r1", "messages": [{"role": "user", "content": "hi"}]});
    let (s, v) = post(&app, "/v1/chat/completions", req.clone()).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let m = &v["choices"][0]["message"];
    assert_eq!((m["reasoning_content"].as_str(), m["content"].as_str()), (Some("Let me think {a}."), Some("{\"ok\": true}")));

    let mut stream = req.clone();
    stream["stream"] = json!(true);
    let (_, _, body) = send(&app, Method::POST, "/v1/chat/completions", stream.to_string()).await;
    let chunks: Vec<Value> =
        sse_data(&body).iter().filter(|d| *d != "[DONE]").map(|d| serde_json::from_str(d).unwrap()).collect();
    let delta = |k: &str| -> String { chunks.iter().filter_map(|c| c["choices"][0]["delta"][k].as_str()).collect() };
    assert_eq!((delta("reasoning_content").as_str(), delta("content").as_str()), ("Let me think {a}.", "{\"ok\": true}"));

    let mut off = req.clone();
    off["reasoning_effort"] = json!("none");
    let (_, v) = post(&app, "/v1/chat/completions", off).await;
    assert!(v["choices"][0]["message"].get("reasoning_content").is_none(), "{v}");
    assert_eq!(obs.jobs.lock().unwrap().last().unwrap().think, Some(Think::Off));

    let mut bad = req;
    bad["reasoning_effort"] = json!("extreme");
    let (s, v) = post(&app, "/v1/chat/completions", bad).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_openai_error(&v);
    assert_eq!(v["error"]["param"], "reasoning_effort");
}

#[cfg(feature = "engine")]
mod engine {
    use super::*;
    use formwork_engine::testing::ScriptedModel;
    use formwork_server::engine_backend::{EngineBackend, ConstraintCache};
    use formwork_server::ModelWorker;
    use std::sync::Arc;
    use std::time::Duration;

    const R1_TEMPLATE: &str = include_str!("../../engine/tests/fixtures/deepseek_r1_distill.jinja");

    /// Byte-level vocabulary plus `<think>` tags, DeepSeek specials and the R1 template; the
    /// script reasons (with braces) and then answers.
    fn r1_router(script: &str) -> axum::Router {
        let tokens: Vec<String> = (0x20u8..0x7f)
            .map(|b| (b as char).to_string())
            .chain(["\n".to_string(), "<think>".into(), "</think>".into()])
            .collect();
        let specials = ["<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<｜begin▁of▁sentence｜>"];
        let mut m = ScriptedModel::new(&tokens, &specials).with_chat_template(R1_TEMPLATE, Some("<｜begin▁of▁sentence｜>"));
        m.script_text(script);
        let backend = EngineBackend::new(Box::new(m), Arc::new(ConstraintCache::new(4)), formwork_grammar::Limits::default());
        assert!(backend.reasoning().is_some(), "the R1 template shows <think> tags");
        let meta = formwork_server::ModelMeta { supports_thinking: true, ..fake_meta("r1") };
        let w = ModelWorker::spawn(meta, Box::new(backend), Duration::ZERO).unwrap();
        app(AppState::new(ServerConfig::default(), vec![w]))
    }

    fn schema() -> Value {
        json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": false})
    }

    #[tokio::test]
    async fn schema_applies_to_the_answer_not_the_reasoning() {
        let app = r1_router("Braces {like} these [ are free here.\n</think>\n\n{\"n\":7}");
        let req = chat(json!({"format": schema(), "options": {"temperature": 0}}));
        let (s, v) = post(&app, "/api/chat", req).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        assert_eq!(v["message"]["thinking"], "Braces {like} these [ are free here.");
        assert_eq!(v["message"]["content"], "{\"n\":7}");
        assert_eq!(v["done_reason"], "stop");
    }

    #[tokio::test]
    async fn think_false_answers_directly_under_the_schema() {
        let app = r1_router("{\"n\":1}");
        let req = json!({"model": "r1", "messages": [{"role": "user", "content": "hi"}], "temperature": 0,
                         "reasoning_effort": "none",
                         "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": schema()}}});
        let (s, v) = post(&app, "/v1/chat/completions", req).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        let m = &v["choices"][0]["message"];
        assert_eq!(m["content"], "{\"n\":1}");
        assert!(m.get("reasoning_content").is_none(), "{v}");
    }
}
