//! Per-token log-probabilities ([`GenerateOptions::logprobs`](super::GenerateOptions::logprobs)).
//!
//! **What is reported.** For each generated text token (end-of-turn and other special tokens
//! are not reported), `log p(token)` and the `top` most likely tokens, under the
//! distribution the token was drawn from **after the constraint's mask**: the model's softmax
//! restricted to the allowed tokens ([`formwork_sampler::logprobs()`]). Masked-out tokens
//! have probability 0 and never appear among the alternatives; the allowed tokens'
//! probabilities sum to 1. Temperature, top-k/top-p/min-p and the repeat penalties are not
//! applied (the model's distribution, as OpenAI and Ollama report it; so greedy decoding
//! still gives informative numbers).
//!
//! - **Forced tokens** (the constraint's forced text, appended without sampling, and tokens
//!   the budget forces from the completion plan): only one token was possible, so their
//!   logprob is `0` and their only alternative is themselves.
//! - After the budget refused a token and sampled again, the mask in force excluded the
//!   refused tokens: they are reported with probability 0, like masked ones.
//!
//! **Cost.** Off (the default), nothing here runs. On: per sampled token one O(vocabulary)
//! log-sum-exp and a top-`top` pass; under a constraint also the full mask at each step,
//! which the fast path (sample first, check one token) otherwise skips: about one mask
//! computation per token more.

use std::sync::{Arc, Mutex};

use formwork_model::logprob::{TokenLogprob, TopLogprob};
use formwork_sampler::transform::Candidate;
use formwork_vocab::{TokenId, TokenMask, Vocabulary};

use super::EngineError;

/// Asks [`generate`](super::generate) for per-token log-probabilities.
#[derive(Clone, Debug, Default)]
pub struct LogprobOptions {
    /// How many of the most likely tokens to report beside each chosen one (`0`: none).
    pub top: usize,
    /// Where each entry also goes as soon as its token is chosen, before the token's text
    /// reaches the text callback: a streaming caller takes them in its callback.
    pub sink: Option<LogprobSink>,
}

/// A shared queue of [`TokenLogprob`]s: the loop pushes, a streaming caller
/// [`take`](LogprobSink::take)s. Cloning shares the queue.
#[derive(Clone, Debug, Default)]
pub struct LogprobSink(Arc<Mutex<Vec<TokenLogprob>>>);

impl LogprobSink {
    /// An empty sink.
    pub fn new() -> Self {
        Self::default()
    }

    /// Everything pushed since the last call, in order.
    pub fn take(&self) -> Vec<TokenLogprob> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn push(&self, e: TokenLogprob) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(e);
    }
}

/// The loop's side of it: computes and keeps the entries.
pub(super) struct Recorder {
    top: usize,
    sink: Option<LogprobSink>,
    scratch: Vec<Candidate>,
    pub entries: Vec<TokenLogprob>,
}

impl Recorder {
    pub fn new(o: &LogprobOptions) -> Self {
        Recorder { top: o.top, sink: o.sink.clone(), scratch: Vec::new(), entries: Vec::new() }
    }

    /// A token that was the only one possible: logprob 0.
    pub fn forced(&mut self, t: TokenId, vocab: &Vocabulary) {
        let bytes = vocab.token_bytes(t).to_vec();
        let top = if self.top > 0 { vec![TopLogprob { token: t, bytes: bytes.clone(), logprob: 0.0 }] } else { Vec::new() };
        self.record(TokenLogprob { token: t, bytes, logprob: 0.0, top });
    }

    /// A sampled token, under `logits` restricted to `mask`.
    pub fn sampled(&mut self, t: TokenId, logits: &[f32], mask: Option<&TokenMask>, vocab: &Vocabulary) -> Result<(), EngineError> {
        let lp = formwork_sampler::logprobs(logits, mask, t, self.top, &mut self.scratch)
            .map_err(|e| EngineError::Sampler(e.to_string()))?;
        let top = lp
            .top
            .iter()
            .map(|&(id, l)| TopLogprob { token: id, bytes: vocab.token_bytes(id).to_vec(), logprob: l })
            .collect();
        // A token that could not have been drawn (never, short of a bug) reads as OpenAI's floor.
        let logprob = if lp.chosen.is_finite() { lp.chosen } else { -9999.0 };
        self.record(TokenLogprob { token: t, bytes: vocab.token_bytes(t).to_vec(), logprob, top });
        Ok(())
    }

    fn record(&mut self, e: TokenLogprob) {
        if let Some(s) = &self.sink {
            s.push(e.clone());
        }
        self.entries.push(e);
    }
}
