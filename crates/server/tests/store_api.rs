//! The model store over the Ollama API: pull, copy, delete, create, tags, and aliases of the
//! served model used at once, over a fake Ollama store and a scripted fake model.

mod common;
use axum::body::Body;
use axum::http::{Method, StatusCode};
use common::*;
use formwork_models::Cache;
use formwork_server::backend::PromptSpec;
use formwork_server::{ServerConfig, ModelMeta};
use serde_json::{json, Value};
use std::fs;
use std::path::Path;

/// Adds `registry.ollama.ai/library/<model>/<tag>` to a fake Ollama store (the real layout;
/// the digests need not be the blobs' hashes for a reader).
fn ollama_model(root: &Path, model: &str, tag: &str, hex_digit: char) {
    let hex: String = std::iter::repeat_n(hex_digit, 64).collect();
    fs::create_dir_all(root.join("blobs")).unwrap();
    fs::write(root.join("blobs").join(format!("sha256-{hex}")), gguf_header(&[("general.architecture", "llama"), ("general.size_label", "1B")], 15)).unwrap();
    let dir = root.join("manifests/registry.ollama.ai/library").join(model);
    fs::create_dir_all(&dir).unwrap();
    let manifest = json!({"schemaVersion": 2, "layers": [{"mediaType": "application/vnd.ollama.image.model", "digest": format!("sha256:{hex}"), "size": 17}]});
    fs::write(dir.join(tag), manifest.to_string()).unwrap();
}

/// A GGUF file of metadata only (version 3, no tensors): `strings`, then `general.file_type`.
fn gguf_header(strings: &[(&str, &str)], file_type: u32) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    b.extend((strings.len() as u64 + 1).to_le_bytes());
    let text = |b: &mut Vec<u8>, s: &str| {
        b.extend((s.len() as u64).to_le_bytes());
        b.extend(s.as_bytes());
    };
    for (k, v) in strings {
        text(&mut b, k);
        b.extend(8u32.to_le_bytes());
        text(&mut b, v);
    }
    text(&mut b, "general.file_type");
    b.extend(4u32.to_le_bytes());
    b.extend(file_type.to_le_bytes());
    b
}

struct Fixture {
    tmp: tempfile::TempDir,
    app: axum::Router,
    obs: formwork_server::testing::Observed,
}

/// A server serving the fake `smollm2` (loaded from a file in the temp dir), with a store
/// over `home` and a fake Ollama store holding `llama3.2:1b`.
fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let ollama = tmp.path().join("ollama");
    ollama_model(&ollama, "llama3.2", "1b", 'a');
    let served_file = tmp.path().join("served.gguf");
    fs::write(&served_file, b"GGUF served").unwrap();
    let cache = Cache::new(tmp.path().join("home")).with_python("/nonexistent/python").with_ollama_store(&ollama);
    // No registry: a test never reaches the network (see `pulls_from_an_allowed_registry`).
    let cfg = ServerConfig { store: Some(cache), pull_registries: Vec::new(), ..ServerConfig::default() };
    let meta = ModelMeta { path: Some(served_file), ..formwork_server::testing::fake_meta("smollm2") };
    let (w, obs) = formwork_server::testing::spawn_scripted_meta(meta, |_| text("Arr."));
    let app = formwork_server::app(formwork_server::AppState::new(cfg, vec![w]));
    Fixture { tmp, app, obs }
}

async fn delete(app: &axum::Router, body: Value) -> (StatusCode, String) {
    let (s, _, b) = send(app, Method::DELETE, "/api/delete", body.to_string()).await;
    (s, b)
}

async fn copy(app: &axum::Router, body: Value) -> (StatusCode, String) {
    let (s, _, b) = send(app, Method::POST, "/api/copy", body.to_string()).await;
    (s, b)
}

fn tag_names(v: &Value) -> Vec<String> {
    v["models"].as_array().unwrap().iter().map(|m| m["name"].as_str().unwrap().to_string()).collect()
}

