//! `logprobs` / `top_logprobs` on both APIs: request validation, and the response shapes
//! (streamed and not) over a scripted fake model whose every piece is one "token" with
//! logprob ln(1/2) and alternatives `alt1`, `alt2`, ... (see `testing::fake_logprob`).

mod common;
use axum::http::{Method, StatusCode};
use common::*;
use serde_json::{json, Value};

const LN_HALF: f64 = -std::f64::consts::LN_2;

fn close(v: &Value, want: f64) -> bool {
    v.as_f64().is_some_and(|x| (x - want).abs() < 1e-5)
}

fn chat(extra: Value) -> Value {
    let mut r = json!({"model": "smollm2", "messages": [{"role": "user", "content": "Capital?"}]});
    r.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    r
}

#[tokio::test]
async fn openai_chat_logprobs_shape() {
    let (app, obs) = router(|_| text("Paris is nice."));
    let (s, v) = post(&app, "/v1/chat/completions", chat(json!({"logprobs": true, "top_logprobs": 2}))).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(obs.jobs.lock().unwrap()[0].logprobs, Some(2));
    let lp = &v["choices"][0]["logprobs"];
    assert!(lp["refusal"].is_null(), "{lp}");
    let content = lp["content"].as_array().unwrap();
    let tokens: Vec<&str> = content.iter().map(|e| e["token"].as_str().unwrap()).collect();
    assert_eq!(tokens, ["Paris ", "is ", "nice."]);
    for e in content {
        assert!(close(&e["logprob"], LN_HALF), "{e}");
        assert_eq!(e["bytes"], json!(e["token"].as_str().unwrap().as_bytes()));
        let top = e["top_logprobs"].as_array().unwrap();
        assert_eq!(top.len(), 2);
        assert_eq!(top[0]["token"], e["token"]);
        assert_eq!(top[1]["token"], "alt1");
        assert!(top[1]["bytes"].is_array() && close(&top[1]["logprob"], 2.0 * LN_HALF));
    }
    // Not asked: null, and the job computes nothing.
    let (_, v) = post(&app, "/v1/chat/completions", chat(json!({}))).await;
    assert!(v["choices"][0]["logprobs"].is_null());
    assert_eq!(obs.jobs.lock().unwrap()[1].logprobs, None);
    // logprobs alone: entries with no alternatives.
    let (_, v) = post(&app, "/v1/chat/completions", chat(json!({"logprobs": true}))).await;
    let e = &v["choices"][0]["logprobs"]["content"][0];
    assert_eq!(e["top_logprobs"], json!([]));
}

#[tokio::test]
async fn openai_chat_stream_chunks_carry_their_tokens() {
    let (app, _) = router(|_| text("Paris is nice."));
    let (s, _, body) = send(&app, Method::POST, "/v1/chat/completions", chat(json!({"logprobs": true, "top_logprobs": 1, "stream": true})).to_string()).await;
    assert_eq!(s, StatusCode::OK);
    let chunks: Vec<Value> = sse_data(&body).iter().filter(|d| *d != "[DONE]").map(|d| serde_json::from_str(d).unwrap()).collect();
    let mut seen = Vec::new();
    for c in &chunks {
        let ch = &c["choices"][0];
        let content = ch["delta"]["content"].as_str().unwrap_or("");
        match ch["logprobs"]["content"].as_array() {
            Some(l) => {
                let text: String = l.iter().map(|e| e["token"].as_str().unwrap()).collect();
                assert_eq!(text, content, "a chunk's logprobs are its delta's tokens");
                assert!(ch["logprobs"]["refusal"].is_null());
                seen.extend(l.iter().map(|e| e["token"].as_str().unwrap().to_string()));
            }
            None => assert!(content.is_empty() && ch["logprobs"].is_null(), "{c}"),
        }
    }
    assert_eq!(seen, ["Paris ", "is ", "nice."]);
}

#[tokio::test]
async fn openai_validation_errors_name_the_param() {
    let (app, _) = router(|_| text("x"));
    for (extra, param) in [
        (json!({"top_logprobs": 2}), "top_logprobs"),
        (json!({"logprobs": false, "top_logprobs": 0}), "top_logprobs"),
        (json!({"logprobs": true, "top_logprobs": 21}), "top_logprobs"),
        (json!({"logprobs": true, "top_logprobs": -1}), "top_logprobs"),
    ] {
        let (s, v) = post(&app, "/v1/chat/completions", chat(extra.clone())).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{extra}: {v}");
        assert_openai_error(&v);
        assert_eq!(v["error"]["param"], param, "{v}");
    }
    let legacy = |extra: Value| {
        let mut r = json!({"model": "smollm2", "prompt": "Once"});
        r.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        r
    };
    for (extra, param) in [(json!({"logprobs": 6}), "logprobs"), (json!({"logprobs": 2, "echo": true}), "echo")] {
        let (s, v) = post(&app, "/v1/completions", legacy(extra.clone())).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{extra}: {v}");
        assert_openai_error(&v);
        assert_eq!(v["error"]["param"], param, "{v}");
    }
}

