//! [`logprobs`]: log-probabilities of the masked distribution, for reporting (the APIs'
//! `logprobs` / `top_logprobs`). Not part of [`Sampler::sample`](crate::Sampler::sample):
//! nothing here runs unless a caller asks.
//!
//! ## Which distribution
//! The model's next-token distribution **restricted to the allowed tokens**: a softmax of the
//! raw logits over the tokens the mask allows (all tokens without a mask),
//!
//! `log p(t) = l_t − log Σ_{a allowed} exp(l_a)`.
//!
//! A masked-out token has probability 0 and is never reported; the reported probabilities of
//! the allowed tokens sum to 1. Temperature, top-k, top-p, min-p and the penalties are **not**
//! applied: they shape how the sampler draws, and reporting them would make every greedy
//! (temperature 0) logprob 0. This is what OpenAI and Ollama report (the model's own
//! distribution), with the one change a constraint makes: the mask.
//!
//! ## Cost
//! Two passes over the allowed logits (max, then a vectorised `exp` sum), skipping
//! all-masked 64-token blocks, plus the top-k pass of
//! [`collect_top_k`](crate::transform::collect_top_k) when alternatives are asked for:
//! O(V) per token, about the cost of one unconstrained [`Sampler::sample`](crate::Sampler::sample).

use formwork_vocab::{TokenId, TokenMask};

use crate::transform::{self, exp_nonpositive, Candidate};
use crate::SampleError;

/// The log-probabilities of one step (see the module docs for the distribution).
#[derive(Clone, Debug, PartialEq)]
pub struct Logprobs {
    /// Natural log of the chosen token's probability; `-inf` when it is not allowed or its
    /// logit is `-inf` (it could not have been sampled).
    pub chosen: f32,
    /// The `top_n` most likely allowed tokens, best first (ties to the lower id), with their
    /// log-probabilities; fewer when fewer tokens have a probability above 0.
    pub top: Vec<(TokenId, f32)>,
}

/// Log-probabilities of `chosen` and of the `top_n` most likely tokens under the softmax of
/// `logits` over the tokens `mask` allows (tokens at or past `mask.len()` are not allowed).
/// `scratch` is reused for the top-n pass.
///
/// Errors: [`SampleError::Empty`], [`SampleError::NaN`] for an allowed NaN logit,
/// [`SampleError::NoCandidates`] when no allowed token has a logit above `-inf`.
pub fn logprobs(
    logits: &[f32],
    mask: Option<&TokenMask>,
    chosen: TokenId,
    top_n: usize,
    scratch: &mut Vec<Candidate>,
) -> Result<Logprobs, SampleError> {
    if logits.is_empty() {
        return Err(SampleError::Empty);
    }
    let max = fold_allowed(logits, mask, f32::NEG_INFINITY, |m, chunk, word| {
        let mut m = m;
        for_bits(chunk, word, |x| m = if x > m { x } else { m });
        m
    });
    if max.is_nan() {
        return Err(first_nan(logits, mask));
    }
    if max == f32::NEG_INFINITY {
        return Err(SampleError::NoCandidates);
    }
    let allowed = |t: TokenId| t.index() < logits.len() && mask.is_none_or(|m| m.contains(t));
    // The normaliser: log Σ exp over the allowed tokens, or (some logit is +inf) the share
    // each +inf token gets.
    let norm = if max == f32::INFINITY {
        let n = fold_allowed(logits, mask, 0usize, |n, chunk, word| {
            let mut n = n;
            for_bits(chunk, word, |x| n += (x == f32::INFINITY) as usize);
            n
        });
        Norm::Infinite { share: -(n as f32).ln() }
    } else {
        let sum = fold_allowed(logits, mask, 0.0f64, |s, chunk, word| {
            if word == !0 {
                let mut lanes = [0.0f32; 8];
                let mut it = chunk.chunks_exact(8);
                for c in &mut it {
                    for j in 0..8 {
                        lanes[j] += exp_nonpositive(c[j] - max);
                    }
                }
                let tail: f32 = it.remainder().iter().map(|&x| exp_nonpositive(x - max)).sum();
                s + lanes.iter().map(|&v| v as f64).sum::<f64>() + tail as f64
            } else {
                let mut s = s;
                for_bits(chunk, word, |x| s += exp_nonpositive(x - max) as f64);
                s
            }
        });
        Norm::Finite { log_sum_exp: max as f64 + sum.ln() }
    };
    let lp = |x: f32| norm.logprob(x);
    let chosen_lp = if allowed(chosen) { lp(logits[chosen.index()]) } else { f32::NEG_INFINITY };
    let mut top = Vec::new();
    if top_n > 0 {
        transform::collect_top_k(logits, mask, &[], top_n, scratch)?;
        transform::sort_best_first(scratch);
        top.extend(scratch.iter().take(top_n).map(|c| (c.id, lp(c.logit))).filter(|(_, l)| *l > f32::NEG_INFINITY));
    }
    Ok(Logprobs { chosen: chosen_lp, top })
}

/// The softmax normaliser of one step.
enum Norm {
    /// Every allowed logit is finite or -inf: log Σ_allowed exp(l).
    Finite { log_sum_exp: f64 },
    /// Some allowed logit is +inf: those share the mass equally (`share` = −ln count).
    Infinite { share: f32 },
}

impl Norm {
    /// log p of an allowed token with logit `x`.
    fn logprob(&self, x: f32) -> f32 {
        match *self {
            Norm::Finite { log_sum_exp } => (x as f64 - log_sum_exp) as f32,
            Norm::Infinite { share } if x == f32::INFINITY => share,
            Norm::Infinite { .. } => f32::NEG_INFINITY,
        }
    }
}

