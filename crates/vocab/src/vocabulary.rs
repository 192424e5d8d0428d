//! [`Vocabulary`]: the token byte table, token kinds and end-of-sequence tokens.

use crate::TokenId;

/// What a token is, as far as constrained decoding cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TokenKind {
    /// Ordinary text: its bytes are produced by grammar text.
    Normal,
    /// A SentencePiece byte-fallback token `<0xXX>`: decodes to the single byte XX.
    Byte,
    /// A control/special token (`<|im_end|>`, `<s>`, ...): never produced by grammar
    /// text; allowed only as EOS when the grammar accepts, or where a grammar names it.
    Special,
    /// A user-defined added token that decodes to its text like a normal token.
    UserDefined,
    /// An unused or unknown slot: never allowed.
    Unused,
}

/// Errors while building or reading a vocabulary.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VocabError {
    /// The input is not in the expected format; the message says what was wrong and where.
    #[error("invalid vocabulary: {0}")]
    Invalid(String),
    /// The tokenizer uses a model or decoder this crate does not understand.
    #[error("unsupported tokenizer: {0}")]
    Unsupported(String),
    /// The GGUF file could not be read.
    #[error(transparent)]
    Gguf(#[from] crate::gguf::GgufError),
    /// An I/O error reading a file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
}

/// A model's vocabulary as byte strings.
///
/// Invariants: `bytes.len() == kinds.len()`; every EOS id is `< len()`. Special tokens'
/// byte strings are their textual names (for display and for grammars that name them).
#[derive(Clone, Debug)]
pub struct Vocabulary {
    /// Indexed by `TokenId`: the bytes the token decodes to.
    bytes: Vec<Vec<u8>>,
    /// Indexed by `TokenId`.
    kinds: Vec<TokenKind>,
    /// Tokens that end generation (EOS, end-of-turn), in order of preference.
    eos: Vec<TokenId>,
    /// The beginning-of-sequence token, when the tokenizer has one.
    bos: Option<TokenId>,
    /// Whether the model expects BOS prepended to the prompt.
    add_bos: bool,
}

impl Vocabulary {
    /// Builds a vocabulary from per-token bytes and kinds and the EOS tokens.
    pub fn new(bytes: Vec<Vec<u8>>, kinds: Vec<TokenKind>, eos: Vec<TokenId>) -> Result<Self, VocabError> {
        if bytes.len() != kinds.len() {
            return Err(VocabError::Invalid(format!(
                "{} token strings but {} token kinds",
                bytes.len(),
                kinds.len()
            )));
        }
        if bytes.len() > u32::MAX as usize {
            return Err(VocabError::Invalid("more than 2^32 tokens".into()));
        }
        if let Some(e) = eos.iter().find(|e| e.index() >= bytes.len()) {
            return Err(VocabError::Invalid(format!("EOS token {e} outside a vocabulary of {}", bytes.len())));
        }
        Ok(Vocabulary { bytes, kinds, eos, bos: None, add_bos: false })
    }

    /// A vocabulary of plain text tokens (all [`TokenKind::Normal`]) plus the given EOS
    /// tokens appended as [`TokenKind::Special`] at the end. For tests and tiny vocabularies.
    pub fn from_strings<S: AsRef<[u8]>>(tokens: &[S], eos_names: &[&str]) -> Self {
        let mut bytes: Vec<Vec<u8>> = tokens.iter().map(|t| t.as_ref().to_vec()).collect();
        let mut kinds = vec![TokenKind::Normal; bytes.len()];
        let mut eos = Vec::new();
        for name in eos_names {
            eos.push(TokenId(bytes.len() as u32));
            bytes.push(name.as_bytes().to_vec());
            kinds.push(TokenKind::Special);
        }
        Vocabulary { bytes, kinds, eos, bos: None, add_bos: false }
    }

    /// Number of tokens.
    #[inline]
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// True when there are no tokens.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The bytes `t` decodes to (a special token's name for special tokens).
    #[inline]
    pub fn token_bytes(&self, t: TokenId) -> &[u8] {
        &self.bytes[t.index()]
    }

    /// The kind of `t`.
    #[inline]
    pub fn kind(&self, t: TokenId) -> TokenKind {
        self.kinds[t.index()]
    }

    /// True when grammar text may produce `t` (normal, byte and user-defined tokens with
    /// at least one byte).
    #[inline]
    pub fn is_text(&self, t: TokenId) -> bool {
        matches!(self.kinds[t.index()], TokenKind::Normal | TokenKind::Byte | TokenKind::UserDefined)
            && !self.bytes[t.index()].is_empty()
    }

