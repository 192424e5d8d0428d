//! Several threads share one compiled grammar, with no lock around it (see the matcher's
//! `compiled` module): each walks its own documents token by token — `compute_mask`,
//! `is_allowed`, `commit`, now and then a `rollback` — on a grammar that starts cold, so the
//! threads build automaton states and cached masks while the others read them. Every mask
//! must equal, bit for bit, the one a single-threaded run computes at the same step.
//!
//! On the real SmolLM2 vocabulary with the real tokenization of MaskBench instances, for the
//! built-in JSON grammar and for a MaskBench schema (with bounded repetitions, so the
//! canonical-state shortcut runs too). Debug builds walk fewer documents.

use formwork_grammar::json::{grammar, JsonGrammarOptions};
use formwork_grammar::{CompiledGrammar, Grammar, Limits, TokenIndex};
use formwork_testkit::{shared_data_dir, smollm2_vocab, tokenize};
use formwork_vocab::{TokenId, TokenMask};
use std::sync::{Arc, Barrier};

const THREADS: usize = 4;

/// Valid object instances of the MaskBench files `files` (all when empty), compact and pretty
/// in turn, tokenized; at most `n`.
fn documents(files: &[&str], n: usize) -> Vec<Vec<TokenId>> {
    let dir = shared_data_dir().join("maskbench-dev");
    let mut paths: Vec<_> = if files.is_empty() {
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect()
    } else {
        files.iter().map(|f| dir.join(f)).collect()
    };
    paths.sort();
    let mut docs = Vec::new();
    for p in paths {
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        for t in v["tests"].as_array().into_iter().flatten() {
            if t["valid"] == true && t["data"].is_object() && docs.len() < n {
                let text = if docs.len() % 2 == 0 {
                    serde_json::to_string(&t["data"]).unwrap()
                } else {
                    serde_json::to_string_pretty(&t["data"]).unwrap()
                };
                docs.push(tokenize(&text));
            }
        }
        if docs.len() >= n {
            break;
        }
    }
    docs
}

/// One step of a walk: the mask before the token (as words).
type Masks = Vec<Vec<u64>>;

/// Walks `doc` on `cg`: the mask at every step (and at the end). After every 7th token it
/// commits the next token too, rolls it back, and checks `is_allowed` against the mask.
fn walk(cg: &Arc<CompiledGrammar>, doc: &[TokenId]) -> Masks {
    let mut m = cg.matcher();
    let mut mask = TokenMask::new(cg.vocab().len());
    let mut out = Vec::with_capacity(doc.len() + 1);
    for (i, &t) in doc.iter().enumerate() {
        m.compute_mask(&mut mask);
        out.push(mask.words().to_vec());
        assert!(mask.contains(t), "token {i} of a valid document rejected");
        assert!(m.is_allowed(t));
        m.commit(t).unwrap();
        if i % 7 == 0 {
            if let Some(&u) = doc.get(i + 1) {
                m.commit(u).unwrap();
                m.rollback(1).unwrap();
            }
        }
    }
    m.compute_mask(&mut mask);
    out.push(mask.words().to_vec());
    assert!(m.is_accepting());
    out
}

/// The single-threaded masks of every document (one grammar, documents in order), then
/// `rounds` runs of `THREADS` threads on a fresh shared grammar each, every thread walking
/// every document from a different starting one; all masks must be equal.
fn check(g: &Grammar, index: &Arc<TokenIndex>, docs: &[Vec<TokenId>], rounds: usize) {
    let compile = || CompiledGrammar::with_index(g, index.clone(), &Limits::default()).unwrap();
    let single = compile();
    let want: Vec<Masks> = docs.iter().map(|d| walk(&single, d)).collect();
    for round in 0..rounds {
        let cg = compile();
        let start = Barrier::new(THREADS);
        std::thread::scope(|s| {
            for k in 0..THREADS {
                let (cg, start, want) = (&cg, &start, &want);
                s.spawn(move || {
                    start.wait();
                    for j in 0..docs.len() {
                        // Threads start on different documents, and odd ones go backwards,
                        // so that they build different states at the same time.
                        let i = if k % 2 == 0 { (j + k) % docs.len() } else { (docs.len() * 2 - j - k) % docs.len() };
                        let got = walk(cg, &docs[i]);
                        for (step, (a, b)) in got.iter().zip(&want[i]).enumerate() {
                            assert!(a == b, "round {round}, thread {k}, document {i}, step {step}: mask differs from the single-threaded one");
                        }
                    }
                });
            }
        });
        // The shared grammar ends in the same place as the single-threaded one.
        let mut a = cg.matcher();
        let mut b = single.matcher();
        let (mut ma, mut mb) = (TokenMask::new(index.vocab().len()), TokenMask::new(index.vocab().len()));
        a.compute_mask(&mut ma);
        b.compute_mask(&mut mb);
        assert_eq!(ma.words(), mb.words());
    }
}

#[test]
fn threads_sharing_the_json_grammar_compute_single_threaded_masks() {
    let n = if cfg!(debug_assertions) { 6 } else { 40 };
    let docs = documents(&[], n);
    let index = TokenIndex::for_vocab(&smollm2_vocab());
    let g = grammar(&JsonGrammarOptions::default());
    check(&g, &index, &docs, if cfg!(debug_assertions) { 1 } else { 8 });
}

#[test]
fn threads_sharing_a_schema_grammar_compute_single_threaded_masks() {
    // Two instances each (compact and pretty); `maxLength` (bounded repetitions), nested objects.
    let files = ["Snowplow---sp_261_Normalized.json", "Github_hard---o66237.json"];
    let index = TokenIndex::for_vocab(&smollm2_vocab());
    let opts = formwork_schema::SchemaOptions { key_order: formwork_schema::KeyOrder::Any, ..Default::default() };
    for f in files {
        let path = shared_data_dir().join("maskbench-dev").join(f);
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let g = formwork_schema::compile(&v["schema"], &opts).unwrap_or_else(|e| panic!("{f}: {e}"));
        let mut docs = documents(&[f], 8);
        if cfg!(debug_assertions) {
            docs.truncate(2);
        }
        assert!(!docs.is_empty(), "{f}: no valid object instance");
        check(&g, &index, &docs, if cfg!(debug_assertions) { 1 } else { 6 });
    }
}

#[test]
fn compiled_grammars_and_matchers_can_cross_threads() {
    fn shared<T: Send + Sync>() {}
    fn owned<T: Send>() {}
    shared::<CompiledGrammar>();
    owned::<formwork_grammar::Matcher>();
}
