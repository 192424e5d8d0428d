//! Validation and retry (`formwork_engine::retry`) on the scripted fake model.

use formwork_engine::retry::{
    feedback_message, generate_validated, retry_prompt, RetryError, RetryMode, Validated, Validation, ValidationError,
    Validator,
};
use formwork_engine::testing::{ScriptedAnswers, ScriptedModel};
use formwork_engine::{ChatMessage, Constraint, GenerateOptions, Prompt, SamplerOptions};
use formwork_vocab::TokenId;
use serde_json::json;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

/// A scripted model that gives the next of `answers` on each generation (the last one again
/// when they run out), over a byte-level vocabulary so that any prompt tokenizes.
struct Answers;

impl Answers {
    #[allow(clippy::new_ret_no_self)]
    fn new(answers: &[&str]) -> ScriptedAnswers {
        let bytes: Vec<Vec<u8>> = (0x20u8..0x7f).chain([b'\n', b'\t']).map(|b| vec![b]).collect();
        ScriptedAnswers::new(ScriptedModel::new(&bytes, &["<|im_end|>", "<|im_start|>"]), answers)
    }
}

fn chat(q: &str) -> Prompt {
    Prompt::Chat { messages: vec![ChatMessage::new("user", q)], tools: None }
}

fn greedy() -> GenerateOptions {
    GenerateOptions { sampler: SamplerOptions::greedy(), num_predict: Some(200), ..Default::default() }
}

fn run(m: &mut ScriptedAnswers, prompt: &Prompt, validation: &mut Validation) -> Result<Validated, RetryError> {
    generate_validated(m, prompt, &greedy(), &mut || None, validation, &mut |_, _| ControlFlow::Continue(()), &mut |_| {})
}

fn adult_rule() -> Validator {
    Validator::Rules(json!({"properties": {"age": {"minimum": 18}}}))
}

