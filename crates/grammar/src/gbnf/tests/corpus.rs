//! The data-driven corpus in `testdata/corpus/*.json` (format in `testdata/README.md`):
//! every grammar parses, round-trips through `print`, and the reference oracle agrees with
//! every accept/reject expectation. The matcher's own runner executes the same files
//! byte by byte and through token masks.

use super::oracle;
use crate::json::{self, JsonGrammarOptions};
use crate::{gbnf, Limits};
use std::path::PathBuf;

#[derive(serde::Deserialize)]
struct Case {
    name: String,
    grammar: String,
    accept: Vec<String>,
    reject: Vec<String>,
}

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata/corpus")
}

fn load() -> Vec<Case> {
    let dir = corpus_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read the corpus folder {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut cases = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let mut v: Vec<Case> =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: not a list of cases: {e}", f.display()));
        cases.append(&mut v);
    }
    cases
}

#[test]
fn corpus_is_large_and_names_are_unique() {
    let cases = load();
    assert!(cases.len() >= 60, "only {} corpus cases", cases.len());
    let mut names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
    names.sort();
    let before = names.len();
    names.dedup();
    assert_eq!(before, names.len(), "duplicate case names");
    for c in &cases {
        assert!(!c.accept.is_empty() || !c.reject.is_empty(), "{}: no inputs", c.name);
    }
}

#[test]
fn every_corpus_grammar_round_trips() {
    let limits = Limits::default();
    for c in load() {
        let g = gbnf::parse(&c.grammar, &limits).unwrap_or_else(|e| panic!("{}: {e}", c.name));
        let printed = gbnf::print(&g);
        let back = gbnf::parse(&printed, &limits).unwrap_or_else(|e| panic!("{}: printed text fails: {e}\n{printed}", c.name));
        assert_eq!(back, g, "{}: parse(print(g)) != g\n{printed}", c.name);
        // Printing is idempotent.
        assert_eq!(gbnf::print(&back), printed, "{}", c.name);
    }
}

#[test]
fn reference_oracle_agrees_with_the_corpus() {
    let limits = Limits::default();
    for c in load() {
        let g = gbnf::parse(&c.grammar, &limits).unwrap();
        for s in &c.accept {
            assert!(oracle::accepts(&g, s), "{}: should accept {s:?}", c.name);
        }
        for s in &c.reject {
            assert!(!oracle::accepts(&g, s), "{}: should reject {s:?}", c.name);
        }
    }
}

#[test]
fn json_corpus_grammars_are_the_builtin_json_grammar() {
    let object = json::gbnf(&JsonGrammarOptions::default());
    let value = json::gbnf(&JsonGrammarOptions { root_object_only: false, ..Default::default() });
    let mut seen = 0;
    for c in load() {
        if c.name.starts_with("json-object/") {
            assert_eq!(c.grammar, object, "{}: regenerate from json::gbnf", c.name);
            seen += 1;
        } else if c.name.starts_with("json-value/") {
            assert_eq!(c.grammar, value, "{}: regenerate from json::gbnf", c.name);
            seen += 1;
        }
    }
    assert!(seen >= 4);
}

#[test]
fn byte_matcher_agrees_with_the_corpus() {
    let limits = Limits::default();
    let mut failures = Vec::new();
    for c in load() {
        let g = gbnf::parse(&c.grammar, &limits).unwrap();
        for (inputs, want) in [(&c.accept, true), (&c.reject, false)] {
            for s in inputs {
                match crate::matcher::accepts(&g, s.as_bytes(), &limits) {
                    Ok(got) if got == want => {}
                    other => failures.push(format!("{}: {s:?}: want {want}, got {other:?}", c.name)),
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} disagreements:\n{}", failures.len(), failures.join("\n"));
}
