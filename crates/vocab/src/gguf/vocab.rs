//! A [`Vocabulary`](crate::Vocabulary) from a GGUF file's tokenizer metadata.

use super::GgufFile;
use crate::decode;
use crate::{TokenId, TokenKind, VocabError};
use std::path::Path;

impl crate::Vocabulary {
    /// Reads the vocabulary from a GGUF file's tokenizer metadata (`tokenizer.ggml.*`).
    ///
    /// - `tokenizer.ggml.model` `gpt2`: byte-level BPE; token strings are mapped back to bytes
    ///   through the GPT-2 byte/character table. `llama`: SentencePiece; `▁` is a space and
    ///   `<0xXX>` tokens are [`TokenKind::Byte`]. Other models are
    ///   [`VocabError::Unsupported`].
    /// - `tokenizer.ggml.token_type`: 1 normal, 2 unknown and 5 unused ([`TokenKind::Unused`]),
    ///   3 control ([`TokenKind::Special`]), 4 user-defined (its text as is), 6 byte.
    /// - EOS: `tokenizer.ggml.eos_token_id`, then `eot_token_id` / `eom_token_id`, then control
    ///   tokens with well-known end-of-turn names (`<|im_end|>`, `<|eot_id|>`, `<|end|>`,
    ///   `<end_of_turn>`, `<|endoftext|>`, ...). BOS and `add_bos_token` are kept too.
    pub fn from_gguf(f: &GgufFile) -> Result<crate::Vocabulary, VocabError> {
        let model = f.tokenizer_model().ok_or_else(|| {
            VocabError::Invalid(format!("{}: no tokenizer.ggml.model in the GGUF metadata", f.path().display()))
        })?;
        let byte_level = match model {
            "gpt2" => true,
            "llama" => false,
            other => {
                return Err(VocabError::Unsupported(format!(
                    "{}: tokenizer.ggml.model is \"{other}\"; formwork reads \"gpt2\" (byte-level BPE) and \"llama\" (SentencePiece) vocabularies",
                    f.path().display()
                )))
            }
        };
        let tokens = f.get_bytes_array("tokenizer.ggml.tokens").ok_or_else(|| {
            VocabError::Invalid(format!("{}: no string array tokenizer.ggml.tokens in the GGUF metadata", f.path().display()))
        })?;
        let types = match f.get("tokenizer.ggml.token_type") {
            None => None,
            Some(_) => {
                let t = f.get_i32_array("tokenizer.ggml.token_type").ok_or_else(|| {
                    VocabError::Invalid(format!("{}: tokenizer.ggml.token_type is not an integer array", f.path().display()))
                })?;
                if t.len() != tokens.len() {
                    return Err(VocabError::Invalid(format!(
                        "{}: {} tokens but {} token types",
                        f.path().display(),
                        tokens.len(),
                        t.len()
                    )));
                }
                Some(t)
            }
        };
        let mut bytes = Vec::with_capacity(tokens.len());
        let mut kinds = Vec::with_capacity(tokens.len());
        for (i, raw) in tokens.iter().enumerate() {
            let text = String::from_utf8_lossy(raw);
            let ty = types.as_ref().map_or(1, |t| t[i]);
            let ty = if types.is_none() && !byte_level && decode::parse_byte_token(&text).is_some() { 6 } else { ty };
            let (b, k) = match ty {
                2 | 5 => (raw.clone(), TokenKind::Unused),
                3 => (raw.clone(), TokenKind::Special),
                4 => (raw.clone(), TokenKind::UserDefined),
                6 => match decode::parse_byte_token(&text) {
                    Some(b) => (vec![b], TokenKind::Byte),
                    None if byte_level => (decode::byte_level_to_bytes(&text), TokenKind::Normal),
                    None => {
                        return Err(VocabError::Invalid(format!(
                            "{}: token {i} {text:?} has type byte but is not spelled <0xXX>",
                            f.path().display()
                        )))
                    }
                },
                _ if byte_level => (decode::byte_level_to_bytes(&text), TokenKind::Normal),
                _ => (decode::sentencepiece_to_bytes(&text), TokenKind::Normal),
            };
            bytes.push(b);
            kinds.push(k);
        }
        let n = bytes.len();
        let mut eos: Vec<TokenId> = Vec::new();
        let push = |t: TokenId, eos: &mut Vec<TokenId>| {
            if t.index() < n && !eos.contains(&t) {
                eos.push(t);
            }
        };
        for key in ["tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"] {
            if let Some(id) = f.get_u32(key) {
                push(TokenId(id), &mut eos);
            }
        }
        for name in decode::END_OF_TURN_NAMES {
            if let Some(i) = (0..n).find(|&i| kinds[i] == TokenKind::Special && bytes[i] == name.as_bytes()) {
                push(TokenId(i as u32), &mut eos);
            }
        }
        let mut v = crate::Vocabulary::new(bytes, kinds, eos)?;
        v.set_bos_token(f.bos_token_id().map(TokenId).filter(|b| b.index() < n))?;
        v.set_add_bos(f.add_bos_token().unwrap_or(!byte_level));
        Ok(v)
    }

    /// Opens a GGUF file and reads its vocabulary ([`Vocabulary::from_gguf`](crate::Vocabulary::from_gguf)).
    pub fn from_gguf_file(path: impl AsRef<Path>) -> Result<crate::Vocabulary, VocabError> {
        Self::from_gguf(&GgufFile::open(path)?)
    }
}
