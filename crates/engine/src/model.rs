//! The [`Model`] trait: what the generation loop needs from a backend.

use formwork_vocab::{TokenId, Vocabulary};
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
/// `reset` (or `truncate` to reuse a shared prefix), `decode(prompt)`, then `decode(&[t])`
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
}
