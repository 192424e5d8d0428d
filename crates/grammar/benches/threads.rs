//! Masks from several threads on ONE shared compiled grammar: the server's case, where many
//! sequences use the built-in JSON grammar or a popular schema at once.
//!
//! `cargo bench -p formwork-grammar --bench threads` runs, for 1, 2 and 4 threads, each
//! with its own [`Matcher`](formwork_grammar::Matcher) on one `Arc<CompiledGrammar>`,
//! `compute_mask` + `commit` at every token of realistic JSON documents (SmolLM2's real
//! tokenization), and prints the aggregate throughput in masks per second:
//!
//! - **warm**: the grammar has already walked every document once (automaton, mask caches
//!   built): nearly every mask is a cache hit, so this measures what the sharing costs;
//!   beside it, the same with a grammar of its own per thread (nothing shared: the
//!   ceiling the machine allows — copying masks from beyond the core's cache is bound by
//!   memory bandwidth, which two cores of a small VM may not double);
//! - **cold**: a fresh compiled grammar per repetition, so the threads build automaton
//!   states and masks while the others read them (threads on the same documents need the
//!   same masks, which are computed once: expect no speed-up here, and no slow-down);
//! - **warm readers beside a builder**: N−1 threads walk documents the grammar knows while
//!   one walks new ones (misses), against the same readers alone: with a lock around the
//!   grammar, the readers wait for the builder's trie walks.
//!
//! Two grammars: the built-in JSON grammar over MaskBench's first 200 valid object
//! instances (compact and pretty; warm runs walk them 10 times), and one MaskBench schema
//! (JsonSchemaStore `composer-schema`, any key order) over its own valid instances
//! (compact and pretty; warm runs walk them 50 times). Threads take documents from a shared
//! queue, so the work is the same at every thread count; a figure is the median of
//! `FORMWORK_BENCH_REPS` repetitions (default 7). `FORMWORK_BENCH_THREADS=1,2,4` sets the
//! thread counts, `FORMWORK_BENCH_ONLY=warm` (or `cold`, `mixed`) runs one variant. A
//! "machine check" line, before and after, gives the machine's own scaling (a loop that
//! shares nothing): on a VM whose cores are busy elsewhere no figure can do better.
//! On a machine with C cores, the ideal is C× one thread up to C threads, flat after.

use formwork_grammar::json::{grammar, JsonGrammarOptions};
use formwork_grammar::{CompiledGrammar, Grammar, Limits, TokenIndex};
use formwork_testkit::SharedTokenizer;
use formwork_vocab::{TokenId, TokenMask};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// The schema of the second workload (a MaskBench dev file with two valid instances).
const SCHEMA_FILE: &str = "JsonSchemaStore---composer-schema.json";

fn maskbench_dir() -> PathBuf {
    formwork_testkit::shared_data_dir().join("maskbench-dev")
}

/// Every valid object instance in MaskBench dev, alternately compact and pretty.
fn json_documents(n: usize) -> Vec<String> {
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(maskbench_dir()).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let mut docs = Vec::new();
    for f in files {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(&f).unwrap())
        else {
            continue;
        };
        for t in v["tests"].as_array().into_iter().flatten() {
            if t["valid"] == true && t["data"].is_object() {
                docs.push(if docs.len() % 2 == 0 {
                    serde_json::to_string(&t["data"]).unwrap()
                } else {
                    serde_json::to_string_pretty(&t["data"]).unwrap()
                });
            }
        }
        if docs.len() >= n {
            break;
        }
    }
    docs.truncate(n);
    docs
}

/// The schema grammar and its valid instances (compact and pretty).
fn schema_workload() -> (Grammar, Vec<String>) {
    let path = maskbench_dir().join(SCHEMA_FILE);
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let opts = formwork_schema::SchemaOptions {
        key_order: formwork_schema::KeyOrder::Any,
        ..Default::default()
    };
    let g = formwork_schema::compile(&v["schema"], &opts).unwrap();
    let mut docs = Vec::new();
    for t in v["tests"].as_array().into_iter().flatten().filter(|t| t["valid"] == true) {
        docs.push(serde_json::to_string(&t["data"]).unwrap());
        docs.push(serde_json::to_string_pretty(&t["data"]).unwrap());
    }
    (g, docs)
}

/// Walks one document: a mask before every token and at the end, a commit per token.
/// Returns the masks computed.
fn walk(cg: &Arc<CompiledGrammar>, toks: &[TokenId], mask: &mut TokenMask) -> usize {
    let mut m = cg.matcher();
    for &t in toks {
        m.compute_mask(mask);
        assert!(mask.contains(t), "token {t} rejected");
        m.commit(t).unwrap();
    }
    m.compute_mask(mask);
    assert!(m.is_accepting());
    toks.len() + 1
}

