//! [`Sampler`]: options + RNG + scratch buffers, and the pipeline that ties the transforms together.

use formwork_vocab::{TokenId, TokenMask};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::transform::{self, Candidate, Penalized};
use crate::{SampleError, SamplerOptions};

/// Picks the next token from raw logits. Owns its options, a seeded RNG and scratch buffers
/// that are reused across calls (no allocation per sample once they have grown).
///
/// One `Sampler` per generation stream: its RNG state advances with every draw, so the same
/// seed, logits and history give the same tokens.
#[derive(Debug, Clone)]
pub struct Sampler {
    opts: SamplerOptions,
    seed: u64,
    rng: Xoshiro256PlusPlus,
    /// Window token ids, sorted (scratch for the penalty overlay).
    ids: Vec<u32>,
    /// Penalized window tokens, sorted by id.
    overlay: Vec<Penalized>,
    /// Candidates after top-k (best-first when top-k is in force).
    cands: Vec<Candidate>,
    /// Probabilities parallel to `cands`.
    probs: Vec<f32>,
}

impl Sampler {
    /// A sampler with validated options. A `seed` of `None` draws one from the OS-seeded
    /// thread RNG; [`Sampler::seed`] tells which, so a run can be reproduced.
    pub fn new(opts: SamplerOptions) -> Result<Self, SampleError> {
        opts.validate()?;
        let seed = opts.seed.unwrap_or_else(rand::random::<u64>);
        let k = if opts.top_k == 0 { 64 } else { opts.top_k.min(4096) };
        Ok(Sampler {
            seed,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            ids: Vec::with_capacity(opts.repeat_last_n.min(4096)),
            overlay: Vec::with_capacity(opts.repeat_last_n.min(4096)),
            cands: Vec::with_capacity(k),
            probs: Vec::with_capacity(k),
            opts,
        })
    }

    /// The options this sampler was built with.
    pub fn options(&self) -> &SamplerOptions {
        &self.opts
    }

    /// The seed in use (the given one, or the random one drawn when none was given).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Picks the next token.
    ///
    /// `logits`: raw, one per vocabulary entry. `mask`: when given, only its tokens may be
    /// chosen (tokens at or past `mask.len()` are disallowed). `history`: every token so far;
    /// the penalties look at the last `repeat_last_n`. Pipeline: mask → penalties → top-k →
    /// temperature → softmax → top-p → min-p → draw (greedy: argmax after mask and penalties,
    /// ties to the lowest id).
    ///
    /// Errors: [`SampleError::Empty`] for no logits, [`SampleError::NaN`] when an allowed
    /// token's logit is NaN, [`SampleError::NoCandidates`] when every token is masked or -inf.
    pub fn sample(
        &mut self,
        logits: &[f32],
        mask: Option<&TokenMask>,
        history: &[TokenId],
    ) -> Result<TokenId, SampleError> {
        if logits.is_empty() {
            return Err(SampleError::Empty);
        }
        let o = &self.opts;
        if o.has_penalties() {
            let window = &history[history.len().saturating_sub(o.repeat_last_n)..];
            transform::penalty_overlay(
                logits,
                mask,
                window,
                (o.repeat_penalty, o.presence_penalty, o.frequency_penalty),
                &mut self.ids,
                &mut self.overlay,
            )?;
        } else {
            self.overlay.clear();
        }

        let greedy = o.is_greedy();
        let k = if greedy { 1 } else { o.top_k };
        transform::collect_top_k(logits, mask, &self.overlay, k, &mut self.cands)?;
        if self.cands.is_empty() {
            return Err(SampleError::NoCandidates);
        }
        if greedy {
            return Ok(self.cands[0].id);
        }

        let limited = o.top_k > 0 && o.top_k < logits.len();
        if !limited && o.top_p < 1.0 {
            transform::sort_best_first(&mut self.cands);
        }
        transform::apply_temperature(&mut self.cands, o.temperature);
        transform::softmax(&self.cands, &mut self.probs);
        if o.top_p < 1.0 {
            let n = transform::top_p(&self.probs, o.top_p);
            self.cands.truncate(n);
            self.probs.truncate(n);
        }
        transform::min_p(&mut self.cands, &mut self.probs, o.min_p);
        let u: f64 = self.rng.random();
        let i = transform::draw(&self.probs, u);
        Ok(self.cands[i].id)
    }

