//! Where a slow mask's time goes: each file's valid tests walked token by token (greedy
//! longest-match tokens, close to what a tokenizer gives), every mask timed on a fresh
//! compiled grammar (cold, as `bench masks` times them) and again on the same grammar with
//! its mask cache bypassed (`full_walk`: the plain walk over transitions already built).
//! The gap between the two is building: new states, transitions, caches.
//!
//! `cargo run --release -p formwork-schema --example mask_replay -- TOKENIZER.json [--top N]
//! [--repeat R] [--real] FILE...` prints the N slowest masks per file (µs cold, nodes walked,
//! states built, µs of the warm plain walk); `--repeat` recompiles and replays each file R
//! times (for a profiler; the token index, and the class indexes it builds on threads of
//! their own, stay from one repeat to the next); `--perf-ctl FIFO TEST:STEP` has perf record
//! only that one mask of every repeat (`mkfifo FIFO; perf record --control fifo:FIFO -D -1
//! --call-graph fp -- mask_replay ... --perf-ctl FIFO 0:49 FILE`, a frame-pointer build);
//! `--real` walks the model's own tokenization
//! (the shared tokenizers only), as `formwork bench masks` does, instead of greedy
//! longest-match tokens. The summary counts the masks that walked 50,000 and 100,000 trie
//! nodes or more (deterministic, unlike the times).

#[global_allocator]
static GLOBAL: formwork_alloc::MiMalloc = formwork_alloc::MiMalloc;

use formwork_grammar::{CompiledGrammar, Limits, TokenIndex};
use formwork_vocab::{TokenId, TokenMask};
use std::time::Instant;


/// Writes `cmd` to perf's control fifo (`perf record --control fifo:FIFO -D -1`).
fn perf_ctl(perf: &mut Option<(std::fs::File, (usize, usize))>, cmd: &str) {
    use std::io::Write;
    if let Some((f, _)) = perf {
        writeln!(f, "{cmd}").and_then(|_| f.flush()).expect("--perf-ctl: writing to the fifo");
    }
}

