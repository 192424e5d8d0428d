//! The Ollama API over a scripted fake model.

mod common;
use axum::body::Body;
use axum::http::{Method, StatusCode};
use common::*;
use formwork_server::testing::Script;
use formwork_server::{BackendError, ConstraintRequest};
use serde_json::{json, Value};

#[tokio::test]
async fn root_version_tags_show() {
    let (app, _) = router(|_| text("hi"));
    let (s, _, b) = send(&app, Method::GET, "/", Body::empty()).await;
    assert_eq!((s, b.as_str()), (StatusCode::OK, "Ollama is running"));
    let (s, _, b) = send(&app, Method::HEAD, "/", Body::empty()).await;
    assert_eq!((s, b.as_str()), (StatusCode::OK, ""));
    let (s, v) = get(&app, "/api/version").await;
    assert_eq!(s, StatusCode::OK);
    assert!(v["version"].is_string());
    let (_, v) = get(&app, "/api/tags").await;
    let m = &v["models"][0];
    assert_eq!(m["name"], "smollm2:latest");
    let (s, ps) = get(&app, "/api/ps").await;
    assert_eq!(s, StatusCode::OK);
    let p = &ps["models"][0];
    assert_eq!((&p["name"], &p["digest"], &p["size"]), (&m["name"], &m["digest"], &m["size"]));
    assert_eq!(p["details"], m["details"]);
    assert!(p["expires_at"].as_str().unwrap().starts_with("2318-"), "never expires: {p}");
    assert!(p["context_length"].as_u64().unwrap() > 0);
    assert!(p["slots"].as_u64().unwrap() >= 1);
    assert_eq!((p["slots_busy"].as_u64(), p["queued"].as_u64()), (Some(0), Some(0)), "idle: {p}");
    assert_eq!(m["details"]["family"], "llama");
    assert_eq!(m["digest"].as_str().unwrap().len(), 64);
    let (s, v) = post(&app, "/api/show", json!({"model": "smollm2"})).await;
    assert_eq!(s, StatusCode::OK);
    assert!(v["capabilities"].as_array().unwrap().contains(&json!("completion")));
    assert_eq!(v["details"]["quantization_level"], "Q8_0");
    let (s, v) = post(&app, "/api/show", json!({"model": "nope"})).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_ollama_error(&v);
}

#[tokio::test]
async fn chat_non_streaming_has_ollama_fields() {
    let (app, obs) = router(|_| text("Hello there, friend."));
    let req = json!({
        "model": "smollm2:latest",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hello"}],
        "stream": false,
        "keep_alive": "5m",
        "options": {"temperature": 0.2, "top_k": 10, "top_p": 0.5, "min_p": 0.05, "seed": 42, "num_predict": 50,
                    "repeat_penalty": 1.2, "repeat_last_n": 32, "presence_penalty": 0.1, "frequency_penalty": 0.3,
                    "num_ctx": 2048, "num_gpu": 99, "stop": ["\n\n"]}
    });
    let (s, v) = post(&app, "/api/chat", req).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["model"], "smollm2:latest");
    assert_eq!(v["message"]["role"], "assistant");
    assert_eq!(v["message"]["content"], "Hello there, friend.");
    assert_eq!(v["done"], true);
    assert_eq!(v["done_reason"], "stop");
    for k in ["total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration", "eval_count", "eval_duration"] {
        assert!(v[k].is_u64(), "{k} missing in {v}");
    }
    assert_eq!(v["eval_count"], 3);
    assert!(v["created_at"].as_str().unwrap().ends_with('Z'));
    let job = obs.jobs.lock().unwrap()[0].clone();
    assert_eq!(job.sampling.temperature, Some(0.2));
    assert_eq!(job.sampling.top_k, Some(10));
    assert_eq!(job.sampling.min_p, Some(0.05));
    assert_eq!(job.sampling.seed, Some(42));
    assert_eq!(job.sampling.repeat_last_n, Some(32));
    assert_eq!(job.num_predict, 50);
    assert_eq!(job.num_ctx, Some(2048));
    assert_eq!(job.stop, vec!["\n\n".to_string()]);
    assert_eq!(job.constraint, ConstraintRequest::None);
}

#[tokio::test]
async fn chat_streams_ndjson_by_default() {
    let (app, _) = router(|_| text("one two three"));
    let (s, ctype, body) =
        send(&app, Method::POST, "/api/chat", json!({"model": "smollm2", "messages": [{"role": "user", "content": "count"}]}).to_string()).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(ctype, "application/x-ndjson");
    let ls = lines(&body);
    assert_eq!(ls.len(), 4, "3 pieces and a final line: {body}");
    let content: String = ls.iter().map(|l| l["message"]["content"].as_str().unwrap()).collect();
    assert_eq!(content, "one two three");
    assert!(ls[..3].iter().all(|l| l["done"] == false && l.get("done_reason").is_none()));
    let last = ls.last().unwrap();
    assert_eq!(last["done"], true);
    assert_eq!(last["done_reason"], "stop");
    assert!(last["eval_count"].is_u64());
}