    /// True when "sample without the mask, check the token, and only if it is rejected sample
    /// again with the mask" gives exactly the same distribution as sampling with the mask.
    ///
    /// That holds for greedy decoding, and for plain temperature sampling with no truncation
    /// (`top_k` 0 or `>= vocab_len`, `top_p >= 1`, `min_p <= 0`). Penalties do not matter: they
    /// change each token's logit the same way with or without the mask.
    ///
    /// Proof sketch. Let A be the allowed set.
    /// - Greedy: the unmasked argmax t* (ties to the lowest id) is, if allowed, also the best
    ///   allowed token under the same order, so accepting it returns the masked answer; if it
    ///   is rejected the masked resample is the masked answer.
    /// - Untruncated sampling: the unmasked draw is q(t) = exp(l_t/T)/Z over all tokens, and the
    ///   masked draw is q(t)/q(A) over A. The two-step scheme returns an allowed t either on the
    ///   first draw (probability q(t)) or after a rejection (probability (1 − q(A)) · q(t)/q(A)),
    ///   in total q(t) + (1 − q(A)) q(t)/q(A) = q(t)/q(A): the masked distribution.
    /// - With truncation this fails: top-k/top-p/min-p choose their set from the unmasked
    ///   ranking, so a masked-first top-k can contain allowed tokens the unmasked one cut off
    ///   (and renormalises over a different set), changing the probabilities.
    pub fn fast_path_is_exact(&self, vocab_len: usize) -> bool {
        let o = &self.opts;
        o.is_greedy() || ((o.top_k == 0 || o.top_k >= vocab_len) && o.top_p >= 1.0 && o.min_p <= 0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;
    use std::collections::HashMap;

    fn opts(temperature: f32, top_k: usize, top_p: f32, min_p: f32) -> SamplerOptions {
        SamplerOptions {
            temperature,
            top_k,
            top_p,
            min_p,
            repeat_penalty: 1.0,
            seed: Some(7),
            ..Default::default()
        }
    }

    fn t(ids: &[u32]) -> Vec<TokenId> {
        ids.iter().map(|&i| TokenId(i)).collect()
    }

    /// Straightforward reference: full-vocabulary copy, every step spelled out, f64 probabilities.
    /// Returns the final distribution as (token, probability), best-first.
    fn reference(logits: &[f32], mask: Option<&TokenMask>, history: &[TokenId], o: &SamplerOptions) -> Vec<(u32, f64)> {
        let mut l = logits.to_vec();
        for (i, x) in l.iter_mut().enumerate() {
            if mask.is_some_and(|m| !m.contains(TokenId(i as u32))) {
                *x = f32::NEG_INFINITY;
            }
        }
        if o.repeat_last_n > 0 {
            let start = history.len().saturating_sub(o.repeat_last_n);
            let mut counts: HashMap<u32, u32> = HashMap::new();
            for tok in &history[start..] {
                *counts.entry(tok.0).or_default() += 1;
            }
            for (&id, &c) in &counts {
                let Some(x) = l.get_mut(id as usize) else { continue };
                if *x == f32::NEG_INFINITY {
                    continue;
                }
                *x = if *x > 0.0 { *x / o.repeat_penalty } else { *x * o.repeat_penalty };
                *x -= c as f32 * o.frequency_penalty + o.presence_penalty;
            }
        }
        let mut c: Vec<(u32, f32)> =
            l.iter().enumerate().filter(|(_, x)| **x > f32::NEG_INFINITY).map(|(i, &x)| (i as u32, x)).collect();
        c.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap().then(a.0.cmp(&b.0)));
        if c.is_empty() {
            return vec![];
        }
        if o.temperature <= 0.0 {
            return vec![(c[0].0, 1.0)];
        }
        if o.top_k > 0 {
            c.truncate(o.top_k);
        }
        let max = c[0].1 as f64 / o.temperature as f64;
        let e: Vec<f64> = c.iter().map(|x| (x.1 as f64 / o.temperature as f64 - max).exp()).collect();
        let z: f64 = e.iter().sum();
        let mut d: Vec<(u32, f64)> = c.iter().zip(&e).map(|(x, e)| (x.0, e / z)).collect();
        if o.top_p < 1.0 {
            let mut s = 0.0;
            let mut keep = d.len();
            for (i, x) in d.iter().enumerate() {
                s += x.1;
                if s > o.top_p as f64 {
                    keep = i + 1;
                    break;
                }
            }
            d.truncate(keep);
        }
        if o.min_p > 0.0 {
            let cut = d[0].1 * o.min_p as f64;
            d.retain(|x| x.1 >= cut);
        }
        let z: f64 = d.iter().map(|x| x.1).sum();
        d.iter().map(|&(i, p)| (i, p / z)).collect()
    }

    /// The distribution the sampler's last call drew from, best-first, normalised.
    fn last_distribution(s: &Sampler) -> Vec<(u32, f64)> {
        let z: f64 = s.probs.iter().map(|&p| p as f64).sum();
        let mut d: Vec<(u32, f64)> = s.cands.iter().zip(&s.probs).map(|(c, &p)| (c.id.0, p as f64 / z)).collect();
        d.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap().then(a.0.cmp(&b.0)));
        d
    }

