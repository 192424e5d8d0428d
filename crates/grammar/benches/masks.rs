//! Token-mask benchmark on the real vocabularies (SmolLM2 49k, Llama 3.1 128k) with the
//! built-in JSON grammar, walking realistic JSON documents (MaskBench test data) token by
//! token, timing every `compute_mask`.
//!
//! `cargo bench -p formwork-grammar --bench masks` prints, per vocabulary:
//! - compile time and TTFM (first mask after compiling);
//! - **cold**: a fresh `CompiledGrammar` per document (nothing cached but the vocabulary's
//!   trie) — p50/p99/max per mask;
//! - **warm**: one `CompiledGrammar` shared by all documents (the server's case: the JSON
//!   grammar compiled once per model) — p50/p99/max per mask;
//!
//! then runs criterion micro-benchmarks of a mask hit, a miss in a string state and
//! `is_allowed`. Set `FORMWORK_BENCH_DOCS=N` to change how many documents are walked
//! (default 200), `FORMWORK_BENCH_QUICK=1` to skip criterion, `FORMWORK_BENCH_DEBUG=1` to
//! print every mask over 60 µs with the text before it.

use criterion::Criterion;
use formwork_grammar::json::{grammar, JsonGrammarOptions};
use formwork_grammar::{CompiledGrammar, Limits};
use formwork_vocab::{TokenId, TokenMask, Vocabulary};
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn data_dir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data");
    assert!(
        d.is_dir(),
        "shared data folder missing at {} (tokenizers and maskbench-dev are needed)",
        d.display()
    );
    d
}

fn load_vocab(name: &str) -> Arc<Vocabulary> {
    let path = data_dir().join("tokenizers").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Arc::new(
        Vocabulary::from_tokenizer_json(&text)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
}

/// JSON documents: every valid object test instance in maskbench-dev, compact and pretty.
fn documents(n: usize) -> Vec<String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(data_dir().join("maskbench-dev"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut docs = Vec::new();
    for f in files {
        let Ok(v) =
            serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(&f).unwrap())
        else {
            continue;
        };
        for t in v["tests"].as_array().into_iter().flatten() {
            if t["valid"] == true && t["data"].is_object() {
                let s = if docs.len() % 2 == 0 {
                    serde_json::to_string(&t["data"]).unwrap()
                } else {
                    serde_json::to_string_pretty(&t["data"]).unwrap()
                };
                docs.push(s);
            }
        }
        if docs.len() >= n {
            break;
        }
    }
    docs.truncate(n);
    docs
}


fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort_unstable();
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn report(label: &str, mut times: Vec<Duration>) {
    let n = times.len();
    let p50 = pct(&mut times, 0.5);
    let p90 = pct(&mut times, 0.9);
    let p99 = pct(&mut times, 0.99);
    let p999 = pct(&mut times, 0.999);
    let max = *times.last().unwrap();
    println!(
        "  {label:<28} n={n:<7} p50={:>8.2}µs p90={:>8.2}µs p99={:>8.2}µs p99.9={:>8.2}µs max={:>8.2}µs",
        p50.as_secs_f64() * 1e6,
        p90.as_secs_f64() * 1e6,
        p99.as_secs_f64() * 1e6,
        p999.as_secs_f64() * 1e6,
        max.as_secs_f64() * 1e6
    );
}

/// Walks `doc` through a matcher, timing each mask; checks every token is allowed.
fn walk_doc(
    cg: &Arc<CompiledGrammar>,
    toks: &[TokenId],
    mask: &mut TokenMask,
    times: &mut Vec<Duration>,
) {
    let mut m = cg.matcher();
    for (k, &t) in toks.iter().enumerate() {
        let w0 = m.stats().trie_nodes_walked;
        let s = Instant::now();
        m.compute_mask(mask);
        let el = s.elapsed();
        times.push(el);
        if std::env::var("FORMWORK_BENCH_DEBUG").is_ok() && el > Duration::from_micros(60) {
            let prev: Vec<u8> = toks[..k]
                .iter()
                .flat_map(|&t| cg.vocab().token_bytes(t).to_vec())
                .collect();
            let tail = String::from_utf8_lossy(&prev[prev.len().saturating_sub(30)..]).into_owned();
            eprintln!(
                "slow mask {:?} walked {} allowed {} after {:?}",
                el,
                m.stats().trie_nodes_walked - w0,
                mask.count_ones(),
                tail
            );
        }
        assert!(mask.contains(t), "token {t} rejected");
        m.commit(t).unwrap();
    }
    let s = Instant::now();
    m.compute_mask(mask);
    times.push(s.elapsed());
    assert!(
        cg.vocab().eos_tokens().iter().all(|&e| mask.contains(e)),
        "EOS not allowed at the end"
    );
}

fn run_vocab(name: &str, docs: &[String], c: Option<&mut Criterion>) {
    let t = Instant::now();
    let vocab = load_vocab(name);
    let load = t.elapsed();
    let t = Instant::now();
    let index = formwork_grammar::TokenIndex::for_vocab(&vocab);
    let index_time = t.elapsed();
    let g = grammar(&JsonGrammarOptions::default());
    let limits = Limits::default();
    let toks: Vec<Vec<TokenId>> = docs
        .iter()
        .map(|d| index.trie().longest_match_tokens(d.as_bytes()).expect("every byte starts a token"))
        .collect();
    let n_toks: usize = toks.iter().map(|t| t.len()).sum();
    println!(
        "{name}: {} tokens, trie {} nodes; load {:.0} ms, index {:.1} ms; {} docs, {} tokens",
        vocab.len(),
        index.trie().len(),
        load.as_secs_f64() * 1e3,
        index_time.as_secs_f64() * 1e3,
        docs.len(),
        n_toks
    );
    let mut mask = TokenMask::new(vocab.len());

    // Compile + TTFM, a few times.
    let mut compile = Vec::new();
    let mut ttfm = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let cg = CompiledGrammar::with_index(&g, index.clone(), &limits).unwrap();
        compile.push(t.elapsed());
        let t = Instant::now();
        cg.matcher().compute_mask(&mut mask);
        ttfm.push(t.elapsed());
    }
    report("compile", compile);
    report("TTFM", ttfm);

    // Cold: a fresh compiled grammar per document.
    let mut cold = Vec::new();
    let mut mem = 0;
    for tk in &toks {
        let cg = CompiledGrammar::with_index(&g, index.clone(), &limits).unwrap();
        walk_doc(&cg, tk, &mut mask, &mut cold);
        mem = mem.max(cg.memory_usage());
    }
    report("cold (grammar per doc)", cold);
    println!(
        "  max memory per compiled grammar after one doc: {:.1} KiB",
        mem as f64 / 1024.0
    );

    // Warm: one shared compiled grammar; first pass warms it, second is measured.
    let cg = CompiledGrammar::with_index(&g, index.clone(), &limits).unwrap();
    let mut first = Vec::new();
    for tk in &toks {
        walk_doc(&cg, tk, &mut mask, &mut first);
    }
    report("shared, first pass", first);
    let mut warm = Vec::new();
    for tk in &toks {
        walk_doc(&cg, tk, &mut mask, &mut warm);
    }
    report("shared, second pass", warm);
    println!(
        "  shared grammar memory: {:.1} MiB; index {:.1} MiB",
        cg.memory_usage() as f64 / (1 << 20) as f64,
        index.memory_usage() as f64 / (1 << 20) as f64
    );

    full_walks(&index, &limits);

    if let Some(c) = c {
        let mut group = c.benchmark_group(name);
        let doc = &toks[0];
        let mut m = cg.matcher();
        m.commit(doc[0]).unwrap();
        group.bench_function("mask hit", |b| {
            b.iter(|| m.compute_mask(black_box(&mut mask)))
        });
        group.bench_function("is_allowed", |b| b.iter(|| m.is_allowed(black_box(doc[1]))));
        group.bench_function("miss: fresh grammar, mask inside a string", |b| {
            b.iter_batched(
                || {
                    let cg = CompiledGrammar::with_index(&g, index.clone(), &limits).unwrap();
                    let mut m = cg.matcher();
                    m.commit_bytes(b"{\"a").unwrap();
                    m
                },
                |mut m| m.compute_mask(&mut mask),
                criterion::BatchSize::SmallInput,
            )
        });
        group.finish();
    }
}

