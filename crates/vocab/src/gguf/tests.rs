//! Tests of the GGUF reader, with GGUF headers built in memory.

use super::*;

/// Builds a GGUF header in memory.
pub(crate) struct Builder {
    pub buf: Vec<u8>,
    count: u64,
}

impl Builder {
    pub fn new(version: u32) -> Self {
        let mut buf = b"GGUF".to_vec();
        buf.extend(version.to_le_bytes());
        buf.extend(7u64.to_le_bytes()); // tensors
        buf.extend(0u64.to_le_bytes()); // kv count, patched in finish
        Builder { buf, count: 0 }
    }
    fn key(&mut self, k: &str, ty: u32) {
        self.count += 1;
        self.str_raw(k.as_bytes());
        self.buf.extend(ty.to_le_bytes());
    }
    fn str_raw(&mut self, s: &[u8]) {
        self.buf.extend((s.len() as u64).to_le_bytes());
        self.buf.extend(s);
    }
    pub fn string(mut self, k: &str, v: &str) -> Self {
        self.key(k, 8);
        self.str_raw(v.as_bytes());
        self
    }
    pub fn u32(mut self, k: &str, v: u32) -> Self {
        self.key(k, 4);
        self.buf.extend(v.to_le_bytes());
        self
    }
    pub fn bool(mut self, k: &str, v: bool) -> Self {
        self.key(k, 7);
        self.buf.push(v as u8);
        self
    }
    pub fn str_array(mut self, k: &str, v: &[&str]) -> Self {
        self.key(k, 9);
        self.buf.extend(8u32.to_le_bytes());
        self.buf.extend((v.len() as u64).to_le_bytes());
        for s in v {
            self.str_raw(s.as_bytes());
        }
        self
    }
    pub fn i32_array(mut self, k: &str, v: &[i32]) -> Self {
        self.key(k, 9);
        self.buf.extend(5u32.to_le_bytes());
        self.buf.extend((v.len() as u64).to_le_bytes());
        for x in v {
            self.buf.extend(x.to_le_bytes());
        }
        self
    }
    pub fn raw(mut self, k: &str, ty: u32, bytes: &[u8]) -> Self {
        self.key(k, ty);
        self.buf.extend(bytes);
        self
    }
    pub fn finish(mut self) -> Vec<u8> {
        self.buf[16..24].copy_from_slice(&self.count.to_le_bytes());
        self.buf
    }
    pub fn parse(self) -> Result<GgufFile, GgufError> {
        let b = self.finish();
        GgufFile::from_reader(&b[..], "mem.gguf", &GgufLimits::default())
    }
}

#[test]
fn details_name_family_size_and_quantization() {
    let f = Builder::new(3).string("general.architecture", "qwen2").string("general.size_label", "500M").u32("general.file_type", 15).parse().unwrap();
    assert_eq!(f.details(), ModelDetails { family: "qwen2".into(), parameter_size: "500M".into(), quantization_level: "Q4_K_M".into() });
    let f = Builder::new(3).u32("general.file_type", 999).parse().unwrap();
    assert_eq!(f.details(), ModelDetails { quantization_level: "unknown".into(), ..Default::default() });
    assert_eq!(Builder::new(3).parse().unwrap().details(), ModelDetails::default());
}

