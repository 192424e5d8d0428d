//! # formwork-model: the seam between the generation loop and a backend
//!
//! What `formwork-engine`'s loop needs from a model, and nothing else, so that a backend
//! (`formwork-llama`) depends on this small crate instead of on the engine with its
//! templates, schemas and sampler:
//! - [`Model`] / [`ModelInfo`] / [`ModelError`]: one sequence — tokenize, decode → logits,
//!   truncate the KV cache, and optionally report the cached tokens for prefix reuse.
//! - [`batch::BatchModel`]: several sequences evaluated in one call (continuous batching);
//!   [`batch::Tokenize`] shares the tokenizer between threads.
//! - [`embed::Embed`]: sentence embeddings (the pooled hidden state of a whole input), which
//!   a model may offer beside generation ([`Model::embedder`], [`batch::BatchModel::embedder`]).
//! - [`logprob::TokenLogprob`]: a generated token's log-probability and its step's most
//!   likely alternatives: what the loop reports and the server puts on the wire (one type on
//!   both sides, here because the server needs it without the engine).
//!
//! The engine re-exports all of these (`formwork_engine::Model`, `formwork_engine::batch::*`).
#![deny(missing_docs)]
#![forbid(unsafe_code)]

/// The token id type of every model (re-exported for crates that need no vocabulary).
pub use formwork_vocab::TokenId;
use formwork_vocab::Vocabulary;
use std::sync::Arc;

/// Static facts about a loaded model.
#[derive(Clone, Debug)]
pub struct ModelInfo {
    /// A display name (file stem or registry name).
    pub name: String,
    /// The Jinja chat template from the model's metadata, if any.
    pub chat_template: Option<String>,
    /// The BOS token's text, for templates that use `bos_token`.
    pub bos_token: Option<String>,
    /// The EOS token's text, for templates that use `eos_token`.
    pub eos_token: Option<String>,
    /// Whether the tokenizer adds BOS to a prompt by itself.
    pub add_bos: bool,
    /// Context length in tokens that this instance was loaded with.
    pub context_length: usize,
    /// Context length the model was trained for.
    pub trained_context_length: usize,
}

/// A backend error. The message says what failed and, where it can, how to fix it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The prompt (plus what is already in the context) does not fit.
    #[error("the prompt is {needed} tokens but the context holds {context}; shorten the prompt or raise the context length (num_ctx / --ctx-size)")]
    ContextOverflow {
        /// Tokens needed.
        needed: usize,
        /// Context length.
        context: usize,
    },
    /// Tokenization failed.
    #[error("tokenization failed: {0}")]
    Tokenize(String),
    /// The backend failed to evaluate a batch.
    #[error("model evaluation failed: {0}")]
    Decode(String),
    /// Loading failed.
    #[error("could not load the model: {0}")]
    Load(String),
}

/// A language model that evaluates tokens and returns next-token logits.
///
/// A model instance holds one sequence (its KV cache). The loop is:
/// `truncate(0)` (or `truncate(n)` to keep a shared prefix), `decode(prompt)`, then `decode(&[t])`
/// per generated token. `decode` returns the raw logits for the position after the last
/// token given, one `f32` per vocabulary entry.
pub trait Model: Send {
    /// Static facts.
    fn info(&self) -> &ModelInfo;
    /// The vocabulary (token id → bytes, kinds, EOS tokens).
    fn vocab(&self) -> &Arc<Vocabulary>;
    /// Tokenizes text. `parse_special`: recognise special-token names (`<|im_start|>`) in
    /// the text, as needed for rendered chat templates.
    fn tokenize(&self, text: &str, add_bos: bool, parse_special: bool) -> Result<Vec<TokenId>, ModelError>;
    /// Number of tokens currently in the sequence.
    fn n_past(&self) -> usize;
    /// Drops everything after the first `n` tokens of the sequence (`0` resets).
    fn truncate(&mut self, n: usize) -> Result<(), ModelError>;
    /// Appends `tokens` to the sequence and returns the logits after the last one.
    fn decode(&mut self, tokens: &[TokenId]) -> Result<&[f32], ModelError>;
    /// The tokens currently in the sequence (`n_past()` of them), if the backend tracks
    /// them. The generation loop uses this for prefix reuse: a new prompt that starts with
    /// cached tokens keeps them and evaluates only the rest. The default (`None`) means
    /// "unknown": every prompt is evaluated from scratch.
    fn cached_tokens(&self) -> Option<&[TokenId]> {
        None
    }
    /// The model's embedding capability, if it has one (see [`embed::Embed`]). Default: none.
    fn embedder(&self) -> Option<Arc<dyn embed::Embed>> {
        None
    }
}

