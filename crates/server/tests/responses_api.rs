//! The OpenAI Responses API (`/v1/responses`) over a scripted fake model.

mod common;
use axum::http::{Method, StatusCode};
use common::*;
use formwork_server::backend::PromptSpec;
use formwork_server::testing::{spawn_scripted_meta, fake_meta, Script};
use formwork_server::{app, AppState, ConstraintRequest, ServerConfig};
use serde_json::{json, Value};

fn messages(job: &formwork_server::Job) -> Vec<(String, String)> {
    match &job.prompt {
        PromptSpec::Chat { messages, .. } => messages.iter().map(|m| (m.role.clone(), m.content.clone())).collect(),
        p => panic!("{p:?}"),
    }
}

#[tokio::test]
async fn create_shape_and_options() {
    let (app, obs) = router(|_| text("Paris is the capital."));
    let req = json!({"model": "smollm2", "input": "Capital of France?", "instructions": "Answer briefly.",
                     "temperature": 0, "top_p": 0.9, "max_output_tokens": 64, "store": true, "metadata": {"k": "v"}, "user": "u1"});
    let (s, v) = post(&app, "/v1/responses", req).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["object"], "response");
    assert!(v["id"].as_str().unwrap().starts_with("resp_"));
    assert_eq!(v["status"], "completed");
    assert_eq!(v["model"], "smollm2");
    assert_eq!(v["instructions"], "Answer briefly.");
    assert_eq!(v["metadata"], json!({"k": "v"}));
    assert_eq!(v["text"]["format"]["type"], "text");
    assert_eq!(v["tool_choice"], "auto");
    assert!(v["error"].is_null() && v["incomplete_details"].is_null());
    let out = v["output"].as_array().unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0]["type"], "message");
    assert_eq!(out[0]["role"], "assistant");
    assert_eq!(out[0]["status"], "completed");
    assert!(out[0]["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(out[0]["content"][0], json!({"type": "output_text", "text": "Paris is the capital.", "annotations": [], "logprobs": []}));
    let u = &v["usage"];
    assert_eq!(u["output_tokens"], 4);
    assert_eq!(u["total_tokens"].as_u64(), Some(u["input_tokens"].as_u64().unwrap() + 4));
    assert_eq!(u["input_tokens_details"]["cached_tokens"], 0);
    let job = obs.jobs.lock().unwrap()[0].clone();
    assert_eq!(job.sampling.temperature, Some(0.0));
    assert_eq!(job.sampling.top_p, Some(0.9));
    assert_eq!(job.num_predict, 64);
    assert_eq!(messages(&job), [("system".into(), "Answer briefly.".into()), ("user".into(), "Capital of France?".into())]);
    assert_eq!(job.constraint, ConstraintRequest::None);
    // Kept: GET returns it, DELETE forgets it.
    let id = v["id"].as_str().unwrap().to_string();
    let (s, got) = get(&app, &format!("/v1/responses/{id}")).await;
    assert_eq!((s, &got), (StatusCode::OK, &v));
    let (s, _, b) = send(&app, Method::DELETE, &format!("/v1/responses/{id}"), "").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(serde_json::from_str::<Value>(&b).unwrap(), json!({"id": id, "object": "response", "deleted": true}));
    let (s, v) = get(&app, &format!("/v1/responses/{id}")).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_openai_error(&v);
}

#[tokio::test]
async fn input_items_become_turns() {
    let (app, obs) = router(|_| text("ok"));
    let req = json!({"model": "smollm2", "input": [
        {"role": "developer", "content": "Be terse."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hello", "annotations": []}], "status": "completed", "id": "msg_1"},
        {"role": "user", "content": "Bye"}
    ]});
    let (s, v) = post(&app, "/v1/responses", req).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let job = obs.jobs.lock().unwrap()[0].clone();
    let roles: Vec<String> = messages(&job).into_iter().map(|(r, _)| r).collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"]);
    let (s, v) = post(&app, "/v1/responses", json!({"model": "smollm2", "input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(v["error"]["param"], "input");
    let (s, v) = post(&app, "/v1/responses", json!({"model": "smollm2"})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(v["error"]["param"], "input");
}

#[tokio::test]
async fn text_formats_become_constraints() {
    let (app, obs) = router(|_| text("{\"name\": \"x\"}"));
    let schema = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"], "additionalProperties": false});
    let base = |f: Value| json!({"model": "smollm2", "input": "x", "text": {"format": f}});
    post(&app, "/v1/responses", base(json!({"type": "text"}))).await;
    post(&app, "/v1/responses", base(json!({"type": "json_object"}))).await;
    let (s, v) = post(&app, "/v1/responses", base(json!({"type": "json_schema", "name": "P", "schema": schema, "strict": true}))).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["output"][0]["content"][0]["text"], "{\"name\": \"x\"}");
    assert_eq!(v["text"]["format"]["name"], "P");
    assert_eq!(v["text"]["format"]["strict"], true);
    let (s, v) = post(&app, "/v1/responses", base(json!({"type": "xml"}))).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_openai_error(&v);
    let (s, v) = post(&app, "/v1/responses", base(json!({"type": "json_schema", "name": "P", "schema": 3}))).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(v["error"]["param"], "text.format");
    let jobs = obs.jobs.lock().unwrap();
    assert_eq!(jobs[0].constraint, ConstraintRequest::None);
    assert_eq!(jobs[1].constraint, ConstraintRequest::Json);
    assert!(matches!(&jobs[2].constraint, ConstraintRequest::Schema { schema: s, strict: true } if **s == schema));
}

fn weather_tools() -> Value {
    json!([{"type": "function", "name": "get_weather", "description": "Current weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": false}, "strict": true},
           {"type": "function", "name": "get_time", "parameters": {"type": "object", "properties": {}}, "strict": false}])
}

#[tokio::test]
async fn function_calls_and_their_outputs_round_trip() {
    let (app, obs) = router(|job| match &job.prompt {
        PromptSpec::Chat { messages, .. } if messages.last().is_some_and(|m| m.role == "tool") => text("It is sunny in Oslo."),
        _ => text(r#"{"name": "get_weather", "arguments": {"city": "Oslo"}}"#),
    });
    let req = json!({"model": "smollm2", "input": "Weather in Oslo?", "tools": weather_tools(), "tool_choice": "required"});
    let (s, v) = post(&app, "/v1/responses", req).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let call = &v["output"][0];
    assert_eq!(call["type"], "function_call");
    assert_eq!(call["name"], "get_weather");
    assert_eq!(call["status"], "completed");
    assert!(call["call_id"].as_str().unwrap().starts_with("call_"));
    assert!(call["id"].as_str().unwrap().starts_with("fc_"));
    assert_eq!(serde_json::from_str::<Value>(call["arguments"].as_str().unwrap()).unwrap(), json!({"city": "Oslo"}));
    assert_eq!(v["tools"][0]["name"], "get_weather");
    assert_eq!(v["tool_choice"], "required");
    assert!(matches!(obs.jobs.lock().unwrap()[0].constraint, ConstraintRequest::ToolCalls { .. }));
    // The output goes back with previous_response_id: the model sees the call and its result.
    let id = v["id"].as_str().unwrap();
    let req = json!({"model": "smollm2", "previous_response_id": id, "tools": weather_tools(),
                     "input": [{"type": "function_call_output", "call_id": call["call_id"], "output": "sunny, 21 C"}]});
    let (s, v2) = post(&app, "/v1/responses", req).await;
    assert_eq!(s, StatusCode::OK, "{v2}");
    assert_eq!(v2["output"][0]["content"][0]["text"], "It is sunny in Oslo.");
    assert_eq!(v2["previous_response_id"], *id);
    let job = obs.jobs.lock().unwrap()[1].clone();
    match &job.prompt {
        PromptSpec::Chat { messages, tools } => {
            assert_eq!(tools.len(), 2);
            let roles: Vec<&str> = messages.iter().map(|m| m.role.as_str()).collect();
            assert_eq!(roles, ["user", "assistant", "tool"]);
            assert_eq!(messages[1].tool_calls[0].function.name, "get_weather");
            assert_eq!(messages[2].tool_name.as_deref(), Some("get_weather"));
            assert_eq!(messages[2].content, "sunny, 21 C");
        }
        p => panic!("{p:?}"),
    }
    // The same round trip without the store: the call items sent back as input.
    let req = json!({"model": "smollm2", "tools": weather_tools(), "input": [
        {"role": "user", "content": "Weather in Oslo?"}, call.clone(),
        {"type": "function_call_output", "call_id": call["call_id"], "output": "sunny"}]});
    let (s, v3) = post(&app, "/v1/responses", req).await;
    assert_eq!(s, StatusCode::OK, "{v3}");
    assert_eq!(v3["output"][0]["type"], "message");
}

#[tokio::test]
async fn tool_choice_shapes() {
    let (app, obs) = router(|_| text(r#"{"name": "get_time", "arguments": {}}"#));
    let (s, v) = post(&app, "/v1/responses", json!({"model": "smollm2", "input": "x", "tools": weather_tools(),
        "tool_choice": {"type": "function", "name": "get_time"}, "max_tool_calls": 1})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["output"][0]["name"], "get_time");
    match &obs.jobs.lock().unwrap()[0].constraint {
        ConstraintRequest::ToolCalls { max_calls, call_schema } => {
            assert_eq!(*max_calls, 1);
            assert_eq!(call_schema["properties"]["name"]["const"], "get_time");
        }
        c => panic!("{c:?}"),
    }
    let (s, v) = post(&app, "/v1/responses", json!({"model": "smollm2", "input": "x", "tools": weather_tools(),
        "tool_choice": {"type": "function", "name": "launch"}})).await;
    assert_eq!((s, v["error"]["param"].as_str()), (StatusCode::BAD_REQUEST, Some("tool_choice")));
    let (s, v) = post(&app, "/v1/responses", json!({"model": "smollm2", "input": "x", "tools": [{"type": "web_search"}]})).await;
    assert_eq!((s, v["error"]["param"].as_str()), (StatusCode::BAD_REQUEST, Some("tools")));
    let (s, v) = post(&app, "/v1/responses", json!({"model": "smollm2", "input": "x", "tools": weather_tools(),
        "tool_choice": {"type": "allowed_tools", "mode": "auto", "tools": []}})).await;
    assert_eq!((s, v["error"]["param"].as_str()), (StatusCode::BAD_REQUEST, Some("tool_choice")));
}

#[tokio::test]
async fn previous_response_id_continues_and_unknown_ids_are_404() {
    let (app, obs) = router(|job| text(&format!("answer {}", messages(job).len())));
    let (_, v1) = post(&app, "/v1/responses", json!({"model": "smollm2", "input": "My name is Ada.", "instructions": "first only"})).await;
    let id1 = v1["id"].as_str().unwrap();
    let (s, v2) = post(&app, "/v1/responses", json!({"model": "smollm2", "input": "What is my name?", "previous_response_id": id1})).await;
    assert_eq!(s, StatusCode::OK, "{v2}");
    let job = obs.jobs.lock().unwrap()[1].clone();
    // Instructions are not carried over (as in OpenAI's API).
    assert_eq!(
        messages(&job),
        [("user".into(), "My name is Ada.".into()), ("assistant".into(), "answer 2".into()), ("user".into(), "What is my name?".into())]
    );
    let (s, v) = post(&app, "/v1/responses", json!({"model": "smollm2", "input": "x", "previous_response_id": "resp_nope"})).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert_openai_error(&v);
    assert_eq!(v["error"]["param"], "previous_response_id");
    assert_eq!(v["error"]["code"], "previous_response_not_found");
    // store: false keeps nothing.
    let (_, v) = post(&app, "/v1/responses", json!({"model": "smollm2", "input": "x", "store": false})).await;
    assert_eq!(v["store"], false);
    let (s, _) = post(&app, "/v1/responses", json!({"model": "smollm2", "input": "y", "previous_response_id": v["id"]})).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn the_store_is_bounded() {
    let cfg = ServerConfig { max_stored_responses: 2, ..Default::default() };
    let (w, _) = spawn_scripted_meta(fake_meta("smollm2"), |_| text("ok"));
    let app = app(AppState::new(cfg, vec![w]));
    let mut ids = Vec::new();
    for _ in 0..3 {
        let (_, v) = post(&app, "/v1/responses", json!({"model": "smollm2", "input": "x"})).await;
        ids.push(v["id"].as_str().unwrap().to_string());
    }
    assert_eq!(get(&app, &format!("/v1/responses/{}", ids[0])).await.0, StatusCode::NOT_FOUND);
    assert_eq!(get(&app, &format!("/v1/responses/{}", ids[2])).await.0, StatusCode::OK);
}

#[tokio::test]
async fn length_is_incomplete() {
    let (app, _) = router(|_| text("one two three four"));
    let (s, v) = post(&app, "/v1/responses", json!({"model": "smollm2", "input": "x", "max_output_tokens": 2})).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["status"], "incomplete");
    assert_eq!(v["incomplete_details"]["reason"], "max_output_tokens");
    assert_eq!(v["output"][0]["status"], "incomplete");
    assert_eq!(v["usage"]["output_tokens"], 2);
}

#[tokio::test]
async fn unsupported_parameters_are_named() {
    let (app, obs) = router(|_| text("x"));
    for (field, value) in [("background", json!(true)), ("conversation", json!("conv_1")), ("prompt", json!({"id": "p"})), ("top_logprobs", json!(21))] {
        let mut req = json!({"model": "smollm2", "input": "x"});
        req[field] = value;
        let (s, v) = post(&app, "/v1/responses", req).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{field}");
        assert_eq!(v["error"]["param"], field);
    }
    assert!(obs.jobs.lock().unwrap().is_empty());
    // Accepted and without effect on the output.
    let req = json!({"model": "smollm2", "input": "x", "store": true, "truncation": "auto", "include": [], "service_tier": "auto",
                     "prompt_cache_key": "k", "background": false, "stream_options": {"include_obfuscation": false}});
    let (s, v) = post(&app, "/v1/responses", req).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, v) = post(&app, "/v1/responses", json!({"model": "nope", "input": "x"})).await;
    assert_eq!((s, v["error"]["code"].as_str()), (StatusCode::NOT_FOUND, Some("model_not_found")));
}

/// The events of a streamed response: (event name, data).
async fn events(app: &axum::Router, req: Value) -> Vec<(String, Value)> {
    let (s, ctype, body) = send(app, Method::POST, "/v1/responses", req.to_string()).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert!(ctype.starts_with("text/event-stream"));
    let names: Vec<String> = body.lines().filter_map(|l| l.strip_prefix("event: ").or_else(|| l.strip_prefix("event:"))).map(str::to_string).collect();
    let data: Vec<Value> = sse_data(&body).iter().map(|d| serde_json::from_str(d).unwrap()).collect();
    assert_eq!(names.len(), data.len(), "{body}");
    for (i, (n, d)) in names.iter().zip(&data).enumerate() {
        assert_eq!(d["type"], *n, "the event name is the type");
        assert_eq!(d["sequence_number"], i, "numbered from 0");
    }
    names.into_iter().zip(data).collect()
}

fn types(ev: &[(String, Value)]) -> Vec<&str> {
    ev.iter().map(|(n, _)| n.as_str()).collect()
}

#[tokio::test]
async fn streamed_text_events() {
    let (app, _) = router(|_| text("a b c"));
    let ev = events(&app, json!({"model": "smollm2", "input": "x", "stream": true})).await;
    assert_eq!(
        types(&ev),
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed"
        ]
    );
    assert_eq!(ev[0].1["response"]["status"], "in_progress");
    assert_eq!(ev[0].1["response"]["output"], json!([]));
    let id = ev[0].1["response"]["id"].clone();
    let item_id = ev[2].1["item"]["id"].clone();
    assert_eq!(ev[2].1["item"]["status"], "in_progress");
    assert!(ev[3..10].iter().all(|(_, d)| d["output_index"] == 0));
    assert!(ev[3..9].iter().all(|(_, d)| d["item_id"] == item_id && d["content_index"] == 0));
    let deltas: String = ev.iter().filter_map(|(_, d)| d["delta"].as_str()).collect();
    assert_eq!(deltas, "a b c");
    assert_eq!(ev[7].1["text"], "a b c");
    assert_eq!(ev[8].1["part"]["text"], "a b c");
    assert_eq!(ev[9].1["item"]["status"], "completed");
    let done = &ev[10].1["response"];
    assert_eq!(done["id"], id);
    assert_eq!(done["status"], "completed");
    assert_eq!(done["output"][0], ev[9].1["item"]);
    assert_eq!(done["usage"]["output_tokens"], 3);
    // Kept like a non-streamed response.
    let (s, got) = get(&app, &format!("/v1/responses/{}", id.as_str().unwrap())).await;
    assert_eq!((s, &got), (StatusCode::OK, done));
}

#[tokio::test]
async fn streamed_function_calls() {
    let two = r#"{"name": "get_time", "arguments": {}}
{"name": "get_weather", "arguments": {"city": "Oslo"}}"#;
    let (app, _) = router(move |_| text(two));
    let ev = events(&app, json!({"model": "smollm2", "input": "x", "stream": true, "tools": weather_tools(), "tool_choice": "required"})).await;
    let t = types(&ev);
    assert_eq!(t.first(), Some(&"response.created"));
    assert_eq!(t.last(), Some(&"response.completed"));
    assert!(!t.iter().any(|t| t.contains("output_text")), "{t:?}");
    let added: Vec<&Value> = ev.iter().filter(|(n, _)| n == "response.output_item.added").map(|(_, d)| d).collect();
    assert_eq!(added.len(), 2);
    assert_eq!(added[0]["item"]["name"], "get_time");
    assert_eq!(added[1]["item"]["name"], "get_weather");
    assert_eq!(added[1]["output_index"], 1);
    assert_eq!(added[1]["item"]["arguments"], "");
    let args: String = ev
        .iter()
        .filter(|(n, d)| n == "response.function_call_arguments.delta" && d["output_index"] == 1)
        .map(|(_, d)| d["delta"].as_str().unwrap())
        .collect();
    assert_eq!(serde_json::from_str::<Value>(&args).unwrap(), json!({"city": "Oslo"}));
    let dones: Vec<&Value> = ev.iter().filter(|(n, _)| n == "response.function_call_arguments.done").map(|(_, d)| d).collect();
    assert_eq!(dones[1]["arguments"], args);
    let items: Vec<&Value> = ev.iter().filter(|(n, _)| n == "response.output_item.done").map(|(_, d)| &d["item"]).collect();
    assert_eq!(items[1]["call_id"], added[1]["item"]["call_id"]);
    assert_eq!(items[1]["status"], "completed");
    let fin = &ev.last().unwrap().1["response"];
    assert_eq!(fin["output"].as_array().unwrap().iter().collect::<Vec<_>>(), items);
}

#[tokio::test]
async fn streamed_text_with_tools_offered_and_tagged_calls() {
    let (app, _) = router(|job| {
        if formwork_server::testing::prompt_text(job).contains("tagged") {
            text(r#"<tool_call>{"name": "get_time", "arguments": {}}</tool_call>"#)
        } else {
            text(" Sunny in Oslo.")
        }
    });
    let ev = events(&app, json!({"model": "smollm2", "input": "x", "stream": true, "tools": weather_tools()})).await;
    let text: String = ev.iter().filter(|(n, _)| n == "response.output_text.delta").map(|(_, d)| d["delta"].as_str().unwrap()).collect();
    assert_eq!(text, " Sunny in Oslo.");
    assert_eq!(ev.last().unwrap().1["response"]["output"][0]["type"], "message");
    let ev = events(&app, json!({"model": "smollm2", "input": "tagged", "stream": true, "tools": weather_tools()})).await;
    let fin = &ev.last().unwrap().1["response"];
    assert_eq!(fin["output"][0]["type"], "function_call");
    assert_eq!(fin["output"][0]["name"], "get_time");
    assert_eq!(fin["output"][0]["arguments"], "{}");
    assert!(types(&ev).contains(&"response.function_call_arguments.done"));
}

#[tokio::test]
async fn streamed_length_and_failure() {
    let (app, _) = router(|job| {
        if formwork_server::testing::prompt_text(job).contains("reason") {
            Script::Reasoned(vec!["hmm ".into(), "yes".into()], vec!["ok".into()])
        } else {
            text("one two three")
        }
    });
    let ev = events(&app, json!({"model": "smollm2", "input": "x", "stream": true, "max_output_tokens": 1})).await;
    let (name, last) = ev.last().unwrap();
    assert_eq!(name, "response.incomplete");
    assert_eq!(last["response"]["incomplete_details"]["reason"], "max_output_tokens");
    // A forced call that cannot be read fails after the stream started: `error`, then
    // `response.failed`.
    let ev = events(&app, json!({"model": "smollm2", "input": "x", "stream": true, "tools": weather_tools(), "tool_choice": "required", "max_output_tokens": 1})).await;
    let t = types(&ev);
    assert_eq!(&t[t.len() - 2..], ["error", "response.failed"], "{t:?}");
    assert_eq!(ev.last().unwrap().1["response"]["status"], "failed");
    assert!(ev.last().unwrap().1["response"]["error"]["message"].as_str().unwrap().contains("max_output_tokens"));
    // Reasoning comes first, as a reasoning item.
    let ev = events(&app, json!({"model": "smollm2", "input": "reason", "stream": true})).await;
    let fin = &ev.last().unwrap().1["response"];
    assert_eq!(fin["output"][0]["type"], "reasoning");
    assert_eq!(fin["output"][0]["content"][0]["text"], "hmm yes");
    assert_eq!(fin["output"][1]["content"][0]["text"], "ok");
    assert!(types(&ev).contains(&"response.reasoning_text.delta"));
    let (_, v) = post(&app, "/v1/responses", json!({"model": "smollm2", "input": "reason"})).await;
    assert_eq!(v["output"][0]["content"][0]["text"], "hmm yes");
    assert_eq!(v["output"][1]["type"], "message");
}
