//! The real engine backend (formwork-engine + formwork-schema + the grammar matcher) behind
//! the HTTP layer, driven by the engine's scripted fake model: constrained output, schema
//! errors as 400s, the grammar cache, and forced tool calls.
#![cfg(feature = "engine")]

mod common;
use axum::http::StatusCode;
use common::{assert_openai_error, post};
use formwork_engine::testing::ScriptedModel;
use formwork_server::engine_backend::{EngineBackend, ConstraintCache};
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

fn router(script: &str) -> (axum::Router, Arc<ConstraintCache>) {
    let cache = Arc::new(ConstraintCache::new(8));
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
    let (app, _) = router(&envelope(&[r#"{"name":"get_person","arguments":{"name":"Bo","age":7}}"#]));
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

#[tokio::test]
async fn the_whitespace_field_lays_out_json_answers_on_both_apis() {
    // Under `pretty` the grammar allows one layout only: the script follows it (the
    // scripted model cannot step around forced tokens it did not plan).
    let pretty = "{\n  \"name\": \"Ada\",\n  \"age\": 36\n}";
    let (app, cache) = router(pretty);
    let req = json!({"model": "smollm2", "messages": [{"role": "user", "content": "who"}], "format": person_schema(),
                     "stream": false, "options": {"temperature": 0}, "whitespace": "pretty"});
    let (s, v) = post(&app, "/api/chat", req).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["message"]["content"], pretty, "{v}");
    let req = json!({"model": "smollm2", "messages": [{"role": "user", "content": "who"}], "temperature": 0, "whitespace": "pretty",
                     "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": person_schema()}}});
    let (s, v) = post(&app, "/v1/chat/completions", req).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["choices"][0]["message"]["content"], pretty, "{v}");
    assert_eq!(cache.stats(), (1, 1), "the same schema and layout are compiled once");
    let (app, _) = router(r#"{"name":"Ada","age":36}"#);
    let (s, v) = post(&app, "/api/generate", json!({"model": "smollm2", "prompt": "x", "format": "json", "stream": false, "whitespace": "compact"})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["response"], r#"{"name":"Ada","age":36}"#);
    let (s, v) = post(&app, "/api/generate", json!({"model": "smollm2", "prompt": "x", "whitespace": "tidy"})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert!(v["error"].as_str().unwrap().contains("pretty"), "{v}");
}

/// Parameters as `openai.pydantic_function_tool` writes them for a model with nested models
/// and an enum: `$defs` at the parameters' root, `$ref`s to it, one `$def` referring to another.
fn query_parameters() -> Value {
    json!({
        "$defs": {
            "Column": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8}, "kind": {"$ref": "#/$defs/Kind"}},
                       "required": ["name", "kind"], "additionalProperties": false},
            "Kind": {"enum": ["text", "integer"], "type": "string"},
            "Table": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                                      "columns": {"type": "array", "items": {"$ref": "#/$defs/Column"}, "maxItems": 3}},
                      "required": ["name", "columns"], "additionalProperties": false}
        },
        "type": "object",
        "properties": {"table": {"$ref": "#/$defs/Table"}, "limit": {"type": "integer"}},
        "required": ["table", "limit"],
        "additionalProperties": false
    })
}

const QUERY_CALL: &str = r#"{"name":"query","arguments":{"table":{"name":"t","columns":[{"name":"a","kind":"integer"}]},"limit":3}}"#;

fn tool(name: &str, parameters: Value) -> Value {
    json!({"type": "function", "function": {"name": name, "parameters": parameters}})
}

/// The calls of a chat completion, each checked against its tool's own parameters schema.
fn checked_calls(v: &Value, tools: &Value) -> Vec<(String, Value)> {
    let calls = v["choices"][0]["message"]["tool_calls"].as_array().unwrap_or_else(|| panic!("no tool calls: {v}"));
    calls
        .iter()
        .map(|c| {
            let name = c["function"]["name"].as_str().unwrap().to_string();
            let args = c["function"]["arguments"].as_str().unwrap();
            let params = &tools.as_array().unwrap().iter().find(|t| t["function"]["name"] == name.as_str()).unwrap()["function"]["parameters"];
            formwork_schema::validate(params, args).unwrap_or_else(|e| panic!("{name}({args}): {e:?}"));
            (name, serde_json::from_str(args).unwrap())
        })
        .collect()
}

/// What a model whose template cannot show tools (this one has no template) is asked to
/// write to make `calls` (see `formwork_engine::tool_prompt`).
fn envelope(calls: &[&str]) -> String {
    let calls: Vec<Value> = calls.iter().map(|c| serde_json::from_str(c).unwrap()).collect();
    // Laid out as the envelope's grammar lays it out (pretty, two spaces), so that the
    // scripted model's text and the forced whitespace agree.
    serde_json::to_string_pretty(&json!({"tool_calls": calls})).unwrap()
}