/// Folds `f` over the 64-token blocks of `logits` that hold an allowed token, with the
/// block's allowed bits (all-masked blocks are skipped without reading their logits).
fn fold_allowed<A>(logits: &[f32], mask: Option<&TokenMask>, init: A, mut f: impl FnMut(A, &[f32], u64) -> A) -> A {
    let words = mask.map(|m| m.words());
    let mut acc = init;
    for (b, chunk) in logits.chunks(64).enumerate() {
        let mut word = match words {
            Some(w) => w.get(b).copied().unwrap_or(0),
            None => !0,
        };
        if chunk.len() < 64 {
            // A short last block: its bits only (so `!0` always means a full, all-allowed block).
            word &= (1u64 << chunk.len()) - 1;
        }
        if word != 0 {
            acc = f(acc, chunk, word);
        }
    }
    acc
}

/// Calls `f` with each logit of `chunk` whose bit is set in `word` (NaN logits included, so
/// the caller's fold sees them).
#[inline]
fn for_bits(chunk: &[f32], word: u64, mut f: impl FnMut(f32)) {
    if word == !0 {
        chunk.iter().for_each(|&x| f(x));
        return;
    }
    let mut bits = word;
    while bits != 0 {
        let i = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        f(chunk[i]);
    }
}

#[cold]
fn first_nan(logits: &[f32], mask: Option<&TokenMask>) -> SampleError {
    let i = (0..logits.len())
        .find(|&i| logits[i].is_nan() && mask.is_none_or(|m| m.contains(TokenId(i as u32))))
        .unwrap_or(0);
    SampleError::NaN { index: i }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// f64 reference: log-softmax over the allowed finite tokens, best first.
    fn reference(logits: &[f32], mask: Option<&TokenMask>) -> Vec<(u32, f64)> {
        let allowed: Vec<(u32, f64)> = logits
            .iter()
            .enumerate()
            .filter(|(i, x)| **x > f32::NEG_INFINITY && mask.is_none_or(|m| m.contains(TokenId(*i as u32))))
            .map(|(i, &x)| (i as u32, x as f64))
            .collect();
        let max = allowed.iter().map(|x| x.1).fold(f64::NEG_INFINITY, f64::max);
        let lse = max + allowed.iter().map(|x| (x.1 - max).exp()).sum::<f64>().ln();
        let mut d: Vec<(u32, f64)> = allowed.iter().map(|&(i, x)| (i, x - lse)).collect();
        d.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap().then(a.0.cmp(&b.0)));
        d
    }

    #[test]
    fn matches_the_reference_and_sums_to_one_over_the_support() {
        let mut s = Vec::new();
        for (n, density) in [(5usize, 100u32), (64, 100), (130, 50), (700, 3), (700, 100), (300, 0)] {
            let logits: Vec<f32> = (0..n).map(|i| ((i * 7919) % 1000) as f32 / 90.0 - 5.0).collect();
            let mask = (density < 100).then(|| {
                let mut m = TokenMask::new(n);
                for i in 0..n {
                    if (i as u32 * 2654435761u32) % 100 < density || i == 3 {
                        m.insert(TokenId(i as u32));
                    }
                }
                m
            });
            let want = reference(&logits, mask.as_ref());
            let got = logprobs(&logits, mask.as_ref(), TokenId(want[0].0), n, &mut s).unwrap();
            assert_eq!(got.top.len(), want.len(), "n {n} density {density}");
            let total: f64 = got.top.iter().map(|x| (x.1 as f64).exp()).sum();
            assert!((total - 1.0).abs() < 1e-4, "sum {total}");
            for (g, w) in got.top.iter().zip(&want) {
                assert_eq!(g.0 .0, w.0);
                assert!((g.1 as f64 - w.1).abs() < 1e-4, "{} vs {}", g.1, w.1);
                assert!(mask.as_ref().is_none_or(|m| m.contains(g.0)), "a masked token was reported");
            }
            assert!((got.chosen as f64 - want[0].1).abs() < 1e-4);
            // top_n smaller than the support: the best, in order.
            let few = logprobs(&logits, mask.as_ref(), TokenId(3), 2, &mut s).unwrap();
            assert_eq!(few.top, got.top[..2.min(got.top.len())].to_vec());
        }
    }

    #[test]
    fn masked_and_impossible_tokens() {
        let mut s = Vec::new();
        let logits = [1.0, 5.0, f32::NEG_INFINITY, 2.0];
        let mut m = TokenMask::full(4);
        m.remove(TokenId(1));
        let r = logprobs(&logits, Some(&m), TokenId(1), 4, &mut s).unwrap();
        assert_eq!(r.chosen, f32::NEG_INFINITY);
        assert_eq!(r.top.iter().map(|x| x.0 .0).collect::<Vec<_>>(), vec![3, 0]);
        // One allowed token: probability 1.
        let mut only = TokenMask::new(4);
        only.insert(TokenId(0));
        let r = logprobs(&logits, Some(&only), TokenId(0), 3, &mut s).unwrap();
        assert_eq!((r.chosen, r.top.clone()), (0.0, vec![(TokenId(0), 0.0)]));
        assert_eq!(logprobs(&logits, Some(&TokenMask::new(4)), TokenId(0), 1, &mut s), Err(SampleError::NoCandidates));
        assert_eq!(logprobs(&[0.0, f32::NAN], None, TokenId(0), 1, &mut s), Err(SampleError::NaN { index: 1 }));
        assert!(logprobs(&[0.0, f32::NAN], Some(&only), TokenId(0), 1, &mut s).is_ok());
        let inf = logprobs(&[f32::INFINITY, 0.0, f32::INFINITY], None, TokenId(2), 3, &mut s).unwrap();
        assert!((inf.chosen - (0.5f32).ln()).abs() < 1e-6);
        assert_eq!(inf.top.len(), 2);
    }
}
