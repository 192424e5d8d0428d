//! Budget steering: with a grammar constraint, `num_predict` or a full context never cuts
//! the output; the loop closes it in time (`StopDetail::ClosedEarly`, reason `length`).

use formwork_engine::testing::{NoPlan, ScriptedModel};
use formwork_engine::{
    generate, Constraint, EngineError, GenerateOptions, Generation, GrammarConstraint, Model, Prompt, SamplerOptions,
    StopDetail, StopReason,
};
use formwork_grammar::{gbnf, matcher::CompiledGrammar, Grammar, Limits};
use std::ops::ControlFlow;
use std::sync::Arc;

const OBJECT: &str = r#"
root   ::= "{" ws "\"name\"" ws ":" ws string ws "," ws "\"age\"" ws ":" ws int ws ("," ws "\"tags\"" ws ":" ws tags ws)? "}"
ws     ::= [ \n]{0,4}
string ::= "\"" [^"\\\n]* "\""
int    ::= "-"? ("0" | [1-9] [0-9]{0,15})
tags   ::= "[" ws (string (ws "," ws string)*)? ws "]"
"#;

fn grammar() -> Grammar {
    gbnf::parse(OBJECT, &Limits::default()).unwrap()
}

/// Printable ASCII and newline as single bytes, plus merged tokens.
fn model() -> ScriptedModel {
    let mut toks: Vec<String> = (0x20u8..0x7f).map(|b| (b as char).to_string()).collect();
    toks.push("\n".into());
    for s in ["{\"", "\":", "\": \"", "\", \"", "\"}", "name", "age", "tags", "aa", "aaaa", " \"", "12", "\",", "}}"] {
        toks.push(s.into());
    }
    ScriptedModel::new(&toks, &["</s>"])
}

/// A model that starts the object and then wants to write the name forever.
fn chatty() -> ScriptedModel {
    let mut m = model();
    let t = |s: &str| m.token(s);
    let mut script = vec![vec![t("{\"")], vec![t("name")], vec![t("\": \"")]];
    for _ in 0..200 {
        script.push(vec![t("aaaa"), t("aa"), t("a")]);
    }
    m.set_script(script);
    m
}

fn compiled(m: &ScriptedModel) -> Arc<CompiledGrammar> {
    CompiledGrammar::new(&grammar(), m.vocab().clone(), &Limits::default()).unwrap()
}

fn run(m: &mut ScriptedModel, opts: &GenerateOptions) -> Result<Generation, EngineError> {
    let g = compiled(m);
    let mut c = GrammarConstraint::new(&g);
    generate(m, &Prompt::Raw("Hi".into()), opts, Some(&mut c), &mut |_| ControlFlow::Continue(()))
}

fn valid(text: &str) -> bool {
    formwork_grammar::accepts(&grammar(), text.as_bytes(), &Limits::default()).unwrap()
}

/// Tokens of the shortest valid output from the start.
fn minimum(m: &ScriptedModel) -> usize {
    GrammarConstraint::new(&compiled(m)).completion_plan().unwrap().len()
}

fn greedy(n: Option<usize>) -> GenerateOptions {
    GenerateOptions { sampler: SamplerOptions::greedy(), num_predict: n, ..Default::default() }
}

#[test]
fn every_budget_from_the_minimum_closes_a_valid_output() {
    let min = minimum(&chatty());
    assert!(min >= 5, "{min}");
    let mut last_len = 0;
    for n in min..min + 30 {
        let g = run(&mut chatty(), &greedy(Some(n))).unwrap();
        assert!(g.tokens.len() <= n, "{n}: {} tokens", g.tokens.len());
        assert!(valid(&g.text), "{n}: {:?}", g.text);
        assert_eq!(g.done_reason, StopReason::Length, "{n}: {:?}", g.stop);
        assert_eq!(g.stop, StopDetail::ClosedEarly, "{n}");
        // The model's string gets as long as the budget allows.
        assert!(g.text.len() >= last_len, "{n}: {:?}", g.text);
        last_len = g.text.len();
    }
    // The minimum budget is the shortest document, in exactly that many tokens.
    let g = run(&mut chatty(), &greedy(Some(min))).unwrap();
    assert_eq!(g.tokens.len(), min);
    assert!(g.text.starts_with("{\"name"), "{:?}", g.text);
}

#[test]
fn a_budget_below_the_shortest_output_is_a_clear_error() {
    let min = minimum(&chatty());
    match run(&mut chatty(), &greedy(Some(min - 1))) {
        Err(e @ EngineError::BudgetTooSmall { budget, needed, context: false }) => {
            assert_eq!((budget, needed), (min - 1, min));
            let msg = e.to_string();
            assert!(msg.contains("num_predict") && msg.contains(&min.to_string()), "{msg}");
        }
        other => panic!("expected BudgetTooSmall, got {other:?}"),
    }
    // Zero tokens asked: nothing generated, as without a constraint.
    let g = run(&mut chatty(), &greedy(Some(0))).unwrap();
    assert!(g.tokens.is_empty());
    assert_eq!(g.stop, StopDetail::NumPredict);
}

#[test]
fn an_ample_budget_changes_nothing() {
    let scripted = || {
        let mut m = model();
        m.script_text(r#"{"name": "Bo", "age": 12}"#);
        m
    };
    let free = run(&mut scripted(), &greedy(None)).unwrap();
    assert_eq!(free.text, r#"{"name": "Bo", "age": 12}"#);
    assert_eq!(free.stop, StopDetail::ConstraintComplete);
    for n in [free.tokens.len(), free.tokens.len() + 1, 100] {
        let g = run(&mut scripted(), &greedy(Some(n))).unwrap();
        assert_eq!(g.tokens, free.tokens, "{n}");
        assert_eq!(g.stop, StopDetail::ConstraintComplete, "{n}");
    }
}

#[test]
fn sampled_outputs_close_on_both_paths() {
    for seed in 0..12 {
        for (name, sampler) in [
            ("fast path", SamplerOptions { temperature: 1.0, seed: Some(seed), ..SamplerOptions::greedy() }),
            ("mask first", SamplerOptions { temperature: 1.0, top_k: 5, seed: Some(seed), ..Default::default() }),
        ] {
            let mut m = chatty();
            let min = minimum(&m);
            let n = min + (seed as usize % 7);
            let opts = GenerateOptions { sampler, num_predict: Some(n), ..Default::default() };
            let g = run(&mut m, &opts).unwrap();
            assert!(g.tokens.len() <= n, "{name} {seed}");
            assert!(valid(&g.text), "{name} {seed}: {:?}", g.text);
            assert_eq!(g.done_reason, StopReason::Length, "{name} {seed}");
        }
    }
}

#[test]
fn a_full_context_closes_the_output_too() {
    let min = minimum(&chatty());
    // The prompt "Hi" is two tokens.
    for room in [min, min + 5] {
        let mut m = chatty().with_context_length(2 + room);
        let g = run(&mut m, &greedy(None)).unwrap();
        assert!(valid(&g.text), "{room}: {:?}", g.text);
        assert_eq!(g.stop, StopDetail::ClosedEarly, "{room}");
        assert!(g.tokens.len() <= room);
    }
    let mut m = chatty().with_context_length(2 + min - 1);
    assert!(matches!(run(&mut m, &greedy(None)), Err(EngineError::BudgetTooSmall { context: true, .. })));
}

#[test]
fn constraints_without_a_plan_are_cut_as_before() {
    let mut m = chatty();
    let g = compiled(&m);
    let mut c = NoPlan(GrammarConstraint::new(&g));
    let out = generate(&mut m, &Prompt::Raw("Hi".into()), &greedy(Some(8)), Some(&mut c), &mut |_| ControlFlow::Continue(()))
        .unwrap();
    assert_eq!(out.tokens.len(), 8);
    assert_eq!(out.stop, StopDetail::NumPredict);
    assert!(!valid(&out.text), "{:?}", out.text);
}

/// People with addresses and friends: definitions a lazily compiled grammar builds on first
/// reach (`formwork_schema::compile_lazy`), as the server compiles schemas.
const PEOPLE: &str = r##"{
  "$defs": {
    "addr": {"type": "object", "properties": {"street": {"type": "string", "maxLength": 6}, "zip": {"type": "string", "maxLength": 5}}, "required": ["street"]},
    "person": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8}, "home": {"$ref": "#/$defs/addr"},
      "work": {"$ref": "#/$defs/addr"}, "friends": {"type": "array", "items": {"$ref": "#/$defs/person"}}}, "required": ["name", "home"]}
  },
  "type": "object", "properties": {"owner": {"$ref": "#/$defs/person"}, "note": {"type": "string"}}, "required": ["owner"]
}"##;