fn chat(tools: &Value, choice: Value) -> Value {
    let mut req = json!({"model": "smollm2", "messages": [{"role": "user", "content": "x"}], "temperature": 0, "tools": tools});
    if !choice.is_null() {
        req["tool_choice"] = choice;
    }
    req
}

#[tokio::test]
async fn tool_parameters_with_defs_work_under_every_tool_choice() {
    // One tool, `$defs` with nested references; then the same tool among others.
    let one = json!([tool("query", query_parameters())]);
    let many = json!([tool("other", json!({"type": "object", "properties": {"q": {"$ref": "#/$defs/Table"}},
                                           "$defs": {"Table": {"type": "boolean"}}})),
                      tool("query", query_parameters())]);
    for tools in [&one, &many] {
        for choice in [json!("required"), json!({"type": "function", "function": {"name": "query"}}), json!("auto"), Value::Null] {
            let (app, _) = router(&envelope(&[QUERY_CALL]));
            let (s, v) = post(&app, "/v1/chat/completions", chat(tools, choice.clone())).await;
            assert_eq!(s, StatusCode::OK, "{choice}: {v}");
            let calls = checked_calls(&v, tools);
            assert_eq!(calls.len(), 1, "{v}");
            assert_eq!(calls[0].1["table"]["columns"][0]["kind"], "integer", "{choice}: {v}");
        }
    }
}

#[tokio::test]
async fn each_tool_resolves_its_own_definitions() {
    // Both tools define `X`, differently; `definitions`, names escaped in the pointer (`a/b`
    // as `a~1b`) and in the URI fragment (`s t` as `s%20t`) too.
    let tools = json!([
        tool("s", json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/s%20t"}}, "required": ["x"],
                         "$defs": {"s t": {"$ref": "#/$defs/X"}, "X": {"type": "string"}}})),
        tool("n", json!({"type": "object", "properties": {"x": {"$ref": "#/definitions/a~1b"}}, "required": ["x"],
                         "definitions": {"a/b": {"$ref": "#/definitions/X"}, "X": {"type": "integer", "minimum": 5}}}))
    ]);
    let (app, _) = router(&envelope(&[r#"{"name":"n","arguments":{"x":7}}"#]));
    let (s, v) = post(&app, "/v1/chat/completions", chat(&tools, json!("required"))).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(checked_calls(&v, &tools), vec![("n".to_string(), json!({"x": 7}))]);
    // The script's -3 is below tool n's minimum: the grammar must not take it. (A 3 would be
    // taken as the start of a larger number, whose digits the script could then not end.)
    let (app, _) = router(&envelope(&[r#"{"name":"n","arguments":{"x":-3}}"#]));
    let (s, v) = post(&app, "/v1/chat/completions", chat(&tools, json!({"type": "function", "function": {"name": "n"}}))).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let calls = checked_calls(&v, &tools);
    assert!(calls[0].1["x"].as_i64().unwrap() >= 5, "{v}");
    // Ollama's /api/chat (tools mean auto) compiles the same calls.
    let (app, _) = router(&envelope(&[r#"{"name":"s","arguments":{"x":"hi"}}"#]));
    let req = json!({"model": "smollm2", "messages": [{"role": "user", "content": "x"}], "tools": tools, "stream": false,
                     "options": {"temperature": 0}});
    let (s, v) = post(&app, "/api/chat", req).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["message"]["tool_calls"][0]["function"], json!({"name": "s", "arguments": {"x": "hi"}}));
}

#[tokio::test]
async fn parallel_calls_each_validated_and_one_without_them() {
    let tools = json!([tool("query", query_parameters()), tool("ping", json!({"type": "object", "properties": {}}))]);
    let script = envelope(&[QUERY_CALL, r#"{"name":"ping","arguments":{}}"#]);
    for choice in [json!("required"), json!("auto")] {
        let (app, _) = router(&script);
        let (s, v) = post(&app, "/v1/chat/completions", chat(&tools, choice.clone())).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        let names: Vec<String> = checked_calls(&v, &tools).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["query", "ping"], "{choice}: {v}");
        let ids: Vec<&str> = v["choices"][0]["message"]["tool_calls"].as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap()).collect();
        assert_ne!(ids[0], ids[1]);
        let (app, _) = router(&script);
        let mut req = chat(&tools, choice.clone());
        req["parallel_tool_calls"] = json!(false);
        let (s, v) = post(&app, "/v1/chat/completions", req).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        let names: Vec<String> = checked_calls(&v, &tools).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["query"], "{choice}: {v}");
    }
}

#[tokio::test]
async fn tools_declaring_the_same_anchor_are_refused() {
    let tools = json!([tool("a", json!({"$defs": {"p": {"$anchor": "place", "type": "string"}}, "properties": {"x": {"$ref": "#place"}}})),
                       tool("b", json!({"$defs": {"p": {"$anchor": "place", "type": "integer"}}, "properties": {"x": {"$ref": "#place"}}}))]);
    let (app, _) = router("{}");
    let (s, v) = post(&app, "/v1/chat/completions", chat(&tools, json!("required"))).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["error"]["param"], "tools");
}