/// Many sequences on one model: the batch seam.
pub mod batch {
    use crate::{ModelError, ModelInfo};
    use formwork_vocab::{TokenId, Vocabulary};
    use std::sync::Arc;

    /// A sequence of a [`BatchModel`]: `0..BatchModel::n_seq()`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub struct SeqId(pub u32);

    impl SeqId {
        /// As an index.
        pub fn index(self) -> usize {
            self.0 as usize
        }
    }

    /// One entry of a batch: `tokens` appended to sequence `seq` at positions `pos..`.
    #[derive(Clone, Copy, Debug)]
    pub struct BatchEntry<'a> {
        /// The sequence.
        pub seq: SeqId,
        /// The position of the first token (the sequence holds exactly `pos` tokens before).
        pub pos: usize,
        /// The tokens (at least one).
        pub tokens: &'a [TokenId],
        /// Whether the logits after the last token are wanted.
        pub logits: bool,
    }

    /// Tokenization, shareable between threads (sessions tokenize while the model decodes).
    pub trait Tokenize: Send + Sync {
        /// Tokenizes `text` (see [`crate::Model::tokenize`]).
        fn tokenize(&self, text: &str, add_bos: bool, parse_special: bool) -> Result<Vec<TokenId>, ModelError>;
    }

    /// A model that holds several sequences and evaluates a batch of them in one call.
    ///
    /// Driven by one thread (the step thread of `formwork_engine::batch::Batcher`); `&mut self`
    /// throughout.
    pub trait BatchModel: Send {
        /// Static facts; `context_length` is the room of **one** sequence.
        fn info(&self) -> &ModelInfo;
        /// The vocabulary.
        fn vocab(&self) -> &Arc<Vocabulary>;
        /// The tokenizer, for use from other threads.
        fn tokenizer(&self) -> Arc<dyn Tokenize>;
        /// How many sequences the model holds.
        fn n_seq(&self) -> usize;
        /// Most tokens one [`decode_batch`](Self::decode_batch) call takes.
        fn max_batch_tokens(&self) -> usize;
        /// Keeps the first `n` positions of `seq` and drops the rest. Returns `false` when the
        /// model cannot drop a suffix (recurrent state); `n == 0` (clear) always works.
        fn seq_keep(&mut self, seq: SeqId, n: usize) -> bool;
        /// Whether the model evaluates a batch in micro-batches holding the same number of
        /// tokens of each sequence (llama.cpp with a KV stream per sequence): then a sequence
        /// with several tokens next to one-token sequences costs a micro-batch of its own, and
        /// the batcher feeds a generating sequence's forced tokens one per step. Default: no.
        fn equal_micro_batches(&self) -> bool {
            false
        }
        /// Whether [`seq_copy`](Self::seq_copy) works (then a new request may start from a
        /// prefix another slot holds). Default: no.
        fn can_copy_seqs(&self) -> bool {
            false
        }
        /// Replaces `dst`'s cache with a copy of `src`'s whole cache (the caller then keeps the
        /// prefix it wants with [`seq_keep`](Self::seq_keep)). `false` when it cannot.
        fn seq_copy(&mut self, src: SeqId, dst: SeqId) -> bool {
            let _ = (src, dst);
            false
        }
        /// Exchanges the caches of `a` and `b`: afterwards `a` holds what `b` held and `b`
        /// what `a` held, exactly (a sequence evaluated further in its new place gives what
        /// it would have given in its old one). The batcher uses it to keep the sequences in
        /// use on the lowest sequence ids, where the model evaluates them together (see
        /// [`contiguous_seqs`](Self::contiguous_seqs)). Costs about what copying the two
        /// caches' used positions costs. `false` when it cannot; then both caches are as they
        /// were.
        fn seq_swap(&mut self, a: SeqId, b: SeqId) -> bool {
            let _ = (a, b);
            false
        }
        /// Whether one evaluation covers only a run of consecutive sequence ids, so that a
        /// batch over ids with gaps between them (`0, 2, 5`) costs an evaluation per run
        /// (llama.cpp with a KV stream per sequence: a step of 8 one-token sequences on every
        /// other id takes 77 ms against 40 on ids 0 to 7). Then the batcher moves sequences
        /// with [`seq_swap`](Self::seq_swap) to close the gaps. Default: no.
        fn contiguous_seqs(&self) -> bool {
            false
        }
        /// Evaluates `entries` (distinct sequences, at most
        /// [`max_batch_tokens`](Self::max_batch_tokens) tokens in all). On error nothing is
        /// promised about the sequences' KV caches beyond their old positions; the caller rolls
        /// them back with [`seq_keep`](Self::seq_keep).
        fn decode_batch(&mut self, entries: &[BatchEntry<'_>]) -> Result<(), ModelError>;
        /// After a successful [`decode_batch`](Self::decode_batch): the logits of the `i`-th
        /// entry (counting only entries with `logits: true`, in order), one `f32` per
        /// vocabulary entry (or more: backends may pad).
        fn logits(&self, i: usize) -> &[f32];
        /// The model's embedding capability, if it has one (see [`crate::embed::Embed`]);
        /// taken once, before the model moves to its step thread. Default: none.
        fn embedder(&self) -> Option<Arc<dyn crate::embed::Embed>> {
            None
        }
    }
}

/// Sentence embeddings: one vector per input text, beside generation.
pub mod embed {
    use crate::ModelError;
    use formwork_vocab::TokenId;

    /// Computes embeddings with a model: each input is evaluated alone and its hidden states
    /// are pooled into one vector (mean, CLS or last token, as the model's metadata says)
    /// and L2-normalized, as Ollama and OpenAI return them.
    ///
    /// Shared between threads (`&self`): an implementation serializes its calls internally
    /// if it must, and never disturbs generation running on the same model (llama.cpp: a
    /// context of its own over the same weights).
    pub trait Embed: Send + Sync {
        /// The length of every vector [`embed`](Self::embed) returns.
        fn dimensions(&self) -> usize;
        /// The most tokens one input may have; the caller truncates or refuses longer ones.
        fn max_tokens(&self) -> usize;
        /// The number of vocabulary entries (token ids given to [`embed`](Self::embed) must
        /// be below it).
        fn vocab_size(&self) -> usize;
        /// Tokenizes an input text as the model's tokenizer does for a whole document
        /// (special tokens it adds by itself included, e.g. BOS, or CLS/SEP).
        fn tokenize(&self, text: &str) -> Result<Vec<TokenId>, ModelError>;
        /// The embedding of `tokens` (one to [`max_tokens`](Self::max_tokens) of them):
        /// [`dimensions`](Self::dimensions) values of unit L2 norm (all zero only if the
        /// model's pooled state was zero).
        fn embed(&self, tokens: &[TokenId]) -> Result<Vec<f32>, ModelError>;
    }

    /// Scales `v` to unit L2 norm (left as is when its norm is zero or not finite).
    pub fn normalize(v: &mut [f32]) {
        let norm = v.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>().sqrt();
        if norm > 0.0 && norm.is_finite() {
            let inv = (1.0 / norm) as f32;
            v.iter_mut().for_each(|x| *x *= inv);
        }
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn normalize_gives_unit_norm_and_keeps_zero() {
            let mut v = [3.0f32, 4.0];
            super::normalize(&mut v);
            assert_eq!(v, [0.6, 0.8]);
            let mut z = [0.0f32; 3];
            super::normalize(&mut z);
            assert_eq!(z, [0.0; 3]);
        }
    }
}

pub mod logprob {
    //! Per-token log-probabilities, as the generation loop reports them (when asked) and the
    //! server writes them in OpenAI's and Ollama's shapes. The numbers' meaning (which
    //! distribution, forced tokens) is the engine's to define: see `formwork_engine`'s
    //! `GenerateOptions::logprobs`.
    use formwork_vocab::TokenId;

    /// One generated token: its log-probability and the most likely tokens of its step.
    #[derive(Clone, Debug, PartialEq)]
    pub struct TokenLogprob {
        /// The token.
        pub token: TokenId,
        /// Its bytes (not always valid UTF-8 on their own: a character may span tokens).
        pub bytes: Vec<u8>,
        /// Natural log of its probability; `0.0` for a token that was the only one allowed.
        pub logprob: f32,
        /// The most likely tokens at this step, best first (as many as were asked for, fewer
        /// when fewer tokens were possible). Tokens that were not allowed never appear.
        pub top: Vec<TopLogprob>,
    }

    /// An alternative at one step.
    #[derive(Clone, Debug, PartialEq)]
    pub struct TopLogprob {
        /// The token.
        pub token: TokenId,
        /// Its bytes.
        pub bytes: Vec<u8>,
        /// Natural log of its probability.
        pub logprob: f32,
    }

    impl TokenLogprob {
        /// The token's text: its bytes as UTF-8, with invalid sequences replaced (U+FFFD).
        pub fn text(&self) -> String {
            String::from_utf8_lossy(&self.bytes).into_owned()
        }
    }

    impl TopLogprob {
        /// The token's text: its bytes as UTF-8, with invalid sequences replaced (U+FFFD).
        pub fn text(&self) -> String {
            String::from_utf8_lossy(&self.bytes).into_owned()
        }
    }
}