/// `threads` threads walk `docs` (taken from a shared queue) on `cg`: wall time from the
/// first thread's start to the last one's end (each thread reads the clock itself, so a
/// main thread waiting for a core cannot shorten it), and the masks computed.
fn run(cg: &Arc<CompiledGrammar>, docs: &[Vec<TokenId>], threads: usize) -> (Duration, usize) {
    run_each(&vec![cg.clone(); threads], docs)
}

/// Like [`run`], with one thread per grammar of `cgs` (the same one, or each its own).
fn run_each(cgs: &[Arc<CompiledGrammar>], docs: &[Vec<TokenId>]) -> (Duration, usize) {
    let next = AtomicUsize::new(0);
    let ready = Barrier::new(cgs.len());
    let vocab_len = cgs[0].vocab().len();
    let spans: Vec<(Instant, Instant, usize)> = std::thread::scope(|s| {
        let handles: Vec<_> = cgs
            .iter()
            .map(|cg| {
                let (next, ready) = (&next, &ready);
                s.spawn(move || {
                    let mut mask = TokenMask::new(vocab_len);
                    ready.wait();
                    let start = Instant::now();
                    let mut n = 0;
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(d) = docs.get(i) else { break };
                        n += walk(cg, d, &mut mask);
                    }
                    (start, Instant::now(), n)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let start = spans.iter().map(|x| x.0).min().unwrap();
    let end = spans.iter().map(|x| x.1).max().unwrap();
    (end - start, spans.iter().map(|x| x.2).sum())
}

/// The machine's own scaling: a loop that touches no shared memory, at each thread count,
/// relative to one thread (a VM whose cores are busy elsewhere shows less than N×; the mask
/// figures cannot do better).
fn calibrate(threads: &[usize], reps: usize) -> String {
    let spin = || {
        let mut x = 1u64;
        for _ in 0..20_000_000 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        x
    };
    let mut out = String::from("machine check (a loop sharing nothing):");
    let mut base = 0.0;
    for &t in threads {
        let r = median(
            (0..reps)
                .map(|_| {
                    let start = Instant::now();
                    std::thread::scope(|s| {
                        for _ in 0..t {
                            s.spawn(spin);
                        }
                    });
                    t as f64 / start.elapsed().as_secs_f64()
                })
                .collect(),
        );
        if t == threads[0] {
            base = r / t as f64;
        }
        out += &format!(" {t}: {:.2}x", r / base);
    }
    out
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// One thread walks `cold` on `cg` (building states and masks) while `readers` threads walk
/// `warm` (cache hits) on the same grammar until it is done: the readers' masks/s while the
/// builder runs.
fn mixed(cg: &Arc<CompiledGrammar>, warm: &[Vec<TokenId>], cold: &[Vec<TokenId>], readers: usize) -> f64 {
    let stop = AtomicBool::new(false);
    let ready = Barrier::new(readers + 1);
    let vocab_len = cg.vocab().len();
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut mask = TokenMask::new(vocab_len);
            ready.wait();
            for d in cold {
                walk(cg, d, &mut mask);
            }
            stop.store(true, Ordering::Relaxed);
        });
        let handles: Vec<_> = (0..readers)
            .map(|_| {
                s.spawn(|| {
                    let mut mask = TokenMask::new(vocab_len);
                    ready.wait();
                    let start = Instant::now();
                    let mut n = 0;
                    'outer: loop {
                        for d in warm {
                            if stop.load(Ordering::Relaxed) {
                                break 'outer;
                            }
                            n += walk(cg, d, &mut mask);
                        }
                    }
                    n as f64 / start.elapsed().as_secs_f64()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    })
}

/// Prints masks/s at each thread count: warm, cold, and warm readers beside a builder.
#[allow(clippy::too_many_arguments)]
fn bench(
    name: &str,
    g: &Grammar,
    index: &Arc<TokenIndex>,
    warm_docs: &[Vec<TokenId>],
    cold_docs: &[Vec<TokenId>],
    mixed_docs: (&[Vec<TokenId>], &[Vec<TokenId>]),
    threads: &[usize],
    reps: usize,
) {
    let limits = Limits::default();
    let compile = || CompiledGrammar::with_index(g, index.clone(), &limits).unwrap();
    let masks = |docs: &[Vec<TokenId>]| docs.iter().map(|d| d.len() + 1).sum::<usize>();
    println!(
        "{name}: warm {} docs / {} masks per run, cold {} docs / {} masks per run",
        warm_docs.len(),
        masks(warm_docs),
        cold_docs.len(),
        masks(cold_docs)
    );
    let only = std::env::var("FORMWORK_BENCH_ONLY").unwrap_or_default();
    let line = |label: &str, f: &mut dyn FnMut(usize) -> f64| {
        let mut base = 0.0;
        let mut out = format!("  {label:<34}");
        for &t in threads {
            let r = median((0..reps).map(|_| f(t)).collect());
            if t == threads[0] {
                base = r / t as f64;
            }
            out += &format!(" {t}: {:>9.0} ({:.2}x)", r, r / base);
        }
        println!("{out}");
    };
    if only.is_empty() || only == "warm" {
        let cg = compile();
        run(&cg, warm_docs, 1);
        println!(
            "  warm grammar: {} states, {:.1} MiB (mostly cached masks: a working set past the \
             L2 cache makes warm masks memory-bound)",
            {
                let mut m = cg.matcher();
                m.compute_mask(&mut TokenMask::new(cg.vocab().len()));
                m.stats().states
            },
            cg.memory_usage() as f64 / (1 << 20) as f64
        );
        line("warm, masks/s at N threads", &mut |t| {
            let (el, n) = run(&cg, warm_docs, t);
            n as f64 / el.as_secs_f64()
        });
        // The ceiling: nothing shared but the vocabulary (each thread its own warm grammar).
        let own: Vec<_> = (0..threads.iter().copied().max().unwrap_or(1))
            .map(|_| {
                let cg = compile();
                run(&cg, warm_docs, 1);
                cg
            })
            .collect();
        line("warm, a grammar per thread (ceiling)", &mut |t| {
            let (el, n) = run_each(&own[..t], warm_docs);
            n as f64 / el.as_secs_f64()
        });
    }
    if only.is_empty() || only == "cold" {
        line("cold, masks/s at N threads", &mut |t| {
            let cg = compile();
            let (el, n) = run(&cg, cold_docs, t);
            n as f64 / el.as_secs_f64()
        });
    }
    if only.is_empty() || only == "mixed" {
        let (warm, cold) = mixed_docs;
        // Readers alone, then beside a thread that builds.
        let readers: Vec<usize> = threads.iter().filter(|&&t| t >= 2).map(|&t| t - 1).collect();
        let mut alone = Vec::new();
        let mut beside = Vec::new();
        for &r in &readers {
            let mut a = Vec::new();
            let mut b = Vec::new();
            for _ in 0..reps {
                let cg = compile();
                run(&cg, warm, 1);
                let (el, n) = run(&cg, warm, r);
                a.push(n as f64 / el.as_secs_f64());
                b.push(mixed(&cg, warm, cold, r));
            }
            alone.push(median(a));
            beside.push(median(b));
        }
        let mut out = format!("  {:<34}", "warm readers beside a builder");
        for ((r, a), b) in readers.iter().zip(&alone).zip(&beside) {
            out += &format!(" {r}+1: {b:>9.0} ({:.2}x of {r} alone)", b / a);
        }
        println!("{out}");
    }
}

fn main() {
    let threads: Vec<usize> = std::env::var("FORMWORK_BENCH_THREADS")
        .ok()
        .map(|s| s.split(',').map(|x| x.trim().parse().unwrap()).collect())
        .unwrap_or_else(|| vec![1, 2, 4]);
    let reps: usize =
        std::env::var("FORMWORK_BENCH_REPS").ok().and_then(|s| s.parse().ok()).unwrap_or(7);
    let tk = SharedTokenizer::Smollm2;
    let vocab = tk.vocab();
    let index = TokenIndex::for_vocab(&vocab);
    println!(
        "SmolLM2 ({} tokens); {} cores available; median of {reps} runs",
        vocab.len(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );

    // Warm runs repeat the documents so that they last long enough to time (tens of ms).
    println!("{}", calibrate(&threads, reps.min(5)));

    let docs: Vec<Vec<TokenId>> = json_documents(200).iter().map(|d| tk.tokenize(d)).collect();
    let warm: Vec<Vec<TokenId>> = docs.iter().cycle().take(docs.len() * 10).cloned().collect();
    let g = grammar(&JsonGrammarOptions::default());
    let readers: Vec<Vec<TokenId>> = docs[..20].to_vec();
    bench("JSON grammar", &g, &index, &warm, &docs, (&readers, &docs[20..]), &threads, reps);

    let (g, docs) = schema_workload();
    let docs: Vec<Vec<TokenId>> = docs.iter().map(|d| tk.tokenize(d)).collect();
    let warm: Vec<Vec<TokenId>> = docs.iter().cycle().take(docs.len() * 50).cloned().collect();
    let half = docs.len() / 2;
    bench(&format!("schema {SCHEMA_FILE}"), &g, &index, &warm, &docs, (&docs[..half], &docs[half..]), &threads, reps);
    println!("{}", calibrate(&threads, reps.min(5)));
}