/// Full trie walks, the cost behind a mask no cache or shortcut covers (a new position in
/// a string with a pattern, a format or length bounds): a plain walk from one state, warm
/// (every transition it needs already built), best of 20, reported per trie node stepped.
fn full_walks(index: &Arc<formwork_grammar::TokenIndex>, limits: &Limits) {
    let cases = [
        // Any string body of up to 16 characters: most of the trie is live.
        ("string body, up to 16 chars", r#"root ::= "\"" [^"\\]{0,16} "\"""#, &b"\""[..]),
        // A hexadecimal run: few live nodes per level, the walk mostly rejects.
        ("hex run, up to 24 chars", r#"root ::= "\"" [0-9a-fA-F]{0,24} "\"""#, &b"\""[..]),
    ];
    for (label, text, prefix) in cases {
        let g = formwork_grammar::gbnf::parse(text, limits).unwrap();
        let cg = CompiledGrammar::with_index(&g, index.clone(), limits).unwrap();
        let mut m = cg.matcher();
        m.commit_bytes(prefix).unwrap();
        let mut mask = TokenMask::new(cg.vocab().len());
        let cold = Instant::now();
        let nodes = m.full_walk(&mut mask);
        let cold = cold.elapsed();
        let mut best = Duration::MAX;
        for _ in 0..20 {
            let t = Instant::now();
            black_box(m.full_walk(&mut mask));
            best = best.min(t.elapsed());
        }
        println!(
            "  full walk, {label:<28} {nodes:>7} nodes, {} allowed: cold {:>7.1} µs, warm {:>7.1} µs = {:.2} ns/node",
            mask.count_ones(),
            cold.as_secs_f64() * 1e6,
            best.as_secs_f64() * 1e6,
            best.as_secs_f64() * 1e9 / nodes as f64
        );
    }
}

fn main() {
    let n: usize = std::env::var("FORMWORK_BENCH_DOCS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200);
    let quick = std::env::var("FORMWORK_BENCH_QUICK").is_ok();
    let docs = documents(n);
    let mut c = Criterion::default()
        .configure_from_args()
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(500));
    for name in ["smollm2.json", "llama3_1.json"] {
        run_vocab(name, &docs, if quick { None } else { Some(&mut c) });
    }
    if !quick {
        c.final_summary();
    }
}
