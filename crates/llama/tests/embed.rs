//! Embeddings on the real default model (SmolLM2, a decoder: mean-pooled hidden states):
//! deterministic unit vectors of the model's width, similar sentences closer than unrelated
//! ones, and embedding beside a running batched generation leaves that generation as it was.

use formwork_engine::batch::{BatchModel, Batcher, BatcherOptions};
use formwork_engine::{generate, ChatMessage, GenerateOptions, Model, Prompt, SamplerOptions};
use formwork_llama::{LlamaBatchModel, LlamaModel, LoadOptions, Pooling};
use formwork_model::embed::Embed;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;

/// SmolLM2-135M's hidden size (`llama.embedding_length`).
const SMOLLM2_N_EMBD: usize = 576;

fn model_path() -> PathBuf {
    formwork_models::resolve("smollm2").unwrap_or_else(|e| panic!("these tests need the default model: {e}"))
}

fn opts(n_ctx: usize) -> LoadOptions {
    LoadOptions { n_ctx: Some(n_ctx), n_threads: Some(1), ..Default::default() }
}

fn embed(e: &dyn Embed, text: &str) -> Vec<f32> {
    e.embed(&e.tokenize(text).unwrap()).unwrap()
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[test]
fn embeddings_are_deterministic_unit_vectors_of_the_model_width() {
    let m = LlamaModel::load(model_path(), opts(512)).unwrap();
    let e = m.embedder().expect("llama models embed");
    assert_eq!(e.dimensions(), SMOLLM2_N_EMBD);
    assert_eq!(e.max_tokens(), 512, "the embedding context follows the model's");
    let a = embed(e.as_ref(), "the cat sat");
    let b = embed(e.as_ref(), "the cat sat");
    assert_eq!(a.len(), SMOLLM2_N_EMBD);
    assert_eq!(a, b, "the same text gives the same vector");
    let norm = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-4, "unit length, got {norm}");
    assert!(a.iter().all(|x| x.is_finite()));
    // Generation on the same model is unaffected by the embedding context.
    let mut m = m;
    let prompt = m.tokenize("Hello", false, false).unwrap();
    assert!(m.decode(&prompt).unwrap().iter().all(|x| x.is_finite()));
}

#[test]
fn similar_sentences_are_closer_than_unrelated_ones() {
    let m = LlamaModel::load(model_path(), opts(512)).unwrap();
    let e = m.embedder().unwrap();
    let e = e.as_ref();
    let cat = embed(e, "The cat is sleeping on the sofa.");
    let kitten = embed(e, "A kitten is napping on the couch.");
    let stocks = embed(e, "Quarterly revenue rose by twelve percent, the company reported.");
    let pasta = embed(e, "Boil the pasta in salted water for ten minutes.");
    // Measured: cat~kitten 0.95, cat~stocks 0.74, cat~pasta 0.73.
    let near = cosine(&cat, &kitten);
    for (name, far) in [("stocks", &stocks), ("pasta", &pasta)] {
        let far = cosine(&cat, far);
        assert!(near > far, "cat~kitten {near} should beat cat~{name} {far}");
    }
}

#[test]
fn long_inputs_are_refused_by_the_embedder_and_tokens_checked() {
    let m = LlamaModel::load(model_path(), opts(64)).unwrap();
    let e = m.embedder().unwrap();
    let long = e.tokenize(&"word ".repeat(200)).unwrap();
    assert!(long.len() > 64);
    assert!(e.embed(&long).is_err(), "over the context: the caller must truncate");
    let cut = e.embed(&long[..64]).unwrap();
    assert_eq!(cut.len(), SMOLLM2_N_EMBD);
    assert!(e.embed(&[]).is_err());
    assert!(e.embed(&[formwork_vocab::TokenId(u32::MAX)]).is_err());
}

#[test]
fn embedding_beside_a_batched_generation_leaves_it_unchanged() {
    let gen = |b: &Batcher| {
        let prompt = Prompt::Chat { messages: vec![ChatMessage::new("user", "Name three colours.")], tools: None };
        let mut seq = b.acquire(&b.prompt_tokens(&prompt).unwrap());
        let o = GenerateOptions { sampler: SamplerOptions::greedy(), num_predict: Some(40), ..Default::default() };
        generate(&mut seq, &prompt, &o, None, &mut |_| ControlFlow::Continue(())).unwrap().text
    };
    let model = LlamaBatchModel::load(model_path(), opts(512), 2).unwrap();
    assert!(model.embedder().is_some());
    let batcher = Batcher::new(Box::new(model), BatcherOptions::default());
    let alone = gen(&batcher);
    let e: Arc<dyn Embed> = batcher.embedder().expect("the batcher hands out the model's embedder");
    let first = embed(e.as_ref(), "the cat sat");
    let embedding = std::thread::spawn(move || (0..8).map(|_| embed(e.as_ref(), "the cat sat")).collect::<Vec<_>>());
    let beside = gen(&batcher);
    let vectors = embedding.join().unwrap();
    assert_eq!(beside, alone, "greedy output does not change while embeddings are computed");
    assert!(vectors.iter().all(|v| *v == first), "nor do the embeddings");
}

#[test]
fn pooling_comes_from_the_metadata_with_mean_as_default() {
    assert_eq!(Pooling::from_metadata(None), Pooling::Mean);
    assert_eq!(Pooling::from_metadata(Some(0)), Pooling::Mean);
    assert_eq!(Pooling::from_metadata(Some(1)), Pooling::Mean);
    assert_eq!(Pooling::from_metadata(Some(2)), Pooling::Cls);
    assert_eq!(Pooling::from_metadata(Some(3)), Pooling::Last);
    assert_eq!(Pooling::from_metadata(Some(4)), Pooling::Mean);
}
