//! The one entry point (`formwork_engine::request::Request`) on the scripted fake model:
//! every combination of format, reasoning and validation composes.

use formwork_engine::reasoning::{Reasoning, ReasoningFormat};
use formwork_engine::request::{Event, Format, FormatError, Request, RequestError, Whitespace};
use formwork_engine::retry::{Validation, Validator};
use formwork_engine::testing::{ScriptedAnswers, ScriptedModel};
use formwork_engine::{ChatMessage, Model as _, Prompt, SamplerOptions, SchemaPlacement};
use formwork_grammar::Limits;
use serde_json::json;
use std::ops::ControlFlow;

const R1_TEMPLATE: &str = include_str!("fixtures/deepseek_r1_distill.jinja");
const R1_SPECIALS: &[&str] = &["<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<｜begin▁of▁sentence｜>"];

/// A model that writes the next of `outputs` on each generation: printable ASCII one token
/// each, `<think>`/`</think>` as tokens, and an R1-style template when `reasoning`.
fn outputs(outputs: &[&str], reasoning: bool) -> ScriptedAnswers {
    let mut tokens: Vec<String> = (0x20u8..0x7f).map(|b| (b as char).to_string()).collect();
    tokens.push("\n".into());
    tokens.extend(["<think>".to_string(), "</think>".to_string()]);
    let inner = if reasoning {
        ScriptedModel::new(&tokens, R1_SPECIALS).with_chat_template(R1_TEMPLATE, Some("<｜begin▁of▁sentence｜>"))
    } else {
        ScriptedModel::new(&tokens, &["<|im_end|>", "<|im_start|>"])
    };
    ScriptedAnswers::new(inner, outputs)
}

fn chat(q: &str) -> Prompt {
    Prompt::Chat { messages: vec![ChatMessage::new("user", q)], tools: None }
}

fn age_schema() -> serde_json::Value {
    json!({"type": "object", "properties": {"age": {"type": "integer"}}, "required": ["age"], "additionalProperties": false})
}

/// Every event as `T1:text`, `A2:text`, `C1:pass`/`C1:fail`.
fn run(m: &mut ScriptedAnswers, r: Request) -> Result<(formwork_engine::request::Answer, Vec<String>), RequestError> {
    let mut events = Vec::new();
    let a = r.run(m, &mut |e| {
        events.push(match e {
            Event::Thinking { attempt, text } => format!("T{attempt}:{text}"),
            Event::Answer { attempt, text } => format!("A{attempt}:{text}"),
            Event::Checked(a) => format!("C{}:{}", a.number, if a.passed() { "pass" } else { "fail" }),
        });
        ControlFlow::Continue(())
    })?;
    Ok((a, events))
}

fn joined(events: &[String], prefix: &str) -> String {
    events.iter().filter_map(|e| e.strip_prefix(prefix)).collect()
}

#[test]
fn reasoning_composes_with_retries_each_attempt_reasons_then_answers_valid_json() {
    // What `formwork run --think --retries 1` lost before: the retried attempts reason too.
    let mut m = outputs(&["Young.</think>{\"age\": 5}", "Older.</think>{\"age\": 30}"], true);
    let reasoning = Reasoning::on(ReasoningFormat::for_model(&m, None).expect("R1 template"));
    let rules = Validator::Rules(json!({"properties": {"age": {"minimum": 18}}}));
    let request = Request::new(chat("How old?"))
        .format(Format::JsonSchema { schema: age_schema(), strict: false, first_key: None })
        .sampler(SamplerOptions::greedy())
        .num_predict(200)
        .reasoning(Some(reasoning))
        .validation(Validation { validators: vec![rules], retries: 2, ..Default::default() });
    let (a, events) = run(&mut m, request).unwrap();
    assert_eq!(a.valid, Some(true));
    assert_eq!(a.text, "{\"age\": 30}");
    assert_eq!(a.generation.thinking.as_deref(), Some("Older."));
    assert_eq!(a.attempts.len(), 2);
    assert_eq!(joined(&events, "T1:"), "Young.");
    assert_eq!(joined(&events, "A1:"), "{\"age\": 5}");
    assert_eq!(joined(&events, "T2:"), "Older.");
    assert_eq!(joined(&events, "A2:"), "{\"age\": 30}");
    // Each verdict comes right after its attempt's text, before the next attempt starts.
    let c1 = events.iter().position(|e| e == "C1:fail").expect("attempt 1 checked");
    let t2 = events.iter().position(|e| e.starts_with("T2:")).unwrap();
    assert!(c1 < t2, "{events:?}");
    assert!(events.contains(&"C2:pass".to_string()), "{events:?}");
    // The format's schema was a validator too: the rules' error is the only one.
    assert_eq!(a.attempts[0].errors.len(), 1);
    assert_eq!(a.attempts[0].errors[0].validator, "rules");
    // The retry saw the failed answer and the errors, and opened a reasoning section again.
    let seq = m.last_sequence();
    assert!(seq.contains("Your answer did not pass validation:"), "{seq}");
    // (The closing brace completes the answer — nothing may follow the root value — so it
    // ends the generation without being evaluated.)
    assert!(seq.contains("<think>\nOlder.</think>{\"age\": 30"), "{seq}");
}