    /// Pearson's chi-square statistic of observed counts against expected probabilities, merging
    /// every category expected below 5 draws into one bin. Returns (statistic, degrees of freedom).
    /// Draws outside the support make the test fail outright.
    fn chi_square(counts: &HashMap<u32, u64>, dist: &[(u32, f64)], n: u64) -> (f64, usize) {
        let support: HashMap<u32, f64> = dist.iter().copied().collect();
        for id in counts.keys() {
            assert!(support.contains_key(id), "token {id} was drawn but has probability 0");
        }
        let (mut stat, mut bins) = (0.0, 0usize);
        let (mut small_obs, mut small_exp) = (0.0, 0.0);
        for &(id, p) in dist {
            let obs = *counts.get(&id).unwrap_or(&0) as f64;
            let exp = p * n as f64;
            if exp < 5.0 {
                small_obs += obs;
                small_exp += exp;
            } else {
                stat += (obs - exp).powi(2) / exp;
                bins += 1;
            }
        }
        if small_exp > 0.0 {
            stat += (small_obs - small_exp).powi(2) / small_exp.max(1e-9);
            bins += 1;
        }
        (stat, bins.saturating_sub(1))
    }

    /// Upper critical value of chi-square with `df` degrees of freedom at significance 0.001
    /// (Wilson–Hilferty approximation; z = 3.0902). df = 0 (a single bin) accepts only 0.
    fn chi_square_critical(df: usize) -> f64 {
        if df == 0 {
            return 1e-9;
        }
        let k = df as f64;
        let z = 3.0902;
        k * (1.0 - 2.0 / (9.0 * k) + z * (2.0 / (9.0 * k)).sqrt()).powi(3)
    }

    #[test]
    fn chi_square_critical_matches_tables() {
        // Table values at p = 0.001: df 1 → 10.83, 5 → 20.52, 10 → 29.59, 30 → 59.70.
        for (df, table) in [(1, 10.83), (5, 20.52), (10, 29.59), (30, 59.70)] {
            let v = chi_square_critical(df);
            assert!((v - table).abs() / table < 0.06, "df {df}: {v} vs {table}");
        }
    }

    fn draws(s: &mut Sampler, logits: &[f32], mask: Option<&TokenMask>, history: &[TokenId], n: u64) -> HashMap<u32, u64> {
        let mut counts = HashMap::new();
        for _ in 0..n {
            let tok = s.sample(logits, mask, history).unwrap();
            *counts.entry(tok.0).or_default() += 1;
        }
        counts
    }

    fn assert_matches(counts: &HashMap<u32, u64>, dist: &[(u32, f64)], n: u64, what: &str) {
        let (stat, df) = chi_square(counts, dist, n);
        let crit = chi_square_critical(df);
        assert!(stat <= crit, "{what}: chi-square {stat:.2} > critical {crit:.2} (df {df})\n{counts:?}\n{dist:?}");
    }

    const N: u64 = 20_000;

