use super::*;
use crate::backend::TopLogprob;

fn q(v: Value) -> Result<Question, ApiError> {
    Question::parse("q", &v)
}

#[test]
fn reads_the_three_kinds() {
    let c = q(json!({"type": "choice", "instructions": "Which team?", "criteria": {"billing": "Payments", "other": null}})).unwrap();
    assert_eq!(c.shown_options(), vec!["billing: Payments", "other"]);
    let n = q(json!({"type": "noul", "instructions": {"ask": "refund?"}})).unwrap();
    assert_eq!(n.shown_options(), vec!["Yes", "No"], "true is letter A");
    assert!(n.instructions().contains("\"ask\": \"refund?\""), "JSON instructions are shown indented");
    let n = q(json!({"type": "noul", "instructions": "x", "criteria": {"false": "Nope", "true": "Sure"}})).unwrap();
    assert_eq!(n.shown_options(), vec!["Sure", "Nope"]);
    let s = q(json!({"type": "score", "instructions": "How urgent?", "criteria": ["Routine", "Soon", "Urgent"]})).unwrap();
    assert_eq!(s.shown_options(), vec!["Routine", "Soon", "Urgent"]);
    let p = s.prompt("the state");
    assert!(p.starts_with("State:\nthe state\n") && p.contains("A. Routine\nB. Soon\nC. Urgent\n"), "{p}");
}

#[test]
fn bad_questions_say_what_is_wrong() {
    let msg = |v: Value| format!("{:?}", q(v).unwrap_err());
    assert!(msg(json!({"type": "choice", "instructions": "x", "criteria": {"a": null}})).contains("has 1 criteria"));
    let many: Map<String, Value> = (0..27).map(|i| (format!("k{i}"), Value::Null)).collect();
    assert!(msg(json!({"type": "choice", "instructions": "x", "criteria": many})).contains("has 27 criteria"));
    assert!(msg(json!({"type": "choice", "instructions": "x"})).contains("needs `criteria`"));
    assert!(msg(json!({"type": "score", "instructions": "x", "criteria": {"a": "b"}})).contains("list of descriptions"));
    assert!(msg(json!({"type": "noul", "instructions": "x", "criteria": {"maybe": "?"}})).contains("only `false` and `true`"));
    assert!(msg(json!({"type": "vote", "instructions": "x"})).contains("unknown type `vote`"));
    assert!(msg(json!({"type": "noul"})).contains("`instructions` is required"));
    assert!(msg(json!({"type": "noul", "instructions": "x", "extra": 1})).contains("unknown field `extra`"));
    assert!(msg(json!({"type": "noul", "instructions": 3})).contains("must be text"));
    assert!(msg(json!({"type": "noul", "instructions": "x".repeat(MAX_TEXT_BYTES + 1)})).contains("over the limit"));
}

fn lp(chosen: &str, top: &[(&str, f32)]) -> TokenLogprob {
    let top: Vec<TopLogprob> = top.iter().map(|&(t, l)| TopLogprob { token: formwork_model::TokenId(0), bytes: t.as_bytes().to_vec(), logprob: l }).collect();
    let logprob = top.iter().find(|t| t.bytes == chosen.as_bytes()).map_or(-1.0, |t| t.logprob);
    TokenLogprob { token: formwork_model::TokenId(0), bytes: chosen.as_bytes().to_vec(), logprob, top }
}

#[test]
fn probabilities_are_the_letters_softmaxed() {
    let p = probabilities(&lp("A", &[("A", 0.5f32.ln()), ("B", 0.25f32.ln()), ("C", 0.25f32.ln())]), 3).unwrap();
    assert!((p[0] - 0.5).abs() < 1e-6 && (p[1] - 0.25).abs() < 1e-6 && (p[2] - 0.25).abs() < 1e-6, "{p:?}");
    // Tokens that are not letters of an option are left out, and the rest sum to 1.
    let p = probabilities(&lp("B", &[("B", 0.2f32.ln()), ("alt", 0.6f32.ln()), ("D", 0.2f32.ln())]), 3).unwrap();
    assert_eq!(p, vec![0.0, 1.0, 0.0]);
    assert!(probabilities(&lp("x", &[("y", -1.0)]), 2).is_none());
}

#[test]
fn answers_have_ollamas_shapes() {
    let s = q(json!({"type": "score", "instructions": "x", "criteria": ["low", "mid", "high"]})).unwrap();
    let a = s.answer(&[0.25, 0.25, 0.5]);
    assert_eq!(a["type"], "score");
    assert!((a["score"].as_f64().unwrap() - 1.25).abs() < 1e-9);
    assert_eq!(a["legend"], json!({"0": "low", "1": "mid", "2": "high"}));
    assert_eq!(a["probabilities"]["2"], 0.5);
    let c = q(json!({"type": "choice", "instructions": "x", "criteria": {"billing": null, "technical": null}})).unwrap();
    let a = c.answer(&[0.1, 0.9]);
    assert_eq!(a["choice"], "technical");
    assert_eq!(a["probabilities"], json!({"billing": 0.1, "technical": 0.9}));
    let n = q(json!({"type": "noul", "instructions": "x"})).unwrap();
    assert_eq!(n.answer(&[0.7, 0.3]), json!({"type": "noul", "noul": 0.7}));
}

#[test]
fn confidence_is_concentration() {
    assert_eq!(confidence(&[1.0, 0.0, 0.0]), 1.0);
    assert!(confidence(&[0.5, 0.5]).abs() < 1e-12);
    let mid = confidence(&[0.8, 0.1, 0.1]);
    assert!(mid > 0.0 && mid < 1.0);
}
