//! `formwork bench serve` end to end: `formwork serve` with the real default model on a free
//! port, then a small load from two clients in both modes, read back as `--json`.
//!
//! The model is resolved through the model cache (`$FORMWORK_HOME`, default
//! `~/.cache/formwork`) as in the other CLI tests, which pulls it on first use. The server
//! runs with one thread and the load is small (2 clients × 1 request × 2 modes, ≤ 40 tokens),
//! so the test stays short on a 2-core CI machine.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Kills the server when the test ends, pass or fail.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `formwork serve --port 0` and returns it with its base URL, read from the line it
/// prints once it listens.
fn start_server() -> (Server, String) {
    formwork_models::resolve(formwork_models::DEFAULT_MODEL)
        .unwrap_or_else(|e| panic!("the default model is needed for this test and could not be resolved: {e}"));
    let child = Command::new(env!("CARGO_BIN_EXE_formwork"))
        .args(["serve", "--port", "0", "--threads", "1", "--model", formwork_models::DEFAULT_MODEL])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the formwork binary runs");
    let mut server = Server(child);
    let stdout = server.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(rest) = line.split("listening on ").nth(1) {
                let url = rest.split_whitespace().next().unwrap_or_default().to_string();
                let _ = tx.send(url);
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Ok(url) = rx.recv_timeout(Duration::from_millis(200)) {
            return (server, url);
        }
        if let Ok(Some(status)) = server.0.try_wait() {
            let mut err = String::new();
            let _ = server.0.stderr.take().unwrap().read_to_string(&mut err);
            panic!("formwork serve exited ({status}) before listening:\n{err}");
        }
        assert!(Instant::now() < deadline, "formwork serve did not listen within 120 s");
    }
}

#[test]
fn two_clients_get_valid_answers_from_formwork_serve() {
    let (_server, url) = start_server();
    let out = Command::new(env!("CARGO_BIN_EXE_formwork"))
        .args(["bench", "serve", "--url", &url, "--clients", "2", "--requests", "1", "--max-tokens", "40", "--json"])
        .args(["--temperature", "0"])
        .stdin(Stdio::null())
        .output()
        .expect("the formwork binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bench serve failed ({}):\nstdout: {stdout}\nstderr: {stderr}", out.status);
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("--json output is not JSON ({e}):\n{stdout}"));
    let levels = report["levels"].as_array().expect("levels");
    let modes: Vec<&str> = levels.iter().map(|l| l["mode"].as_str().unwrap()).collect();
    assert_eq!(modes, ["schema", "free"], "{report:#}");
    for l in levels {
        assert_eq!(l["clients"], 2, "{l:#}");
        assert_eq!(l["requests"], 2, "{l:#}");
        assert_eq!(l["errors"], 0, "{l:#}");
        assert_eq!(l["answered"], 2, "{l:#}");
        assert_eq!(l["counted_by_chunks"], 0, "formwork sends usage: {l:#}");
        assert!(l["tok_per_s"].as_f64().unwrap() > 0.0, "{l:#}");
        assert!(l["ttft_p50_s"].as_f64().unwrap() <= l["latency_p50_s"].as_f64().unwrap(), "{l:#}");
    }
    assert_eq!(levels[0]["invalid"], 0, "every schema answer validates: {:#}", levels[0]);
}