fn main() {
    formwork_alloc::keep_freed_memory();
    let mut args = std::env::args().skip(1);
    let tok = args.next().expect("usage: mask_replay TOKENIZER.json [--top N] [--repeat R] FILE...");
    let vocab = std::sync::Arc::new(formwork_vocab::Vocabulary::from_tokenizer_json_file(&tok, None).expect("tokenizer"));
    let index = TokenIndex::for_vocab(&vocab);
    let limits = Limits::default();
    let (mut top, mut repeat, mut files, mut lazy, mut real) = (5usize, 1usize, Vec::new(), false, false);
    // `--perf-ctl`: perf's control fifo, and the mask (test, step) to record alone.
    let mut perf: Option<(std::fs::File, (usize, usize))> = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--top" => top = args.next().and_then(|s| s.parse().ok()).expect("--top N"),
            "--repeat" => repeat = args.next().and_then(|s| s.parse().ok()).expect("--repeat R"),
            "--lazy" => lazy = true,
            "--real" => real = true,
            "--perf-ctl" => {
                let fifo = args.next().expect("--perf-ctl FIFO TEST:STEP");
                let at = args.next().and_then(|s| s.split_once(':').and_then(|(d, k)| Some((d.parse().ok()?, k.parse().ok()?)))).expect("--perf-ctl FIFO TEST:STEP");
                perf = Some((std::fs::OpenOptions::new().write(true).open(&fifo).expect("--perf-ctl: the fifo perf reads"), at));
            }
            _ => files.push(a),
        }
    }
    // Every mask of every file (µs, best of the repeats), for the summary.
    let mut all: Vec<f64> = Vec::new();
    // Trie nodes walked by all first (cold) masks.
    let mut nodes_total = 0u64;
    // First (cold) masks that walked at least 50,000 and 100,000 trie nodes (a full walk of
    // Llama 3.1's trie is about 268,000; these are the tail's usual cause).
    let mut big = [0usize; 2];
    for file in files {
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let schema = v.get("schema").cloned().unwrap_or(v.clone());
        let opts = formwork_schema::SchemaOptions { key_order: formwork_schema::KeyOrder::Any, ..Default::default() };
        let (g, lg) = if lazy {
            match formwork_schema::compile_lazy(&schema, &opts) {
                Ok((g, _)) => (None, Some(g)),
                Err(_) => {
                    println!("{file}: refused");
                    continue;
                }
            }
        } else {
            match formwork_schema::compile(&schema, &opts) {
                Ok(g) => (Some(g), None),
                Err(_) => {
                    println!("{file}: refused");
                    continue;
                }
            }
        };
        let docs: Vec<Vec<TokenId>> = v["tests"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|t| t["valid"] == true)
            .filter_map(|t| {
                let text = serde_json::to_string(&t["data"]).unwrap();
                if real {
                    // The model's own tokenization, as `formwork bench masks` walks it.
                    let name = std::path::Path::new(&tok).file_name().and_then(|n| n.to_str()).unwrap_or("");
                    let shared = formwork_testkit::SharedTokenizer::from_name(name).expect("--real needs smollm2.json or llama3_1.json");
                    Some(shared.tokenize(&text))
                } else {
                    index.trie().longest_match_tokens(text.as_bytes())
                }
            })
            .collect();
        // (µs cold, nodes, states built, test, step)
        let mut rows: Vec<(f64, u64, usize, usize, usize)> = Vec::new();
        let mut cg = None;
        for r in 0..repeat {
            let c = match (&g, &lg) {
                (Some(g), _) => CompiledGrammar::with_index(g, index.clone(), &limits),
                (_, Some(_)) => CompiledGrammar::lazy(formwork_schema::compile_lazy(&schema, &opts).expect("compiled before").0, index.clone(), &limits),
                _ => unreachable!(),
            };
            let Ok(c) = c else { break };
            let mut mask = TokenMask::new(vocab.len());
            // The k-th mask of this repeat (the same walk every time).
            let mut k = 0;
            for (d, toks) in docs.iter().enumerate() {
                let mut m = c.matcher();
                for step in 0..=toks.len() {
                    let (w0, s0) = (m.stats().trie_nodes_walked, m.stats().states);
                    let profiled = perf.as_ref().is_some_and(|(_, at)| *at == (d, step));
                    if profiled {
                        perf_ctl(&mut perf, "enable");
                    }
                    let t0 = Instant::now();
                    m.compute_mask(&mut mask);
                    let us = t0.elapsed().as_secs_f64() * 1e6;
                    if profiled {
                        perf_ctl(&mut perf, "disable");
                    }
                    if r == 0 {
                        rows.push((us, m.stats().trie_nodes_walked - w0, m.stats().states - s0, d, step));
                    } else if let Some(row) = rows.get_mut(k) {
                        // Each repeat recompiles: every mask is cold again; keep the best.
                        row.0 = row.0.min(us);
                    }
                    k += 1;
                    if step < toks.len() && m.commit(toks[step]).is_err() {
                        break;
                    }
                }
            }
            cg = Some(c);
        }
        let Some(cg) = cg else {
            println!("{file}: refused");
            continue;
        };
        rows.sort_by(|a, b| b.0.total_cmp(&a.0));
        all.extend(rows.iter().map(|r| r.0));
        nodes_total += rows.iter().map(|r| r.1).sum::<u64>();
        big[0] += rows.iter().filter(|r| r.1 >= 50_000).count();
        big[1] += rows.iter().filter(|r| r.1 >= 100_000).count();
        println!("{file}");
        for &(us, nodes, built, d, step) in rows.iter().take(top) {
            // The same state again, walked plainly over the transitions built by now.
            let mut m = cg.matcher();
            for &t in &docs[d][..step] {
                m.commit(t).unwrap();
            }
            let mut mask = TokenMask::new(vocab.len());
            let t0 = Instant::now();
            let plain = m.full_walk(&mut mask);
            let warm = t0.elapsed().as_secs_f64() * 1e6;
            let before: Vec<u8> = docs[d][..step].iter().flat_map(|&t| vocab.token_bytes(t).to_vec()).collect();
            let tail = String::from_utf8_lossy(&before[before.len().saturating_sub(40)..]).into_owned();
            println!(
                "  {us:>8.0} µs cold  {nodes:>7} nodes  {built:>5} states built | plain walk warm {warm:>7.0} µs {plain:>7} nodes | test {d} step {step} after {tail:?}"
            );
        }
    }
    all.sort_by(|a, b| a.total_cmp(b));
    if !all.is_empty() {
        // How much of the time the tail holds: masks over each bound, and their sum.
        for lim in [5.0, 20.0, 100.0, 500.0] {
            let over: Vec<f64> = all.iter().copied().filter(|&x| x > lim).collect();
            println!("masks over {lim} µs: {} ({:.2} %), {:.1} ms", over.len(), 100.0 * over.len() as f64 / all.len() as f64, over.iter().sum::<f64>() / 1e3);
        }
        let pct = |p: f64| all[((all.len() - 1) as f64 * p).round() as usize];
        println!(
            "{} masks: total {:.1} ms, p50 {:.1} µs, p99 {:.1} µs, p99.9 {:.1} µs, max {:.1} µs, {nodes_total} trie nodes walked",
            all.len(),
            all.iter().sum::<f64>() / 1e3,
            pct(0.5),
            pct(0.99),
            pct(0.999),
            all[all.len() - 1]
        );
        println!("masks walking >= 50,000 trie nodes: {}; >= 100,000: {}", big[0], big[1]);
    }
}