#[test]
fn every_value_type_and_accessors() {
    let f = Builder::new(3)
        .string("general.architecture", "llama")
        .u32("llama.context_length", 8192)
        .raw("u8", 0, &[200])
        .raw("i8", 1, &[0xff])
        .raw("u16", 2, &500u16.to_le_bytes())
        .raw("i16", 3, &(-3i16).to_le_bytes())
        .raw("i32", 5, &(-7i32).to_le_bytes())
        .raw("f32", 6, &1.5f32.to_le_bytes())
        .bool("flag", true)
        .raw("u64", 10, &(1u64 << 40).to_le_bytes())
        .raw("i64", 11, &(-9i64).to_le_bytes())
        .raw("f64", 12, &2.25f64.to_le_bytes())
        .str_array("strs", &["a", "βγ", ""])
        .i32_array("ints", &[1, -2, 3])
        .string("tokenizer.chat_template", "{{ x }}")
        .parse()
        .unwrap();
    assert_eq!(f.version(), 3);
    assert_eq!(f.tensor_count(), 7);
    assert_eq!(f.architecture(), Some("llama"));
    assert_eq!(f.context_length(), Some(8192));
    assert_eq!(f.chat_template(), Some("{{ x }}"));
    assert_eq!(f.get_u32("u8"), Some(200));
    assert_eq!(f.get_u32("i8"), None, "-1 does not fit in u32");
    assert_eq!(f.get_i64("i8"), Some(-1));
    assert_eq!(f.get_u64("u16"), Some(500));
    assert_eq!(f.get_i64("i16"), Some(-3));
    assert_eq!(f.get_i64("i32"), Some(-7));
    assert_eq!(f.get_f32("f32"), Some(1.5));
    assert_eq!(f.get_f32("f64"), Some(2.25));
    assert_eq!(f.get_bool("flag"), Some(true));
    assert_eq!(f.get_u32("u64"), None);
    assert_eq!(f.get_u64("u64"), Some(1 << 40));
    assert_eq!(f.get_i64("i64"), Some(-9));
    assert_eq!(f.get_str_array("strs"), Some(vec!["a", "βγ", ""]));
    assert_eq!(f.get_i32_array("ints"), Some(vec![1, -2, 3]));
    assert_eq!(f.get_u32_array("ints"), None);
    assert_eq!(f.get_i64_array("ints"), Some(vec![1, -2, 3]));
    assert_eq!(f.get_str("llama.context_length"), None, "wrong type is None");
    assert_eq!(f.get("missing"), None);
}

#[test]
fn nested_arrays_and_version_2() {
    let mut inner = Vec::new();
    inner.extend(9u32.to_le_bytes()); // array of arrays
    inner.extend(2u64.to_le_bytes());
    for n in [1u64, 2] {
        inner.extend(4u32.to_le_bytes());
        inner.extend(n.to_le_bytes());
        for i in 0..n as u32 {
            inner.extend(i.to_le_bytes());
        }
    }
    let f = Builder::new(2).raw("nested", 9, &inner).parse().unwrap();
    assert_eq!(f.version(), 2);
    assert_eq!(
        f.get_array("nested"),
        Some(&GgufArray::Array(vec![GgufArray::U32(vec![0]), GgufArray::U32(vec![0, 1])]))
    );
}

#[test]
fn bad_magic_version_and_truncation() {
    let e = GgufFile::from_reader(&b"{\"model\": 1}"[..], "x.json", &GgufLimits::default()).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, GgufError::BadMagic { .. }));
    assert!(msg.contains("x.json is not a GGUF file (it starts with \"{\\\"mo\")"), "{msg}");
    let e = GgufFile::from_reader(&b""[..], "empty", &GgufLimits::default()).unwrap_err();
    assert!(e.to_string().contains("the file is empty"), "{e}");

    let e = Builder::new(1).parse().unwrap_err();
    assert!(matches!(e, GgufError::UnsupportedVersion { version: 1, .. }), "{e}");

    let full = Builder::new(3).string("general.architecture", "llama").str_array("t", &["a", "b"]).finish();
    for cut in [10, 24, 30, full.len() - 1] {
        let e = GgufFile::from_reader(&full[..cut], "cut.gguf", &GgufLimits::default()).unwrap_err();
        assert!(matches!(e, GgufError::Truncated { .. }), "cut at {cut}: {e}");
        assert!(e.to_string().contains("truncated"));
    }
}