#[test]
fn a_json_answer_ends_at_its_closing_brace() {
    // The model would go on with newlines after the object (as small models do); with the
    // built-in JSON grammar for generation nothing may follow the value, so the closing
    // brace ends the answer without being evaluated.
    let mut m = outputs(&["{\"age\": 7}\n\n\n\n"], false);
    let request = Request::new(chat("How old?")).format(Format::Json).sampler(SamplerOptions::greedy()).num_predict(50);
    let (a, _) = run(&mut m, request).unwrap();
    assert_eq!(a.text, "{\"age\": 7}");
    assert_eq!(a.generation.done_reason, formwork_engine::StopReason::Stop);
    let seq = m.last_sequence();
    assert!(seq.ends_with("{\"age\": 7"), "{seq:?}");
}

#[test]
fn the_format_constrains_the_answer_without_validation() {
    let mut m = outputs(&["{\"age\": 7}"], false);
    let request = Request::new(chat("How old?"))
        .format(Format::JsonSchema { schema: age_schema(), strict: false, first_key: None })
        .sampler(SamplerOptions::greedy())
        .num_predict(50);
    let (a, events) = run(&mut m, request).unwrap();
    assert_eq!(a.valid, None, "no validation was asked");
    assert!(a.attempts.is_empty());
    assert_eq!(a.text, "{\"age\": 7}");
    assert_eq!(joined(&events, "A1:"), a.text);
    assert!(a.generation.constraint.is_some(), "the grammar was applied");
}

#[test]
fn a_prepared_schema_compiles_from_what_prepare_made_and_again_after() {
    let prepared = Request::new(chat("How old?"))
        .format(Format::JsonSchema { schema: age_schema(), strict: false, first_key: None })
        .sampler(SamplerOptions::greedy())
        .num_predict(50)
        .prepare()
        .unwrap();
    let mut m = outputs(&["{\"age\": 7}"], false);
    let vocab = m.vocab().clone();
    // The first compile takes the lazy grammar prepare made; the second compiles anew.
    for _ in 0..2 {
        let g = prepared.compile(&vocab).unwrap().expect("a schema has a grammar");
        let mut m = g.matcher();
        m.commit_bytes(b"{\"age\": 7}").unwrap();
        assert!(m.is_accepting());
        assert!(g.matcher().commit_bytes(b"{\"age\": \"7\"}").is_err(), "a string age is refused");
    }
    let (a, _) = run(&mut m, prepared).unwrap();
    assert_eq!(a.text, "{\"age\": 7}");
    let refused = Request::new(chat("x"))
        .format(Format::JsonSchema { schema: json!({"type": "strnig"}), strict: false, first_key: None })
        .prepare()
        .unwrap_err();
    assert!(matches!(refused, FormatError::Schema(_)), "prepare still refuses up front: {refused:?}");
}

#[test]
fn schema_integers_are_canonical_for_generation() {
    let limits = Limits::default();
    let f = Format::JsonSchema { schema: json!({"type": "integer"}), strict: false, first_key: None };
    let g = f.grammar(&limits, Default::default()).unwrap().unwrap();
    assert!(formwork_grammar::accepts(&g, b"3", &limits).unwrap());
    assert!(!formwork_grammar::accepts(&g, b"3.0", &limits).unwrap(), "3.0 is a valid integer but not one to generate");
    let strict = Format::JsonSchema { schema: json!({"type": "object", "properties": {"a": {"type": "string"}}}), strict: true, first_key: None };
    let g = strict.grammar(&limits, Default::default()).unwrap().unwrap();
    assert!(!formwork_grammar::accepts(&g, b"{}", &limits).unwrap(), "strict: every listed property is required");
    assert!(formwork_grammar::accepts(&g, b"{\"a\": \"x\"}", &limits).unwrap());
}