#[tokio::test]
async fn openai_legacy_completion_logprobs() {
    let (app, _) = router(|_| text("upon a time"));
    let (s, v) = post(&app, "/v1/completions", json!({"model": "smollm2", "prompt": "Once", "logprobs": 2})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let lp = &v["choices"][0]["logprobs"];
    assert_eq!(lp["tokens"], json!(["upon ", "a ", "time"]));
    assert_eq!(lp["text_offset"], json!([0, 5, 7]));
    assert!(lp["token_logprobs"].as_array().unwrap().iter().all(|x| close(x, LN_HALF)));
    assert_eq!(lp["top_logprobs"][0].as_object().unwrap().len(), 2);
    assert!(close(&lp["top_logprobs"][1]["alt1"], 2.0 * LN_HALF));
    // Streamed: each chunk its tokens, offsets running on.
    let (_, _, body) =
        send(&app, Method::POST, "/v1/completions", json!({"model": "smollm2", "prompt": "Once", "logprobs": 0, "stream": true}).to_string())
            .await;
    let mut offsets = Vec::new();
    for d in sse_data(&body).iter().filter(|d| *d != "[DONE]") {
        let c: Value = serde_json::from_str(d).unwrap();
        let ch = &c["choices"][0];
        if let Some(t) = ch["logprobs"]["tokens"].as_array() {
            assert_eq!(t.iter().map(|x| x.as_str().unwrap()).collect::<String>(), ch["text"].as_str().unwrap());
            offsets.extend(ch["logprobs"]["text_offset"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()));
        }
    }
    assert_eq!(offsets, [0, 5, 7]);
    let (_, v) = post(&app, "/v1/completions", json!({"model": "smollm2", "prompt": "Once"})).await;
    assert!(v["choices"][0]["logprobs"].is_null());
}

#[tokio::test]
async fn ollama_chat_and_generate_logprobs() {
    let (app, obs) = router(|_| text("Paris is nice."));
    let body = json!({"model": "smollm2", "messages": [{"role": "user", "content": "Capital?"}], "stream": false, "logprobs": true, "top_logprobs": 3});
    let (s, v) = post(&app, "/api/chat", body).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(obs.jobs.lock().unwrap()[0].logprobs, Some(3));
    let l = v["logprobs"].as_array().unwrap();
    assert_eq!(l.iter().map(|e| e["token"].as_str().unwrap()).collect::<Vec<_>>(), ["Paris ", "is ", "nice."]);
    for e in l {
        assert!(close(&e["logprob"], LN_HALF));
        assert_eq!(e["bytes"], json!(e["token"].as_str().unwrap().as_bytes()));
        let top = e["top_logprobs"].as_array().unwrap();
        assert_eq!(top.len(), 3);
        assert!(top.iter().all(|t| t["token"].is_string() && t["logprob"].is_number() && t["bytes"].is_array()));
    }
    // Not asked: no field.
    let (_, v) = post(&app, "/api/chat", json!({"model": "smollm2", "messages": [{"role": "user", "content": "Capital?"}], "stream": false})).await;
    assert!(v.get("logprobs").is_none(), "{v}");
    // Streamed /api/generate: each line its tokens.
    let (s, _, body) = send(
        &app,
        Method::POST,
        "/api/generate",
        json!({"model": "smollm2", "prompt": "Capital?", "logprobs": true, "top_logprobs": 1}).to_string(),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let mut seen = Vec::new();
    for line in lines(&body) {
        if let Some(l) = line["logprobs"].as_array() {
            let text: String = l.iter().map(|e| e["token"].as_str().unwrap()).collect();
            assert_eq!(text, line["response"].as_str().unwrap());
            assert!(l.iter().all(|e| e["top_logprobs"].as_array().unwrap().len() == 1));
            seen.extend(l.iter().map(|e| e["token"].as_str().unwrap().to_string()));
        }
    }
    assert_eq!(seen, ["Paris ", "is ", "nice."]);
    // Non-streamed /api/generate and streamed /api/chat too.
    let (_, v) = post(&app, "/api/generate", json!({"model": "smollm2", "prompt": "Capital?", "stream": false, "logprobs": true})).await;
    assert_eq!(v["logprobs"].as_array().unwrap().len(), 3);
    let (_, _, body) = send(
        &app,
        Method::POST,
        "/api/chat",
        json!({"model": "smollm2", "messages": [{"role": "user", "content": "Capital?"}], "logprobs": true}).to_string(),
    )
    .await;
    let n: usize = lines(&body).iter().filter_map(|l| l["logprobs"].as_array().map(|a| a.len())).sum();
    assert_eq!(n, 3);
}

#[tokio::test]
async fn ollama_validation_errors() {
    let (app, _) = router(|_| text("x"));
    for extra in [json!({"logprobs": true, "top_logprobs": 21}), json!({"top_logprobs": 2})] {
        let mut body = json!({"model": "smollm2", "messages": [{"role": "user", "content": "hi"}], "stream": false});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let (s, v) = post(&app, "/api/chat", body).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{extra}: {v}");
        assert_ollama_error(&v);
        assert!(v["error"].as_str().unwrap().contains("top_logprobs"), "{v}");
    }
}

/// The real engine backend over the engine's scripted model: constrained logprobs through
/// the whole path (masked distribution, forced tokens at 0, streamed = not streamed).
#[cfg(feature = "engine")]
mod engine {
    use super::*;
    use formwork_engine::testing::ScriptedModel;
    use formwork_server::engine_backend::{EngineBackend, ConstraintCache};
    use formwork_server::testing::fake_meta;
    use formwork_server::{app, AppState, ModelWorker, ServerConfig};
    use std::sync::Arc;
    use std::time::Duration;

    fn router() -> axum::Router {
        let tokens: Vec<String> = (0x20u8..0x7f).map(|b| (b as char).to_string()).chain(["\n".to_string(), "{\"name".to_string()]).collect();
        let mut m = ScriptedModel::new(&tokens, &["<|im_end|>", "<|im_start|>"]);
        m.script_text(r#"Sure! {"name":"Ada","age":36}"#);
        let backend = EngineBackend::new(Box::new(m), Arc::new(ConstraintCache::new(8)), formwork_grammar::Limits::default());
        let w = ModelWorker::spawn(fake_meta("smollm2"), Box::new(backend), Duration::ZERO).unwrap();
        app(AppState::new(ServerConfig::default(), vec![w]))
    }

    fn request(stream: bool) -> Value {
        let schema = json!({"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}, "age": {"type": "integer"}},
                            "required": ["name", "age"], "additionalProperties": false});
        json!({"model": "smollm2", "messages": [{"role": "user", "content": "who"}], "temperature": 0, "stream": stream,
               "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": schema, "strict": true}},
               "logprobs": true, "top_logprobs": 20})
    }

    #[tokio::test]
    async fn constrained_chat_reports_the_masked_distribution() {
        let app = router();
        let (s, v) = post(&app, "/v1/chat/completions", request(false)).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        let content = v["choices"][0]["message"]["content"].as_str().unwrap().to_string();
        let entries = v["choices"][0]["logprobs"]["content"].as_array().unwrap().clone();
        let bytes: Vec<u8> = entries.iter().flat_map(|e| e["bytes"].as_array().unwrap().iter().map(|b| b.as_u64().unwrap() as u8)).collect();
        assert_eq!(String::from_utf8(bytes).unwrap(), content);
        let mut forced = 0;
        for e in &entries {
            let top = e["top_logprobs"].as_array().unwrap();
            let lps: Vec<f64> = top.iter().map(|t| t["logprob"].as_f64().unwrap()).collect();
            assert!(lps.windows(2).all(|w| w[0] >= w[1]), "{e}");
            let mass: f64 = lps.iter().map(|l| l.exp()).sum();
            assert!(mass <= 1.0 + 1e-5, "{e}");
            // Greedy: the chosen token is the masked argmax (the script's "S" of "Sure!" is
            // never reported: the schema masks it at the start).
            assert!((e["logprob"].as_f64().unwrap() - lps[0]).abs() < 1e-6, "{e}");
            assert!(top.iter().all(|t| t["token"] != "S"), "{e}");
            if top.len() == 1 && e["logprob"] == 0.0 {
                forced += 1;
            }
        }
        assert!(forced > 0, "the grammar's forced text has logprob 0: {entries:?}");
        // Streamed: the same entries, spread over the chunks.
        let (_, _, body) = send(&app, Method::POST, "/v1/chat/completions", request(true).to_string()).await;
        let streamed: Vec<Value> = sse_data(&body)
            .iter()
            .filter(|d| *d != "[DONE]")
            .flat_map(|d| {
                let c: Value = serde_json::from_str(d).unwrap();
                c["choices"][0]["logprobs"]["content"].as_array().cloned().unwrap_or_default()
            })
            .collect();
        assert_eq!(streamed, entries);
    }
}

/// The Responses API's SSE events as (name, data).
async fn response_events(app: &axum::Router, req: Value) -> Vec<(String, Value)> {
    let (s, _, body) = send(app, Method::POST, "/v1/responses", req.to_string()).await;
    assert_eq!(s, StatusCode::OK);
    sse_data(&body).iter().map(|d| serde_json::from_str::<Value>(d).unwrap()).map(|v| (v["type"].as_str().unwrap().to_string(), v)).collect()
}

#[tokio::test]
async fn responses_logprobs_when_included_or_with_top_logprobs() {
    let (app, obs) = router(|_| text("Paris is nice."));
    let req = json!({"model": "smollm2", "input": "Capital?", "include": ["message.output_text.logprobs"], "top_logprobs": 2});
    let (s, v) = post(&app, "/v1/responses", req).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(obs.jobs.lock().unwrap()[0].logprobs, Some(2));
    let lp = v["output"][0]["content"][0]["logprobs"].as_array().unwrap().clone();
    let tokens: Vec<&str> = lp.iter().map(|e| e["token"].as_str().unwrap()).collect();
    assert_eq!(tokens, ["Paris ", "is ", "nice."]);
    for e in &lp {
        assert!(close(&e["logprob"], LN_HALF), "{e}");
        assert_eq!(e["bytes"], json!(e["token"].as_str().unwrap().as_bytes()));
        assert_eq!(e["top_logprobs"].as_array().unwrap().len(), 2);
    }
    // include alone: no alternatives; neither: none, and the job computes none.
    let (_, v) = post(&app, "/v1/responses", json!({"model": "smollm2", "input": "x", "include": ["message.output_text.logprobs"]})).await;
    assert_eq!(v["output"][0]["content"][0]["logprobs"][0]["top_logprobs"], json!([]));
    let (_, v) = post(&app, "/v1/responses", json!({"model": "smollm2", "input": "x", "include": ["reasoning.encrypted_content"]})).await;
    assert_eq!(v["output"][0]["content"][0]["logprobs"], json!([]));
    assert_eq!(obs.jobs.lock().unwrap()[2].logprobs, None);
    // top_logprobs alone asks too; beyond 20 is refused by name.
    let (_, v) = post(&app, "/v1/responses", json!({"model": "smollm2", "input": "x", "top_logprobs": 1})).await;
    assert_eq!(v["output"][0]["content"][0]["logprobs"].as_array().unwrap().len(), 3);
    let (s, v) = post(&app, "/v1/responses", json!({"model": "smollm2", "input": "x", "top_logprobs": 21})).await;
    assert_eq!((s, &v["error"]["param"]), (StatusCode::BAD_REQUEST, &json!("top_logprobs")));
}

#[tokio::test]
async fn responses_stream_deltas_carry_their_tokens() {
    let (app, _) = router(|_| text("Paris is nice."));
    let req = json!({"model": "smollm2", "input": "Capital?", "include": ["message.output_text.logprobs"], "stream": true});
    let ev = response_events(&app, req).await;
    let mut from_deltas = Vec::new();
    for (name, d) in &ev {
        if name == "response.output_text.delta" {
            let lp = d["logprobs"].as_array().unwrap();
            let joined: String = lp.iter().map(|e| e["token"].as_str().unwrap()).collect();
            assert_eq!(joined, d["delta"].as_str().unwrap(), "a delta carries exactly its own tokens: {d}");
            from_deltas.extend(lp.iter().cloned());
        }
    }
    assert_eq!(from_deltas.len(), 3);
    let done = ev.iter().find(|(n, _)| n == "response.output_text.done").unwrap();
    assert_eq!(done.1["logprobs"].as_array().unwrap(), &from_deltas);
    let completed = ev.iter().find(|(n, _)| n == "response.completed").unwrap();
    assert_eq!(completed.1["response"]["output"][0]["content"][0]["logprobs"].as_array().unwrap(), &from_deltas);
}
