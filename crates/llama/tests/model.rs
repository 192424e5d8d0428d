//! Tests against the real default model (SmolLM2-135M-Instruct Q4_1), fetched once into the
//! model cache by `formwork_models::resolve` when missing.

use formwork_engine::{Model, ModelError};
use formwork_llama::{LlamaModel, LoadOptions};
use formwork_vocab::TokenId;
use std::path::PathBuf;

fn model_path() -> PathBuf {
    formwork_models::resolve("smollm2").unwrap_or_else(|e| panic!("these tests need the default model: {e}"))
}

/// One thread each: the test harness runs tests in parallel, and more evaluation threads
/// than cores makes llama.cpp crawl.
fn load(n_ctx: usize) -> LlamaModel {
    LlamaModel::load(model_path(), LoadOptions { n_ctx: Some(n_ctx), n_threads: Some(1), ..Default::default() })
        .unwrap_or_else(|e| panic!("loading the default model: {e}"))
}

fn argmax(logits: &[f32]) -> TokenId {
    let i = (0..logits.len()).max_by(|&a, &b| logits[a].total_cmp(&logits[b])).expect("non-empty logits");
    TokenId(i as u32)
}

fn greedy(m: &mut LlamaModel, prompt: &[TokenId], n: usize) -> Vec<TokenId> {
    m.truncate(0).unwrap();
    let mut next = argmax(m.decode(prompt).unwrap());
    let mut out = vec![next];
    while out.len() < n {
        next = argmax(m.decode(&[next]).unwrap());
        out.push(next);
    }
    out
}

const CHAT: &str = "<|im_start|>user\nName three colours.<|im_end|>\n<|im_start|>assistant\n";

/// The default thread count follows the machine's load (`threads` module): decoding with
/// it works and settles on a count between 1 and the default.
#[test]
fn the_default_thread_count_adapts_within_its_bounds() {
    let mut m = LlamaModel::load(model_path(), LoadOptions { n_ctx: Some(512), ..Default::default() }).unwrap();
    let prompt = m.tokenize(CHAT, m.info().add_bos, true).unwrap();
    let out = greedy(&mut m, &prompt, 150);
    assert_eq!(out.len(), 150);
    let n = m.n_threads();
    assert!((1..=formwork_llama::default_threads()).contains(&n), "{n} threads");
}

#[test]
fn info_comes_from_the_gguf_metadata() {
    let m = load(512);
    let info = m.info();
    assert_eq!(info.name, "SmolLM2-135M-Instruct.Q4_1");
    assert_eq!(info.context_length, 512);
    assert_eq!(info.trained_context_length, 8192);
    let tpl = info.chat_template.as_deref().expect("SmolLM2 ships a chat template");
    assert!(tpl.contains("<|im_start|>"), "{tpl}");
    assert_eq!(info.eos_token.as_deref(), Some("<|im_end|>"));
    assert_eq!(m.vocab().len(), 49_152);
    assert!(m.vocab().eos_tokens().contains(&TokenId(2)));
    assert_eq!(m.n_past(), 0);
    assert_eq!(m.cached_tokens(), Some(&[][..]));
}

#[test]
fn tokenization_agrees_with_our_vocabulary() {
    let m = load(512);
    let text = "Hello world, ünïcode and  spaces\n\ttabs 12345!";
    let toks = m.tokenize(text, false, false).unwrap();
    assert!(!toks.is_empty());
    let mut bytes = Vec::new();
    for t in &toks {
        assert!(t.index() < m.vocab().len());
        bytes.extend_from_slice(m.vocab().token_bytes(*t));
    }
    assert_eq!(String::from_utf8(bytes).unwrap(), text, "llama.cpp's tokens spell the text in our byte table");

    // Special tokens are recognised only when asked.
    let im_start = m.vocab().special_by_name("<|im_start|>").expect("<|im_start|> is a special token");
    let special = m.tokenize(CHAT, false, true).unwrap();
    assert_eq!(special[0], im_start);
    let plain = m.tokenize(CHAT, false, false).unwrap();
    assert_ne!(plain[0], im_start);
    assert!(plain.len() > special.len());

    // BOS only when asked, and never doubled.
    if let Some(bos) = m.vocab().bos_token() {
        let with = m.tokenize("Hi", true, false).unwrap();
        assert_eq!(with[0], bos);
        assert_eq!(with[1..], m.tokenize("Hi", false, false).unwrap()[..]);
        let bos_text = m.info().bos_token.clone().unwrap();
        let already = m.tokenize(&format!("{bos_text}Hi"), true, true).unwrap();
        assert_eq!(already, with, "a template's own BOS is not doubled");
    }
    assert!(m.tokenize("", false, false).unwrap().is_empty());
}

