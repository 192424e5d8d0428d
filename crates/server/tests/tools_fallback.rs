//! Tools on a model whose chat template cannot show them (SmolLM2's real template), through
//! the real engine backend: `/api/show` lists `tools`, the definitions reach the prompt (it
//! grows by them), and a call written after them comes back as a call on both APIs.
#![cfg(feature = "engine")]

mod common;
use axum::http::StatusCode;
use common::post;
use formwork_engine::testing::ScriptedModel;
use formwork_server::capabilities::{supports_tools, template_shows_tools};
use formwork_server::engine_backend::{EngineBackend, ConstraintCache};
use formwork_server::testing::fake_meta;
use formwork_server::{app, AppState, ModelWorker, ServerConfig};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

const SMOLLM2: &str = include_str!("../../engine/tests/fixtures/smollm2.jinja");
const CALL: &str = r#"{"name": "get_weather", "arguments": {"city": "Paris"}}"#;

/// A byte-level scripted model with `template`, writing `script`, served as `smollm2` with
/// the capabilities `formwork serve` gives it.
fn router(template: &str, script: &str) -> axum::Router {
    let tokens: Vec<String> = (0x20u8..0x7f).map(|b| (b as char).to_string()).chain(["\n".to_string()]).collect();
    let mut m = ScriptedModel::new(&tokens, &["<|im_end|>", "<|im_start|>"]).with_chat_template(template, Some("<|im_start|>"));
    m.script_text(script);
    let backend = EngineBackend::new(Box::new(m), Arc::new(ConstraintCache::new(8)), formwork_grammar::Limits::default());
    let meta = formwork_server::ModelMeta {
        template: Some(template.to_string()),
        supports_tools: supports_tools(Some(template)),
        ..fake_meta("smollm2")
    };
    let w = ModelWorker::spawn(meta, Box::new(backend), Duration::ZERO).unwrap();
    app(AppState::new(ServerConfig::default(), vec![w]))
}

fn weather() -> Value {
    json!({"type": "function", "function": {"name": "get_weather", "description": "Weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}})
}

#[tokio::test]
async fn show_lists_tools_for_a_template_that_cannot_show_them() {
    assert!(!template_shows_tools(SMOLLM2));
    let app = router(SMOLLM2, "hi");
    let (s, v) = post(&app, "/api/show", json!({"model": "smollm2"})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert!(v["capabilities"].as_array().unwrap().contains(&json!("tools")), "{v}");
}

#[tokio::test]
async fn tool_definitions_reach_the_prompt_and_calls_come_back() {
    let app = router(SMOLLM2, CALL);
    let ask = json!([{"role": "user", "content": "Weather in Paris?"}]);
    let opts = json!({"temperature": 0});
    let (_, plain) = post(&app, "/api/chat", json!({"model": "smollm2", "messages": ask, "stream": false, "options": opts})).await;
    let (s, v) = post(&app, "/api/chat", json!({"model": "smollm2", "messages": ask, "tools": [weather()], "stream": false, "options": opts})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (with, without) = (v["prompt_eval_count"].as_u64().unwrap(), plain["prompt_eval_count"].as_u64().unwrap());
    // The instruction is a few hundred bytes: one token per byte in this vocabulary.
    assert!(with > without + 200, "prompt tokens: {with} with tools, {without} without");
    let call = &v["message"]["tool_calls"][0]["function"];
    assert_eq!((call["name"].as_str(), &call["arguments"]), (Some("get_weather"), &json!({"city": "Paris"})), "{v}");

    // OpenAI, `auto`: the call is read as a call.
    let req = json!({"model": "smollm2", "messages": ask, "tools": [weather()], "tool_choice": "auto", "temperature": 0});
    let (s, v) = post(&app, "/v1/chat/completions", req).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["choices"][0]["finish_reason"], "tool_calls", "{v}");
    assert_eq!(v["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], r#"{"city":"Paris"}"#, "{v}");
}

#[tokio::test]
async fn a_template_that_refuses_tools_gets_them_in_the_system_prompt() {
    let refuses = "{% if tools %}{{ raise_exception('tools are not supported') }}{% endif %}\
{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}<|im_start|>assistant\n";
    let app = router(refuses, CALL);
    let (_, v) = post(&app, "/api/show", json!({"model": "smollm2"})).await;
    assert!(v["capabilities"].as_array().unwrap().contains(&json!("tools")), "{v}");
    let req = json!({"model": "smollm2", "messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": [weather()],
                     "tool_choice": "required", "temperature": 0});
    let (s, v) = post(&app, "/v1/chat/completions", req).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "get_weather", "{v}");
}
