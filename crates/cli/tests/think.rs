//! `formwork run` with reasoning flags, end to end on the default model (SmolLM2, which has
//! no reasoning section: markers are given with `--think-markers`, and the budget forces the
//! section closed), plus an opt-in test with a real reasoning model:
//!
//! ```text
//! FORMWORK_REASONING_MODEL=/path/to/DeepSeek-R1-Distill-Qwen-7B-Q4_K_M.gguf \
//!     cargo test --release -p formwork-cli --test think -- --ignored --nocapture
//! ```

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn default_model() -> PathBuf {
    formwork_models::resolve(formwork_models::DEFAULT_MODEL)
        .unwrap_or_else(|e| panic!("the default model is needed for these tests and could not be resolved: {e}"))
}

fn formwork(model: &std::path::Path, threads: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_formwork"))
        .arg("run")
        .arg("--model")
        .arg(model)
        .args(["--threads", threads])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("the formwork binary runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8(b.to_vec()).expect("UTF-8 output")
}

#[test]
fn think_on_a_model_without_a_reasoning_section_says_how_to_fix_it() {
    let out = formwork(&default_model(), "1", &["--think", "hi"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("shows no reasoning section") && err.contains("--think-markers"), "{err}");
}

/// A small closed schema (so that the answer fits in the token budget), written to a file.
fn name_schema() -> (serde_json::Value, PathBuf) {
    let schema = serde_json::json!({"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}},
                                    "required": ["name"], "additionalProperties": false});
    let dir = std::env::temp_dir().join(format!("formwork-think-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("name.schema.json");
    std::fs::write(&path, schema.to_string()).unwrap();
    (schema, path)
}

#[test]
fn budget_forces_the_section_closed_and_the_answer_is_constrained_json() {
    let (schema, path) = name_schema();
    let args = [
        "--think-markers", "<think>,</think>", "--think-budget", "12", "--format", path.to_str().unwrap(), "--temperature",
        "0", "--num-predict", "96", "Name a cat, as a JSON object.",
    ];
    let out = formwork(&default_model(), "1", &args);
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    // The answer alone is on stdout, and it is JSON; the reasoning went to stderr.
    let v: serde_json::Value =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {stdout:?}"));
    formwork_schema::validate(&schema, stdout.trim()).unwrap_or_else(|e| panic!("{v}: {e:?}"));
    assert!(!stderr.trim().is_empty(), "the reasoning is printed to stderr");
    assert!(!stdout.contains("think>") && !stderr.contains("think>"), "markers are not printed:\n{stdout}\n{stderr}");
}

/// `--think` with `--retries`: every attempt reasons (printed to stderr), its answer is
/// checked, and the retry reasons again. This used to drop the reasoning setup silently.
#[test]
fn reasoning_composes_with_validation_and_retries() {
    let (schema, path) = name_schema();
    // A check that fails the first answer only (a marker file remembers the first call).
    let dir = path.parent().unwrap().join(format!("retry-think-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let marker = dir.join("seen");
    let check = format!("if [ -e {m} ]; then cat >/dev/null; else touch {m}; echo 'say another name' >&2; exit 1; fi", m = marker.display());
    let args = [
        "--think-markers", "<think>,</think>", "--think-budget", "8", "--format", path.to_str().unwrap(), "--check", &check,
        "--retries", "2", "--retry-mode", "resample", "--temperature", "0", "--num-predict", "80", "Name a cat, as a JSON object.",
    ];
    let out = formwork(&default_model(), "1", &args);
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    formwork_schema::validate(&schema, stdout.trim()).unwrap_or_else(|e| panic!("{stdout}: {e:?}"));
    assert!(stderr.contains("attempt 1/3: failed validation") && stderr.contains("say another name"), "{stderr}");
    assert!(stderr.contains("attempt 2/3: passed validation"), "{stderr}");
    // Reasoning text came before each verdict: stderr has text before `attempt 1/3` and
    // between the two verdicts.
    let first = stderr.find("attempt 1/3").unwrap();
    let second = stderr.find("attempt 2/3").unwrap();
    assert!(!stderr[..first].trim().is_empty(), "attempt 1 reasoned: {stderr}");
    let between = &stderr[first..second];
    let after_errors = between.lines().skip_while(|l| l.starts_with("attempt") || l.starts_with("  ")).collect::<Vec<_>>().join("\n");
    assert!(!after_errors.trim().is_empty(), "attempt 2 reasoned too: {stderr}");
    assert!(!stdout.contains("think>"), "{stdout}");
}

#[test]
fn no_think_answers_directly() {
    let (_, path) = name_schema();
    let args = ["--think-markers", "<think>,</think>", "--no-think", "--format", path.to_str().unwrap(), "--temperature",
                "0", "--num-predict", "64", "Name a dog, as a JSON object."];
    let out = formwork(&default_model(), "1", &args);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_str::<serde_json::Value>(stdout.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout:?}"));
    assert!(text(&out.stderr).trim().is_empty(), "no reasoning printed");
}

/// Opt-in (not in CI): a real reasoning model from `FORMWORK_REASONING_MODEL` reasons freely
/// (at most 48 tokens, then `</think>` is forced) and answers under a JSON Schema. Slow on
/// small machines (a 7B model runs at a few tokens per second on 2 cores).
#[test]
#[ignore = "needs a reasoning model GGUF in FORMWORK_REASONING_MODEL"]
fn real_reasoning_model_thinks_then_answers_under_a_schema() {
    let Some(path) = std::env::var_os("FORMWORK_REASONING_MODEL") else {
        panic!("set FORMWORK_REASONING_MODEL to a reasoning model GGUF (e.g. DeepSeek-R1-Distill-Qwen-7B)");
    };
    let schema = serde_json::json!({"type": "object", "properties": {"answer": {"type": "integer"}},
                                    "required": ["answer"], "additionalProperties": false});
    let dir = std::env::temp_dir().join(format!("formwork-think-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let schema_path = dir.join("schema.json");
    std::fs::write(&schema_path, schema.to_string()).unwrap();
    let threads = std::env::var("FORMWORK_THREADS").unwrap_or_else(|_| "2".into());
    let args = ["--think-budget", "48", "--format", schema_path.to_str().unwrap(), "--temperature", "0",
                "--num-predict", "80", "--ctx-size", "1024", "--verbose", "What is 17 + 25?"];
    let out = formwork(std::path::Path::new(&path), &threads, &args);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    eprintln!("--- stderr (reasoning, stats)\n{stderr}\n--- stdout (answer)\n{stdout}");
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout:?}"));
    formwork_schema::validate(&schema, stdout.trim()).unwrap_or_else(|e| panic!("{v}: {e:?}"));
    assert!(!stdout.contains("think>"), "{stdout}");
}
