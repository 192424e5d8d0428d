//! `formwork run --retries/--rules/--check/--repair` end to end on the default model.

mod common;
use common::model_path;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};


fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_formwork"))
        .arg("run")
        .arg("--model")
        .arg(model_path())
        .args(["--threads", "1"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("formwork-run-retry-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_check_that_rejects_the_first_answer_gives_two_attempts() {
    check_once(&[], "once");
}

#[test]
fn resample_mode_also_retries() {
    check_once(&["--retry-mode", "resample"], "resample");
}

fn check_once(extra: &[&str], tag: &str) {
    let dir = temp_dir(tag);
    let counter = dir.join("count");
    // Fails the first time it runs (a counter in a file), passes after.
    let check = format!(
        "n=$(cat '{c}' 2>/dev/null || echo 0); echo $((n+1)) > '{c}'; if [ \"$n\" -eq 0 ]; then echo 'first answer rejected: add more detail' >&2; exit 1; fi",
        c = counter.display()
    );
    let mut args = vec!["--format", "json", "--temperature", "0", "--num-predict", "120", "--retries", "2", "--check", &check];
    args.extend_from_slice(extra);
    args.push("Give the name and age of a fictional person as JSON.");
    let out = run(&args);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("attempt 1/3: failed validation (1 error(s))"), "{err}");
    assert!(err.contains("- check: first answer rejected: add more detail"), "{err}");
    assert!(err.contains("attempt 2/3: passed validation"), "{err}");
    assert!(!err.contains("attempt 3/3"), "{err}");
    assert_eq!(std::fs::read_to_string(&counter).unwrap().trim(), "2", "the check ran twice");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("stdout not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    assert!(v.is_object());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn exhausted_retries_print_the_last_answer_and_fail() {
    let dir = temp_dir("never");
    let rules = dir.join("rules.json");
    // The grammar allows any object; the rule asks for a key the model will not invent.
    std::fs::write(&rules, r#"{"required": ["formwork_never_generated_key"]}"#).unwrap();
    let out = run(&[
        "--format", "json", "--temperature", "0", "--num-predict", "60", "--retries", "1", "--rules",
        rules.to_str().unwrap(), "--verbose", "Describe a cat as JSON.",
    ]);
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("attempt 1/2: failed validation") && err.contains("attempt 2/2: failed validation"), "{err}");
    assert!(err.contains("rules: \"formwork_never_generated_key\" is a required property"), "{err}");
    assert!(err.contains("failed validation after 2 attempt(s)"), "{err}");
    assert!(err.contains("prompt token(s)") && err.contains("reused"), "--verbose shows per-attempt counts: {err}");
    assert!(!out.stdout.is_empty(), "the last answer is still printed");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn repair_without_a_grammar_prints_json() {
    let out = run(&[
        "--repair", "--temperature", "0", "--num-predict", "80", "--retries", "2",
        "Reply with only a JSON object with keys \"name\" and \"age\" for a fictional person.",
    ]);
    let err = stderr(&out);
    // The 135M model may or may not write recoverable JSON; when it passes, stdout is JSON.
    if out.status.success() {
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {err}"));
        assert!(v.is_object() || v.is_array(), "{v}");
    } else {
        assert!(err.contains("repair: "), "failures come from the repair step: {err}");
    }
    assert!(err.contains("attempt 1/3"), "{err}");
}

#[test]
fn validation_flags_are_checked_before_the_model_loads() {
    let dir = temp_dir("flags");
    let bad = dir.join("bad.json");
    std::fs::write(&bad, r#"{"type": 12}"#).unwrap();
    let base = ["run", "--model", "/nonexistent/never-loaded.gguf"];
    let out = Command::new(env!("CARGO_BIN_EXE_formwork")).args(base).args(["--rules", bad.to_str().unwrap(), "Hi"]).output().unwrap();
    let err = stderr(&out);
    assert!(!out.status.success());
    assert!(err.contains("--rules") && err.contains("bad.json"), "{err}");
    let out = Command::new(env!("CARGO_BIN_EXE_formwork")).args(base).args(["--check-timeout", "0", "--check", "true", "Hi"]).output().unwrap();
    assert!(stderr(&out).contains("--check-timeout"), "{}", stderr(&out));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn retries_without_anything_to_validate_is_an_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_formwork"))
        .args(["run", "--model", "/nonexistent/never-loaded.gguf", "--retries", "2", "Hi"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--retries needs something to validate"), "{}", stderr(&out));
}