#[test]
fn lazily_compiled_schemas_close_valid_outputs_within_every_budget() {
    let schema: serde_json::Value = serde_json::from_str(PEOPLE).unwrap();
    let opts = formwork_schema::SchemaOptions::default();
    let lazy = |m: &ScriptedModel| {
        let (g, _) = formwork_schema::compile_lazy(&schema, &opts).unwrap();
        CompiledGrammar::lazy(g, formwork_grammar::TokenIndex::for_vocab(m.vocab()), &Limits::default()).unwrap()
    };
    let eager = |m: &ScriptedModel| CompiledGrammar::new(&formwork_schema::compile(&schema, &opts).unwrap(), m.vocab().clone(), &Limits::default()).unwrap();
    // The shortest output is the same plan both ways (its required definitions built, the
    // optional ones not needed).
    let m = model();
    let min = GrammarConstraint::new(&lazy(&m)).completion_plan().unwrap().len();
    assert_eq!(min, GrammarConstraint::new(&eager(&m)).completion_plan().unwrap().len());
    for seed in 0..24 {
        let mut m = model();
        let n = min + (seed as usize * 5) % 60;
        let sampler = SamplerOptions { temperature: 1.0, seed: Some(seed), ..SamplerOptions::greedy() };
        let opts = GenerateOptions { sampler, num_predict: Some(n), ..Default::default() };
        let g = lazy(&m);
        let mut c = GrammarConstraint::new(&g);
        let out = generate(&mut m, &Prompt::Raw("Hi".into()), &opts, Some(&mut c), &mut |_| ControlFlow::Continue(())).unwrap();
        assert!(out.tokens.len() <= n, "{seed}: {} tokens for a budget of {n}", out.tokens.len());
        assert!(formwork_schema::validate(&schema, &out.text).is_ok(), "{seed} (budget {n}): {:?}", out.text);
    }
}