    #[test]
    fn distribution_matches_filtered_distribution() {
        let logits = [1.0, 2.5, 0.3, 2.0, -1.0, 1.7, 0.0, 2.2, 0.9, -0.5, 1.2, 0.6];
        let mut mask = TokenMask::full(logits.len());
        mask.remove(TokenId(7));
        let history = t(&[1, 1, 3, 8]);
        let configs = [
            ("plain temperature", opts(1.0, 0, 1.0, 0.0), None),
            ("hot temperature", opts(1.7, 0, 1.0, 0.0), None),
            ("top-k 4", opts(0.8, 4, 1.0, 0.0), None),
            ("top-p 0.7", opts(1.0, 0, 0.7, 0.0), None),
            ("min-p 0.3", opts(1.0, 0, 1.0, 0.3), None),
            ("all + mask", opts(0.9, 6, 0.9, 0.1), Some(&mask)),
            (
                "defaults + penalties + mask",
                SamplerOptions { seed: Some(3), presence_penalty: 0.3, frequency_penalty: 0.2, ..Default::default() },
                Some(&mask),
            ),
        ];
        for (i, (what, o, m)) in configs.into_iter().enumerate() {
            let mut s = Sampler::new(SamplerOptions { seed: Some(100 + i as u64), ..o.clone() }).unwrap();
            let dist = reference(&logits, m, &history, &o);
            let counts = draws(&mut s, &logits, m, &history, N);
            assert_matches(&counts, &dist, N, what);
        }
    }

    #[test]
    fn fast_path_rejection_sampling_is_exact_when_promised() {
        let logits = [1.0, 2.5, 0.3, 2.0, -1.0, 1.7, 0.0, 2.2];
        let mut mask = TokenMask::new(logits.len());
        for i in [0, 2, 3, 6] {
            mask.insert(TokenId(i));
        }
        let o = SamplerOptions { temperature: 0.9, top_k: 0, top_p: 1.0, min_p: 0.0, seed: Some(11), ..Default::default() };
        let mut s = Sampler::new(o.clone()).unwrap();
        assert!(s.fast_path_is_exact(logits.len()));
        let history = t(&[3, 3]);
        let mut counts = HashMap::new();
        for _ in 0..N {
            let mut tok = s.sample(&logits, None, &history).unwrap();
            if !mask.contains(tok) {
                tok = s.sample(&logits, Some(&mask), &history).unwrap();
            }
            *counts.entry(tok.0).or_default() += 1;
        }
        assert_matches(&counts, &reference(&logits, Some(&mask), &history, &o), N, "rejection sampling");

        // And when not promised, it really differs: top-k 2 unmasked keeps {1, 7}, both
        // disallowed, so the fast path always falls back; but top-k 1 of {1} vs masked differs.
        let truncated = Sampler::new(SamplerOptions { top_k: 2, ..o.clone() }).unwrap();
        assert!(!truncated.fast_path_is_exact(logits.len()));
        assert!(truncated.fast_path_is_exact_for_options_of(&SamplerOptions { top_k: 8, ..o.clone() }, 8));
        for (o2, exact) in [
            (SamplerOptions { top_k: 40, ..o.clone() }, true), // k >= vocab
            (SamplerOptions { top_p: 0.95, ..o.clone() }, false),
            (SamplerOptions { min_p: 0.05, ..o.clone() }, false),
            (SamplerOptions { top_k: 3, temperature: 0.0, ..o.clone() }, true),
        ] {
            assert_eq!(Sampler::new(o2.clone()).unwrap().fast_path_is_exact(logits.len()), exact, "{o2:?}");
        }
    }

    impl Sampler {
        fn fast_path_is_exact_for_options_of(&self, o: &SamplerOptions, vocab: usize) -> bool {
            Sampler::new(o.clone()).unwrap().fast_path_is_exact(vocab)
        }
    }

