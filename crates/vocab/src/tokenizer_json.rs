//! Reading a HuggingFace `tokenizer.json` into a [`crate::Vocabulary`].
//!
//! Parsed with `serde_json` directly; no tokenizer library is pulled in. What is read:
//! - `model.vocab`: a BPE / WordPiece map `{token: id}` or a Unigram list `[[piece, score], ...]`.
//! - `added_tokens`: `special: true` becomes [`TokenKind::Special`]; other added tokens are
//!   [`TokenKind::UserDefined`] and decode to their `content` as is.
//! - How token strings map to bytes: byte-level (a `ByteLevel` pre-tokenizer or decoder,
//!   GPT-2's byte/character table) or SentencePiece-style (`Metaspace`, or a `Replace` of `▁`
//!   in the decoder or normalizer; `▁` is a space, and with `byte_fallback` the `<0xXX>`
//!   tokens are [`TokenKind::Byte`]). Anything else keeps token strings as UTF-8.
//! - EOS: given by the caller, or found by well-known names (`<|im_end|>`, `<|eot_id|>`,
//!   `<|end|>`, `<end_of_turn>`, `<|endoftext|>`, `</s>`, ...).

use std::path::Path;

use serde_json::Value;

use crate::decode;
use crate::{TokenId, TokenKind, VocabError, Vocabulary};

/// Largest token id accepted (larger ids would make the tables huge on a hostile file).
const MAX_TOKEN_ID: u64 = 1 << 24;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Spelling {
    ByteLevel,
    SentencePiece,
    Plain,
}

/// Does any component (nested through `Sequence`s) of `v` have `type == ty`, or a `Replace`
/// whose pattern is `▁`?
fn mentions(v: &Value, pred: &dyn Fn(&Value) -> bool, depth: u32) -> bool {
    if depth > 16 {
        return false;
    }
    match v {
        Value::Object(o) => {
            pred(v) || o.values().any(|x| matches!(x, Value::Array(_) | Value::Object(_)) && mentions(x, pred, depth + 1))
        }
        Value::Array(a) => a.iter().any(|x| mentions(x, pred, depth + 1)),
        _ => false,
    }
}

fn is_type(v: &Value, ty: &str) -> bool {
    v.get("type").and_then(Value::as_str) == Some(ty)
}

fn replaces_metaspace(v: &Value) -> bool {
    is_type(v, "Replace")
        && (v.pointer("/pattern/String").and_then(Value::as_str) == Some("\u{2581}")
            || v.get("content").and_then(Value::as_str) == Some("\u{2581}"))
}

impl Vocabulary {
    /// Reads a HuggingFace `tokenizer.json` (see the [module docs](crate::tokenizer_json)).
    /// EOS tokens are found by well-known names; use
    /// [`Vocabulary::from_tokenizer_json_with_eos`] to name it.
    pub fn from_tokenizer_json(text: &str) -> Result<Vocabulary, VocabError> {
        Self::from_tokenizer_json_with_eos(text, None)
    }

