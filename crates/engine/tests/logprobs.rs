//! Per-token logprobs (`GenerateOptions::logprobs`): the masked distribution, forced tokens
//! at 0, and no change to what is generated.

use formwork_engine::testing::ScriptedModel;
use formwork_engine::{
    generate, GenerateOptions, Generation, GrammarConstraint, LogprobOptions, LogprobSink, Model, Prompt, SamplerOptions,
};
use formwork_grammar::{gbnf, matcher::CompiledGrammar, Limits};
use std::ops::ControlFlow;

const TOKENS: &[&str] = &["a", "b", "c", "z", "1", "2", "hel", "lo", " world", " ", "w", "o", "r", "l", "d", "h", "e", "x"];

fn model() -> ScriptedModel {
    let mut m = ScriptedModel::new(TOKENS, &["</s>"]);
    let t = |s: &str| m.token(s);
    // Step 0 prefers "z" (not allowed by the grammar), then "b", then "a".
    let script = vec![vec![t("z"), t("b"), t("a")], vec![t("x"), t("hel")]];
    m.set_script(script);
    m
}

fn run(m: &mut ScriptedModel, opts: &GenerateOptions, constrained: bool) -> Generation {
    let g = CompiledGrammar::new(&gbnf::parse(r#"root ::= [abc] "hello world" [12]"#, &Limits::default()).unwrap(), m.vocab().clone(), &Limits::default())
        .unwrap();
    let mut c = GrammarConstraint::new(&g);
    let c: Option<&mut dyn formwork_engine::Constraint> = if constrained { Some(&mut c) } else { None };
    generate(m, &Prompt::Raw("hel".into()), opts, c, &mut |_| ControlFlow::Continue(())).unwrap()
}

fn with_logprobs(o: GenerateOptions, top: usize) -> GenerateOptions {
    GenerateOptions { logprobs: Some(LogprobOptions { top, sink: None }), ..o }
}

fn text_of(m: &ScriptedModel, id: formwork_vocab::TokenId) -> String {
    String::from_utf8_lossy(m.vocab().token_bytes(id)).into_owned()
}

#[test]
fn constrained_logprobs_are_the_masked_distribution() {
    for force in [false, true] {
        let mut m = model();
        let opts = with_logprobs(GenerateOptions { sampler: SamplerOptions::greedy(), num_predict: Some(20), force_tokens: force, ..Default::default() }, 64);
        let g = run(&mut m, &opts, true);
        assert_eq!(g.text, "bhello world1", "force {force}");
        // One entry per text token (the final EOS is not reported).
        assert_eq!(g.logprobs.len(), g.tokens.iter().filter(|t| !m.vocab().eos_tokens().contains(t)).count());
        let first = &g.logprobs[0];
        assert_eq!(text_of(&m, first.token), "b");
        // Allowed at step 0: a, b, c only; "z" (logit 10) is masked and never appears.
        let top: Vec<String> = first.top.iter().map(|t| text_of(&m, t.token)).collect();
        assert_eq!(top, ["b", "a", "c"]);
        let want = 9.0f64 - (9.0f64.exp() + 8.0f64.exp() + 1.0).ln();
        assert!((first.logprob as f64 - want).abs() < 1e-4, "{} vs {want}", first.logprob);
        for (i, e) in g.logprobs.iter().enumerate() {
            assert_eq!(e.bytes, m.vocab().token_bytes(e.token));
            assert!(e.top.iter().all(|t| t.token != m.token("z") && t.token != m.token("x")), "step {i}: a masked token reported");
            // top (64) covers the whole support: the probabilities sum to 1.
            let total: f64 = e.top.iter().map(|t| (t.logprob as f64).exp()).sum();
            assert!((total - 1.0).abs() < 1e-4, "step {i}: sum {total}");
            assert!(e.top.windows(2).all(|w| w[0].logprob >= w[1].logprob), "step {i}: not sorted");
            assert!(e.top.iter().any(|t| t.token == e.token && t.logprob == e.logprob), "step {i}: chosen not among top");
        }
        let stats = g.constraint.unwrap();
        if force {
            // "hel", "lo" are forced (the last token of the forced text is sampled): logprob 0,
            // their only alternative themselves.
            assert_eq!(stats.forced, 2);
            for e in &g.logprobs[1..3] {
                assert_eq!(e.logprob, 0.0, "{}", text_of(&m, e.token));
                assert_eq!(e.top.len(), 1);
                assert_eq!((e.top[0].token, e.top[0].logprob), (e.token, 0.0));
            }
        }
    }
}

#[test]
fn unconstrained_logprobs_cover_the_vocabulary() {
    let mut m = model();
    let g = run(&mut m, &with_logprobs(GenerateOptions { sampler: SamplerOptions::greedy(), num_predict: Some(2), ..Default::default() }, 100), false);
    assert_eq!(g.text, "zx");
    let e = &g.logprobs[0];
    assert_eq!(e.top.len(), m.vocab().len(), "every token has some probability");
    let total: f64 = e.top.iter().map(|t| (t.logprob as f64).exp()).sum();
    assert!((total - 1.0).abs() < 1e-4, "{total}");
    assert_eq!(e.top[0].token, m.token("z"));
    // Fewer alternatives when fewer are asked for; none at 0.
    let g = run(&mut model(), &with_logprobs(GenerateOptions { sampler: SamplerOptions::greedy(), num_predict: Some(2), ..Default::default() }, 0), false);
    assert!(g.logprobs.iter().all(|e| e.top.is_empty()) && g.logprobs.len() == 2);
}

#[test]
fn logprobs_do_not_change_the_output() {
    let samplers = [
        SamplerOptions::greedy(),
        // Fast path (untruncated) and mask first (Ollama's defaults), both seeded.
        SamplerOptions { temperature: 1.0, top_k: 0, top_p: 1.0, seed: Some(3), ..Default::default() },
        SamplerOptions { seed: Some(4), ..Default::default() },
    ];
    for sampler in samplers {
        for constrained in [false, true] {
            for force in [false, true] {
                let base = GenerateOptions { sampler: sampler.clone(), num_predict: Some(12), force_tokens: force, ..Default::default() };
                let off = run(&mut model(), &base, constrained);
                let on = run(&mut model(), &with_logprobs(base.clone(), 5), constrained);
                assert_eq!((off.text.as_str(), &off.tokens), (on.text.as_str(), &on.tokens), "{sampler:?} {constrained} {force}");
                assert!(off.logprobs.is_empty());
                assert!(!on.logprobs.is_empty());
            }
        }
    }
}

#[test]
fn the_sink_gets_each_entry_before_its_text() {
    let mut m = model();
    let sink = LogprobSink::new();
    let opts = GenerateOptions {
        sampler: SamplerOptions::greedy(),
        num_predict: Some(20),
        force_tokens: true,
        logprobs: Some(LogprobOptions { top: 2, sink: Some(sink.clone()) }),
        ..Default::default()
    };
    let g = CompiledGrammar::new(&gbnf::parse(r#"root ::= [abc] "hello world" [12]"#, &Limits::default()).unwrap(), m.vocab().clone(), &Limits::default())
        .unwrap();
    let mut c = GrammarConstraint::new(&g);
    let (mut streamed, mut text) = (Vec::new(), String::new());
    let g = generate(&mut m, &Prompt::Raw("hel".into()), &opts, Some(&mut c), &mut |t| {
        let got = sink.take();
        text.push_str(t);
        // Every byte of the text so far belongs to a token already reported.
        streamed.extend(got);
        let reported: usize = streamed.iter().map(|e| e.bytes.len()).sum();
        assert!(reported >= text.len(), "{reported} bytes reported for {text:?}");
        ControlFlow::Continue(())
    })
    .unwrap();
    streamed.extend(sink.take());
    assert_eq!(streamed, g.logprobs);
    assert!(g.logprobs.iter().all(|e| e.top.len() <= 2));
}
