//! `formwork run`'s interactive chat, driven through a pseudo-terminal on the real default
//! model (SmolLM2-135M-Instruct Q4_1), and the one-shot runs that must not become chats.
//!
//! The terminal is `TERM=dumb`: the line editor then reads plain lines, so the output holds no
//! editing escape sequences to parse around. Timeouts are
//! generous and sampling is greedy with a bounded answer: CI runs these on 2 slow cores.

mod common;
use common::model_path;
use expectrl::process::unix::{PtyStream, UnixProcess, WaitStatus};
use expectrl::{ControlCode, Eof, Expect, Regex, Session};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

type Chat = Session<UnixProcess, PtyStream>;


/// `formwork run --model M --threads 1 ARGS` on a pseudo-terminal, with a fresh
/// `FORMWORK_HOME` (the chat keeps its line history there).
fn chat(home: &tempfile::TempDir, args: &[&str]) -> Chat {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_formwork"));
    cmd.arg("run").arg("--model").arg(model_path()).args(["--threads", "1"]).args(args);
    cmd.env("TERM", "dumb").env("FORMWORK_HOME", home.path()).env_remove("FORMWORK_MODEL");
    let mut p = Session::spawn(cmd).expect("the formwork binary runs on a pseudo-terminal");
    p.set_expect_timeout(Some(Duration::from_secs(600)));
    p
}

/// Everything before the next prompt, with the terminal's `\r`s dropped.
fn until_prompt(p: &mut Chat) -> String {
    let found = p.expect(">>> ").expect("the chat prompt comes back");
    String::from_utf8_lossy(found.before()).replace('\r', "")
}

fn send_line(p: &mut Chat, line: &str) {
    p.send_line(line).expect("writing to the terminal");
}

fn exits_with(p: &mut Chat, code: i32) {
    p.expect(Eof).expect("formwork ends");
    let status = p.get_process().wait().expect("waiting for formwork");
    assert_eq!(status, WaitStatus::Exited(p.get_process().pid(), code));
}

#[test]
fn chat_with_format_json_then_bye() {
    let home = tempfile::tempdir().unwrap();
    let mut p = chat(&home, &["--temperature", "0", "--seed", "1", "--num-predict", "120"]);
    let banner = until_prompt(&mut p);
    assert!(banner.contains("/? for help"), "{banner}");

    // Bad input is reported and the session goes on.
    send_line(&mut p, "/set parameter temperature hot");
    let out = until_prompt(&mut p);
    assert!(out.contains("error: temperature takes a number"), "{out}");
    send_line(&mut p, "/frobnicate");
    let out = until_prompt(&mut p);
    assert!(out.contains("error: unknown command `/frobnicate`"), "{out}");

    // SmolLM2's chat template has no reasoning section.
    send_line(&mut p, "/set think");
    let out = until_prompt(&mut p);
    assert!(out.contains("error: this model's chat template shows no reasoning section"), "{out}");

    // A system message over several lines, between triple quotes (`... ` prompts in between).
    send_line(&mut p, "/set system \"\"\"You are terse.");
    p.expect("... ").expect("the continuation prompt");
    send_line(&mut p, "You answer in JSON.\"\"\"");
    let out = until_prompt(&mut p);
    assert!(out.contains("Set system message."), "{out}");

    send_line(&mut p, "/set format json");
    let out = until_prompt(&mut p);
    assert!(out.contains("Set format to json."), "{out}");

    let question = "Give the name and age of a fictional person as JSON.";
    send_line(&mut p, question);
    let out = until_prompt(&mut p);
    // The answer, after the question should the terminal echo it (expectrl turns echo off).
    let answer = out.split_once(question).map_or(out.as_str(), |(_, a)| a).trim();
    let v: serde_json::Value =
        serde_json::from_str(answer).unwrap_or_else(|e| panic!("the answer is not JSON ({e}): {answer:?}\nwhole output: {out:?}"));
    assert!(v.is_object(), "{v}");

    // The turn is kept: its question and its answer.
    send_line(&mut p, "/show");
    let out = until_prompt(&mut p);
    assert!(out.contains("Conversation: 2 message(s)") && out.contains("Format: json"), "{out}");
    assert!(out.contains("temperature") && out.contains("num_predict      120"), "{out}");
    assert!(out.contains("System: You are terse.\nYou answer in JSON."), "{out}");
    send_line(&mut p, "/clear");
    assert!(until_prompt(&mut p).contains("Cleared the conversation."));

    send_line(&mut p, "/bye");
    exits_with(&mut p, 0);
    // The line history was written to FORMWORK_HOME.
    let history = std::fs::read_to_string(home.path().join("history")).unwrap_or_default();
    assert!(history.contains("/set format json"), "history: {history:?}");
}

