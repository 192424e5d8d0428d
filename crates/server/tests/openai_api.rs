//! The OpenAI API over a scripted fake model.

mod common;
use axum::http::{Method, StatusCode};
use common::*;
use formwork_server::ConstraintRequest;
use serde_json::{json, Value};

#[tokio::test]
async fn models_list() {
    let (app, _) = router(|_| text("x"));
    let (s, v) = get(&app, "/v1/models").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["object"], "list");
    assert_eq!(v["data"][0]["id"], "smollm2");
    assert_eq!(v["data"][0]["object"], "model");
    let (s, v) = get(&app, "/v1/models/smollm2").await;
    assert_eq!((s, v["id"].as_str()), (StatusCode::OK, Some("smollm2")));
}

#[tokio::test]
async fn chat_completion_shape_and_options() {
    let (app, obs) = router(|_| text("Paris is the capital."));
    let req = json!({
        "model": "smollm2",
        "messages": [{"role": "developer", "content": "Answer."}, {"role": "user", "content": [{"type": "text", "text": "Capital of France?"}]}],
        "temperature": 0, "top_p": 0.9, "seed": 7, "max_completion_tokens": 64, "stop": ["\n"], "user": "u1"
    });
    let (s, v) = post(&app, "/v1/chat/completions", req).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["object"], "chat.completion");
    assert!(v["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert!(v["created"].is_u64());
    let c = &v["choices"][0];
    assert_eq!(c["index"], 0);
    assert_eq!(c["message"]["role"], "assistant");
    assert_eq!(c["message"]["content"], "Paris is the capital.");
    assert_eq!(c["finish_reason"], "stop");
    assert!(c.get("logprobs").is_some());
    let u = &v["usage"];
    assert_eq!(u["completion_tokens"], 4);
    assert_eq!(u["total_tokens"].as_u64(), Some(u["prompt_tokens"].as_u64().unwrap() + 4));
    let job = obs.jobs.lock().unwrap()[0].clone();
    assert_eq!(job.sampling.temperature, Some(0.0));
    assert_eq!(job.sampling.seed, Some(7));
    assert_eq!(job.num_predict, 64);
    assert_eq!(job.stop, vec!["\n".to_string()]);
    match &job.prompt {
        formwork_server::backend::PromptSpec::Chat { messages, .. } => {
            assert_eq!(messages[0].role, "system");
            assert_eq!(messages[1].content, "Capital of France?");
        }
        p => panic!("{p:?}"),
    }
}

#[tokio::test]
async fn response_formats_become_constraints() {
    let (app, obs) = router(|_| text("{\"name\": \"x\"}"));
    let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"], "additionalProperties": false});
    let base = |rf: Value| json!({"model": "smollm2", "messages": [{"role": "user", "content": "x"}], "response_format": rf});
    post(&app, "/v1/chat/completions", base(json!({"type": "text"}))).await;
    post(&app, "/v1/chat/completions", base(json!({"type": "json_object"}))).await;
    let (s, v) = post(&app, "/v1/chat/completions", base(json!({"type": "json_schema", "json_schema": {"name": "P", "schema": schema, "strict": true}}))).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["choices"][0]["message"]["content"], "{\"name\": \"x\"}");
    let (s, v) = post(&app, "/v1/chat/completions", base(json!({"type": "xml"}))).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_openai_error(&v);
    let jobs = obs.jobs.lock().unwrap();
    assert_eq!(jobs[0].constraint, ConstraintRequest::None);
    assert_eq!(jobs[1].constraint, ConstraintRequest::Json);
    assert!(matches!(&jobs[2].constraint, ConstraintRequest::Schema { schema: s, strict: true } if **s == schema));
}

fn weather_tools() -> Value {
    json!([{"type": "function", "function": {"name": "get_weather", "description": "Current weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["C", "F"]}},
                       "required": ["city", "unit"], "additionalProperties": false}, "strict": true}},
           {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}])
}

