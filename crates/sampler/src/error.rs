//! [`SampleError`]: everything that can go wrong while building a sampler or drawing a token.

/// Why a [`Sampler`](crate::Sampler) could not be built or could not pick a token.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SampleError {
    /// The logits slice was empty.
    #[error("no logits to sample from: the model returned an empty logits vector (is the vocabulary size 0?)")]
    Empty,
    /// A logit the sampler had to look at was NaN.
    #[error(
        "logit for token {index} is NaN: the model produced invalid output \
         (check the model file, the backend and the context length)"
    )]
    NaN {
        /// The token id (index into the logits) whose logit was NaN.
        index: usize,
    },
    /// Every token was masked out or had a logit of negative infinity.
    #[error(
        "no token can be sampled: every token is disallowed by the mask or has a logit of -inf \
         (the constraint may admit nothing at this point)"
    )]
    NoCandidates,
    /// A [`SamplerOptions`](crate::SamplerOptions) field is out of range; the message says which and why.
    #[error("invalid sampler option: {0}")]
    InvalidOption(String),
}
