//! Prompt and generation throughput of a model at several thread counts.
//!
//! ```text
//! cargo run --release -p formwork-llama --example throughput -- [MODEL] [THREADS,...] [PROMPT_TOKENS] [GEN_TOKENS]
//! cargo run --release -p formwork-llama --example throughput -- smollm2 1,2 256 128
//! ```
//! MODEL is a name or a GGUF path (default `smollm2`, pulled if missing). A thread count of
//! `auto` is the default, which follows the machine's load. Each thread count is measured
//! three times; the best run is printed (the machine may be shared), with the count `auto`
//! settled on.

use formwork_engine::Model;
use formwork_llama::{LlamaModel, LoadOptions};
use formwork_vocab::TokenId;
use std::time::Instant;

fn argmax(logits: &[f32]) -> TokenId {
    let i = (0..logits.len()).max_by(|&a, &b| logits[a].total_cmp(&logits[b])).unwrap_or(0);
    TokenId(i as u32)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let model = args.first().map(String::as_str).unwrap_or("smollm2");
    let threads: Vec<Option<usize>> = args
        .get(1)
        .map(String::as_str)
        .unwrap_or("1,2")
        .split(',')
        .map(|t| if t == "auto" { Ok(None) } else { t.parse().map(Some) })
        .collect::<Result<_, _>>()?;
    let n_prompt: usize = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(256);
    let n_gen: usize = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(128);
    let path = formwork_models::resolve(model)?;

    println!("model {} | prompt {n_prompt} tokens | generate {n_gen} tokens | best of 3", path.display());
    println!("{:>7} {:>13} {:>13} {:>9}", "threads", "prompt tok/s", "gen tok/s", "load ms");
    for &t in &threads {
        let started = Instant::now();
        let mut m = LlamaModel::load(&path, LoadOptions { n_ctx: Some(n_prompt + n_gen + 8), n_threads: t, ..Default::default() })?;
        let load_ms = started.elapsed().as_secs_f64() * 1e3;
        let text = "The history of the printing press begins in the fifteenth century, when movable type changed how books were made and read. ".repeat(n_prompt / 10 + 1);
        let mut prompt = m.tokenize(&text, m.info().add_bos, false)?;
        prompt.truncate(n_prompt);
        // Warm-up: page the weights in and let the thread pool start.
        m.decode(&prompt[..prompt.len().min(16)])?;
        let (mut best_p, mut best_g) = (0.0f64, 0.0f64);
        for _ in 0..3 {
            m.truncate(0)?;
            let t0 = Instant::now();
            let mut next = argmax(m.decode(&prompt)?);
            let p = prompt.len() as f64 / t0.elapsed().as_secs_f64();
            let t1 = Instant::now();
            for _ in 0..n_gen {
                next = argmax(m.decode(&[next])?);
            }
            let g = n_gen as f64 / t1.elapsed().as_secs_f64();
            best_p = best_p.max(p);
            best_g = best_g.max(g);
        }
        let name = t.map_or_else(|| format!("auto:{}", m.n_threads()), |t| t.to_string());
        println!("{name:>7} {best_p:>13.1} {best_g:>13.1} {load_ms:>9.0}");
    }
    Ok(())
}
