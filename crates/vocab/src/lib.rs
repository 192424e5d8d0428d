//! # formwork-vocab: a model's vocabulary as bytes
//!
//! The bottom of the formwork stack. No I/O beyond reading a file you name, no async,
//! no global state. Everything above (grammar matcher, sampler, engine) speaks in
//! [`TokenId`]s and the byte strings this crate gives them.
//!
//! ## Key types
//! - [`TokenId`]: a newtype over the model's token index.
//! - [`Vocabulary`]: the token byte table (what bytes each token decodes to), each
//!   token's [`TokenKind`], and the end-of-sequence tokens. Special/control tokens carry
//!   their *name* as bytes but are flagged so that grammar text never produces them.
//! - [`TokenMask`] (`mask.rs`): a bitset over the vocabulary, the unit the grammar
//!   matcher produces and the sampler consumes.
//! - [`TokenTrie`] (`trie.rs`): the tokens' byte strings in a trie laid out for the
//!   mask computation's depth-first walk.
//!
//! ## Where vocabularies come from
//! - [`gguf`]: a small pure-Rust GGUF reader (metadata only; tensors are skipped) and
//!   [`Vocabulary::from_gguf`] for gpt2-style byte-level BPE and SentencePiece
//!   (`▁`, `<0xXX>` byte fallback) vocabularies.
//! - [`tokenizer_json`]: [`Vocabulary::from_tokenizer_json`] for a HuggingFace
//!   `tokenizer.json`, parsed directly (no tokenizer library is pulled in).
//!
//! ## The loop a user writes
//! ```ignore
//! let vocab = Vocabulary::from_tokenizer_json(&std::fs::read_to_string(path)?)?;
//! let mut mask = TokenMask::new(vocab.len());
//! // ... a matcher fills `mask`; the sampler reads it ...
//! assert!(mask.len() == vocab.len());
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod decode;
pub mod gguf;
mod mask;
pub mod tokenizer_json;
mod trie;
mod vocabulary;

pub use mask::TokenMask;
pub use trie::{Node, TokenTrie};
pub use vocabulary::{TokenKind, Vocabulary, VocabError};

/// A token's index in the model's vocabulary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct TokenId(pub u32);

impl TokenId {
    /// The id as a `usize` index into per-token tables.
    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl std::fmt::Display for TokenId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}
