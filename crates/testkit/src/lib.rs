//! # formwork-testkit: vocabularies and tokenizers for tests (publish = false)
//!
//! Only a dev-dependency of the other crates. What it gives:
//! - [`tiny_vocab`]: a hand-made vocabulary of 34 tokens, laid out in [`TINY_TOKENS`]: single
//!   JSON characters, multi-byte tokens that cross grammar boundaries (`":`, `",`, `{"`, `"}`),
//!   whole keywords, a two-byte UTF-8 character and its two halves, a non-EOS special token
//!   and the EOS special `</s>` — so tests need neither network nor big files.
//! - [`byte_vocab`]: 256 single-byte tokens (token `b` is byte `b`) plus the EOS `</s>` (256).
//! - [`greedy_tokenize`]: longest-match tokenization over any vocabulary's text tokens.
//! - The shared real tokenizers ([`shared_data_dir`], [`smollm2_vocab`], [`llama3_vocab`],
//!   [`shared_vocab`] by name) and real HuggingFace tokenization of text ([`tokenize`],
//!   [`SharedTokenizer::tokenize`]) through the `tokenizers` crate (pure Rust: fancy-regex).
//!
//! - [`Rng`]: a small seeded generator (xorshift64*) for randomized tests that must
//!   reproduce from their seed.
//!
//! The fake `Model` lives in the engine crate, not here.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use formwork_vocab::{TokenId, TokenKind, Vocabulary};

/// The tiny vocabulary's tokens, in id order (token `i` is `TINY_TOKENS[i]`). The last two are
/// special: [`TINY_SPECIAL`] (not EOS) and [`TINY_EOS`] (`</s>`).
pub const TINY_TOKENS: &[&[u8]] = &[
    b"{", b"}", b"[", b"]", b"\"", b":", b",", b" ", b"\n", // 0..=8
    b"a", b"b", b"c", b"e", b"0", b"1", b"2", b"-", b".", // 9..=17
    b"\":", b"\",", b"{\"", b"\"}", b"ab", b" \"", // 18..=23: boundary-crossing / multi-char
    b"true", b"false", b"null", // 24..=26
    "é".as_bytes(), b"\xC3", b"\xA9", // 27..=29: a 2-byte character and its halves
    b"12", b"\\", // 30, 31
    b"<|im_start|>", b"</s>", // 32 special, 33 EOS
];

/// The id of the tiny vocabulary's non-EOS special token `<|im_start|>`.
pub const TINY_SPECIAL: TokenId = TokenId(32);
/// The id of the tiny vocabulary's EOS token `</s>`.
pub const TINY_EOS: TokenId = TokenId(33);
/// The id of the byte vocabulary's EOS token `</s>`.
pub const BYTE_EOS: TokenId = TokenId(256);

/// The hand-made vocabulary of [`TINY_TOKENS`] (34 tokens, EOS [`TINY_EOS`]).
pub fn tiny_vocab() -> Vocabulary {
    let n = TINY_TOKENS.len();
    let bytes: Vec<Vec<u8>> = TINY_TOKENS.iter().map(|t| t.to_vec()).collect();
    let mut kinds = vec![TokenKind::Normal; n];
    kinds[TINY_SPECIAL.index()] = TokenKind::Special;
    kinds[TINY_EOS.index()] = TokenKind::Special;
    Vocabulary::new(bytes, kinds, vec![TINY_EOS]).expect("the tiny vocabulary is well-formed")
}

/// 256 single-byte tokens (token `b` is byte `b`) and the EOS `</s>` ([`BYTE_EOS`]).
pub fn byte_vocab() -> Vocabulary {
    let bytes: Vec<Vec<u8>> = (0u8..=255).map(|b| vec![b]).collect();
    Vocabulary::from_strings(&bytes, &["</s>"])
}

/// Longest-match tokenization of `text` over `vocab`'s text tokens (not the model's real
/// tokenization: see [`tokenize`] for that). `None` when some byte is covered by no token.
pub fn greedy_tokenize(vocab: &Vocabulary, text: &[u8]) -> Option<Vec<TokenId>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < text.len() {
        let best = vocab
            .ids()
            .filter(|&t| vocab.is_text(t) && text[i..].starts_with(vocab.token_bytes(t)))
            .max_by_key(|&t| (vocab.token_bytes(t).len(), std::cmp::Reverse(t)))?;
        out.push(best);
        i += vocab.token_bytes(best).len();
    }
    Some(out)
}

