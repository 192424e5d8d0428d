//! # formwork-sampler: raw logits (+ an optional token mask) → the next token
//!
//! The sampler sits between the model and the generation loop: the model produces one logit per
//! vocabulary entry, the grammar matcher (optionally) produces a [`TokenMask`] of allowed tokens,
//! and [`Sampler::sample`] turns the two, plus the tokens generated so far, into one [`TokenId`].
//! No I/O, no global state; the RNG is owned by the sampler and seeded.
//!
//! ## Key types
//! - [`SamplerOptions`]: temperature, top-k, top-p, min-p, repeat / presence / frequency
//!   penalties and the seed. [`Default`] is Ollama's (0.8, 40, 0.9, 0.0, 1.1 over the last 64
//!   tokens, no presence/frequency penalty, random seed).
//! - [`Sampler`]: options + a `Xoshiro256PlusPlus` RNG + scratch buffers reused across calls, so
//!   a steady-state [`Sampler::sample`] does not allocate.
//! - [`SampleError`]: empty logits, a NaN logit, nothing allowed, a bad option.
//! - [`transform`]: each step of the pipeline as its own function (tested one by one).
//! - [`logprobs()`]: log-probabilities of the masked distribution for reporting (the APIs'
//!   `logprobs`); a separate call, so sampling pays nothing for it unless asked.
//!
//! ## The loop a user writes
//! ```
//! use formwork_sampler::{Sampler, SamplerOptions};
//! use formwork_vocab::{TokenId, TokenMask};
//!
//! let mut sampler = Sampler::new(SamplerOptions { seed: Some(42), ..Default::default() })?;
//! let mut history: Vec<TokenId> = vec![TokenId(1), TokenId(2)];   // the prompt
//! for _ in 0..3 {
//!     let logits = vec![0.5f32, 2.0, -1.0, 1.5];                   // model.forward(...)
//!     let mut mask = TokenMask::full(logits.len());                // matcher.compute_mask(...)
//!     mask.remove(TokenId(1));
//!     let next = sampler.sample(&logits, Some(&mask), &history)?;
//!     assert_ne!(next, TokenId(1));
//!     history.push(next);
//! }
//! # Ok::<(), formwork_sampler::SampleError>(())
//! ```
//!
//! ## The order of transforms, and why
//! On the raw logits, as Ollama does it:
//!
//! 1. **mask**: disallowed tokens become -inf first, so nothing later (penalties, truncation,
//!    renormalisation) can give them mass, and the truncation steps choose among allowed tokens.
//! 2. **penalties** (repeat, presence, frequency over the last `repeat_last_n` history tokens):
//!    they edit logits, so they come before anything that ranks or normalises them.
//!    Computed only for the window's distinct tokens, in a small side table ("overlay") that the
//!    top-k pass reads instead of the raw value — the full vocabulary is never copied.
//! 3. **top-k** with a binary heap, O(n log k): the one pass over the whole vocabulary; everything
//!    after works on ≤ k candidates. The pass goes in 64-token blocks aligned with the mask's
//!    words, skipping all-masked blocks and blocks whose maximum cannot enter the heap.
//! 4. **temperature**, then 5. **softmax** (stable: subtract the max; a branch-free `exp` good
//!    to ~1e-7 relative, [`transform::exp_nonpositive`], so a full-vocabulary softmax
//!    vectorises): temperature reshapes the
//!    distribution, so it must precede normalisation; top-k is unaffected by it (dividing by a
//!    positive constant keeps the order), which is why top-k can run first and cheaply.
//! 6. **top-p**, then 7. **min-p**: both need probabilities, and on best-first candidates both are
//!    a linear scan.
//! 8. **draw**: inverse CDF with a uniform `f64` from the seeded RNG, over the surviving weights
//!    (no renormalisation pass needed).
//!
//! `temperature <= 0` is greedy: argmax after mask and penalties, ties going to the lowest id.
//!
//! ## The fast-path exactness rule
//! A constrained loop may sample *without* the mask first and compute the mask only to check the
//! chosen token, resampling with the mask only when it is rejected (cheap when the model mostly
//! follows the grammar). [`Sampler::fast_path_is_exact`] says when this gives exactly the masked
//! distribution: greedy, or untruncated temperature sampling (top-k off, top-p ≥ 1, min-p ≤ 0),
//! where rejection gives p(t)/p(allowed). With truncation it does not (the truncation set depends
//! on the mask); the caller then masks first. The proof sketch is on the method.
//!
//! ## Edge cases
//! - NaN in an allowed token's logit is an error ([`SampleError::NaN`]); disallowed tokens' logits
//!   are never read. Empty logits: [`SampleError::Empty`]. All masked or -inf:
//!   [`SampleError::NoCandidates`].
//! - A mask shorter than the logits (a model whose logits row is padded past the tokenizer's
//!   vocabulary) disallows the extra tokens; history tokens outside the vocabulary are ignored.
//! - `+inf` logits share all the probability mass equally.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod error;
pub mod logprobs;
mod options;
mod sampler;
pub mod transform;

pub use error::SampleError;
pub use logprobs::{logprobs, Logprobs};
pub use formwork_vocab::{TokenId, TokenMask};
pub use options::SamplerOptions;
pub use sampler::Sampler;
