//! Generation throughput of N sequences decoded together in one llama.cpp context, as the
//! server's batcher runs them (one `llama_batch` per step, one token per sequence), next to
//! the same model generating one sequence alone.
//!
//! ```text
//! cargo run --release -p formwork-llama --example batch_throughput -- [MODEL] [THREADS] [SEQS,...] [CTX_PER_SEQ] [GEN_TOKENS]
//! cargo run --release -p formwork-llama --example batch_throughput -- smollm2 2 1,4,16 2048 64
//! ```
//! Compare with llama.cpp's own `llama-batched-bench -npp 32 -ntg GEN -npl SEQS`.

use formwork_engine::batch::{BatchEntry, BatchModel, SeqId};
use formwork_llama::{LlamaBatchModel, LoadOptions};
use formwork_vocab::TokenId;
use std::time::Instant;

fn argmax(logits: &[f32]) -> TokenId {
    let i = (0..logits.len()).max_by(|&a, &b| logits[a].total_cmp(&logits[b])).unwrap_or(0);
    TokenId(i as u32)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let model = args.first().map(String::as_str).unwrap_or("smollm2");
    let threads: usize = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(2);
    let seqs: Vec<usize> = args.get(2).map(String::as_str).unwrap_or("1,4,16").split(',').map(str::parse).collect::<Result<_, _>>()?;
    let ctx: usize = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(2048);
    let n_gen: usize = args.get(4).map(|s| s.parse()).transpose()?.unwrap_or(64);
    let path = formwork_models::resolve(model)?;
    println!("model {} | threads {threads} | ctx/seq {ctx} | generate {n_gen} tokens per sequence", path.display());
    println!("{:>5} {:>12} {:>12} {:>12}", "seqs", "prefill ms", "decode ms", "gen tok/s");
    // FORMWORK_SEQ_STRIDE=k: the sequences take every k-th sequence id (the holes a server's
    // finished requests leave), to show what non-consecutive ids cost llama.cpp.
    let stride: usize = std::env::var("FORMWORK_SEQ_STRIDE").ok().and_then(|s| s.parse().ok()).unwrap_or(1).max(1);
    let id = |s: usize| SeqId((s * stride) as u32);
    for &n in &seqs {
        let mut m = LlamaBatchModel::load(&path, LoadOptions { n_ctx: Some(ctx), n_threads: Some(threads), ..Default::default() }, n * stride)?;
        let text = "The history of the printing press begins in the fifteenth century, when movable type changed how books were made and read.";
        let prompt = m.tokenizer().tokenize(text, true, false)?;
        let t0 = Instant::now();
        let mut next = Vec::new();
        for s in 0..n {
            let e = [BatchEntry { seq: id(s), pos: 0, tokens: &prompt, logits: true }];
            m.decode_batch(&e)?;
            next.push(argmax(m.logits(0)));
        }
        let prefill = t0.elapsed().as_secs_f64() * 1e3;
        // FORMWORK_GAP_US: a pause after each step (what sampling costs a server between steps).
        let gap = std::env::var("FORMWORK_GAP_US").ok().and_then(|s| s.parse().ok()).map(std::time::Duration::from_micros);
        let mut decode_time = std::time::Duration::ZERO;
        let t1 = Instant::now();
        for step in 0..n_gen {
            if let Some(g) = gap {
                std::thread::sleep(g);
            }
            let td = Instant::now();
            let toks: Vec<[TokenId; 1]> = next.iter().map(|&t| [t]).collect();
            let entries: Vec<BatchEntry> = (0..n)
                .map(|s| BatchEntry { seq: id(s), pos: prompt.len() + step, tokens: &toks[s], logits: true })
                .collect();
            m.decode_batch(&entries)?;
            decode_time += td.elapsed();
            for (s, t) in next.iter_mut().enumerate() {
                *t = argmax(m.logits(s));
            }
        }
        let el = t1.elapsed().as_secs_f64();
        let step = decode_time.as_secs_f64() * 1e3 / n_gen as f64;
        print!("{n:>5} {prefill:>12.1} {step:>12.1} {:>12.1}", (n * n_gen) as f64 / el);
        // A stream copy (what moving a sequence to another slot costs): one step with it.
        if stride > 1 {
            let tc = Instant::now();
            m.seq_copy(id(n - 1), SeqId(1));
            let t = [next[0]];
            m.decode_batch(&[BatchEntry { seq: id(0), pos: prompt.len() + n_gen, tokens: &t, logits: true }])?;
            print!("   copy + 1-token step {:.1} ms", tc.elapsed().as_secs_f64() * 1e3);
        }
        println!();
    }
    Ok(())
}