/// The shared read-only test data (`../shared/data` beside the repository). Panics with a
/// clear message when it is missing.
pub fn shared_data_dir() -> PathBuf {
    let d = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/data"));
    assert!(
        d.is_dir(),
        "the shared test data is missing: expected it at {} (a sibling `shared/data` of the repository; the CI has it there)",
        d.display()
    );
    d
}

/// The HuggingFace tokenizer type of the `tokenizers` crate.
pub type HfTokenizer = tokenizers::pipeline::PipelineTokenizer;

/// One of the real tokenizers in `shared/data/tokenizers`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SharedTokenizer {
    /// SmolLM2 (byte-level BPE, 49,152 tokens, EOS 2 `<|im_end|>`).
    Smollm2,
    /// Llama 3.1 (byte-level BPE, 128,256 tokens, EOS 128009 `<|eot_id|>`).
    Llama3,
}

impl SharedTokenizer {
    /// By name: `smollm2` or `llama3` (also `llama3_1`, `llama3.1`).
    pub fn from_name(name: &str) -> Option<SharedTokenizer> {
        match name.to_ascii_lowercase().as_str() {
            "smollm2" | "smollm2.json" => Some(SharedTokenizer::Smollm2),
            "llama3" | "llama3_1" | "llama3.1" | "llama3_1.json" => Some(SharedTokenizer::Llama3),
            _ => None,
        }
    }

    /// The `tokenizer.json` file.
    pub fn path(self) -> PathBuf {
        let file = match self {
            SharedTokenizer::Smollm2 => "smollm2.json",
            SharedTokenizer::Llama3 => "llama3_1.json",
        };
        shared_data_dir().join("tokenizers").join(file)
    }

    /// The model's end-of-sequence token.
    pub fn eos(self) -> TokenId {
        match self {
            SharedTokenizer::Smollm2 => TokenId(2),
            SharedTokenizer::Llama3 => TokenId(128_009),
        }
    }

    /// The vocabulary (loaded once per process), with EOS found by name (the first is
    /// [`SharedTokenizer::eos`]).
    pub fn vocab(self) -> Arc<Vocabulary> {
        static CELLS: [OnceLock<Arc<Vocabulary>>; 2] = [OnceLock::new(), OnceLock::new()];
        CELLS[self as usize]
            .get_or_init(|| {
                let v = Vocabulary::from_tokenizer_json_file(self.path(), None)
                    .unwrap_or_else(|e| panic!("loading {}: {e}", self.path().display()));
                assert_eq!(v.eos_token(), Some(self.eos()));
                Arc::new(v)
            })
            .clone()
    }

    /// The HuggingFace tokenizer (loaded once per process).
    pub fn hf_tokenizer(self) -> &'static HfTokenizer {
        static CELLS: [OnceLock<HfTokenizer>; 2] = [OnceLock::new(), OnceLock::new()];
        CELLS[self as usize].get_or_init(|| {
            // The files are in the classic (version 1.0) format; this tokenizers release reads
            // its canonical 2.0 form, so convert first.
            let json = tokenizers::canonicalize_file(self.path())
                .unwrap_or_else(|e| panic!("converting {} for the tokenizers crate: {e}", self.path().display()));
            let json = fill_byte_alphabet(&json, self.vocab().len());
            tokenizers::from_json(&json)
                .unwrap_or_else(|e| panic!("loading {} with the tokenizers crate: {e}", self.path().display()))
        })
    }

    /// The model's real tokenization of `text`, without special tokens (as MaskBench does).
    ///
    /// Panics on text containing a byte the vocabulary has no token for (SmolLM2 lacks the
    /// control bytes 0x04, 0x06, 0x13, 0x14, 0x16, 0x1D and the bytes 0xF1, 0xF2).
    pub fn tokenize(self, text: &str) -> Vec<TokenId> {
        let n = self.vocab().len();
        let options = tokenizers::pipeline::EncodeOptions { add_special_tokens: false, ..Default::default() };
        let mut encs = self
            .hf_tokenizer()
            .encode(text, &options)
            .wait()
            .unwrap_or_else(|e| panic!("tokenizing {text:?}: {e}"));
        assert_eq!(encs.len(), 1);
        encs.remove(0)
            .ids()
            .iter()
            .map(|t| {
                let id = TokenId(t.id());
                assert!(id.index() < n, "{text:?} contains a byte that {self:?} has no token for");
                id
            })
            .collect()
    }
}