#[tokio::test]
async fn create_an_alias_of_the_served_model_and_use_it_at_once() {
    let f = fixture();
    let req = json!({"model": "pirate", "from": "smollm2", "system": "You are a pirate.", "parameters": {"temperature": 0.25, "stop": ["Yo"]}, "stream": false});
    let (s, v) = post(&f.app, "/api/create", req).await;
    assert_eq!((s, &v), (StatusCode::OK, &json!({"status": "success"})));
    assert!(f.tmp.path().join("home/manifests/pirate/latest.json").is_file());

    let (s, v) = post(&f.app, "/api/chat", json!({"model": "pirate", "messages": [{"role": "user", "content": "hi"}], "stream": false})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!((v["model"].as_str(), v["message"]["content"].as_str()), (Some("pirate"), Some("Arr.")));
    let job = f.obs.jobs.lock().unwrap().last().cloned().unwrap();
    let PromptSpec::Chat { messages, .. } = &job.prompt else { panic!("{:?}", job.prompt) };
    assert_eq!((messages[0].role.as_str(), messages[0].content.as_str()), ("system", "You are a pirate."));
    assert_eq!(job.sampling.temperature, Some(0.25));
    assert_eq!(job.stop, ["Yo"]);

    // The request's own system prompt and options win.
    let req = json!({"model": "pirate:latest", "messages": [{"role": "system", "content": "Be a cat."}, {"role": "user", "content": "hi"}],
                     "options": {"temperature": 0.9}, "stream": false});
    assert_eq!(post(&f.app, "/api/chat", req).await.0, StatusCode::OK);
    let job = f.obs.jobs.lock().unwrap().last().cloned().unwrap();
    let PromptSpec::Chat { messages, .. } = &job.prompt else { panic!() };
    assert_eq!(messages.iter().filter(|m| m.role == "system").count(), 1);
    assert_eq!((messages[0].content.as_str(), job.sampling.temperature), ("Be a cat.", Some(0.9)));

    // /api/generate, with the legacy modelfile form and a copy of the alias.
    let (s, _, b) = send(&f.app, Method::POST, "/api/create", json!({"name": "terse", "modelfile": "FROM pirate\nSYSTEM \"\"\"One word.\"\"\"\nPARAMETER top_k 3"}).to_string()).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let statuses: Vec<Value> = lines(&b).into_iter().map(|l| l["status"].clone()).collect();
    assert_eq!(statuses.last(), Some(&json!("success")), "{b}");
    assert_eq!(copy(&f.app, json!({"source": "terse", "destination": "terse2:v1"})).await, (StatusCode::OK, String::new()));
    let (s, v) = post(&f.app, "/api/generate", json!({"model": "terse2:v1", "prompt": "hi", "stream": false})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let job = f.obs.jobs.lock().unwrap().last().cloned().unwrap();
    let PromptSpec::Chat { messages, .. } = &job.prompt else { panic!() };
    assert_eq!(messages[0].content, "One word.");
    assert_eq!((job.sampling.top_k, job.sampling.temperature), (Some(3), Some(0.25)), "the alias's over its base alias's");

    // /api/show shows the alias's settings; /api/tags lists the aliases.
    let (s, v) = post(&f.app, "/api/show", json!({"model": "terse2:v1"})).await;
    assert_eq!(s, StatusCode::OK);
    assert!(v["modelfile"].as_str().unwrap().contains("SYSTEM \"\"\"One word.\"\"\""), "{v}");
    assert!(v["parameters"].as_str().unwrap().contains("top_k"), "{v}");
    let (_, v) = get(&f.app, "/api/tags").await;
    let names = tag_names(&v);
    assert_eq!(names[0], "smollm2:latest");
    for n in ["pirate:latest", "terse:latest", "terse2:v1", "llama3.2:1b"] {
        assert!(names.contains(&n.to_string()), "{n} in {names:?}");
    }
    let llama = v["models"].as_array().unwrap().iter().find(|m| m["name"] == "llama3.2:1b").unwrap().clone();
    assert_eq!(llama["digest"], "a".repeat(64));
    // Details from the GGUF header, as Ollama lists them.
    let d = &llama["details"];
    assert_eq!((&d["family"], &d["parameter_size"], &d["quantization_level"]), (&json!("llama"), &json!("1B"), &json!("Q4_K_M")), "{d}");
    assert_eq!(d["families"], json!(["llama"]));

    // Delete the aliases: gone from chat.
    for n in ["terse2:v1", "terse", "pirate"] {
        assert_eq!(delete(&f.app, json!({"model": n})).await.0, StatusCode::OK, "{n}");
    }
    let (s, v) = post(&f.app, "/api/chat", json!({"model": "pirate", "messages": [{"role": "user", "content": "hi"}]})).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
    assert_ollama_error(&v);
}

#[tokio::test]
async fn store_models_that_are_not_served_say_to_restart() {
    let f = fixture();
    assert_eq!(copy(&f.app, json!({"source": "llama3.2:1b", "destination": "mine"})).await.0, StatusCode::OK);
    for model in ["mine", "llama3.2:1b"] {
        let (s, v) = post(&f.app, "/api/chat", json!({"model": model, "messages": [{"role": "user", "content": "hi"}]})).await;
        assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
        let msg = v["error"].as_str().unwrap();
        assert!(msg.contains("not loaded") && msg.contains("formwork serve --model"), "{msg}");
    }
}

#[tokio::test]
async fn errors_name_the_problem_and_never_touch_paths() {
    let f = fixture();
    // Unknown source: 404; bad names: 400; Ollama's model: read-only.
    let (s, v) = post(&f.app, "/api/copy", json!({"source": "nope", "destination": "x"})).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
    assert_ollama_error(&v);
    let msg = v["error"].as_str().unwrap();
    assert!(msg.contains("llama3.2:1b") && !msg.contains(f.tmp.path().to_str().unwrap()), "names, not the server's paths: {msg}");
    for dst in ["../evil", "a/b", ""] {
        let (s, v) = post(&f.app, "/api/copy", json!({"source": "smollm2", "destination": dst})).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{dst}: {v}");
    }
    assert!(!f.tmp.path().join("evil.json").exists() && !f.tmp.path().join("home/evil").exists());
    let (s, b) = delete(&f.app, json!({"model": "llama3.2:1b"})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
    assert!(b.contains("read-only: owned by Ollama, remove it with `ollama rm llama3.2:1b`"), "{b}");
    assert!(f.tmp.path().join("ollama/manifests/registry.ollama.ai/library/llama3.2/1b").is_file());
    assert_eq!(delete(&f.app, json!({"name": "never-was"})).await.0, StatusCode::NOT_FOUND);

    // A path from the network is never a model: not for create, copy, delete or pull.
    let file = f.tmp.path().join("served.gguf");
    let p = file.to_str().unwrap();
    for from in [p, "./x.gguf", "/etc/passwd", "~/m.gguf"] {
        let (s, v) = post(&f.app, "/api/create", json!({"model": "x", "from": from})).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{from}: {v}");
        assert!(v["error"].as_str().unwrap().contains("formwork create"), "{v}");
    }
    let (s, v) = post(&f.app, "/api/create", json!({"model": "x", "modelfile": format!("FROM {p}")})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(post(&f.app, "/api/copy", json!({"source": p, "destination": "x"})).await.0, StatusCode::NOT_FOUND);
    assert_eq!(delete(&f.app, json!({"model": p})).await.0, StatusCode::NOT_FOUND);
    assert!(file.exists());
    assert_eq!(post(&f.app, "/api/pull", json!({"model": p})).await.0, StatusCode::NOT_FOUND);

    // Create: what formwork cannot do is refused by name.
    let cases = [
        (json!({"model": "x", "from": "smollm2", "quantize": "q4_K_M"}), "quantize"),
        (json!({"model": "x", "files": {"m.gguf": "sha256:00"}}), "uploaded files"),
        (json!({"model": "x", "from": "smollm2", "parameters": {"mirostat": 1}}), "unknown parameter"),
        (json!({"model": "x", "modelfile": "FROM smollm2\nADAPTER ./a.gguf"}), "line 2"),
        (json!({"model": "x"}), "from is required"),
        (json!({"from": "smollm2"}), "model is required"),
    ];
    for (req, words) in cases {
        let (s, v) = post(&f.app, "/api/create", req.clone()).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{req}: {v}");
        assert!(v["error"].as_str().unwrap().contains(words), "{req}: {v}");
    }
    let (s, v) = post(&f.app, "/api/create", json!({"model": "x", "from": "nothing-here"})).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");

    // The body limit holds here too.
    let big = json!({"model": "x", "from": "smollm2", "system": "y".repeat(3 << 20)});
    assert_eq!(post(&f.app, "/api/create", big).await.0, StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test]
async fn pull_present_unknown_and_failing() {
    let f = fixture();
    // Already here: a quick success, streamed or not.
    let (s, v) = post(&f.app, "/api/pull", json!({"model": "llama3.2:1b", "stream": false})).await;
    assert_eq!((s, v), (StatusCode::OK, json!({"status": "success"})));
    let (s, ctype, b) = send(&f.app, Method::POST, "/api/pull", json!({"name": "llama3.2:1b"}).to_string()).await;
    assert_eq!((s, ctype.as_str()), (StatusCode::OK, "application/x-ndjson"));
    let l = lines(&b);
    assert_eq!((l[0]["status"].as_str(), l.last().unwrap()["status"].as_str()), (Some("pulling manifest"), Some("success")));
    // Another Ollama name, on a server that pulls from no registry: 404 saying so.
    let (s, v) = post(&f.app, "/api/pull", json!({"model": "mistral:7b"})).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    assert!(v["error"].as_str().unwrap().contains("pulls from no registry"), "{v}");
    // Not a model name at all: 400.
    let (s, v) = post(&f.app, "/api/pull", json!({"model": "a b"})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(v["error"].as_str().unwrap().contains("not an Ollama model name"), "{v}");
    assert_eq!(post(&f.app, "/api/pull", json!({})).await.0, StatusCode::BAD_REQUEST);
    // A known model whose pull fails (no python here): an error line after the progress
    // lines when streamed, a 500 when not.
    let (s, _, b) = send(&f.app, Method::POST, "/api/pull", json!({"model": "smollm2"}).to_string()).await;
    assert_eq!(s, StatusCode::OK);
    let l = lines(&b);
    assert_eq!(l[0]["status"], "pulling manifest");
    assert!(l[1]["digest"].as_str().unwrap().starts_with("sha256:") && l[1]["total"].as_u64().unwrap() > 0, "{b}");
    assert!(l.last().unwrap()["error"].as_str().unwrap().contains("Python"), "{b}");
    let (s, v) = post(&f.app, "/api/pull", json!({"model": "smollm2", "stream": false})).await;
    assert_eq!(s, StatusCode::INTERNAL_SERVER_ERROR, "{v}");
    assert_ollama_error(&v);
}

#[tokio::test]
async fn pulls_from_an_allowed_registry_streams_progress_and_lists_the_model() {
    use formwork_models::fake_registry::{manifest, FakeRegistry};
    let gguf = gguf_header(&[("general.architecture", "llama"), ("general.size_label", "1M")], 15);
    let mut blobs = std::collections::HashMap::new();
    let m = manifest(&[("application/vnd.ollama.image.model", &gguf), ("application/vnd.ollama.image.system", b"Be brief.")], &mut blobs);
    let reg = FakeRegistry::start([("library/tiny/latest".to_string(), m)].into(), blobs);
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::new(tmp.path().join("home")).with_python("/nonexistent/python");
    let cfg = ServerConfig { store: Some(cache), pull_registries: vec![reg.host.clone()], ..ServerConfig::default() };
    let (w, _) = formwork_server::testing::spawn_scripted_meta(formwork_server::testing::fake_meta("smollm2"), |_| text("hi"));
    let app = formwork_server::app(formwork_server::AppState::new(cfg, vec![w]));
    let name = format!("{}/library/tiny", reg.host);

    // Streamed in Ollama's shape: manifest, per-blob progress, verify, write, success.
    let (s, ctype, b) = send(&app, Method::POST, "/api/pull", json!({"model": name, "insecure": true}).to_string()).await;
    assert_eq!((s, ctype.as_str()), (StatusCode::OK, "application/x-ndjson"), "{b}");
    let l = lines(&b);
    let status: Vec<&str> = l.iter().map(|x| x["status"].as_str().unwrap_or("")).collect();
    assert_eq!(status[0], "pulling manifest", "{b}");
    assert_eq!(&status[status.len() - 3..], ["verifying sha256 digest", "writing manifest", "success"], "{b}");
    let blob_lines: Vec<&Value> = l.iter().filter(|x| x["digest"].is_string()).collect();
    assert!(blob_lines.iter().any(|x| x["total"] == json!(gguf.len()) && x["completed"] == json!(gguf.len())), "the model blob done: {b}");
    assert!(blob_lines.iter().all(|x| x["status"].as_str().unwrap().starts_with("pulling ") && x["completed"].as_u64() <= x["total"].as_u64()), "{b}");

    // Now on this machine: listed, and a second pull is a quick success.
    let (_, v) = get(&app, "/api/tags").await;
    assert!(tag_names(&v).contains(&format!("{name}:latest")), "{v}");
    let entry = v["models"].as_array().unwrap().iter().find(|m| m["name"] == json!(format!("{name}:latest"))).unwrap();
    let hex = formwork_models::fake_registry::digest(&gguf);
    assert_eq!(entry["digest"].as_str(), hex.strip_prefix("sha256:"), "the model blob's own digest, as Ollama lists it");
    let (s, v) = post(&app, "/api/pull", json!({"model": name, "stream": false})).await;
    assert_eq!((s, v), (StatusCode::OK, json!({"status": "success"})));

    // Missing on the registry: 404 (not streamed) or an error line (streamed).
    let (s, v) = post(&app, "/api/pull", json!({"model": format!("{}/library/nope", reg.host), "insecure": true, "stream": false})).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
    assert!(v["error"].as_str().unwrap().contains("not in its registry"), "{v}");
    let (_, _, b) = send(&app, Method::POST, "/api/pull", json!({"model": format!("{}/library/nope", reg.host), "insecure": true}).to_string()).await;
    assert!(lines(&b).last().unwrap()["error"].as_str().unwrap().contains("not in its registry"), "{b}");

    // A registry the operator did not allow is never contacted.
    let (s, v) = post(&app, "/api/pull", json!({"model": "example.com/library/tiny"})).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
    assert!(v["error"].as_str().unwrap().contains(&format!("pulls only from {}", reg.host)), "{v}");
    assert!(reg.requests().iter().all(|r| !r.contains("example.com")));

    // formwork's own: deleted through the API.
    assert_eq!(delete(&app, json!({"model": name})).await.0, StatusCode::OK);
    let (_, v) = get(&app, "/api/tags").await;
    assert!(!tag_names(&v).contains(&format!("{name}:latest")), "{v}");
}

#[tokio::test]
async fn without_a_store_the_routes_say_so_and_tags_lists_the_served() {
    let (app, _) = router(|_| text("hi"));
    let (s, v) = post(&app, "/api/copy", json!({"source": "smollm2", "destination": "x"})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert!(v["error"].as_str().unwrap().contains("no model store"), "{v}");
    let (_, v) = get(&app, "/api/tags").await;
    assert_eq!(tag_names(&v), ["smollm2:latest"]);
    let (s, _, _) = send(&app, Method::DELETE, "/api/delete", Body::from(json!({"model": "smollm2"}).to_string())).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
}

