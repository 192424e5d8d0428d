//! `formwork run` end to end with the real default model (SmolLM2-135M-Instruct Q4_1).
//!
//! The model is resolved once per test binary through the model cache
//! (`$FORMWORK_HOME`, default `~/.cache/formwork`), which pulls it on first use; every test
//! then passes its path with `--model`. One thread per run: tests run in parallel on small
//! machines, and over-subscribed llama.cpp threads collapse throughput.

mod common;
use common::{formwork_on_model, ok};
use std::process::{Command, Output, Stdio};

fn formwork(args: &[&str]) -> Output {
    formwork_with_stdin(args, None)
}

fn formwork_with_stdin(args: &[&str], stdin: Option<&str>) -> Output {
    formwork_on_model("run", args, stdin)
}

#[test]
fn chat_prompt_gets_a_non_empty_answer() {
    let out = ok(&formwork(&["--temperature", "0", "--num-predict", "48", "Name three colours."]));
    assert!(!out.trim().is_empty(), "empty answer");
}

#[test]
fn greedy_with_a_seed_is_identical_across_runs() {
    let args = ["--temperature", "0", "--seed", "1", "--num-predict", "32", "Write one sentence about the sea."];
    let a = ok(&formwork(&args));
    let b = ok(&formwork(&args));
    assert!(!a.trim().is_empty());
    assert_eq!(a, b);
}

#[test]
fn seeded_sampling_is_identical_across_runs() {
    let args = ["--temperature", "0.9", "--seed", "42", "--num-predict", "24", "Tell me a fact about cats."];
    assert_eq!(ok(&formwork(&args)), ok(&formwork(&args)));
}

#[test]
fn stop_string_ends_the_answer_and_is_not_printed() {
    let base = ["--temperature", "0", "--num-predict", "40", "Count from 1 to 20, separated by commas."];
    let full = ok(&formwork(&base));
    // Pick a stop string that occurs in the unconstrained answer, past its start.
    let words: Vec<&str> = full.split_whitespace().collect();
    assert!(words.len() >= 4, "answer too short to pick a stop string from: {full:?}");
    let stop = words[2];
    let pos = full.find(stop).unwrap();
    let mut args = base.to_vec();
    args.extend(["--stop", stop, "--verbose"]);
    let out = formwork(&args);
    let text = ok(&out);
    assert_eq!(text.trim_end(), full[..pos].trim_end(), "stopped right before {stop:?}");
    assert!(!text.contains(stop), "the stop string {stop:?} was printed: {text:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("stop string"), "--verbose names the stop reason: {err}");
}

#[test]
fn verbose_prints_counts_rates_and_the_stop_reason() {
    let out = formwork(&["--verbose", "--temperature", "0", "--num-predict", "5", "Hello"]);
    ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    for key in ["load duration:", "prompt eval count:", "prompt eval rate:", "eval count:", "eval rate:", "done reason:"] {
        assert!(err.contains(key), "missing {key:?} in:\n{err}");
    }
    let eval_count = err.lines().find(|l| l.contains("eval count:") && !l.contains("prompt")).unwrap();
    assert!(eval_count.trim_end().ends_with(" 5 token(s)"), "{eval_count}");
    assert!(err.contains("length"), "5 tokens of a longer answer: {err}");
}

#[test]
fn prompt_from_stdin() {
    let out = ok(&formwork_with_stdin(&["--temperature", "0", "--num-predict", "16", "-"], Some("Say hello.")));
    assert!(!out.trim().is_empty());
}

#[test]
fn missing_model_file_is_a_clear_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_formwork"))
        .args(["run", "--model", "/nonexistent/dir/model.gguf", "Hello"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/dir/model.gguf") && err.contains("does not exist"), "{err}");
}

#[test]
fn prompt_longer_than_the_context_is_a_clear_error() {
    let long = "word ".repeat(200);
    let out = formwork(&["--ctx-size", "64", &long]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("context"), "{err}");
}

#[test]
fn format_json_output_parses() {
    let out = formwork(&[
        "--format",
        "json",
        "--temperature",
        "0",
        "--num-predict",
        "200",
        "--verbose",
        "Give the name and age of a fictional person as JSON.",
    ]);
    let text = ok(&out);
    let v: serde_json::Value = serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("not JSON ({e}): {text:?}\n{}", String::from_utf8_lossy(&out.stderr)));
    assert!(v.is_object(), "{v}");
}

#[test]
fn grammar_file_constrains_the_answer() {
    let dir = std::env::temp_dir().join(format!("formwork-run-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("yesno.gbnf");
    std::fs::write(&path, "root ::= (\"yes\" | \"no\") \".\"\n").unwrap();
    let out = formwork(&["--grammar", path.to_str().unwrap(), "--temperature", "0", "Is the sky blue?"]);
    let text = ok(&out);
    assert!(text.trim() == "yes." || text.trim() == "no.", "{text:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_grammar_is_reported_with_its_position() {
    let dir = std::env::temp_dir().join(format!("formwork-run-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.gbnf");
    std::fs::write(&path, "root ::= \"a\" (\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_formwork"))
        .args(["run", "--model", "/nonexistent/never-loaded.gguf", "--grammar", path.to_str().unwrap(), "Hi"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.gbnf") && err.contains("1:"), "grammar errors come before the model loads: {err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn first_key_and_schema_in_prompt() {
    let dir = std::env::temp_dir().join(format!("formwork-firstkey-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let schema = dir.join("answer.json");
    std::fs::write(
        &schema,
        r#"{"type":"object","properties":{"answer":{"type":"integer"},"reasoning":{"type":"string","maxLength":60}},"required":["answer"],"additionalProperties":false}"#,
    )
    .unwrap();
    let s = schema.to_str().unwrap();
    for placement in ["user", "system", "off"] {
        let out = formwork(&["--format", s, "--first-key", "reasoning", "--schema-in-prompt", placement, "--temperature", "0", "-n", "120", "What is 12 + 30?"]);
        let text = ok(&out);
        let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{placement}: not JSON ({e}): {text:?}"));
        let after_brace = text.trim_start().strip_prefix('{').map(str::trim_start);
        assert!(after_brace.is_some_and(|t| t.starts_with("\"reasoning\"")), "{placement}: the first key is not reasoning: {text}");
        // `formwork run` generates canonical integers (`42`, never `42.0`).
        assert!(v["answer"].is_i64(), "{placement}: {text}");
    }
    let out = formwork(&["--format", "json", "--first-key", "x", "hi"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--first-key needs a JSON Schema"), "{}", String::from_utf8_lossy(&out.stderr));
    let out = formwork(&["--format", s, "--first-key", "nope", "hi"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("`nope`"), "{}", String::from_utf8_lossy(&out.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}