/// This `tokenizers` release refuses a byte-level vocabulary that lacks a single-byte token for
/// some byte (SmolLM2 lacks eight). Give each missing byte a placeholder id past the end of the
/// vocabulary (`vocab_len..`), which [`SharedTokenizer::tokenize`] refuses if it ever comes out.
fn fill_byte_alphabet(canonical: &str, vocab_len: usize) -> String {
    fn byte_char(b: u8) -> char {
        let printable = |x: u8| matches!(x, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        if printable(b) {
            return b as char;
        }
        let n = (0..b).filter(|&x| !printable(x)).count() as u32;
        char::from_u32(256 + n).expect("U+0100.. are chars")
    }
    let mut v: serde_json::Value = serde_json::from_str(canonical).expect("canonical tokenizer.json is JSON");
    let byte_level = v.pointer("/model/byte_level").and_then(serde_json::Value::as_bool) == Some(true);
    if let (true, Some(vocab)) = (byte_level, v.pointer_mut("/model/vocab").and_then(|x| x.as_object_mut())) {
        let mut next = vocab_len;
        for b in 0u8..=255 {
            let c = byte_char(b).to_string();
            if !vocab.contains_key(&c) {
                vocab.insert(c, serde_json::Value::from(next));
                next += 1;
            }
        }
    }
    v.to_string()
}

/// The SmolLM2 vocabulary (49,152 tokens; EOS 2).
pub fn smollm2_vocab() -> Arc<Vocabulary> {
    SharedTokenizer::Smollm2.vocab()
}

/// The Llama 3.1 vocabulary (128,256 tokens; EOS 128009).
pub fn llama3_vocab() -> Arc<Vocabulary> {
    SharedTokenizer::Llama3.vocab()
}

/// A shared vocabulary by name (`smollm2`, `llama3`). Panics on an unknown name.
pub fn shared_vocab(name: &str) -> Arc<Vocabulary> {
    SharedTokenizer::from_name(name)
        .unwrap_or_else(|| panic!("unknown shared tokenizer {name:?}: use smollm2 or llama3"))
        .vocab()
}

/// SmolLM2's real tokenization of `text` (no special tokens).
pub fn tokenize(text: &str) -> Vec<TokenId> {
    SharedTokenizer::Smollm2.tokenize(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_vocabulary_layout() {
        let v = tiny_vocab();
        assert_eq!(v.len(), TINY_TOKENS.len());
        assert_eq!(v.eos_tokens(), &[TINY_EOS]);
        assert!(!v.is_text(TINY_SPECIAL) && !v.is_text(TINY_EOS));
        assert_eq!(v.token_bytes(TokenId(18)), b"\":");
        let toks = greedy_tokenize(&v, b"{\"a\":true,\"b\":null}").unwrap();
        let text: Vec<u8> = toks.iter().flat_map(|&t| v.token_bytes(t).to_vec()).collect();
        assert_eq!(text, b"{\"a\":true,\"b\":null}");
        assert_eq!(toks[0], TokenId(20), "{{\" is one token");
        assert_eq!(greedy_tokenize(&v, "é".as_bytes()), Some(vec![TokenId(27)]));
        assert_eq!(greedy_tokenize(&v, b"z"), None);
    }

    #[test]
    fn byte_vocabulary() {
        let v = byte_vocab();
        assert_eq!(v.len(), 257);
        assert_eq!(v.token_bytes(TokenId(b'x' as u32)), b"x");
        assert_eq!(v.eos_tokens(), &[BYTE_EOS]);
        assert_eq!(greedy_tokenize(&v, b"hi").unwrap(), vec![TokenId(104), TokenId(105)]);
    }
}

/// A small deterministic generator (xorshift64*): enough randomness for drawing test
/// inputs, reproducible from its seed (which must not be 0).
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// One of `xs` (not empty).
    pub fn pick<T: Clone>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize].clone()
    }
}
