//! `/api/embed`, `/api/embeddings` and `/v1/embeddings` over a fake embedder: wire shapes,
//! validation, base64, and a model that cannot embed.

mod common;
use axum::http::StatusCode;
use axum::Router;
use common::*;
use formwork_server::testing::{spawn_embedding, spawn_scripted, FakeEmbedder};
use formwork_server::{app, AppState, ServerConfig};
use serde_json::{json, Value};

const DIMS: usize = 8;

/// A router serving `smollm2` (embeds: 8 dimensions, inputs of up to 5 words) and `plain`
/// (cannot embed).
fn embed_router(cfg: ServerConfig) -> Router {
    let (w, _) = spawn_embedding("smollm2", FakeEmbedder { dimensions: DIMS, max_tokens: 5 }, |_| text("hi"));
    let (plain, _) = spawn_scripted("plain", |_| text("hi"));
    app(AppState::new(cfg, vec![w, plain]))
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array().unwrap_or_else(|| panic!("an array of floats: {v}")).iter().map(|x| x.as_f64().unwrap() as f32).collect()
}

fn norm(v: &[f32]) -> f32 {
    v.iter().map(|x| x * x).sum::<f32>().sqrt()
}

#[tokio::test]
async fn ollama_embed_shapes() {
    let app = embed_router(ServerConfig::default());
    let (s, v) = post(&app, "/api/embed", json!({"model": "smollm2", "input": "the cat sat"})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["model"], "smollm2");
    let e = v["embeddings"].as_array().unwrap();
    assert_eq!(e.len(), 1);
    let one = floats(&e[0]);
    assert_eq!(one.len(), DIMS);
    assert!((norm(&one) - 1.0).abs() < 1e-5);
    assert_eq!(v["prompt_eval_count"], 3);
    assert!(v["total_duration"].is_u64() && v["load_duration"].is_u64());

    let (s, v) = post(&app, "/api/embed", json!({"model": "smollm2:latest", "input": ["the cat sat", "a dog ran", "the cat sat"]})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let e = v["embeddings"].as_array().unwrap();
    assert_eq!(e.len(), 3);
    assert_eq!(floats(&e[0]), one, "the same text gives the same vector");
    assert_eq!(e[0], e[2]);
    assert_ne!(e[0], e[1]);
    assert_eq!(v["prompt_eval_count"], 9);

    // Ollama's way to load a model: no input, no embeddings.
    for body in [json!({"model": "smollm2"}), json!({"model": "smollm2", "input": []})] {
        let (s, v) = post(&app, "/api/embed", body).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        assert_eq!(v["embeddings"], json!([]));
    }

    // `dimensions` keeps the first ones, normalized again.
    let (s, v) = post(&app, "/api/embed", json!({"model": "smollm2", "input": "the cat sat", "dimensions": 3})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let cut = floats(&v["embeddings"][0]);
    assert_eq!(cut.len(), 3);
    assert!((norm(&cut) - 1.0).abs() < 1e-5);
    let (s, v) = post(&app, "/api/embed", json!({"model": "smollm2", "input": "x", "dimensions": DIMS + 1})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(v["error"].as_str().unwrap().contains("dimensions"), "{v}");
}

#[tokio::test]
async fn ollama_embed_truncates_unless_told_not_to() {
    let app = embed_router(ServerConfig::default());
    let long = "one two three four five six seven";
    let (s, v) = post(&app, "/api/embed", json!({"model": "smollm2", "input": long})).await;
    assert_eq!(s, StatusCode::OK, "truncate defaults to true: {v}");
    assert_eq!(v["prompt_eval_count"], 5);
    let (_, first5) = post(&app, "/api/embed", json!({"model": "smollm2", "input": "one two three four five"})).await;
    assert_eq!(v["embeddings"], first5["embeddings"], "the end is cut");
    let (s, v) = post(&app, "/api/embed", json!({"model": "smollm2", "input": ["ok", long], "truncate": false})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_ollama_error(&v);
    let msg = v["error"].as_str().unwrap();
    assert!(msg.contains("input[1]") && msg.contains("7 tokens") && msg.contains("5"), "{msg}");
}

#[tokio::test]
async fn ollama_embed_validation() {
    let cfg = ServerConfig { max_embed_inputs: 3, max_embed_bytes: 64, ..ServerConfig::default() };
    let app = embed_router(cfg);
    let cases = [
        (json!({"model": "smollm2", "input": ["a", ""]}), StatusCode::BAD_REQUEST, "input[1] is empty"),
        (json!({"model": "smollm2", "input": ["a", 3]}), StatusCode::BAD_REQUEST, "input[1] must be a string"),
        (json!({"model": "smollm2", "input": {"text": "a"}}), StatusCode::BAD_REQUEST, "string or a list of strings"),
        (json!({"model": "smollm2", "input": ["a", "b", "c", "d"]}), StatusCode::BAD_REQUEST, "at most 3"),
        (json!({"model": "smollm2", "input": "x".repeat(65)}), StatusCode::BAD_REQUEST, "64 bytes"),
        (json!({"model": "smollm2", "input": "a", "dimensions": 0}), StatusCode::BAD_REQUEST, "dimensions"),
        (json!({"model": "nope", "input": "a"}), StatusCode::NOT_FOUND, "not found"),
        (json!({"input": "a"}), StatusCode::BAD_REQUEST, "model is required"),
        (json!({"model": "plain", "input": "a"}), StatusCode::BAD_REQUEST, "does not compute embeddings"),
    ];
    for (body, status, needle) in cases {
        let (s, v) = post(&app, "/api/embed", body.clone()).await;
        assert_eq!(s, status, "{body} -> {v}");
        assert_ollama_error(&v);
        assert!(v["error"].as_str().unwrap().contains(needle), "{body}: {v} should say {needle:?}");
    }
}

#[tokio::test]
async fn legacy_embeddings() {
    let app = embed_router(ServerConfig::default());
    let (s, v) = post(&app, "/api/embeddings", json!({"model": "smollm2", "prompt": "the cat sat"})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let legacy = floats(&v["embedding"]);
    assert_eq!(legacy.len(), DIMS);
    let (_, batch) = post(&app, "/api/embed", json!({"model": "smollm2", "input": "the cat sat"})).await;
    assert_eq!(legacy, floats(&batch["embeddings"][0]), "both Ollama endpoints agree");
    let (s, v) = post(&app, "/api/embeddings", json!({"model": "smollm2", "prompt": ""})).await;
    assert_eq!((s, v), (StatusCode::OK, json!({"embedding": []})));
    let (s, v) = post(&app, "/api/embeddings", json!({"model": "plain", "prompt": "a"})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_ollama_error(&v);
}

#[tokio::test]
async fn openai_embeddings_shapes() {
    let app = embed_router(ServerConfig::default());
    let (s, v) = post(&app, "/v1/embeddings", json!({"model": "smollm2", "input": ["the cat sat", "a dog"]})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["object"], "list");
    assert_eq!(v["model"], "smollm2");
    assert_eq!(v["usage"], json!({"prompt_tokens": 5, "total_tokens": 5}));
    let data = v["data"].as_array().unwrap();
    assert_eq!(data.len(), 2);
    for (i, d) in data.iter().enumerate() {
        assert_eq!((d["object"].as_str(), d["index"].as_u64()), (Some("embedding"), Some(i as u64)));
        let e = floats(&d["embedding"]);
        assert_eq!(e.len(), DIMS);
        assert!((norm(&e) - 1.0).abs() < 1e-5);
    }
    let (_, one) = post(&app, "/v1/embeddings", json!({"model": "smollm2", "input": "the cat sat", "encoding_format": "float"})).await;
    assert_eq!(one["data"][0]["embedding"], data[0]["embedding"]);

    // Token ids: one list is one input, a list of lists several.
    let (s, v) = post(&app, "/v1/embeddings", json!({"model": "smollm2", "input": [1, 2, 3]})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!((v["data"].as_array().unwrap().len(), &v["usage"]["prompt_tokens"]), (1, &json!(3)));
    let (s, v) = post(&app, "/v1/embeddings", json!({"model": "smollm2", "input": [[1, 2], [3]]})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["data"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn openai_embeddings_base64() {
    let app = embed_router(ServerConfig::default());
    let (_, float) = post(&app, "/v1/embeddings", json!({"model": "smollm2", "input": "the cat sat"})).await;
    let (s, b64) = post(&app, "/v1/embeddings", json!({"model": "smollm2", "input": "the cat sat", "encoding_format": "base64"})).await;
    assert_eq!(s, StatusCode::OK, "{b64}");
    let text = b64["data"][0]["embedding"].as_str().expect("a base64 string");
    let bytes = decode_base64(text);
    assert_eq!(bytes.len(), DIMS * 4);
    let decoded: Vec<f32> = bytes.chunks(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    assert_eq!(decoded, floats(&float["data"][0]["embedding"]), "little-endian f32s of the same vector");
}

fn decode_base64(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let mut out = Vec::new();
    for chunk in s.as_bytes().chunks(4) {
        let pad = chunk.iter().filter(|&&c| c == b'=').count();
        let n = chunk.iter().filter(|&&c| c != b'=').enumerate().fold(0u32, |n, (i, &c)| n | (u32::from(val(c)) << (18 - 6 * i)));
        out.extend_from_slice(&n.to_be_bytes()[1..4 - pad]);
    }
    out
}

#[tokio::test]
async fn openai_embeddings_validation() {
    let cfg = ServerConfig { max_embed_inputs: 3, ..ServerConfig::default() };
    let app = embed_router(cfg);
    let cases = [
        (json!({"model": "smollm2", "input": ""}), StatusCode::BAD_REQUEST, "empty string", "input"),
        (json!({"model": "smollm2", "input": []}), StatusCode::BAD_REQUEST, "empty list", "input"),
        (json!({"model": "smollm2"}), StatusCode::BAD_REQUEST, "input is required", "input"),
        (json!({"model": "smollm2", "input": ["a", ""]}), StatusCode::BAD_REQUEST, "input[1] is empty", "input"),
        (json!({"model": "smollm2", "input": ["a", "b", "c", "d"]}), StatusCode::BAD_REQUEST, "at most 3", "input"),
        (json!({"model": "smollm2", "input": [1, -2]}), StatusCode::BAD_REQUEST, "input[1] must be a token id", "input"),
        (json!({"model": "smollm2", "input": [[1], [2, "x"]]}), StatusCode::BAD_REQUEST, "input[1][1]", "input"),
        (json!({"model": "smollm2", "input": [5000]}), StatusCode::BAD_REQUEST, "out of range", "input"),
        (json!({"model": "smollm2", "input": "one two three four five six"}), StatusCode::BAD_REQUEST, "6 tokens", "input"),
        (json!({"model": "smollm2", "input": "a", "encoding_format": "int8"}), StatusCode::BAD_REQUEST, "encoding_format", "encoding_format"),
        (json!({"model": "smollm2", "input": "a", "dimensions": 99}), StatusCode::BAD_REQUEST, "more than this model's 8", "dimensions"),
        (json!({"model": "nope", "input": "a"}), StatusCode::NOT_FOUND, "not found", "model"),
        (json!({"model": "plain", "input": "a"}), StatusCode::BAD_REQUEST, "does not compute embeddings", "model"),
    ];
    for (body, status, needle, param) in cases {
        let (s, v) = post(&app, "/v1/embeddings", body.clone()).await;
        assert_eq!(s, status, "{body} -> {v}");
        assert_openai_error(&v);
        assert!(v["error"]["message"].as_str().unwrap().contains(needle), "{body}: {v} should say {needle:?}");
        assert_eq!(v["error"]["param"], param, "{body}: {v}");
    }
}

#[tokio::test]
async fn show_lists_embedding_only_for_models_that_embed() {
    let app = embed_router(ServerConfig::default());
    let caps = |v: &Value| v["capabilities"].as_array().unwrap().iter().map(|c| c.as_str().unwrap().to_string()).collect::<Vec<_>>();
    let (_, v) = post(&app, "/api/show", json!({"model": "smollm2"})).await;
    assert!(caps(&v).contains(&"embedding".to_string()) && caps(&v).contains(&"completion".to_string()), "{v}");
    let (_, v) = post(&app, "/api/show", json!({"model": "plain"})).await;
    assert!(!caps(&v).contains(&"embedding".to_string()), "{v}");
    // Generation still works on the model that embeds.
    let (s, v) = post(&app, "/api/generate", json!({"model": "smollm2", "prompt": "x", "stream": false})).await;
    assert_eq!((s, v["response"].as_str()), (StatusCode::OK, Some("hi")));
}
