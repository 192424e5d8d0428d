//! [`TokenTrie`]: the vocabulary's byte strings in a trie for the mask walk.

/// The vocabulary's text tokens in a byte trie (filled in by the matcher work).
#[derive(Clone, Debug, Default)]
pub struct TokenTrie {}