    /// The end-of-sequence tokens.
    pub fn eos_tokens(&self) -> &[TokenId] {
        &self.eos
    }

    /// Replaces the end-of-sequence tokens.
    pub fn set_eos_tokens(&mut self, eos: Vec<TokenId>) -> Result<(), VocabError> {
        if let Some(e) = eos.iter().find(|e| e.index() >= self.len()) {
            return Err(VocabError::Invalid(format!("EOS token {e} outside a vocabulary of {}", self.len())));
        }
        self.eos = eos;
        Ok(())
    }

    /// The preferred end-of-sequence token (the first of [`Vocabulary::eos_tokens`]).
    pub fn eos_token(&self) -> Option<TokenId> {
        self.eos.first().copied()
    }

    /// The beginning-of-sequence token, when known.
    pub fn bos_token(&self) -> Option<TokenId> {
        self.bos
    }

    /// Sets the beginning-of-sequence token.
    pub fn set_bos_token(&mut self, bos: Option<TokenId>) -> Result<(), VocabError> {
        if let Some(b) = bos.filter(|b| b.index() >= self.len()) {
            return Err(VocabError::Invalid(format!("BOS token {b} outside a vocabulary of {}", self.len())));
        }
        self.bos = bos;
        Ok(())
    }

    /// Whether the prompt should start with the BOS token (`tokenizer.ggml.add_bos_token`).
    pub fn add_bos(&self) -> bool {
        self.add_bos
    }

    /// Sets whether the prompt should start with the BOS token.
    pub fn set_add_bos(&mut self, add_bos: bool) {
        self.add_bos = add_bos;
    }

    /// The token's bytes as text (lossy for tokens that are not whole UTF-8 sequences), for
    /// display and for prompts: `<|im_end|>` for a special token, `" the"` for a text token.
    pub fn token_text(&self, t: TokenId) -> String {
        String::from_utf8_lossy(self.token_bytes(t)).into_owned()
    }

    /// Finds a text (non-special) token whose bytes are exactly `bytes`.
    pub fn text_token_by_bytes(&self, bytes: &[u8]) -> Option<TokenId> {
        self.ids().find(|&t| self.is_text(t) && self.token_bytes(t) == bytes)
    }

    /// Finds a special token by its name (`<|im_end|>`).
    pub fn special_by_name(&self, name: &str) -> Option<TokenId> {
        (0..self.len())
            .map(|i| TokenId(i as u32))
            .find(|&t| self.kind(t) == TokenKind::Special && self.token_bytes(t) == name.as_bytes())
    }

    /// All tokens, in id order.
    pub fn ids(&self) -> impl Iterator<Item = TokenId> {
        (0..self.len() as u32).map(TokenId)
    }

    /// A stable 64-bit fingerprint of the vocabulary (bytes, kinds, EOS), for cache keys.
    pub fn fingerprint(&self) -> u64 {
        // FNV-1a: stable across runs and platforms, unlike `DefaultHasher`.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |b: u8| {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        };
        for (b, k) in self.bytes.iter().zip(&self.kinds) {
            for &x in (b.len() as u32).to_le_bytes().iter().chain(b) {
                eat(x);
            }
            eat(*k as u8);
        }
        for e in &self.eos {
            for x in e.0.to_le_bytes() {
                eat(x);
            }
        }
        h
    }

    /// Heap bytes used.
    pub fn memory_usage(&self) -> usize {
        self.bytes.iter().map(|b| b.capacity() + 24).sum::<usize>() + self.kinds.capacity() + self.eos.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_vocabulary() {
        let v = Vocabulary::from_strings(&["a", "b", "ab"], &["</s>"]);
        assert_eq!(v.len(), 4);
        assert_eq!(v.eos_tokens(), &[TokenId(3)]);
        assert!(v.is_text(TokenId(2)) && !v.is_text(TokenId(3)));
        assert_eq!(v.special_by_name("</s>"), Some(TokenId(3)));
        assert_ne!(v.fingerprint(), Vocabulary::from_strings(&["a", "b", "ba"], &["</s>"]).fingerprint());
    }

    #[test]
    fn rejects_mismatched_tables() {
        assert!(Vocabulary::new(vec![b"a".to_vec()], vec![], vec![]).is_err());
        assert!(Vocabulary::new(vec![b"a".to_vec()], vec![TokenKind::Normal], vec![TokenId(1)]).is_err());
    }
}
