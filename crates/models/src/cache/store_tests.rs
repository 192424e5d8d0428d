//! Tests of the cache over other tools' stores (Ollama, Hugging Face).

use super::*;
use crate::hf::tests::add_repo;
use crate::ollama::tests::add_model;

/// A cache over a fake Ollama store and a fake Hugging Face cache, each with one model.
fn stores() -> (tempfile::TempDir, Cache) {
    let tmp = tempfile::tempdir().unwrap();
    let (ollama, hf) = (tmp.path().join("ollama"), tmp.path().join("hf"));
    add_model(&ollama, "registry.ollama.ai/library/llama3.2/1b", b"GGUF ollama", Some("Be brief."), None);
    add_model(&ollama, "registry.ollama.ai/library/smollm2/latest", b"GGUF ollama smollm2", None, None);
    add_model(&ollama, "hf.co/org/both/Q8_0", b"GGUF pulled by ollama", None, None);
    add_repo(&hf, "org", "repo", "abc", &["m-Q4_K_M.gguf", "m-Q8_0.gguf"]);
    add_repo(&hf, "org", "both", "abc", &["b-Q8_0.gguf"]);
    let cache = Cache::new(tmp.path().join("home")).with_python("/nonexistent/python").with_ollama_store(&ollama).with_hf_cache(&hf);
    (tmp, cache)
}

/// Every file under `dir` with its bytes, to show nothing was written.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((p.clone(), fs::read(&p).unwrap_or_default()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn resolution_order_and_read_only_stores() {
    let (tmp, cache) = stores();
    let before = (snapshot(&tmp.path().join("ollama")), snapshot(&tmp.path().join("hf")));

    let m = cache.resolve_model("llama3.2:1b", Progress::Quiet).unwrap();
    assert_eq!((m.source, fs::read(&m.path).unwrap()), (Source::Ollama, b"GGUF ollama".to_vec()));
    assert_eq!(m.defaults.system.as_deref(), Some("Be brief."));
    let h = cache.resolve_model("hf.co/org/repo:Q8_0", Progress::Quiet).unwrap();
    assert_eq!((h.source, fs::read(&h.path).unwrap()), (Source::HuggingFace, b"GGUF m-Q8_0.gguf".to_vec()));
    // Ollama's store comes before the Hugging Face cache for the same name.
    assert_eq!(cache.resolve_model("hf.co/org/both:Q8_0", Progress::Quiet).unwrap().source, Source::Ollama);
    // A known name Ollama has is taken from Ollama's store rather than pulled...
    assert_eq!(cache.resolve_model("smollm2", Progress::Quiet).unwrap().source, Source::Ollama);
    // ...but formwork's own cached copy comes first.
    let known = crate::lookup("smollm2").unwrap();
    fs::create_dir_all(cache.models_dir()).unwrap();
    let f = File::create(cache.path_of(known)).unwrap();
    f.set_len(known.size).unwrap();
    drop(f);
    let mut bytes = fs::read(cache.path_of(known)).unwrap();
    bytes[..4].copy_from_slice(b"GGUF");
    fs::write(cache.path_of(known), &bytes).unwrap();
    assert_eq!(cache.resolve_model("smollm2:latest", Progress::Quiet).unwrap().source, Source::Formwork);
    // An explicit path wins over everything.
    let file = tmp.path().join("llama3.2");
    fs::write(&file, b"GGUF file").unwrap();
    assert_eq!(cache.resolve_model(file.to_str().unwrap(), Progress::Quiet).unwrap().source, Source::File);

    assert!(cache.resolve("hf.co/org/repo", Progress::Quiet).unwrap().ends_with("m-Q4_K_M.gguf"), "Q4_K_M is the default");
    let err = cache.resolve("mistral:7b", Progress::Quiet).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, ModelsError::UnknownModel { .. }), "{err:?}");
    assert!(msg.contains("mistral:7b") && msg.contains("llama3.2:1b") && msg.contains("hf.co/org/repo:Q4_K_M") && msg.contains("formwork list"), "{msg}");

    let names: Vec<(String, Source)> = cache.list().into_iter().map(|m| (m.name, m.source)).collect();
    assert_eq!(names[0], ("smollm2".to_string(), Source::Formwork));
    assert!(names.contains(&("llama3.2:1b".to_string(), Source::Ollama)));
    assert!(names.contains(&("hf.co/org/repo:Q8_0".to_string(), Source::HuggingFace)));

    assert_eq!((snapshot(&tmp.path().join("ollama")), snapshot(&tmp.path().join("hf"))), before, "the stores are never written");
}

#[test]
fn unknown_name_with_nothing_found_says_where_it_looked() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::new(tmp.path().join("home")).with_ollama_store(tmp.path().join("o"));
    let msg = cache.resolve("mistral", Progress::Quiet).unwrap_err().to_string();
    assert!(msg.contains("none found in formwork's cache") && msg.contains("Ollama's store"), "{msg}");
}
