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
/// The envelope of a call, as the instruction asks (`formwork_engine::tool_prompt`).
/// Laid out as the envelope's grammar lays it out (pretty, two spaces).
const CALL: &str = "{\n  \"tool_calls\": [\n    {\n      \"name\": \"get_weather\",\n      \"arguments\": {\n        \"city\": \"Paris\"\n      }\n    }\n  ]\n}";
/// The envelope of an answer: a JSON string, with escapes.
const ANSWER: &str = "{\n  \"response\": \"It is \\\"sunny\\\".\\nWarm, too.\"\n}";
/// The answer's text.
const ANSWER_TEXT: &str = "It is \"sunny\".\nWarm, too.";

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

#[tokio::test]
async fn an_answer_comes_back_as_text_whole_and_streamed() {
    let ask = json!([{"role": "user", "content": "Hello!"}]);
    let app = router(SMOLLM2, ANSWER);
    let req = json!({"model": "smollm2", "messages": ask, "tools": [weather()], "temperature": 0});
    let (s, v) = post(&app, "/v1/chat/completions", req.clone()).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["choices"][0]["message"]["content"], ANSWER_TEXT, "{v}");
    assert!(v["choices"][0]["message"]["tool_calls"].is_null(), "{v}");
    assert_eq!(v["choices"][0]["finish_reason"], "stop", "{v}");

    let mut streamed = req.clone();
    streamed["stream"] = json!(true);
    let (s, _, body) = common::send(&app, axum::http::Method::POST, "/v1/chat/completions", streamed.to_string()).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let chunks: Vec<Value> = common::sse_data(&body).iter().filter(|d| *d != "[DONE]").map(|d| serde_json::from_str(d).unwrap()).collect();
    let text: String = chunks.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect();
    assert_eq!(text, ANSWER_TEXT, "{body}");
    assert!(chunks.iter().all(|c| c["choices"][0]["delta"]["tool_calls"].is_null()), "{body}");
    // Text arrives as it is generated, not in one piece at the end.
    assert!(chunks.iter().filter(|c| c["choices"][0]["delta"]["content"].as_str().is_some_and(|t| !t.is_empty())).count() > 3, "{body}");

    let req = json!({"model": "smollm2", "messages": ask, "tools": [weather()], "stream": true, "options": {"temperature": 0}});
    let (s, _, body) = common::send(&app, axum::http::Method::POST, "/api/chat", req.to_string()).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let text: String = common::lines(&body).iter().filter_map(|l| l["message"]["content"].as_str().map(str::to_string)).collect();
    assert_eq!(text, ANSWER_TEXT, "{body}");
}

#[tokio::test]
async fn a_token_limit_too_small_for_an_envelope_gives_free_text() {
    let app = router(SMOLLM2, "Hello there");
    let req = json!({"model": "smollm2", "messages": [{"role": "user", "content": "Hi"}], "tools": [weather()],
                     "temperature": 0, "max_tokens": 2});
    let (s, v) = post(&app, "/v1/chat/completions", req).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["choices"][0]["message"]["content"], "He", "{v}");
    assert_eq!(v["choices"][0]["finish_reason"], "length", "{v}");
}

#[tokio::test]
async fn streamed_calls_come_in_openai_shape() {
    let app = router(SMOLLM2, CALL);
    let req = json!({"model": "smollm2", "messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": [weather()],
                     "temperature": 0, "stream": true});
    let (s, _, body) = common::send(&app, axum::http::Method::POST, "/v1/chat/completions", req.to_string()).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let chunks: Vec<Value> = common::sse_data(&body).iter().filter(|d| *d != "[DONE]").map(|d| serde_json::from_str(d).unwrap()).collect();
    let args: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str())
        .collect();
    assert_eq!(serde_json::from_str::<Value>(&args).unwrap(), json!({"city": "Paris"}), "{body}");
    assert!(chunks.iter().all(|c| c["choices"][0]["delta"]["content"].as_str().is_none_or(str::is_empty)), "no envelope text leaks: {body}");
    assert_eq!(chunks.last().unwrap()["choices"][0]["finish_reason"], "tool_calls", "{body}");
}

#[tokio::test]
async fn a_template_that_shows_tools_keeps_free_text_and_its_own_calls() {
    let shows = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}\
{% if tools %}Tools: {{ tools | tojson }}\n{% endif %}<|im_start|>assistant\n";
    assert!(template_shows_tools(shows));
    let ask = json!([{"role": "user", "content": "Weather in Paris?"}]);
    // Free text stays free text: no envelope is asked for or read.
    let app = router(shows, "It is sunny.");
    let req = json!({"model": "smollm2", "messages": ask, "tools": [weather()], "temperature": 0});
    let (s, v) = post(&app, "/v1/chat/completions", req.clone()).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["choices"][0]["message"]["content"], "It is sunny.", "{v}");
    // A call the model writes its own way is read, and generated under the call grammar.
    let app = router(shows, r#"<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>"#);
    let (s, v) = post(&app, "/v1/chat/completions", req).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], r#"{"city":"Paris"}"#, "{v}");
}
