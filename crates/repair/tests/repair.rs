//! `formwork_repair` on the data-driven cases of `tests/repair_cases.txt`, plus the
//! bounds (size, depth) and a few properties that are easier to state in code.

use formwork_repair::{repair, repair_and_validate, repair_with, Fix, RepairError, RepairOptions};
use serde_json::Value;
use std::collections::BTreeSet;

#[derive(Debug, Default)]
struct Case {
    name: String,
    line: usize,
    sections: Vec<(String, String)>,
}

impl Case {
    fn get(&self, key: &str) -> Option<&str> {
        self.sections.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

fn parse_cases(text: &str) -> Vec<Case> {
    let mut cases: Vec<Case> = Vec::new();
    let mut section: Option<(String, Vec<&str>)> = None;
    let flush = |cases: &mut Vec<Case>, section: &mut Option<(String, Vec<&str>)>| {
        if let (Some(c), Some((k, lines))) = (cases.last_mut(), section.take()) {
            c.sections.push((k, lines.join("\n")));
        }
    };
    for (i, line) in text.lines().enumerate() {
        if let Some(name) = line.strip_prefix("=== ") {
            flush(&mut cases, &mut section);
            cases.push(Case { name: name.to_string(), line: i + 1, ..Default::default() });
        } else if let Some(key) = line.strip_prefix("--- ") {
            flush(&mut cases, &mut section);
            section = Some((key.trim().to_string(), Vec::new()));
        } else if let Some((_, lines)) = section.as_mut() {
            lines.push(line);
        } else {
            assert!(line.is_empty() || line.starts_with('#'), "line {}: text outside a section: {line:?}", i + 1);
        }
    }
    flush(&mut cases, &mut section);
    // A blank line before the next `===` separates cases; it is not part of the last section.
    for c in &mut cases {
        if let Some((_, v)) = c.sections.last_mut() {
            while v.ends_with('\n') {
                v.pop();
            }
        }
    }
    cases
}

fn fix_names(fixes: &[Fix]) -> BTreeSet<String> {
    fixes.iter().map(|f| f.name().to_string()).collect()
}

fn expected_fixes(s: &str) -> BTreeSet<String> {
    s.split_whitespace().filter(|w| *w != "none").map(str::to_string).collect()
}

#[test]
fn data_driven_cases() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/repair_cases.txt")).unwrap();
    let cases = parse_cases(&text);
    assert!(cases.len() >= 30, "only {} cases parsed", cases.len());
    let mut failures = Vec::new();
    for c in &cases {
        let input = c.get("input").unwrap_or_else(|| panic!("case {} (line {}) has no input", c.name, c.line));
        let result = match c.get("schema") {
            Some(s) => {
                let schema: Value = serde_json::from_str(s).unwrap_or_else(|e| panic!("case {}: bad schema: {e}", c.name));
                repair_and_validate(input, &schema, &RepairOptions::default()).map(|ch| (ch.repaired, Some(ch.errors)))
            }
            None => repair(input).map(|r| (r, None)),
        };
        let mut fail = |why: String| failures.push(format!("case `{}` (line {}): {why}", c.name, c.line));
        match (result, c.get("error")) {
            (Err(e), Some(want)) => {
                if !e.to_string().contains(want) {
                    fail(format!("error {e:?} does not contain {want:?}"));
                }
            }
            (Err(e), None) => fail(format!("unexpected error: {e}")),
            (Ok((r, _)), Some(want)) => fail(format!("expected an error containing {want:?}, got {}", r.json)),
            (Ok((r, errors)), None) => {
                let want: Value = serde_json::from_str(c.get("expect").expect("expect section")).unwrap();
                if r.value != want {
                    fail(format!("got {}, want {want}", r.json));
                }
                if serde_json::from_str::<Value>(&r.json).ok().as_ref() != Some(&r.value) {
                    fail(format!("`json` {} is not the value", r.json));
                }
                if let Some(f) = c.get("fixes") {
                    if fix_names(&r.fixes) != expected_fixes(f) {
                        fail(format!("fixes {:?}, want {:?}", fix_names(&r.fixes), expected_fixes(f)));
                    }
                }
                match (errors, c.get("errors")) {
                    (Some(errs), Some(want)) if !errs.iter().any(|e| e.contains(want)) => {
                        fail(format!("validation errors {errs:?} do not mention {want:?}"))
                    }
                    (Some(errs), None) if !errs.is_empty() => fail(format!("expected valid, got errors {errs:?}")),
                    _ => {}
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

#[test]
fn input_over_the_size_limit_is_refused_with_the_limit_named() {
    let opts = RepairOptions { max_bytes: 100, ..Default::default() };
    let text = format!("{{\"a\": \"{}\"}}", "x".repeat(200));
    let e = repair_with(&text, &opts).unwrap_err();
    assert_eq!(e, RepairError::TooLarge { len: text.len(), max: 100 });
    assert!(e.to_string().contains("max_bytes"), "{e}");
}

#[test]
fn nesting_deeper_than_the_limit_is_an_error_not_a_stack_overflow() {
    let deep = "[".repeat(100_000);
    let e = repair(&format!("x {deep}")).unwrap_err();
    assert!(matches!(e, RepairError::TooDeep { max: 100 }), "{e:?}");
    // A readable value after a too-deep one is still found.
    let text = format!("{}{} {{\"a\": 1}}", "[".repeat(200), "]".repeat(200));
    let schema = serde_json::json!({"type": "object"});
    let c = repair_and_validate(&text, &schema, &RepairOptions::default()).unwrap();
    assert_eq!(c.repaired.json, r#"{"a":1}"#);
    assert!(c.is_valid());
    // Within the limit, a cut-off deep document is closed.
    let r = repair(&"[".repeat(50)).unwrap();
    assert_eq!(r.json, format!("{}{}", "[".repeat(50), "]".repeat(50)));
}

#[test]
fn candidate_starts_are_bounded() {
    // Many unreadable starts: at most `max_candidates` are tried, then it gives up with the
    // position of the first one.
    let text = "{x} ".repeat(1000) + r#"{"late": 1}"#;
    let e = repair(&text).unwrap_err();
    match e {
        RepairError::Unrepairable { line: 1, column: 1, .. } => {}
        other => panic!("{other:?}"),
    }
    let opts = RepairOptions { max_candidates: 2000, ..Default::default() };
    assert_eq!(repair_with(&text, &opts).unwrap().json, r#"{"late":1}"#);
}

#[test]
fn invalid_schema_is_its_own_error() {
    let schema = serde_json::json!({"type": "no-such-type"});
    let e = repair_and_validate("{}", &schema, &RepairOptions::default()).unwrap_err();
    assert!(matches!(e, RepairError::InvalidSchema(_)), "{e:?}");
}

#[test]
fn unterminated_fix_says_what_was_appended() {
    let r = repair(r#"{"a": ["b", "c"#).unwrap();
    assert_eq!(r.json, r#"{"a":["b","c"]}"#);
    assert!(r.fixes.contains(&Fix::Unterminated { closed: "\"]}".into() }), "{:?}", r.fixes);
}

#[test]
fn non_ascii_text_survives() {
    let r = repair("Voilà : {'ville': 'Zürich — 東京', note: \"ok\"}").unwrap();
    assert_eq!(r.value["ville"], "Zürich — 東京");
    let e = repair("été {\n  \"a\": 1,\n  \"b\": x\n}").unwrap_err();
    match e {
        RepairError::Unrepairable { line, column, fail_line, fail_column, .. } => {
            assert_eq!((line, column, fail_line, fail_column), (1, 5, 3, 8));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn every_fix_has_a_distinct_name_and_a_description() {
    let all = [
        Fix::CodeFence,
        Fix::ProseRemoved,
        Fix::LaterCandidate { skipped: 1 },
        Fix::Comments,
        Fix::TrailingComma,
        Fix::MissingComma,
        Fix::SingleQuotes,
        Fix::UnquotedKeys,
        Fix::PythonLiterals,
        Fix::NonJsonValues,
        Fix::NumberFormat,
        Fix::StringEscapes,
        Fix::IncompleteMemberDropped,
        Fix::Unterminated { closed: "}".into() },
    ];
    let names: BTreeSet<&str> = all.iter().map(|f| f.name()).collect();
    assert_eq!(names.len(), all.len());
    assert!(all.iter().all(|f| !f.to_string().is_empty()));
}
