//! The grammar matcher through `GrammarConstraint` in the loop, on the scripted model.

use formwork_engine::testing::ScriptedModel;
use formwork_engine::{generate, GenerateOptions, GrammarConstraint, Model, Prompt, SamplerOptions, StopReason};
use formwork_grammar::{matcher::CompiledGrammar, Expr, GrammarBuilder, Limits};
use std::ops::ControlFlow;

const WORDS: &[&str] = &["Hi", "{", "}", "\"", "a", "b", ":", "1", "2", " ", "\n", "x", "{\"", "\":", "Sure"];

/// root ::= "{" "\"" [ab]+ "\":" [0-9]+ "}"
fn compiled(model: &ScriptedModel) -> std::sync::Arc<CompiledGrammar> {
    let mut b = GrammarBuilder::new();
    b.define(
        "root",
        Expr::seq([
            Expr::lit("{\""),
            Expr::plus(Expr::class([('a', 'b')], false)),
            Expr::lit("\":"),
            Expr::plus(Expr::class([('0', '9')], false)),
            Expr::lit("}"),
        ]),
    );
    CompiledGrammar::new(&b.build("root").unwrap(), model.vocab().clone(), &Limits::default()).unwrap()
}

fn run(model: &mut ScriptedModel, opts: &GenerateOptions) -> formwork_engine::Generation {
    let g = compiled(model);
    let mut c = GrammarConstraint::new(&g);
    generate(model, &Prompt::Raw("Hi".into()), opts, Some(&mut c), &mut |_| ControlFlow::Continue(())).unwrap()
}

fn scripted() -> ScriptedModel {
    let mut m = ScriptedModel::new(WORDS, &["</s>"]);
    // The model wants to chat ("Sure") first and to end early; the grammar steers it.
    let t = |s: &str| m.token(s);
    let eos = m.token("</s>");
    let script = vec![
        vec![t("Sure"), t("{"), t("{\"")],
        vec![t("\""), t("a")],
        vec![eos, t("b"), t("\":")],
        vec![t("\":")],
        vec![t("x"), t("1")],
        vec![eos, t("}")],
        vec![t("x"), eos],
    ];
    m.set_script(script);
    m
}

#[test]
fn greedy_output_matches_the_grammar_and_stops_when_complete() {
    let mut m = scripted();
    let g = run(&mut m, &GenerateOptions { sampler: SamplerOptions::greedy(), ..Default::default() });
    // "Sure" is refused, "{" is a valid prefix of `{"`; then `"`, "b" (EOS refused), `":`,
    // "1" ("x" refused), "}" (EOS refused before it): complete, so the loop stops.
    assert_eq!(g.text, "{\"b\":1}");
    assert_eq!(g.stop, formwork_engine::StopDetail::ConstraintComplete);
    assert_eq!(g.done_reason, StopReason::Stop);
    let s = g.constraint.unwrap();
    assert!(s.fast_path);
    assert!(s.fast_accepts >= 1 && s.masks >= 3, "{s:?}");
}

#[test]
fn sampled_output_matches_the_grammar_on_the_mask_first_path() {
    for seed in 0..20 {
        let mut m = scripted();
        let opts = GenerateOptions {
            sampler: SamplerOptions { temperature: 1.5, seed: Some(seed), ..Default::default() },
            num_predict: Some(40),
            ..Default::default()
        };
        let g = run(&mut m, &opts);
        assert!(!g.constraint.unwrap().fast_path);
        let b = CompiledGrammar::new(
            &{
                let mut b = GrammarBuilder::new();
                b.define(
                    "root",
                    Expr::seq([
                        Expr::lit("{\""),
                        Expr::plus(Expr::class([('a', 'b')], false)),
                        Expr::lit("\":"),
                        Expr::plus(Expr::class([('0', '9')], false)),
                        Expr::lit("}"),
                    ]),
                );
                b.build("root").unwrap()
            },
            m.vocab().clone(),
            &Limits::default(),
        )
        .unwrap();
        let mut check = b.matcher();
        for &t in g.tokens.iter().filter(|t| !m.vocab().eos_tokens().contains(t)) {
            check.commit(t).unwrap();
        }
        if g.done_reason == StopReason::Stop {
            assert!(check.is_accepting(), "seed {seed}: {:?}", g.text);
        } else {
            assert_eq!(g.done_reason, StopReason::Length);
        }
    }
}