    /// Random logits (normal-ish, with deliberate ties and -inf), random masks (dense, sparse,
    /// with empty words), random histories and options: the optimized pipeline's final
    /// distribution must equal the reference's, and the drawn token must be allowed.
    #[test]
    fn pipeline_matches_reference_on_random_cases() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(2024);
        for case in 0..300 {
            let n = 1 + (rng.next_u32() % 700) as usize;
            let logits: Vec<f32> = (0..n)
                .map(|_| match rng.next_u32() % 10 {
                    0 => f32::NEG_INFINITY,
                    1 => 1.0, // ties
                    _ => ((rng.next_u32() % 2000) as f32 - 1000.0) / 250.0,
                })
                .collect();
            let mask = match rng.next_u32() % 4 {
                0 => None,
                1 => Some(TokenMask::full(n)),
                density => {
                    let mut m = TokenMask::new(n);
                    for i in 0..n {
                        let p = if density == 2 { 50 } else { 3 };
                        if rng.next_u32() % 100 < p {
                            m.insert(TokenId(i as u32));
                        }
                    }
                    Some(m)
                }
            };
            let history: Vec<TokenId> =
                (0..rng.next_u32() % 100).map(|_| TokenId(rng.next_u32() % (n as u32 + 5))).collect();
            let o = SamplerOptions {
                temperature: [0.0, 0.5, 0.8, 1.3][(rng.next_u32() % 4) as usize],
                top_k: [0, 1, 5, 40, 1000][(rng.next_u32() % 5) as usize],
                top_p: [1.0, 0.9, 0.5][(rng.next_u32() % 3) as usize],
                min_p: [0.0, 0.05, 0.2][(rng.next_u32() % 3) as usize],
                repeat_penalty: [1.0, 1.1, 0.9][(rng.next_u32() % 3) as usize],
                repeat_last_n: [0, 8, 64, usize::MAX][(rng.next_u32() % 4) as usize],
                presence_penalty: [0.0, 0.5, -0.3][(rng.next_u32() % 3) as usize],
                frequency_penalty: [0.0, 0.1][(rng.next_u32() % 2) as usize],
                seed: Some(case),
            };
            let want = reference(&logits, mask.as_ref(), &history, &o);
            let mut s = Sampler::new(o.clone()).unwrap();
            let got = s.sample(&logits, mask.as_ref(), &history);
            if want.is_empty() {
                assert_eq!(got, Err(SampleError::NoCandidates), "case {case}");
                continue;
            }
            let tok = got.unwrap_or_else(|e| panic!("case {case}: {e}"));
            assert!(mask.as_ref().is_none_or(|m| m.contains(tok)), "case {case}: masked token {tok}");
            assert!(want.iter().any(|w| w.0 == tok.0), "case {case}: {tok} outside the support");
            if o.is_greedy() {
                assert_eq!(tok.0, want[0].0, "case {case}: greedy");
                continue;
            }
            let have = last_distribution(&s);
            assert_eq!(
                have.iter().map(|x| x.0).collect::<Vec<_>>(),
                want.iter().map(|x| x.0).collect::<Vec<_>>(),
                "case {case}: support ({o:?})"
            );
            for (h, w) in have.iter().zip(&want) {
                assert!((h.1 - w.1).abs() < 1e-4, "case {case}: p({}) {} vs {}", h.0, h.1, w.1);
            }
        }
    }

    #[test]
    fn same_seed_same_tokens_different_seed_different_tokens() {
        let logits: Vec<f32> = (0..200).map(|i| ((i * 37) % 11) as f32 / 5.0).collect();
        let run = |seed| {
            let mut s = Sampler::new(SamplerOptions { seed: Some(seed), top_k: 0, top_p: 1.0, ..Default::default() }).unwrap();
            let mut h = Vec::new();
            for _ in 0..100 {
                let tok = s.sample(&logits, None, &h).unwrap();
                h.push(tok);
            }
            h
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
        // A random seed is reported so the run can be repeated.
        let s = Sampler::new(SamplerOptions::default()).unwrap();
        let again = Sampler::new(SamplerOptions { seed: Some(s.seed()), ..Default::default() }).unwrap();
        assert_eq!(again.seed(), s.seed());
    }

    #[test]
    fn edge_cases() {
        let mut s = Sampler::new(SamplerOptions { seed: Some(1), ..Default::default() }).unwrap();
        assert_eq!(s.sample(&[], None, &[]), Err(SampleError::Empty));
        assert_eq!(s.sample(&[0.0, f32::NAN, 1.0], None, &[]), Err(SampleError::NaN { index: 1 }));
        let ninf = f32::NEG_INFINITY;
        assert_eq!(s.sample(&[ninf, ninf], None, &[]), Err(SampleError::NoCandidates));
        assert_eq!(s.sample(&[1.0, 2.0], Some(&TokenMask::new(2)), &[]), Err(SampleError::NoCandidates));
        // One finite logit: always it, whatever the options.
        for o in [SamplerOptions::default(), SamplerOptions::greedy(), opts(2.0, 0, 1.0, 0.0), opts(0.5, 1, 0.1, 0.9)] {
            let mut s = Sampler::new(o).unwrap();
            for _ in 0..50 {
                assert_eq!(s.sample(&[ninf, ninf, -3.0, ninf], None, &t(&[2, 2])).unwrap(), TokenId(2));
            }
        }
        // k >= vocabulary and p = 1: every token reachable.
        let logits = [0.0f32; 5];
        let mut s = Sampler::new(opts(1.0, 10, 1.0, 0.0)).unwrap();
        let c = draws(&mut s, &logits, None, &[], 2000);
        assert_eq!(c.len(), 5);
        assert_matches(&c, &(0..5).map(|i| (i, 0.2)).collect::<Vec<_>>(), 2000, "uniform");
        // Errors print clearly.
        assert!(SampleError::NaN { index: 9 }.to_string().contains("token 9 is NaN"));
        assert!(Sampler::new(SamplerOptions { top_p: -1.0, ..Default::default() }).is_err());
    }

    #[test]
    fn greedy_ties_go_to_the_lowest_id_and_respect_mask_and_penalties() {
        let mut s = Sampler::new(SamplerOptions::greedy()).unwrap();
        let logits = [1.0, 3.0, 2.0, 3.0, 3.0];
        assert_eq!(s.sample(&logits, None, &[]).unwrap(), TokenId(1));
        let mut m = TokenMask::full(5);
        m.remove(TokenId(1));
        assert_eq!(s.sample(&logits, Some(&m), &[]).unwrap(), TokenId(3));
        // Penalty on 1 and 3 (3.0/1.1 < 3.0) leaves 4 alone at 3.0.
        assert_eq!(s.sample(&logits, None, &t(&[1, 3])).unwrap(), TokenId(4));
        // Ties across a block boundary: 63 and 64 equal, lower wins; and overlay vs scan ties.
        let mut big = vec![0.0f32; 130];
        big[64] = 5.0;
        big[63] = 5.0;
        assert_eq!(s.sample(&big, None, &[]).unwrap(), TokenId(63));
        let mut s = Sampler::new(SamplerOptions { repeat_penalty: 1.0, presence_penalty: 1.0, ..SamplerOptions::greedy() }).unwrap();
        big[10] = 6.0; // penalized to 5.0, ties with 63 and 64 and wins by id
        assert_eq!(s.sample(&big, None, &t(&[10])).unwrap(), TokenId(10));
    }

    #[test]
    fn mask_is_always_respected() {
        let logits: Vec<f32> = (0..300).map(|i| (i % 17) as f32 * 0.3).collect();
        let mut mask = TokenMask::new(300);
        for i in (0..300).step_by(7) {
            mask.insert(TokenId(i));
        }
        for o in [SamplerOptions::default(), SamplerOptions::greedy(), opts(3.0, 0, 1.0, 0.0)] {
            let mut s = Sampler::new(SamplerOptions { seed: Some(5), ..o }).unwrap();
            let mut h = Vec::new();
            for _ in 0..300 {
                let tok = s.sample(&logits, Some(&mask), &h).unwrap();
                assert!(mask.contains(tok));
                h.push(tok);
            }
        }
    }

    #[test]
    fn steady_state_does_not_allocate() {
        let logits: Vec<f32> = (0..5000).map(|i| ((i * 7919) % 1000) as f32 / 100.0).collect();
        let history: Vec<TokenId> = (0..200).map(|i| TokenId(i * 13)).collect();
        let mut s = Sampler::new(SamplerOptions { seed: Some(9), ..Default::default() }).unwrap();
        s.sample(&logits, None, &history).unwrap();
        let before = (s.ids.as_ptr(), s.overlay.as_ptr(), s.cands.as_ptr(), s.probs.as_ptr());
        for _ in 0..200 {
            s.sample(&logits, None, &history).unwrap();
        }
        assert_eq!(before, (s.ids.as_ptr(), s.overlay.as_ptr(), s.cands.as_ptr(), s.probs.as_ptr()));
    }
}
