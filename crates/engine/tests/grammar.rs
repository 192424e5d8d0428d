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

/// root ::= `{"name":"` [ab]+ `"}`, on a vocabulary where the forced start `{"name":"` is
/// tokenized by the model as `{"` `name` `":"`.
fn forcing_setup() -> (ScriptedModel, std::sync::Arc<CompiledGrammar>) {
    let words: &[&str] = &["Hi", "{", "\"", "name", "na", "me", "{\"", "\":\"", ":", "a", "b", "\"}", "x"];
    let mut m = ScriptedModel::new(words, &["</s>"]);
    let mut b = GrammarBuilder::new();
    b.define(
        "root",
        Expr::seq([Expr::lit("{\"name\":\""), Expr::plus(Expr::class([('a', 'b')], false)), Expr::lit("\"}")]),
    );
    let g = CompiledGrammar::new(&b.build("root").unwrap(), m.vocab().clone(), &Limits::default()).unwrap();
    let t = |s: &str| m.token(s);
    // The model's preference at each output position (forced positions are skipped).
    let script = vec![vec![t("{\"")], vec![t("name")], vec![t("\":\""), t("x")], vec![t("a")], vec![t("b")], vec![t("\"}")]];
    m.set_script(script);
    (m, g)
}

#[test]
fn forced_text_is_appended_without_sampling_in_one_batch() {
    let (mut m, g) = forcing_setup();
    let opts = GenerateOptions { sampler: SamplerOptions::greedy(), force_tokens: true, ..Default::default() };
    let mut c = GrammarConstraint::new(&g);
    let out = generate(&mut m, &Prompt::Raw("Hi".into()), &opts, Some(&mut c), &mut |_| ControlFlow::Continue(())).unwrap();
    assert_eq!(out.text, "{\"name\":\"ab\"}");
    // `{"` and `name` are forced; `":"` (the last token of the forced text, which could merge
    // with what follows) is left to the model, which picks it.
    let v = |s: &str| m.token(s);
    assert_eq!(out.tokens, vec![v("{\""), v("name"), v("\":\""), v("a"), v("b"), v("\"}")]);
    assert_eq!(out.constraint.unwrap().forced, 2);
    assert_eq!(out.stop, formwork_engine::StopDetail::ConstraintComplete);
    // Decoded: the prompt, then `{"` `name` in one batch, then `":"`, `a`, `b` one at a time
    // (the last token ends the output and is not evaluated).
    assert_eq!(m.decoded_total(), 1 + 2 + 3);
}

#[test]
fn without_forcing_every_token_is_sampled() {
    let (mut m, g) = forcing_setup();
    let opts = GenerateOptions { sampler: SamplerOptions::greedy(), ..Default::default() };
    let mut c = GrammarConstraint::new(&g);
    let out = generate(&mut m, &Prompt::Raw("Hi".into()), &opts, Some(&mut c), &mut |_| ControlFlow::Continue(())).unwrap();
    assert_eq!(out.text, "{\"name\":\"ab\"}");
    assert_eq!(out.constraint.unwrap().forced, 0);
}

#[test]
fn forced_tokens_keep_to_a_tight_budget() {
    // root ::= `{"name":"` [ab]* `"}`: the shortest output `{"name":""}` is `{"` `name` `":"`
    // `"}`, 4 tokens; with exactly 4, the forced tokens must leave room to close.
    let (mut m, _) = forcing_setup();
    let mut b = GrammarBuilder::new();
    b.define(
        "root",
        Expr::seq([Expr::lit("{\"name\":\""), Expr::star(Expr::class([('a', 'b')], false)), Expr::lit("\"}")]),
    );
    let g = CompiledGrammar::new(&b.build("root").unwrap(), m.vocab().clone(), &Limits::default()).unwrap();
    for n in [4, 5, 6] {
        m.truncate(0).unwrap();
        let opts = GenerateOptions { sampler: SamplerOptions::greedy(), force_tokens: true, num_predict: Some(n), ..Default::default() };
        let mut c = GrammarConstraint::new(&g);
        let out = generate(&mut m, &Prompt::Raw("Hi".into()), &opts, Some(&mut c), &mut |_| ControlFlow::Continue(())).unwrap();
        assert!(out.eval_tokens <= n, "{n}: {out:?}");
        assert!(out.text.starts_with("{\"name\":\"") && out.text.ends_with("\"}"), "{n}: {:?}", out.text);
        assert!(out.constraint.unwrap().forced >= 2, "{n}");
    }
}