#[test]
fn a_failed_rule_is_fed_back_and_the_second_answer_passes() {
    let mut m = Answers::new(&[r#"{"age": 5}"#, r#"{"age": 30}"#]);
    let schema = json!({"type": "object", "properties": {"age": {"type": "integer"}}, "required": ["age"]});
    let mut validation = Validation { validators: vec![Validator::Schema(schema), adult_rule()], retries: 3, ..Default::default() };
    let mut seen = Vec::new();
    let v = generate_validated(
        &mut m,
        &chat("How old?"),
        &greedy(),
        &mut || None,
        &mut validation,
        &mut |_, _| ControlFlow::Continue(()),
        &mut |a| seen.push((a.number, a.passed())),
    )
    .unwrap();
    assert!(v.valid);
    assert_eq!(v.text, r#"{"age": 30}"#);
    assert_eq!(v.attempts.len(), 2);
    assert_eq!(seen, vec![(1, false), (2, true)], "on_attempt sees each attempt as it is validated");
    let first = &v.attempts[0];
    assert_eq!(first.text, r#"{"age": 5}"#);
    assert_eq!(first.errors.len(), 1, "{:?}", first.errors);
    assert_eq!(first.errors[0].validator, "rules");
    assert!(first.errors[0].message.contains("minimum of 18"), "{}", first.errors[0].message);
    assert!(v.attempts[1].errors.is_empty());
    // The second generation saw the first answer and the errors, in the chat.
    let seq = m.last_sequence();
    let fb = seq.find("Your answer did not pass validation:").expect("feedback in the prompt");
    assert!(seq.find(r#"assistant
{"age": 5}"#).is_some_and(|a| a < fb), "{seq}");
    assert!(seq[fb..].contains("- rules: 5 is less than the minimum of 18"), "{seq}");
    assert!(seq[fb..].contains("Answer again, fixing these errors."), "{seq}");
    assert!(v.attempts[1].stats.cached_prompt_tokens > 0, "the retry reuses the cached conversation");
}

#[test]
fn exhausted_retries_return_the_last_answer_flagged_invalid() {
    let mut m = Answers::new(&[r#"{"age": 1}"#, r#"{"age": 2}"#, r#"{"age": 3}"#, r#"{"age": 99}"#]);
    let mut validation = Validation { validators: vec![adult_rule()], retries: 2, ..Default::default() };
    let v = run(&mut m, &chat("How old?"), &mut validation).unwrap();
    assert!(!v.valid);
    assert_eq!(v.attempts.len(), 3, "1 + 2 retries");
    assert_eq!(v.text, r#"{"age": 3}"#);
    assert!(v.attempts.iter().all(|a| !a.passed()));
    assert_eq!(v.attempts.iter().map(|a| a.number).collect::<Vec<_>>(), vec![1, 2, 3]);
}

#[test]
fn zero_retries_validates_once() {
    let mut m = Answers::new(&[r#"{"age": 1}"#, r#"{"age": 99}"#]);
    let mut validation = Validation { validators: vec![adult_rule()], retries: 0, ..Default::default() };
    let v = run(&mut m, &chat("How old?"), &mut validation).unwrap();
    assert!(!v.valid);
    assert_eq!(v.attempts.len(), 1);
}

#[test]
fn command_validator_errors_are_its_stderr_lines() {
    let mut m = Answers::new(&[r#"{"ok": false}"#, r#"{"ok": true}"#]);
    let check = r#"grep -q '"ok": true' || { echo 'ok must be true' >&2; echo 'second line' >&2; exit 3; }"#;
    let mut validation = Validation { validators: vec![Validator::command(check)], retries: 1, ..Default::default() };
    let v = run(&mut m, &chat("Ok?"), &mut validation).unwrap();
    assert!(v.valid, "{:?}", v.attempts);
    assert_eq!(v.attempts.len(), 2);
    let msgs: Vec<&str> = v.attempts[0].errors.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(msgs, vec!["ok must be true", "second line"]);
    assert_eq!(v.attempts[0].errors[0].validator, "check");
}

#[test]
fn command_without_output_reports_its_status() {
    let mut m = Answers::new(&["x"]);
    let mut validation = Validation { validators: vec![Validator::command("cat > /dev/null; exit 4")], retries: 0, ..Default::default() };
    let v = run(&mut m, &chat("?"), &mut validation).unwrap();
    assert_eq!(v.attempts[0].errors[0].message, "the check command exited with status 4");
}

#[test]
fn a_command_past_its_timeout_is_killed_and_is_an_error() {
    let mut m = Answers::new(&["x"]);
    let v = Validator::Command { command: "sleep 30; exit 0".into(), timeout: Duration::from_millis(300) };
    let mut validation = Validation { validators: vec![v], retries: 3, ..Default::default() };
    let t = Instant::now();
    let e = run(&mut m, &chat("?"), &mut validation).unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(5), "killed on time: {:?}", t.elapsed());
    assert!(matches!(&e, RetryError::Validator { validator, .. } if validator == "check"), "{e:?}");
    assert!(e.to_string().contains("did not finish within 0.3s"), "{e}");
}

#[test]
fn an_invalid_rules_schema_fails_before_generating() {
    let mut m = Answers::new(&["x"]);
    let mut validation = Validation { validators: vec![Validator::Rules(json!({"type": 12}))], retries: 1, ..Default::default() };
    let e = run(&mut m, &chat("?"), &mut validation).unwrap_err();
    assert!(e.to_string().contains("rules validator failed"), "{e}");
    assert_eq!(m.inner().decoded_total(), 0, "no generation ran");
}

#[test]
fn repair_extracts_json_before_validating() {
    let mut m = Answers::new(&["Sure:\n```json\n{'age': 40,}\n```"]);
    let schema = json!({"type": "object", "required": ["age"]});
    let mut validation = Validation { validators: vec![Validator::Schema(schema), adult_rule()], retries: 0, repair: true, ..Default::default() };
    let v = run(&mut m, &chat("How old?"), &mut validation).unwrap();
    assert!(v.valid, "{:?}", v.attempts);
    assert_eq!(v.text, r#"{"age":40}"#);
    let a = &v.attempts[0];
    assert_eq!(a.repaired.as_deref(), Some(r#"{"age":40}"#));
    let names: Vec<&str> = a.fixes.iter().map(|f| f.name()).collect();
    assert!(names.contains(&"code_fence") && names.contains(&"single_quotes") && names.contains(&"trailing_comma"), "{names:?}");
}

#[test]
fn repair_failure_is_a_validation_error_and_is_retried() {
    let mut m = Answers::new(&["I cannot answer that.", r#"{"age": 20}"#]);
    let mut validation = Validation { validators: vec![adult_rule()], retries: 1, repair: true, ..Default::default() };
    let v = run(&mut m, &chat("How old?"), &mut validation).unwrap();
    assert!(v.valid);
    assert_eq!(v.attempts[0].errors[0].validator, "repair");
    assert!(v.attempts[0].errors[0].message.contains("no JSON found"));
}

#[test]
fn custom_validator_and_raw_prompt_feedback() {
    let mut m = Answers::new(&["cat", "dog"]);
    let check = Box::new(|t: &str| if t == "dog" { vec![] } else { vec![format!("`{t}` is not a dog")] });
    let mut validation = Validation { validators: vec![Validator::Custom { name: "animal".into(), check }], retries: 1, ..Default::default() };
    let v = run(&mut m, &Prompt::Raw("Pet: ".into()), &mut validation).unwrap();
    assert!(v.valid);
    let seq = m.last_sequence();
    assert!(seq.starts_with("Pet: cat\n\nYour answer did not pass validation:\n- animal: `cat` is not a dog\n"), "{seq:?}");
}

#[test]
fn a_cancelled_attempt_is_not_retried() {
    let mut m = Answers::new(&[r#"{"age": 1}"#]);
    let mut validation = Validation { validators: vec![adult_rule()], retries: 5, ..Default::default() };
    let v = generate_validated(&mut m, &chat("?"), &greedy(), &mut || None, &mut validation, &mut |_, _| ControlFlow::Break(()), &mut |_| {}).unwrap();
    assert!(!v.valid);
    assert_eq!(v.attempts.len(), 1);
}

#[test]
fn each_attempt_gets_a_fresh_constraint_and_streams_with_its_number() {
    /// Allows everything; counts how many were made.
    struct Free;
    impl Constraint for Free {
        fn compute_mask(&mut self, mask: &mut formwork_vocab::TokenMask) {
            mask.set_all();
        }
        fn is_allowed(&mut self, _: TokenId) -> bool {
            true
        }
        fn commit(&mut self, _: TokenId) -> Result<(), String> {
            Ok(())
        }
        fn is_accepting(&self) -> bool {
            true
        }
    }
    let mut m = Answers::new(&["a", "b", "c"]);
    let mut made = 0;
    let mut streamed: Vec<(usize, String)> = Vec::new();
    let check = Box::new(|t: &str| if t == "c" { vec![] } else { vec!["not c".to_string()] });
    let mut validation = Validation { validators: vec![Validator::Custom { name: "c".into(), check }], retries: 5, ..Default::default() };
    let v = generate_validated(
        &mut m,
        &chat("?"),
        &greedy(),
        &mut || {
            made += 1;
            Some(Box::new(Free) as Box<dyn Constraint>)
        },
        &mut validation,
        &mut |n, t| {
            streamed.push((n, t.to_string()));
            ControlFlow::Continue(())
        },
        &mut |_| {},
    )
    .unwrap();
    assert!(v.valid);
    assert_eq!(made, 3);
    assert_eq!(streamed, vec![(1, "a".into()), (2, "b".into()), (3, "c".into())]);
    assert!(v.generation.constraint.is_some());
}

#[test]
fn feedback_lists_at_most_ten_errors_and_cuts_long_ones() {
    let errs: Vec<ValidationError> =
        (0..15).map(|i| ValidationError { validator: "rules".into(), message: if i == 0 { "x".repeat(2000) } else { format!("error {i}") } }).collect();
    let fb = feedback_message(&errs);
    assert!(fb.starts_with("Your answer did not pass validation:\n"));
    assert!(fb.ends_with("Answer again, fixing these errors."));
    assert!(fb.contains("- rules: error 9\n") && !fb.contains("error 10"), "{fb}");
    assert!(fb.contains("- and 5 more\n"));
    assert!(fb.len() < 1000, "{}", fb.len());
    let p = retry_prompt(&chat("q"), "a", &errs[1..2]);
    let Prompt::Chat { messages, .. } = p else { panic!() };
    assert_eq!(messages.iter().map(|m| m.role.as_str()).collect::<Vec<_>>(), vec!["user", "assistant", "user"]);
    assert_eq!(messages[1].content, "a");
}

#[test]
fn with_a_fixed_seed_each_attempt_samples_with_the_next_seed() {
    let mut m = Answers::new(&["a"]);
    let check = Box::new(|_: &str| vec!["never".to_string()]);
    let mut validation = Validation { validators: vec![Validator::Custom { name: "no".into(), check }], retries: 2, ..Default::default() };
    let opts = GenerateOptions { sampler: SamplerOptions { seed: Some(7), ..Default::default() }, num_predict: Some(5), ..Default::default() };
    let v = generate_validated(&mut m, &chat("?"), &opts, &mut || None, &mut validation, &mut |_, _| ControlFlow::Continue(()), &mut |_| {}).unwrap();
    let seeds: Vec<u64> = v.attempts.iter().map(|a| a.stats.seed).collect();
    assert_eq!(seeds, vec![7, 8, 9]);
}

#[test]
fn resample_mode_asks_the_original_prompt_again() {
    let mut m = Answers::new(&[r#"{"age": 5}"#, r#"{"age": 30}"#]);
    let mut validation = Validation { validators: vec![adult_rule()], retries: 2, mode: RetryMode::Resample, ..Default::default() };
    let v = run(&mut m, &chat("How old?"), &mut validation).unwrap();
    assert!(v.valid);
    assert_eq!(v.attempts.len(), 2);
    let seq = m.last_sequence();
    assert!(!seq.contains("did not pass validation") && !seq.contains(r#"{"age": 5}"#), "{seq}");
    assert_eq!(v.attempts[0].stats.prompt_tokens, v.attempts[1].stats.prompt_tokens);
    assert_eq!("resample".parse::<RetryMode>(), Ok(RetryMode::Resample));
    assert!("again".parse::<RetryMode>().unwrap_err().contains("feedback"));
}