    /// Reads a HuggingFace `tokenizer.json`; `eos`, when given, is the only EOS token.
    pub fn from_tokenizer_json_with_eos(text: &str, eos: Option<TokenId>) -> Result<Vocabulary, VocabError> {
        let root: Value = serde_json::from_str(text)
            .map_err(|e| VocabError::Invalid(format!("tokenizer.json is not valid JSON: {e}")))?;
        let model = root
            .get("model")
            .ok_or_else(|| VocabError::Invalid("tokenizer.json has no \"model\" object".into()))?;
        let model_type = model.get("type").and_then(Value::as_str).unwrap_or("BPE");
        let byte_fallback = model.get("byte_fallback").and_then(Value::as_bool).unwrap_or(false);
        let null = Value::Null;
        let pre = root.get("pre_tokenizer").unwrap_or(&null);
        let dec = root.get("decoder").unwrap_or(&null);
        let norm = root.get("normalizer").unwrap_or(&null);
        let spelling = if mentions(pre, &|v| is_type(v, "ByteLevel"), 0) || mentions(dec, &|v| is_type(v, "ByteLevel"), 0) {
            Spelling::ByteLevel
        } else if model_type == "Unigram"
            || byte_fallback
            || [pre, dec, norm].iter().any(|c| mentions(c, &|v| is_type(v, "Metaspace") || replaces_metaspace(v), 0))
        {
            Spelling::SentencePiece
        } else {
            Spelling::Plain
        };

        // (id, token string) pairs from the model.
        let mut entries: Vec<(u64, String)> = Vec::new();
        match model.get("vocab") {
            Some(Value::Object(map)) => {
                for (tok, id) in map {
                    let id = id.as_u64().ok_or_else(|| {
                        VocabError::Invalid(format!("tokenizer.json model.vocab[{tok:?}] is not a token id"))
                    })?;
                    entries.push((id, tok.clone()));
                }
            }
            Some(Value::Array(list)) => {
                for (i, item) in list.iter().enumerate() {
                    let piece = item.get(0).and_then(Value::as_str).ok_or_else(|| {
                        VocabError::Invalid(format!("tokenizer.json model.vocab[{i}] is not a [piece, score] pair"))
                    })?;
                    entries.push((i as u64, piece.to_string()));
                }
            }
            _ => {
                return Err(VocabError::Unsupported(format!(
                    "tokenizer.json model of type {model_type:?} has no \"vocab\" map or list"
                )))
            }
        }
        struct Added {
            id: u64,
            content: String,
            special: bool,
        }
        let mut added = Vec::new();
        if let Some(list) = root.get("added_tokens").and_then(Value::as_array) {
            for (i, t) in list.iter().enumerate() {
                let id = t.get("id").and_then(Value::as_u64);
                let content = t.get("content").and_then(Value::as_str);
                let (Some(id), Some(content)) = (id, content) else {
                    return Err(VocabError::Invalid(format!("tokenizer.json added_tokens[{i}] lacks an id or a content")));
                };
                let special = t.get("special").and_then(Value::as_bool).unwrap_or(false);
                added.push(Added { id, content: content.to_string(), special });
            }
        }
        let max_id = entries.iter().map(|e| e.0).chain(added.iter().map(|a| a.id)).max();
        let Some(max_id) = max_id else {
            return Err(VocabError::Invalid("tokenizer.json has no tokens".into()));
        };
        if max_id >= MAX_TOKEN_ID {
            return Err(VocabError::Invalid(format!("tokenizer.json has token id {max_id} (limit {MAX_TOKEN_ID})")));
        }
        let n = max_id as usize + 1;
        let mut bytes: Vec<Vec<u8>> = vec![Vec::new(); n];
        let mut kinds = vec![TokenKind::Unused; n];
        for (id, tok) in &entries {
            let i = *id as usize;
            let (b, k) = match spelling {
                Spelling::ByteLevel => (decode::byte_level_to_bytes(tok), TokenKind::Normal),
                Spelling::SentencePiece => match decode::parse_byte_token(tok) {
                    Some(b) if byte_fallback => (vec![b], TokenKind::Byte),
                    _ => (decode::sentencepiece_to_bytes(tok), TokenKind::Normal),
                },
                Spelling::Plain => (tok.as_bytes().to_vec(), TokenKind::Normal),
            };
            bytes[i] = b;
            kinds[i] = k;
        }
        if let Some(unk) = model.get("unk_token").and_then(Value::as_str) {
            if let Some((id, _)) = entries.iter().find(|e| e.1 == unk) {
                kinds[*id as usize] = TokenKind::Unused;
            }
        }
        if let Some(unk) = model.get("unk_id").and_then(Value::as_u64) {
            if (unk as usize) < n {
                kinds[unk as usize] = TokenKind::Unused;
            }
        }
        for a in &added {
            let i = a.id as usize;
            bytes[i] = a.content.as_bytes().to_vec();
            kinds[i] = if a.special { TokenKind::Special } else { TokenKind::UserDefined };
        }
        let eos = match eos {
            Some(e) => vec![e],
            None => decode::END_OF_TURN_NAMES
                .iter()
                .filter_map(|name| (0..n).find(|&i| kinds[i] == TokenKind::Special && bytes[i] == name.as_bytes()))
                .map(|i| TokenId(i as u32))
                .collect(),
        };
        let mut v = Vocabulary::new(bytes, kinds, eos)?;
        let bos = ["<|begin_of_text|>", "<s>", "<bos>", "<|im_start|>"]
            .iter()
            .find_map(|name| v.special_by_name(name));
        v.set_bos_token(bos)?;
        v.set_add_bos(false);
        Ok(v)
    }