#[tokio::test]
async fn required_tool_choice_constrains_and_returns_a_call() {
    let (app, obs) = router(|_| text(r#"{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "C"}}"#));
    let req = json!({"model": "smollm2", "messages": [{"role": "user", "content": "Weather in Oslo?"}], "tools": weather_tools(), "tool_choice": "required"});
    let (s, v) = post(&app, "/v1/chat/completions", req).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let c = &v["choices"][0];
    assert_eq!(c["finish_reason"], "tool_calls");
    assert!(c["message"]["content"].is_null());
    let call = &c["message"]["tool_calls"][0];
    assert_eq!(call["type"], "function");
    assert!(call["id"].as_str().unwrap().starts_with("call_"));
    assert_eq!(call["function"]["name"], "get_weather");
    let args: Value = serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"city": "Oslo", "unit": "C"}));
    let constraint = obs.jobs.lock().unwrap()[0].constraint.clone();
    match &constraint {
        ConstraintRequest::ToolCalls { call_schema: schema, max_calls } => {
            assert_eq!(*max_calls, formwork_server::tools::MAX_PARALLEL_CALLS, "parallel calls by default");
            let alts = schema["anyOf"].as_array().unwrap();
            assert_eq!(alts[0]["properties"]["name"]["const"], "get_weather");
            assert_eq!(alts[0]["properties"]["arguments"]["required"], json!(["city", "unit"]));
        }
        c => panic!("{c:?}"),
    }
}

