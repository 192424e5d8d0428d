//! Whole-pipeline sampling cost per token (µs/sample) on random-normal logits.
//!
//! `cargo bench -p formwork-sampler` — sizes: 49,152 (SmolLM2), 128,256 (Llama 3), 256,000
//! (Gemma). Cases: Ollama defaults with a 64-token history; greedy; defaults with a dense
//! (50 %) and a sparse (~1 %, like a JSON-string state) random mask; untruncated temperature
//! sampling (top-k 0, top-p 1: the fast-path-exact configuration, a full softmax).

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use formwork_sampler::{Sampler, SamplerOptions, TokenId, TokenMask};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

const SIZES: [usize; 3] = [49_152, 128_256, 256_000];

fn uniform(rng: &mut Xoshiro256PlusPlus) -> f64 {
    ((rng.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
}

/// Standard normal logits (Box–Muller), deterministic.
fn normal_logits(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let (u1, u2) = (uniform(&mut rng), uniform(&mut rng));
            ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32
        })
        .collect()
}

fn random_mask(n: usize, percent: u64, seed: u64) -> TokenMask {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut m = TokenMask::new(n);
    for i in 0..n {
        if rng.next_u64() % 100 < percent {
            m.insert(TokenId(i as u32));
        }
    }
    m
}

fn history(n: usize, seed: u64) -> Vec<TokenId> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    (0..200).map(|_| TokenId((rng.next_u64() % n as u64) as u32)).collect()
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("sample");
    g.warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(2));
    g.sample_size(30);
    let cases: [(&str, SamplerOptions, Option<u64>); 5] = [
        ("default", SamplerOptions { seed: Some(1), ..Default::default() }, None),
        ("greedy", SamplerOptions { seed: Some(1), ..SamplerOptions::greedy() }, None),
        ("default_mask50", SamplerOptions { seed: Some(1), ..Default::default() }, Some(50)),
        ("default_mask1", SamplerOptions { seed: Some(1), ..Default::default() }, Some(1)),
        (
            "untruncated",
            SamplerOptions { seed: Some(1), top_k: 0, top_p: 1.0, ..Default::default() },
            None,
        ),
    ];
    for &n in &SIZES {
        let logits = normal_logits(n, n as u64);
        let hist = history(n, 7);
        for (name, opts, mask_pct) in &cases {
            let mask = mask_pct.map(|p| random_mask(n, p, 3));
            let mut s = Sampler::new(opts.clone()).unwrap();
            g.bench_with_input(BenchmarkId::new(*name, n), &n, |b, _| {
                b.iter(|| s.sample(black_box(&logits), mask.as_ref(), black_box(&hist)).unwrap())
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
