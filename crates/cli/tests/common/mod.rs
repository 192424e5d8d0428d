//! Helpers shared by the CLI's integration tests.
#![allow(dead_code)]

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

/// The default model's GGUF, resolved once per test binary (pulled on first use); the tests
/// that run the real model need it, and fail saying so when it cannot be had.
pub fn model_path() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        formwork_models::resolve(formwork_models::DEFAULT_MODEL)
            .unwrap_or_else(|e| panic!("the default model is needed for these tests and could not be resolved: {e}"))
    })
    .clone()
}

/// Runs `formwork <command> --model <the default model> --threads 1 <args>`, writing `stdin`
/// to its input when given (else its input is empty).
pub fn formwork_on_model(command: &str, args: &[&str], stdin: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_formwork"));
    cmd.arg(command).arg("--model").arg(model_path()).args(["--threads", "1"]).args(args);
    cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("the formwork binary runs");
    if let Some(s) = stdin {
        child.stdin.take().unwrap().write_all(s.as_bytes()).unwrap();
    }
    child.wait_with_output().unwrap()
}

/// The standard output of a run that succeeded; fails showing the status and both streams
/// when it did not.
pub fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "formwork failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("stdout is UTF-8")
}