#[test]
fn hostile_lengths_are_refused_without_allocating() {
    // A string claiming 2^60 bytes.
    let mut b = Builder::new(3).finish();
    b[16..24].copy_from_slice(&1u64.to_le_bytes());
    b.extend((1u64 << 60).to_le_bytes());
    let e = GgufFile::from_reader(&b[..], "h.gguf", &GgufLimits::default()).unwrap_err();
    assert!(matches!(e, GgufError::OutOfBounds { .. }), "{e}");

    // An array claiming 2^40 u32 elements.
    let mut arr = 4u32.to_le_bytes().to_vec();
    arr.extend((1u64 << 40).to_le_bytes());
    let e = Builder::new(3).raw("big", 9, &arr).parse().unwrap_err();
    assert!(e.to_string().contains("elements"), "{e}");

    // Arrays nested too deep.
    let mut deep = Vec::new();
    for _ in 0..10 {
        deep.extend(9u32.to_le_bytes());
        deep.extend(1u64.to_le_bytes());
    }
    let e = Builder::new(3).raw("deep", 9, &deep).parse().unwrap_err();
    assert!(e.to_string().contains("nested"), "{e}");

    // Too many key/values.
    let mut b = Builder::new(3).finish();
    b[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(GgufFile::from_reader(&b[..], "h.gguf", &GgufLimits::default()).is_err());

    // Unknown type.
    let e = Builder::new(3).raw("x", 99, &[]).parse().unwrap_err();
    assert!(e.to_string().contains("unknown value type 99"), "{e}");
}

#[test]
fn sentencepiece_and_byte_level_vocabularies() {
    use crate::{TokenId, TokenKind, Vocabulary};
    let f = Builder::new(3)
        .string("tokenizer.ggml.model", "llama")
        .str_array("tokenizer.ggml.tokens", &["<unk>", "<s>", "</s>", "<0x0A>", "\u{2581}the", "x", "<tool>", "<extra>"])
        .i32_array("tokenizer.ggml.token_type", &[2, 3, 3, 6, 1, 1, 4, 5])
        .u32("tokenizer.ggml.bos_token_id", 1)
        .u32("tokenizer.ggml.eos_token_id", 2)
        .parse()
        .unwrap();
    let v = Vocabulary::from_gguf(&f).unwrap();
    let kinds: Vec<_> = v.ids().map(|t| v.kind(t)).collect();
    use TokenKind::*;
    assert_eq!(kinds, [Unused, Special, Special, Byte, Normal, Normal, UserDefined, Unused]);
    assert_eq!(v.token_bytes(TokenId(3)), b"\n");
    assert_eq!(v.token_bytes(TokenId(4)), b" the");
    assert_eq!(v.token_bytes(TokenId(6)), b"<tool>");
    assert_eq!(v.eos_tokens(), &[TokenId(2)]);
    assert_eq!(v.bos_token(), Some(TokenId(1)));
    assert!(v.add_bos(), "llama.cpp adds BOS for SentencePiece models by default");

    let f = Builder::new(3)
        .string("tokenizer.ggml.model", "gpt2")
        .str_array("tokenizer.ggml.tokens", &["<|endoftext|>", "\u{0120}the", "\u{010A}", "<|im_end|>", "<|eot_id|>"])
        .i32_array("tokenizer.ggml.token_type", &[3, 1, 1, 3, 1])
        .u32("tokenizer.ggml.eos_token_id", 3)
        .bool("tokenizer.ggml.add_bos_token", false)
        .parse()
        .unwrap();
    let v = Vocabulary::from_gguf(&f).unwrap();
    assert_eq!(v.token_bytes(TokenId(1)), b" the");
    assert_eq!(v.token_bytes(TokenId(2)), b"\n");
    // EOS first, then other end-of-turn control tokens; a *normal* "<|eot_id|>" is not one.
    assert_eq!(v.eos_tokens(), &[TokenId(3), TokenId(0)]);
    assert!(!v.add_bos());

    let e = Vocabulary::from_gguf(&Builder::new(3).string("tokenizer.ggml.model", "bert").parse().unwrap());
    assert!(e.unwrap_err().to_string().contains("\"bert\""));
    let e = Vocabulary::from_gguf(&Builder::new(3).string("tokenizer.ggml.model", "gpt2").parse().unwrap());
    assert!(e.unwrap_err().to_string().contains("tokenizer.ggml.tokens"));
    let e = Builder::new(3)
        .string("tokenizer.ggml.model", "gpt2")
        .str_array("tokenizer.ggml.tokens", &["a"])
        .i32_array("tokenizer.ggml.token_type", &[1, 1])
        .parse()
        .unwrap();
    assert!(Vocabulary::from_gguf(&e).unwrap_err().to_string().contains("1 tokens but 2 token types"));
}