#[test]
fn decode_returns_finite_logits_over_the_vocabulary() {
    let mut m = load(512);
    let prompt = m.tokenize(CHAT, false, true).unwrap();
    let logits = m.decode(&prompt).unwrap().to_vec();
    assert_eq!(logits.len(), 49_152);
    assert!(logits.iter().all(|x| x.is_finite()), "all logits finite");
    let (lo, hi) = logits.iter().fold((f32::MAX, f32::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    assert!(hi - lo > 1.0, "logits carry information (range {lo}..{hi})");
    assert_eq!(m.n_past(), prompt.len());
    assert_eq!(m.cached_tokens(), Some(&prompt[..]));
    // An empty decode returns the same logits again.
    assert_eq!(m.decode(&[]).unwrap(), &logits[..]);
}

#[test]
fn greedy_generation_is_deterministic_and_sensible() {
    let mut m = load(512);
    let prompt = m.tokenize(CHAT, false, true).unwrap();
    let a = greedy(&mut m, &prompt, 24);
    let b = greedy(&mut m, &prompt, 24);
    assert_eq!(a, b, "same prompt, same greedy tokens after a reset");
    let mut fresh = load(512);
    assert_eq!(greedy(&mut fresh, &prompt, 24), a, "and on a fresh instance");
    let text: String = a.iter().map(|t| String::from_utf8_lossy(m.vocab().token_bytes(*t)).into_owned()).collect();
    assert!(text.chars().any(char::is_alphabetic), "the answer has words: {text:?}");
}

#[test]
fn truncate_keeps_the_prefix_in_the_kv_cache() {
    let mut m = load(512);
    let prefix = m.tokenize(CHAT, false, true).unwrap();
    let suffix = m.tokenize("Red, green and", false, false).unwrap();
    let all: Vec<TokenId> = prefix.iter().chain(&suffix).copied().collect();
    let whole = m.decode(&all).unwrap().to_vec();

    m.truncate(prefix.len()).unwrap();
    assert_eq!(m.n_past(), prefix.len());
    assert_eq!(m.cached_tokens(), Some(&prefix[..]));
    let reused = m.decode(&suffix).unwrap().to_vec();
    assert_eq!(argmax(&reused), argmax(&whole));
    let max_diff = whole.iter().zip(&reused).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    assert!(max_diff < 0.05, "same logits up to batching noise (max diff {max_diff})");

    // Truncating past the end is a no-op; truncate(0) resets.
    m.truncate(10_000).unwrap();
    assert_eq!(m.n_past(), all.len());
    m.truncate(0).unwrap();
    assert_eq!(m.n_past(), 0);
    assert!(matches!(m.decode(&[]), Err(ModelError::Decode(_))), "no logits after a reset");
}

#[test]
fn a_prompt_longer_than_the_context_is_an_error_not_a_crash() {
    let mut m = load(64);
    assert_eq!(m.info().context_length, 64);
    let long: Vec<TokenId> = m.tokenize(&"one two three four ".repeat(40), false, false).unwrap();
    assert!(long.len() > 64);
    match m.decode(&long) {
        Err(ModelError::ContextOverflow { needed, context }) => {
            assert_eq!(needed, long.len());
            assert_eq!(context, 64);
        }
        other => panic!("expected ContextOverflow, got {:?}", other.map(|l| l.len())),
    }
    assert_eq!(m.n_past(), 0, "nothing was evaluated");
    // The model is still usable, and the limit counts what is already in the context.
    m.decode(&long[..40]).unwrap();
    match m.decode(&long[40..70]) {
        Err(ModelError::ContextOverflow { needed: 70, context: 64 }) => {}
        other => panic!("expected ContextOverflow {{ needed: 70 }}, got {:?}", other.map(|l| l.len())),
    }
    assert_eq!(m.n_past(), 40);
    let logits = m.decode(&long[40..64]).unwrap();
    assert!(logits.iter().all(|x| x.is_finite()));
    assert_eq!(m.n_past(), 64);
    assert!(matches!(m.decode(&long[64..65]), Err(ModelError::ContextOverflow { needed: 65, context: 64 })));
}

#[test]
fn prompts_longer_than_one_batch_are_split() {
    let mut m = LlamaModel::load(model_path(), LoadOptions { n_ctx: Some(256), n_batch: Some(16), n_threads: Some(1), ..Default::default() }).unwrap();
    let toks = m.tokenize(&"The quick brown fox jumps over the lazy dog. ".repeat(6), false, false).unwrap();
    assert!(toks.len() > 40);
    let split = m.decode(&toks).unwrap().to_vec();
    let mut one = load(256);
    let whole = one.decode(&toks).unwrap().to_vec();
    assert_eq!(m.n_past(), toks.len());
    assert_eq!(argmax(&split), argmax(&whole));
}

#[test]
fn an_invalid_token_is_an_error() {
    let mut m = load(128);
    let err = m.decode(&[TokenId(1), TokenId(49_152)]).unwrap_err();
    assert!(matches!(err, ModelError::Decode(_)), "{err:?}");
    assert!(err.to_string().contains("49152"), "{err}");
    assert_eq!(m.n_past(), 0);
    assert!(m.decode(&[TokenId(1)]).is_ok(), "still usable");
}

#[test]
fn a_missing_file_is_a_clear_load_error() {
    let err = LlamaModel::load("/nonexistent/dir/model.gguf", LoadOptions::default()).unwrap_err();
    assert!(matches!(err, ModelError::Load(_)), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("/nonexistent/dir/model.gguf") && msg.contains("does not exist"), "{msg}");
}

#[test]
fn a_file_that_is_not_gguf_is_a_load_error() {
    let dir = std::env::temp_dir().join(format!("formwork-llama-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("not-a-model.gguf");
    std::fs::write(&path, b"{\"this\": \"is json\"}").unwrap();
    let err = LlamaModel::load(&path, LoadOptions::default()).unwrap_err();
    std::fs::remove_dir_all(&dir).ok();
    assert!(matches!(err, ModelError::Load(_)), "{err:?}");
    assert!(err.to_string().contains("not-a-model.gguf"), "{err}");
}

#[test]
fn model_is_send() {
    fn assert_send<T: Send>() {}
    assert_send::<LlamaModel>();
    let m = load(64);
    let h = std::thread::spawn(move || m.n_past());
    assert_eq!(h.join().unwrap(), 0);
}