#[tokio::test]
async fn generate_streaming_and_not() {
    let (app, obs) = router(|_| text("blue sky"));
    let (s, v) = post(&app, "/api/generate", json!({"model": "smollm2", "prompt": "Why?", "system": "Short.", "stream": false})).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["response"], "blue sky");
    assert_eq!(v["done"], true);
    let (_, _, body) = send(&app, Method::POST, "/api/generate", json!({"model": "smollm2", "prompt": "Why?"}).to_string()).await;
    let ls = lines(&body);
    assert_eq!(ls.iter().map(|l| l["response"].as_str().unwrap()).collect::<String>(), "blue sky");
    assert_eq!(ls.last().unwrap()["done_reason"], "stop");
    // raw prompt goes to the model as is
    post(&app, "/api/generate", json!({"model": "smollm2", "prompt": "<|im_start|>x", "raw": true, "stream": false})).await;
    let jobs = obs.jobs.lock().unwrap();
    assert!(matches!(&jobs[0].prompt, formwork_server::backend::PromptSpec::Chat { messages, .. } if messages[0].role == "system" && messages[1].content == "Why?"));
    assert_eq!(jobs[2].prompt, formwork_server::backend::PromptSpec::Raw("<|im_start|>x".into()));
}

#[tokio::test]
async fn empty_messages_is_a_load_request() {
    let (app, obs) = router(|_| text("x"));
    let (s, v) = post(&app, "/api/chat", json!({"model": "smollm2", "messages": []})).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["done_reason"], "load");
    let (_, v) = post(&app, "/api/generate", json!({"model": "smollm2"})).await;
    assert_eq!(v["done_reason"], "load");
    assert!(obs.jobs.lock().unwrap().is_empty());
}

#[tokio::test]
async fn format_json_and_schema_become_constraints() {
    let (app, obs) = router(|_| text("{\"a\": 1}"));
    let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]});
    post(&app, "/api/chat", json!({"model": "smollm2", "messages": [{"role": "user", "content": "x"}], "format": "json", "stream": false})).await;
    let (s, v) = post(&app, "/api/chat", json!({"model": "smollm2", "messages": [{"role": "user", "content": "x"}], "format": schema, "stream": false})).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["message"]["content"], "{\"a\": 1}");
    let jobs = obs.jobs.lock().unwrap();
    assert_eq!(jobs[0].constraint, ConstraintRequest::Json);
    assert!(matches!(&jobs[1].constraint, ConstraintRequest::Schema { schema: s, strict: false } if **s == schema));
}

