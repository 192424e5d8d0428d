//! The data-driven grammar corpus (`testdata/corpus/*.json`: `[{name, grammar, accept,
//! reject}]`), run byte by byte ([`accepts`]) and through token masks: on the tiny
//! hand-made vocabulary and the byte vocabulary (greedy tokenization), and on the real
//! SmolLM2 and Llama 3.1 vocabularies (their real tokenization; accepted inputs only, and
//! Llama on a subset to keep debug test time low).
//!
//! Through masks, for an accepted input every token of its tokenization must be in the
//! mask at its step and EOS at the end; for a rejected one, some token must be missing from
//! its step's mask or EOS missing at the end. Mask membership must agree with `commit`.

use formwork_grammar::corpus::{read_corpus, CorpusCase};
use formwork_grammar::{accepts, gbnf, CompiledGrammar, Grammar, Limits, TokenIndex};
use formwork_testkit::{greedy_tokenize, SharedTokenizer};
use formwork_vocab::{TokenId, TokenMask, Vocabulary};
use std::path::PathBuf;
use std::sync::Arc;

fn cases() -> Vec<(String, CorpusCase)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata/corpus");
    let out = read_corpus(&dir).unwrap_or_else(|e| panic!("{e}"));
    assert!(!out.is_empty(), "no corpus cases in {}", dir.display());
    out
}

/// Walks `toks` through a matcher; returns whether every token was in its mask and EOS at
/// the end. Checks mask membership against `commit` at every step.
fn through_masks(cg: &Arc<CompiledGrammar>, toks: &[TokenId], what: &str) -> bool {
    let mut m = cg.matcher();
    let mut mask = TokenMask::new(cg.vocab().len());
    for &t in toks {
        m.compute_mask(&mut mask);
        let allowed = mask.contains(t);
        let committed = m.commit(t).is_ok();
        assert_eq!(
            allowed, committed,
            "{what}: mask says {allowed} but commit {committed} for token {t}"
        );
        if !allowed {
            return false;
        }
    }
    m.compute_mask(&mut mask);
    let eos = cg.vocab().eos_tokens().iter().all(|&e| mask.contains(e));
    assert_eq!(
        eos,
        m.is_accepting(),
        "{what}: EOS in mask disagrees with is_accepting"
    );
    eos
}

fn check_vocab(
    g: &Grammar,
    index: &Arc<TokenIndex>,
    case: &str,
    accept: &[String],
    reject: &[String],
    vocab_name: &str,
) {
    let cg = CompiledGrammar::with_index(g, index.clone(), &Limits::default())
        .unwrap_or_else(|e| panic!("{case}: compile for {vocab_name}: {e}"));
    for (inputs, want) in [(accept, true), (reject, false)] {
        for s in inputs {
            let Some(toks) = greedy_tokenize(index.vocab(), s.as_bytes()) else {
                continue;
            };
            let what = format!("{case} [{vocab_name}] {s:?}");
            assert_eq!(
                through_masks(&cg, &toks, &what),
                want,
                "{what}: expected accept={want}"
            );
        }
    }
}

#[test]
fn corpus_bytes_tiny_and_byte_vocabularies() {
    let limits = Limits::default();
    let tiny = TokenIndex::new(Arc::new(formwork_testkit::tiny_vocab()));
    let bytes = TokenIndex::new(Arc::new(formwork_testkit::byte_vocab()));
    let mut n = 0;
    for (file, c) in cases() {
        let case = format!("{file}/{}", c.name);
        let g = gbnf::parse(&c.grammar, &limits).unwrap_or_else(|e| panic!("{case}: {e}"));
        for s in &c.accept {
            assert_eq!(
                accepts(&g, s.as_bytes(), &limits),
                Ok(true),
                "{case}: should accept {s:?}"
            );
            n += 1;
        }
        for s in &c.reject {
            assert_eq!(
                accepts(&g, s.as_bytes(), &limits),
                Ok(false),
                "{case}: should reject {s:?}"
            );
            n += 1;
        }
        check_vocab(&g, &tiny, &case, &c.accept, &c.reject, "tiny");
        check_vocab(&g, &bytes, &case, &c.accept, &c.reject, "bytes");
    }
    assert!(n > 100, "only {n} corpus inputs");
}

fn real_vocab(tok: SharedTokenizer, every: usize) {
    let limits = Limits::default();
    let vocab: Arc<Vocabulary> = tok.vocab();
    let index = TokenIndex::new(vocab.clone());
    for (k, (file, c)) in cases().into_iter().enumerate() {
        if k % every != 0 {
            continue;
        }
        let case = format!("{file}/{}", c.name);
        let g = gbnf::parse(&c.grammar, &limits).unwrap();
        let cg = CompiledGrammar::with_index(&g, index.clone(), &limits).unwrap();
        for s in &c.accept {
            // SmolLM2 has no token for a few control bytes; skip such inputs.
            if s.bytes().any(|b| b < 0x20 && !b"\t\n\r".contains(&b)) {
                continue;
            }
            let toks = tok.tokenize(s);
            assert!(
                through_masks(&cg, &toks, &format!("{case} [{tok:?}] {s:?}")),
                "{case} [{tok:?}]: {s:?} rejected"
            );
        }
    }
}

#[test]
fn corpus_smollm2_real_tokenization() {
    real_vocab(SharedTokenizer::Smollm2, 1);
}

#[test]
fn corpus_llama3_real_tokenization() {
    real_vocab(
        SharedTokenizer::Llama3,
        if cfg!(debug_assertions) { 5 } else { 1 },
    );
}