#[test]
fn ctrl_c_stops_the_answer_not_the_chat() {
    let home = tempfile::tempdir().unwrap();
    // An answer that cannot end early: 1200 letters and spaces, hundreds of tokens (the
    // engine checks that 400 leave room for them), so Ctrl-C comes while it streams.
    let grammar = home.path().join("long.gbnf");
    std::fs::write(&grammar, "root ::= [a-z ]{1200}\n").unwrap();
    let grammar = grammar.to_str().unwrap();
    let mut p = chat(&home, &["--temperature", "0", "--seed", "1", "--num-predict", "400", "--grammar", grammar]);
    until_prompt(&mut p);
    let question = "Tell me a long story.";
    send_line(&mut p, question);
    // Wait for the answer to start streaming, then interrupt it.
    p.expect(Regex("[0-9a-zA-Z]")).expect("the answer starts");
    p.send(ControlCode::EndOfText).unwrap();
    let out = until_prompt(&mut p);
    assert!(out.contains("(stopped)"), "Ctrl-C did not stop the answer: {out:?}");

    // The partial answer is kept in the conversation, and the chat goes on.
    send_line(&mut p, "/show");
    let out = until_prompt(&mut p);
    assert!(out.contains("Conversation: 2 message(s)"), "{out}");

    // Ctrl-D at the prompt ends the chat.
    p.send(ControlCode::EndOfTransmission).unwrap();
    exits_with(&mut p, 0);
}

#[test]
fn chat_refuses_flags_that_need_a_prompt() {
    let home = tempfile::tempdir().unwrap();
    let mut p = chat(&home, &["--raw"]);
    p.expect("--raw needs a prompt").expect("a clear error");
    exits_with(&mut p, 1);
}

#[test]
fn chat_validates_each_answer_and_goes_on_after_a_failure() {
    // A check that passes: the verdict on stderr, the answer printed once, final.
    let home = tempfile::tempdir().unwrap();
    let mut p = chat(&home, &["--temperature", "0", "--num-predict", "24", "--check", "grep -q .", "--retries", "1"]);
    until_prompt(&mut p);
    send_line(&mut p, "Say hello.");
    let out = until_prompt(&mut p);
    assert!(out.contains("attempt 1/2: passed validation"), "{out}");
    assert!(!out.contains("attempt 2/2"), "{out}");
    p.send(ControlCode::EndOfTransmission).unwrap();
    exits_with(&mut p, 0);

    // A check that always fails: every attempt is reported, the failure said, and the chat
    // goes on with the answer kept.
    let home = tempfile::tempdir().unwrap();
    let mut p = chat(&home, &["--temperature", "0", "--num-predict", "16", "--check", "false", "--retries", "1"]);
    until_prompt(&mut p);
    send_line(&mut p, "Say hello.");
    let out = until_prompt(&mut p);
    assert!(out.contains("attempt 1/2: failed validation") && out.contains("attempt 2/2: failed validation"), "{out}");
    assert!(out.contains("error: the answer failed validation after 2 attempt(s)"), "{out}");
    send_line(&mut p, "/show");
    let out = until_prompt(&mut p);
    assert!(out.contains("Conversation: 2 message(s)"), "{out}");
    p.send(ControlCode::EndOfTransmission).unwrap();
    exits_with(&mut p, 0);
}

#[test]
fn piped_stdin_without_a_prompt_runs_once() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_formwork"))
        .arg("run")
        .arg("--model")
        .arg(model_path())
        .args(["--threads", "1", "--temperature", "0", "--num-predict", "16"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"Say hello.").unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(!stdout.trim().is_empty(), "empty answer");
    assert!(!stdout.contains(">>>") && !stderr.contains("/? for help"), "a pipe is not a chat: {stdout}\n{stderr}");
}