    /// Reads a `tokenizer.json` file; `eos`, when given, is the only EOS token.
    pub fn from_tokenizer_json_file(path: impl AsRef<Path>, eos: Option<TokenId>) -> Result<Vocabulary, VocabError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|source| VocabError::Io { path: path.display().to_string(), source })?;
        Self::from_tokenizer_json_with_eos(&text, eos).map_err(|e| match e {
            VocabError::Invalid(m) => VocabError::Invalid(format!("{}: {m}", path.display())),
            VocabError::Unsupported(m) => VocabError::Unsupported(format!("{}: {m}", path.display())),
            e => e,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_level_bpe_with_added_tokens() {
        let j = r#"{"model":{"type":"BPE","vocab":{"a":0,"Ġthe":1,"Ċ":2,"<|im_end|>":3,"Ã©":4}},
            "added_tokens":[{"id":3,"content":"<|im_end|>","special":true},{"id":5,"content":"<tool>","special":false}],
            "pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Digits"},{"type":"ByteLevel"}]}}"#;
        let v = Vocabulary::from_tokenizer_json(j).unwrap();
        assert_eq!(v.len(), 6);
        assert_eq!(v.token_bytes(TokenId(1)), b" the");
        assert_eq!(v.token_bytes(TokenId(2)), b"\n");
        assert_eq!(v.token_bytes(TokenId(4)), "é".as_bytes());
        assert_eq!(v.kind(TokenId(3)), TokenKind::Special);
        assert_eq!(v.kind(TokenId(5)), TokenKind::UserDefined);
        assert_eq!(v.token_bytes(TokenId(5)), b"<tool>");
        assert_eq!(v.eos_tokens(), &[TokenId(3)]);
        let v = Vocabulary::from_tokenizer_json_with_eos(j, Some(TokenId(0))).unwrap();
        assert_eq!(v.eos_tokens(), &[TokenId(0)]);
        assert!(Vocabulary::from_tokenizer_json_with_eos(j, Some(TokenId(6))).is_err());
    }

    #[test]
    fn sentencepiece_with_byte_fallback_and_gaps() {
        let j = r#"{"model":{"type":"BPE","byte_fallback":true,"unk_token":"<unk>",
            "vocab":{"<unk>":0,"<s>":1,"</s>":2,"<0x0A>":3,"▁the":4,"é":6}},
            "added_tokens":[{"id":1,"content":"<s>","special":true},{"id":2,"content":"</s>","special":true}],
            "decoder":{"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"▁"},"content":" "},{"type":"ByteFallback"}]}}"#;
        let v = Vocabulary::from_tokenizer_json(j).unwrap();
        assert_eq!(v.len(), 7);
        assert_eq!(v.kind(TokenId(0)), TokenKind::Unused);
        assert_eq!((v.kind(TokenId(3)), v.token_bytes(TokenId(3))), (TokenKind::Byte, &b"\n"[..]));
        assert_eq!(v.token_bytes(TokenId(4)), b" the");
        assert_eq!(v.kind(TokenId(5)), TokenKind::Unused, "a gap in the ids");
        assert!(!v.is_text(TokenId(5)));
        assert_eq!(v.token_bytes(TokenId(6)), "é".as_bytes());
        assert_eq!(v.eos_tokens(), &[TokenId(2)]);
        assert_eq!(v.bos_token(), Some(TokenId(1)));
    }

    #[test]
    fn malformed_inputs_are_clear_errors() {
        for (j, want) in [
            ("not json", "not valid JSON"),
            ("{}", "no \"model\""),
            (r#"{"model":{"type":"WordLevel"}}"#, "no \"vocab\""),
            (r#"{"model":{"vocab":{"a":"x"}}}"#, "is not a token id"),
            (r#"{"model":{"vocab":{"a":999999999}}}"#, "limit"),
            (r#"{"model":{"vocab":{}}}"#, "no tokens"),
        ] {
            let e = Vocabulary::from_tokenizer_json(j).unwrap_err().to_string();
            assert!(e.contains(want), "{j}: {e}");
        }
    }
}
