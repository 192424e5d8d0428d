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

/// A request that shares a long head with another slot's conversation starts from a copy
/// of that slot's KV cache (not evaluated again), and generates exactly what it generates
/// when its whole prompt is evaluated; the other slot keeps its conversation.
#[test]
fn a_prefix_copied_from_another_slot_generates_as_an_evaluated_one() {
    let system = "You are a careful assistant. Answer in one short sentence, in plain English, without lists. ".repeat(3);
    let with_system = |q: &str| Prompt::Chat {
        messages: vec![ChatMessage::new("system", system.clone()), ChatMessage::new("user", q)],
        tools: None,
    };
    let (p1, p2) = (with_system("Name three colours that people often use to paint a kitchen."), with_system("What is 2+2?"));
    let mut alone = LlamaModel::load(model_path(), opts(1024)).unwrap();
    let expected = gen(&mut alone, &p2, None);
    drop(alone);

    let batcher = Batcher::new(Box::new(LlamaBatchModel::load(model_path(), opts(1024), 3).unwrap()), BatcherOptions::default());
    let (t1, t2) = (batcher.prompt_tokens(&p1).unwrap(), batcher.prompt_tokens(&p2).unwrap());
    let first = {
        let mut seq = batcher.acquire(&t1);
        gen(&mut seq, &p1, None);
        seq.id()
    };
    let shared = t1.iter().zip(&t2).take_while(|(a, b)| a == b).count();
    let mut seq = batcher.acquire(&t2);
    assert_ne!(seq.id(), first, "the other conversation's slot is kept");
    let g = gen(&mut seq, &p2, None);
    drop(seq);
    assert_eq!(batcher.stats().prefix_copies, 1);
    assert_eq!(g.cached_prompt_tokens, shared, "the shared head came from the copy");
    assert_eq!(g.tokens, expected.tokens, "copied: {:?}\nevaluated: {:?}", g.text, expected.text);
    // The first conversation was kept: asked again, its whole prompt is reused (from its
    // slot, or copied from it).
    let mut seq = batcher.acquire(&t1);
    assert_eq!(gen(&mut seq, &p1, None).cached_prompt_tokens, t1.len() - 1);
}

/// Argmax of logits (the raw greedy choice, no sampler settings in between).
fn argmax(logits: &[f32]) -> formwork_vocab::TokenId {
    formwork_vocab::TokenId((0..logits.len()).max_by(|&a, &b| logits[a].total_cmp(&logits[b])).unwrap_or(0) as u32)
}

/// `n` greedy tokens from `logits` on, each decoded before the next is chosen, and the
/// logits after the last.
fn continue_greedy(m: &mut dyn Model, mut logits: Vec<f32>, n: usize) -> (Vec<formwork_vocab::TokenId>, Vec<f32>) {
    let mut out = Vec::new();
    for _ in 0..n {
        let t = argmax(&logits);
        out.push(t);
        logits = m.decode(&[t]).unwrap().to_vec();
    }
    (out, logits)
}

/// A sequence on a slot above a free one is moved down at its next step (its KV cache
/// changes places with the free slot's, `seq_swap`); what it generates is exactly what it
/// generates alone, and the free slot's cache is kept, one slot higher.
#[test]
fn a_sequence_moved_to_close_a_gap_generates_as_if_it_had_stayed() {
    let (p1, p3) = (chat(QUESTIONS[0]), chat(QUESTIONS[2]));
    let batcher = Batcher::new(Box::new(LlamaBatchModel::load(model_path(), opts(1024), 3).unwrap()), BatcherOptions::default());
    let (t1, t3) = (batcher.prompt_tokens(&p1).unwrap(), batcher.prompt_tokens(&p3).unwrap());
    let mut alone = LlamaModel::load(model_path(), opts(1024)).unwrap();
    let first = alone.decode(&t3).unwrap().to_vec();
    let (expected, _) = continue_greedy(&mut alone, first, 40);
    drop(alone);

    let mut s1 = batcher.acquire(&[]);
    let s2 = batcher.acquire(&[]);
    let mut s3 = batcher.acquire(&[]);
    assert_eq!((s1.id().0, s2.id().0, s3.id().0), (0, 1, 2));
    // The third sequence evaluates its prompt and 20 tokens on slot 2 ...
    let first = s3.decode(&t3).unwrap().to_vec();
    let (mut got, logits) = continue_greedy(&mut s3, first, 20);
    assert_eq!(s3.id().0, 2);
    // ... the first finishes (slot 0 is free and holds its conversation), the second goes ...
    let g1 = gen(&mut s1, &p1, None);
    drop(s1);
    drop(s2);
    // ... and the third goes on: its next step moves it to slot 0.
    got.extend(continue_greedy(&mut s3, logits, 20).0);
    assert_eq!(s3.id().0, 0, "the sequence stayed above free slots");
    assert!(batcher.stats().moves >= 1, "{:?}", batcher.stats());
    assert_eq!(got, expected, "a moved sequence generated something else");
    drop(s3);
    // The first conversation's cache survived the move: asked again, its prompt is reused.
    let mut again = batcher.acquire(&t1);
    let g = gen(&mut again, &p1, None);
    assert_eq!(g.cached_prompt_tokens, t1.len() - 1);
    assert_eq!(g.tokens, g1.tokens);
}
