//! `formwork repair`: JSON recovered from stdin, fixes on stderr, exit status 0 / 1 / 2 / 3.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn repair(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_formwork"))
        .arg("repair")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The command may exit before reading its input (a bad schema is refused first): a
    // closed pipe is not a test failure.
    if let Err(e) = child.stdin.take().unwrap().write_all(stdin.as_bytes()) {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "{e}");
    }
    child.wait_with_output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn temp_file(name: &str, content: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("formwork-repair-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    p
}

#[test]
fn fenced_faulty_json_is_printed_repaired_with_the_fixes_on_stderr() {
    let out = repair(&[], "Sure:\n```json\n{'a': [1, 2,], // list\n b: True}\n```\nBye");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v, serde_json::json!({"a": [1, 2], "b": true}));
    assert!(text(&out.stdout).contains("\n  \"a\""), "indented by default: {}", text(&out.stdout));
    let err = text(&out.stderr);
    for f in ["code fence", "trailing commas", "single quotes", "unquoted keys", "Python literals", "comments", "text around"] {
        assert!(err.contains(f), "{f} not reported: {err}");
    }
}

#[test]
fn compact_prints_one_line() {
    let out = repair(&["--compact"], "{\"a\": {\"b\": 1}}");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout), "{\"a\":{\"b\":1}}\n");
    assert!(out.stderr.is_empty(), "nothing to report for valid JSON: {}", text(&out.stderr));
}

#[test]
fn schema_valid_is_0_and_invalid_is_1_with_the_errors() {
    let schema = temp_file("age.json", r#"{"type": "object", "properties": {"age": {"type": "integer", "minimum": 0}}, "required": ["age"]}"#);
    let s = schema.to_str().unwrap();
    let out = repair(&["--schema", s, "--compact"], "Result: {age: 3}");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "{\"age\":3}\n");
    assert!(text(&out.stderr).contains("valid against the schema"));
    let out = repair(&["--schema", s, "--compact"], "{'age': -4}");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stdout), "{\"age\":-4}\n", "the JSON is still printed");
    let err = text(&out.stderr);
    assert!(err.contains("invalid against the schema") && err.contains("minimum of 0"), "{err}");
}

#[test]
fn no_json_is_2_and_a_bad_schema_is_3() {
    let out = repair(&[], "Sorry, I can't help with that.");
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(text(&out.stderr).contains("no JSON found"), "{}", text(&out.stderr));
    let out = repair(&["--max-bytes", "10"], "{\"a\": \"long enough\"}");
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--max-bytes"), "{}", text(&out.stderr));
    let bad = temp_file("bad.json", r#"{"type": 7}"#);
    let out = repair(&["--schema", bad.to_str().unwrap()], "{}");
    assert_eq!(out.status.code(), Some(3));
    assert!(text(&out.stderr).contains("not a valid JSON Schema"), "{}", text(&out.stderr));
    let out = repair(&["--schema", "/nonexistent/schema.json"], "{}");
    assert_eq!(out.status.code(), Some(3));
    assert!(text(&out.stderr).contains("/nonexistent/schema.json"), "{}", text(&out.stderr));
}