#[tokio::test]
async fn bad_format_and_think_are_400() {
    let (app, _) = router(|_| text("x"));
    let (s, v) = post(&app, "/api/chat", json!({"model": "smollm2", "messages": [{"role": "user", "content": "x"}], "format": "yaml"})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(v["error"].as_str().unwrap().contains("yaml"));
    let (s, v) = post(&app, "/api/chat", json!({"model": "smollm2", "messages": [{"role": "user", "content": "x"}], "format": 3})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    let (s, v) = post(&app, "/api/chat", json!({"model": "smollm2", "messages": [{"role": "user", "content": "x"}], "think": true})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(v["error"].as_str().unwrap().contains("does not support thinking"));
    let (s, _) = post(&app, "/api/chat", json!({"model": "smollm2", "messages": [{"role": "robot", "content": "x"}]})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn backend_schema_error_is_400_before_streaming() {
    let (app, _) = router(|_| {
        Script::Fail(BackendError::BadRequest { message: "invalid or unsupported JSON Schema: unsupported keyword `patternProperties` at the root".into(), param: None })
    });
    let req = json!({"model": "smollm2", "messages": [{"role": "user", "content": "x"}], "format": {"type": "object", "patternProperties": {"a": {}}}});
    let (s, v) = post(&app, "/api/chat", req).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(v["error"].as_str().unwrap().contains("patternProperties"));
}

#[tokio::test]
async fn num_predict_is_clamped_and_reports_length() {
    let cfg = formwork_server::ServerConfig { max_num_predict: 2, ..Default::default() };
    let (app, obs) = router_with(cfg, |_| text("a b c d e"));
    let (_, v) = post(&app, "/api/generate", json!({"model": "smollm2", "prompt": "x", "stream": false, "options": {"num_predict": 1000000}})).await;
    assert_eq!(v["done_reason"], "length");
    assert_eq!(v["response"], "a b ");
    assert_eq!(obs.jobs.lock().unwrap()[0].num_predict, 2);
}

#[tokio::test]
async fn stop_strings_end_generation() {
    let (app, _) = router(|_| text("alpha beta. gamma delta"));
    let (_, v) = post(&app, "/api/generate", json!({"model": "smollm2", "prompt": "x", "stream": false, "options": {"stop": "."}})).await;
    assert_eq!(v["response"], "alpha beta");
}

#[tokio::test]
async fn tools_give_tool_calls() {
    let (app, obs) = router(|_| text(r#"<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>"#));
    let req = json!({
        "model": "smollm2", "stream": false,
        "messages": [{"role": "user", "content": "Weather in Paris?"}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather now",
                   "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    });
    let (s, v) = post(&app, "/api/chat", req).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["message"]["tool_calls"][0]["function"]["name"], "get_weather");
    assert_eq!(v["message"]["tool_calls"][0]["function"]["arguments"]["city"], "Paris");
    assert!(matches!(obs.jobs.lock().unwrap()[0].constraint, ConstraintRequest::TextOrCall { .. }));
}

fn weather_tool() -> Value {
    json!([{"type": "function", "function": {"name": "get_weather", "description": "Weather now",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])
}

#[tokio::test]
async fn streamed_tool_calls_come_in_a_line_of_their_own_then_done() {
    let two = "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>\n\
               <tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}</tool_call>";
    let (app, _) = router(move |_| text(two));
    let req = json!({"model": "smollm2", "messages": [{"role": "user", "content": "Weather in Paris and Rome?"}], "tools": weather_tool()});
    let (s, _, body) = send(&app, Method::POST, "/api/chat", req.to_string()).await;
    assert_eq!(s, StatusCode::OK);
    let ls = lines(&body);
    assert_eq!(ls.len(), 2, "the call text is not streamed as content: {body}");
    assert_eq!(ls[0]["done"], false);
    assert_eq!(ls[0]["message"]["content"], "");
    let cities: Vec<&str> = ls[0]["message"]["tool_calls"].as_array().unwrap().iter().map(|c| c["function"]["arguments"]["city"].as_str().unwrap()).collect();
    assert_eq!(cities, ["Paris", "Rome"]);
    assert_eq!(ls[1]["done"], true);
    assert_eq!(ls[1]["done_reason"], "stop");
    assert!(ls[1]["message"].get("tool_calls").is_none());
}

#[tokio::test]
async fn streamed_text_with_tools_offered_comes_piece_by_piece() {
    let (app, _) = router(|_| text("It is sunny in Paris today."));
    let req = json!({"model": "smollm2", "messages": [{"role": "user", "content": "Weather?"}], "tools": weather_tool()});
    let (_, _, body) = send(&app, Method::POST, "/api/chat", req.to_string()).await;
    let ls = lines(&body);
    let pieces: Vec<&str> = ls.iter().filter(|l| l["done"] == false).map(|l| l["message"]["content"].as_str().unwrap()).collect();
    assert!(pieces.len() >= 4, "{body}");
    let all: String = ls.iter().map(|l| l["message"]["content"].as_str().unwrap()).collect();
    assert_eq!(all, "It is sunny in Paris today.");
    assert_eq!(ls.last().unwrap()["done"], true);
    assert!(ls.iter().all(|l| l["message"].get("tool_calls").is_none()));
}

#[tokio::test]
async fn schema_in_prompt_is_opt_in_and_checked() {
    use formwork_server::SchemaPlacement;
    let (app, obs) = router(|_| text("{}"));
    let base = json!({"model": "smollm2", "messages": [{"role": "user", "content": "x"}], "format": "json", "stream": false});
    for (field, want) in [(None, None), (Some(json!(true)), Some(SchemaPlacement::User)), (Some(json!("system")), Some(SchemaPlacement::System)), (Some(json!(false)), None)] {
        let mut req = base.clone();
        if let Some(f) = field {
            req["schema_in_prompt"] = f;
        }
        let (s, v) = post(&app, "/api/chat", req).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        assert_eq!(obs.jobs.lock().unwrap().last().unwrap().schema_in_prompt, want);
    }
    let mut g = json!({"model": "smollm2", "prompt": "x", "format": "json", "stream": false, "schema_in_prompt": "user"});
    let (s, _) = post(&app, "/api/generate", g.clone()).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(obs.jobs.lock().unwrap().last().unwrap().schema_in_prompt, Some(SchemaPlacement::User));
    g["schema_in_prompt"] = json!("everywhere");
    let (s, v) = post(&app, "/api/generate", g).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(v["error"].as_str().unwrap().contains("schema_in_prompt"), "{v}");
}
