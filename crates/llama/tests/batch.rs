//! The batched model on the real default model: sequences generated together at
//! temperature 0 give the tokens each gives alone; a long prompt is chunked while others
//! generate; slots keep their prefix.

use formwork_engine::batch::{Batcher, BatcherOptions};
use formwork_engine::{generate, ChatMessage, GenerateOptions, Generation, GrammarConstraint, Model, Prompt, SamplerOptions};
use formwork_grammar::matcher::CompiledGrammar;
use formwork_llama::{LlamaBatchModel, LlamaModel, LoadOptions};
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;

fn model_path() -> PathBuf {
    formwork_models::resolve("smollm2").unwrap_or_else(|e| panic!("these tests need the default model: {e}"))
}

fn opts(n_ctx: usize) -> LoadOptions {
    LoadOptions { n_ctx: Some(n_ctx), n_threads: Some(1), ..Default::default() }
}

fn chat(q: &str) -> Prompt {
    Prompt::Chat { messages: vec![ChatMessage::new("user", q)], tools: None }
}

const QUESTIONS: [&str; 4] = ["Name three colours.", "What is 2+2?", "Write a haiku about the sea.", "Describe a cat as JSON."];

fn gen(m: &mut dyn Model, p: &Prompt, grammar: Option<&Arc<CompiledGrammar>>) -> Generation {
    let o = GenerateOptions { sampler: SamplerOptions::greedy(), num_predict: Some(48), force_tokens: true, ..Default::default() };
    let mut c = grammar.map(GrammarConstraint::new);
    let c = c.as_mut().map(|c| c as &mut dyn formwork_engine::Constraint);
    generate(m, p, &o, c, &mut |_| ControlFlow::Continue(())).unwrap()
}

#[test]
fn batched_greedy_generation_equals_each_sequence_alone() {
    let mut alone = LlamaModel::load(model_path(), opts(1024)).unwrap();
    let json = Arc::new(
        CompiledGrammar::new(
            &formwork_grammar::json::grammar(&Default::default()),
            alone.vocab().clone(),
            &formwork_grammar::Limits::default(),
        )
        .unwrap(),
    );
    // Free text and JSON-constrained, each alone.
    let expected: Vec<Generation> = QUESTIONS
        .iter()
        .enumerate()
        .map(|(i, q)| gen(&mut alone, &chat(q), (i % 2 == 1).then_some(&json)))
        .collect();
    drop(alone);

    let batched = LlamaBatchModel::load(model_path(), opts(1024), 4).unwrap();
    let batcher = Batcher::new(Box::new(batched), BatcherOptions::default());
    let threads: Vec<_> = QUESTIONS
        .iter()
        .enumerate()
        .map(|(i, q)| {
            let b = batcher.clone();
            let json = json.clone();
            let p = chat(q);
            std::thread::spawn(move || {
                let mut seq = b.acquire(&b.prompt_tokens(&p).unwrap());
                gen(&mut seq, &p, (i % 2 == 1).then_some(&json))
            })
        })
        .collect();
    for (t, e) in threads.into_iter().zip(&expected) {
        let g = t.join().unwrap();
        assert_eq!(g.text, e.text);
        assert_eq!(g.tokens, e.tokens);
    }
    let stats = batcher.stats();
    assert!(stats.max_batch_sequences >= 2, "never batched: {stats:?}");
}

#[test]
fn a_long_prompt_is_prefilled_in_chunks_while_another_sequence_generates() {
    let m = LlamaBatchModel::load(model_path(), LoadOptions { n_batch: Some(64), ..opts(2048) }, 2).unwrap();
    let batcher = Batcher::new(Box::new(m), BatcherOptions::default());
    let b = batcher.clone();
    let (tx, rx) = std::sync::mpsc::channel::<std::time::Instant>();
    let short = std::thread::spawn(move || {
        let mut seq = b.acquire(&[]);
        let o = GenerateOptions { sampler: SamplerOptions::greedy(), num_predict: Some(200), ..Default::default() };
        let mut stamps = Vec::new();
        let mut told = false;
        generate(&mut seq, &chat("Tell me a long story about a dragon."), &o, None, &mut |_| {
            stamps.push(std::time::Instant::now());
            if !told && stamps.len() >= 5 {
                told = true;
                let _ = tx.send(std::time::Instant::now());
            }
            ControlFlow::Continue(())
        })
        .unwrap();
        stamps
    });
    // Once the short sequence is generating, a prompt of ~1,200 tokens arrives.
    let _ = rx.recv();
    let long_prompt = chat(&"The quick brown fox jumps over the lazy dog. ".repeat(120));
    let mut seq = batcher.acquire(&[]);
    let t0 = std::time::Instant::now();
    let o = GenerateOptions { sampler: SamplerOptions::greedy(), num_predict: Some(1), ..Default::default() };
    let g = generate(&mut seq, &long_prompt, &o, None, &mut |_| ControlFlow::Continue(())).unwrap();
    let t1 = std::time::Instant::now();
    assert!(g.prompt_tokens > 1000, "{}", g.prompt_tokens);
    let stamps = short.join().unwrap();
    let during = stamps.iter().filter(|&&s| s > t0 && s < t1).count();
    // ~20 chunks of 64 tokens: the generating sequence got a token in most of those steps.
    assert!(during >= 5, "the generating sequence produced {during} tokens during the {:?} prefill", t1 - t0);
}