#[tokio::test]
async fn named_none_and_bad_tool_choices() {
    let (app, obs) = router(|_| text(r#"{"name": "get_time", "arguments": {}}"#));
    let msgs = json!([{"role": "user", "content": "x"}]);
    let (s, v) = post(&app, "/v1/chat/completions", json!({"model": "smollm2", "messages": msgs, "tools": weather_tools(),
        "tool_choice": {"type": "function", "function": {"name": "get_time"}}})).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "get_time");
    let (s, v) = post(&app, "/v1/chat/completions", json!({"model": "smollm2", "messages": msgs, "tools": weather_tools(), "tool_choice": "none"})).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert!(v["choices"][0]["message"]["content"].is_string());
    let (s, v) = post(&app, "/v1/chat/completions", json!({"model": "smollm2", "messages": msgs, "tools": weather_tools(),
        "tool_choice": {"type": "function", "function": {"name": "launch"}}})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(v["error"]["param"], "tool_choice");
    let (s, _) = post(&app, "/v1/chat/completions", json!({"model": "smollm2", "messages": msgs, "tool_choice": "required"})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let jobs = obs.jobs.lock().unwrap();
    assert_eq!(jobs.len(), 2);
    assert_eq!(jobs[1].constraint, ConstraintRequest::None);
    assert!(matches!(&jobs[1].prompt, formwork_server::backend::PromptSpec::Chat { tools, .. } if tools.is_empty()));
}

#[tokio::test]
async fn streaming_sse_with_usage_and_done() {
    let (app, _) = router(|_| text("a b c"));
    let req = json!({"model": "smollm2", "messages": [{"role": "user", "content": "x"}], "stream": true, "stream_options": {"include_usage": true}});
    let (s, ctype, body) = send(&app, Method::POST, "/v1/chat/completions", req.to_string()).await;
    assert_eq!(s, StatusCode::OK);
    assert!(ctype.starts_with("text/event-stream"));
    let data = sse_data(&body);
    assert_eq!(data.last().unwrap(), "[DONE]");
    let chunks: Vec<Value> = data[..data.len() - 1].iter().map(|d| serde_json::from_str(d).unwrap()).collect();
    assert!(chunks.iter().all(|c| c["object"] == "chat.completion.chunk"));
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let content: String = chunks.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect();
    assert_eq!(content, "a b c");
    let fin = &chunks[chunks.len() - 2];
    assert_eq!(fin["choices"][0]["finish_reason"], "stop");
    assert!(fin["usage"].is_null());
    let usage = chunks.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["completion_tokens"], 3);
    // without include_usage there is no usage key at all
    let req = json!({"model": "smollm2", "messages": [{"role": "user", "content": "x"}], "stream": true});
    let (_, _, body) = send(&app, Method::POST, "/v1/chat/completions", req.to_string()).await;
    let data = sse_data(&body);
    let first: Value = serde_json::from_str(&data[0]).unwrap();
    assert!(first.get("usage").is_none());
}

/// The chunks of an SSE chat completion stream (without `[DONE]`, which must end it).
async fn stream_chunks(app: &axum::Router, req: Value) -> Vec<Value> {
    let (s, _, body) = send(app, Method::POST, "/v1/chat/completions", req.to_string()).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let data = sse_data(&body);
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"), "{body}");
    data[..data.len() - 1].iter().map(|d| serde_json::from_str(d).unwrap()).collect()
}

/// The calls of a streamed choice, accumulated as the SDK does: (id, name, arguments).
fn streamed_calls(chunks: &[Value]) -> Vec<(String, String, String)> {
    let mut calls: Vec<(String, String, String)> = Vec::new();
    for c in chunks {
        for d in c["choices"][0]["delta"]["tool_calls"].as_array().into_iter().flatten() {
            let k = d["index"].as_u64().unwrap() as usize;
            if k == calls.len() {
                assert_eq!(d["type"], "function", "a call's first delta has its type: {d}");
                calls.push((d["id"].as_str().unwrap().into(), d["function"]["name"].as_str().unwrap().into(), String::new()));
            } else {
                assert!(d.get("id").is_none() && d["function"].get("name").is_none(), "later deltas carry arguments only: {d}");
            }
            calls[k].2.push_str(d["function"]["arguments"].as_str().unwrap_or(""));
        }
    }
    calls
}

#[tokio::test]
async fn streaming_tool_calls_in_openais_shape() {
    // Two forced calls: each starts with its id and name (the first delta also has the role
    // and `content: null`), its arguments follow in fragments as they are generated, and the
    // finish reason comes alone, in a last chunk with an empty delta (the SDK's stream helper
    // closes the last call's arguments on it).
    let two = r#"{"name": "get_time", "arguments": {}}
{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "C"}}"#;
    let (app, _) = router(move |_| text(two));
    let req = json!({"model": "smollm2", "messages": [{"role": "user", "content": "x"}], "stream": true, "tools": weather_tools(), "tool_choice": "required"});
    let chunks = stream_chunks(&app, req).await;
    let first = &chunks[0]["choices"][0]["delta"];
    assert_eq!(first["role"], "assistant");
    assert!(first.get("content").is_some_and(Value::is_null), "content is null before tool calls: {first}");
    assert!(chunks[1..].iter().all(|c| c["choices"][0]["delta"].get("role").is_none() && c["choices"][0]["delta"].get("content").is_none()));
    let calls = streamed_calls(&chunks);
    assert_eq!(calls.len(), 2);
    assert!(calls.iter().all(|(id, _, _)| id.starts_with("call_")) && calls[0].0 != calls[1].0);
    assert_eq!((calls[0].1.as_str(), calls[0].2.as_str()), ("get_time", "{}"));
    assert_eq!(calls[1].1, "get_weather");
    assert_eq!(serde_json::from_str::<Value>(&calls[1].2).unwrap(), json!({"city": "Oslo", "unit": "C"}));
    let fragments = chunks.iter().filter(|c| c["choices"][0]["delta"]["tool_calls"][0]["index"] == 1).count();
    assert!(fragments >= 3, "arguments stream as they come: {chunks:?}");
    let (last, rest) = chunks.split_last().unwrap();
    assert!(rest.iter().all(|c| c["choices"][0]["finish_reason"].is_null()));
    assert_eq!(last["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(last["choices"][0]["delta"], json!({}));
}

#[tokio::test]
async fn streamed_calls_of_another_shape_come_whole_at_the_end() {
    // `auto`, and calls written in `<tool_call>` tags: read from the whole output, then sent
    // one delta each, before the finish reason.
    let tagged = r#"<tool_call>{"name": "get_time", "arguments": {}}</tool_call> <tool_call>{"name": "get_time", "arguments": {}}</tool_call>"#;
    let (app, _) = router(move |_| text(tagged));
    let req = json!({"model": "smollm2", "messages": [{"role": "user", "content": "x"}], "stream": true, "tools": weather_tools()});
    let chunks = stream_chunks(&app, req).await;
    assert_eq!(chunks.len(), 3, "{chunks:?}");
    assert!(chunks[0]["choices"][0]["delta"]["content"].is_null());
    let calls = streamed_calls(&chunks);
    assert_eq!(calls.iter().map(|c| (c.1.as_str(), c.2.as_str())).collect::<Vec<_>>(), [("get_time", "{}"), ("get_time", "{}")]);
    assert_eq!(chunks[2]["choices"][0]["finish_reason"], "tool_calls");
}

#[tokio::test]
async fn streaming_with_tools_offered_streams_text_as_it_comes() {
    // `auto`, and the model answers in text: the text streams piece by piece (held only
    // until its start shows it is not a call), and the finish reason is `stop`.
    let (app, _) = router(|_| text(" <b>Sunny</b> in Oslo today."));
    let req = json!({"model": "smollm2", "messages": [{"role": "user", "content": "x"}], "stream": true, "tools": weather_tools()});
    let chunks = stream_chunks(&app, req).await;
    let pieces: Vec<&str> = chunks.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect();
    assert!(pieces.len() >= 4, "text streams in pieces: {pieces:?}");
    assert_eq!(pieces.concat(), " <b>Sunny</b> in Oslo today.");
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    assert_eq!(chunks.last().unwrap()["choices"][0]["finish_reason"], "stop");
    assert!(chunks.iter().all(|c| c["choices"][0]["delta"].get("tool_calls").is_none()));
}

#[tokio::test]
async fn n_choices_and_length() {
    let (app, obs) = router(|_| text("one two three four"));
    let (s, v) = post(&app, "/v1/chat/completions", json!({"model": "smollm2", "messages": [{"role": "user", "content": "x"}], "n": 2, "max_tokens": 2, "seed": 5})).await;
    assert_eq!(s, StatusCode::OK);
    let ch = v["choices"].as_array().unwrap();
    assert_eq!(ch.len(), 2);
    assert_eq!(ch[1]["index"], 1);
    assert!(ch.iter().all(|c| c["finish_reason"] == "length"));
    assert_eq!(v["usage"]["completion_tokens"], 4);
    let jobs = obs.jobs.lock().unwrap();
    assert_eq!((jobs[0].sampling.seed, jobs[1].sampling.seed), (Some(5), Some(6)));
    drop(jobs);
    let (s, v) = post(&app, "/v1/chat/completions", json!({"model": "smollm2", "messages": [{"role": "user", "content": "x"}], "n": 100})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(v["error"]["param"], "n");
}

#[tokio::test]
async fn legacy_completions() {
    let (app, obs) = router(|_| text("world"));
    let (s, v) = post(&app, "/v1/completions", json!({"model": "smollm2", "prompt": "hello ", "echo": true})).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["object"], "text_completion");
    assert_eq!(v["choices"][0]["text"], "hello world");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(obs.jobs.lock().unwrap()[0].num_predict, 16);
    let req = json!({"model": "smollm2", "prompt": ["a", "b"], "stream": true});
    let (_, _, body) = send(&app, Method::POST, "/v1/completions", req.to_string()).await;
    let data = sse_data(&body);
    assert_eq!(data.last().unwrap(), "[DONE]");
    let idx: Vec<u64> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str::<Value>(d).unwrap()["choices"][0]["index"].as_u64().unwrap())
        .collect();
    assert!(idx.contains(&0) && idx.contains(&1));
}

#[tokio::test]
async fn schema_in_prompt_extension_reaches_the_job() {
    let (app, obs) = router(|_| text("{}"));
    let req = json!({"model": "smollm2", "messages": [{"role": "user", "content": "x"}],
                     "response_format": {"type": "json_object"}, "schema_in_prompt": true});
    let (s, v) = post(&app, "/v1/chat/completions", req.clone()).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(obs.jobs.lock().unwrap()[0].schema_in_prompt, Some(formwork_server::SchemaPlacement::User));
    let mut bad = req;
    bad["schema_in_prompt"] = json!(3);
    let (s, v) = post(&app, "/v1/chat/completions", bad).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_openai_error(&v);
}