#[test]
fn bad_formats_are_refused_with_what_is_wrong() {
    let mut m = outputs(&["x"], false);
    let bad_schema = Request::new(chat("x")).format(Format::JsonSchema {
        schema: json!({"type": "object", "properties": {"a": {"type": "strnig"}}}),
        strict: false,
        first_key: None,
    });
    let e = run(&mut m, bad_schema).unwrap_err();
    assert!(matches!(e, RequestError::Format(FormatError::Schema(_))), "{e:?}");
    assert!(e.to_string().contains("invalid or unsupported JSON Schema"), "{e}");
    assert!(e.to_string().contains("/properties/a"), "names the pointer: {e}");
    let bad_gbnf = Request::new(chat("x")).format(Format::Gbnf("root ::= missing".into()));
    let e = run(&mut m, bad_gbnf).unwrap_err();
    assert!(matches!(e, RequestError::Format(FormatError::Gbnf(_))), "{e:?}");
    assert!(e.to_string().contains("missing"), "{e}");
}

#[test]
fn the_schema_goes_in_the_prompt_when_asked() {
    let r = Request::new(chat("How old?"))
        .format(Format::JsonSchema { schema: age_schema(), strict: false, first_key: None })
        .schema_in_prompt(SchemaPlacement::System);
    let Prompt::Chat { messages, .. } = r.prompt() else { panic!("a chat stays a chat") };
    assert!(messages.iter().any(|m| m.content.contains("\"age\"")), "{messages:?}");
    let plain = Request::new(chat("How old?")).schema_in_prompt(SchemaPlacement::System);
    let Prompt::Chat { messages, .. } = plain.prompt() else { panic!() };
    assert_eq!(messages.len(), 1, "free text: nothing to show");
}

#[test]
fn a_cancelled_attempt_is_not_retried() {
    let mut m = outputs(&["{\"age\": 5}", "{\"age\": 30}"], false);
    let request = Request::new(chat("How old?"))
        .format(Format::JsonSchema { schema: age_schema(), strict: false, first_key: None })
        .sampler(SamplerOptions::greedy())
        .retries(3);
    let mut answers = 0;
    let a = request
        .run(&mut m, &mut |e| {
            if matches!(e, Event::Answer { .. }) {
                answers += 1;
                if answers == 3 {
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        })
        .unwrap();
    assert_eq!(a.valid, Some(false));
    assert_eq!(a.attempts.len(), 1);
    assert_eq!(a.generation.done_reason, formwork_engine::StopReason::Cancelled);
}

#[test]
fn the_whitespace_style_lays_out_json_answers() {
    let limits = Limits::default();
    let schema = Format::JsonSchema { schema: json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}}), strict: false, first_key: None };
    let pretty = Whitespace::Pretty { indent: 2 };
    for f in [schema, Format::Json] {
        let g = f.grammar(&limits, pretty).unwrap().unwrap();
        assert!(formwork_grammar::accepts(&g, b"{\n  \"a\": [\n    1,\n    2\n  ]\n}", &limits).unwrap(), "{f:?}");
        assert!(!formwork_grammar::accepts(&g, b"{\"a\": [1, 2]}", &limits).unwrap(), "{f:?}");
        let g = f.grammar(&limits, Whitespace::Compact).unwrap().unwrap();
        assert!(formwork_grammar::accepts(&g, b"{\"a\":[1,2]}", &limits).unwrap(), "{f:?}");
        assert!(!formwork_grammar::accepts(&g, b"{\"a\": [1,2]}", &limits).unwrap(), "{f:?}");
    }
}

#[test]
fn generation_grammars_have_no_whitespace_around_the_root_value() {
    let limits = Limits::default();
    let f = Format::JsonSchema { schema: json!({"type": "object", "properties": {"a": {"type": "integer"}}}), strict: false, first_key: None };
    let g = f.grammar(&limits, Whitespace::default()).unwrap().unwrap();
    assert!(formwork_grammar::accepts(&g, b"{ \"a\": 1 }", &limits).unwrap(), "whitespace inside stays flexible");
    assert!(!formwork_grammar::accepts(&g, b"{\"a\": 1}\n\n", &limits).unwrap(), "nothing after the answer");
    assert!(!formwork_grammar::accepts(&g, b"\n{\"a\": 1}", &limits).unwrap(), "nothing before it");
    // The same for any JSON object (the built-in grammar, in every layout).
    for ws in [Whitespace::default(), Whitespace::Compact] {
        let g = Format::Json.grammar(&limits, ws).unwrap().unwrap();
        assert!(formwork_grammar::accepts(&g, b"{\"a\":1}", &limits).unwrap());
        assert!(!formwork_grammar::accepts(&g, b"{\"a\":1}\n", &limits).unwrap(), "nothing after a JSON answer ({ws:?})");
    }
}
