//! The real vocabularies in the shared data folder and the default model's GGUF.

use formwork_vocab::gguf::GgufFile;
use formwork_vocab::{TokenId, TokenKind, Vocabulary};
use std::path::PathBuf;

fn data_dir() -> PathBuf {
    let d = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/data"));
    assert!(d.is_dir(), "shared test data missing: expected it at {} (the CI has it there)", d.display());
    d
}

fn load(name: &str) -> Vocabulary {
    Vocabulary::from_tokenizer_json_file(data_dir().join("tokenizers").join(name), None).unwrap()
}

fn find(v: &Vocabulary, s: &str) -> TokenId {
    v.text_token_by_bytes(s.as_bytes()).unwrap_or_else(|| panic!("no token {s:?}"))
}

#[test]
fn smollm2_tokenizer_json() {
    let v = load("smollm2.json");
    assert_eq!(v.len(), 49_152);
    assert_eq!(v.eos_token(), Some(TokenId(2)));
    assert_eq!(v.token_bytes(TokenId(2)), b"<|im_end|>");
    assert_eq!(v.kind(TokenId(2)), TokenKind::Special);
    assert_eq!(v.kind(TokenId(0)), TokenKind::Special, "<|endoftext|>");
    assert!(v.eos_tokens().contains(&TokenId(0)));
    assert_eq!(v.bos_token(), Some(TokenId(1)));
    let specials = v.ids().filter(|&t| v.kind(t) == TokenKind::Special).count();
    assert_eq!(specials, 17);
    // " the" is spelled "Ġthe"; newline "Ċ".
    let the = find(&v, " the");
    assert_eq!(v.token_bytes(the), b" the");
    find(&v, "\n");
    find(&v, "{\"");
    // Single-byte tokens: every printable ASCII byte, tab, newline and UTF-8 lead bytes
    // (SmolLM2 lacks 21 bytes, among them 0x04 and the never-valid-UTF-8 0xC0/0xC1/0xF5..).
    let single: Vec<u8> = (0u8..=255).filter(|&b| v.text_token_by_bytes(&[b]).is_some()).collect();
    assert_eq!(single.len(), 256 - 21);
    for b in (b' '..=b'~').chain([b'\t', b'\n', 0xC3, 0xE2, 0xF0]) {
        assert!(single.contains(&b), "byte {b:#04x}");
    }
    assert!(!single.contains(&0xC0));
    // No normal token contains the byte-level spelling of a space.
    assert!(v.ids().filter(|&t| v.kind(t) == TokenKind::Normal).all(|t| !v.token_text(t).contains('Ġ')));
}

#[test]
fn llama3_tokenizer_json() {
    let v = load("llama3_1.json");
    assert_eq!(v.len(), 128_256);
    assert_eq!(v.eos_token(), Some(TokenId(128_009)));
    assert_eq!(v.token_bytes(TokenId(128_009)), b"<|eot_id|>");
    assert_eq!(v.bos_token(), Some(TokenId(128_000)));
    let specials = v.ids().filter(|&t| v.kind(t) == TokenKind::Special).count();
    assert_eq!(specials, 256);
    assert!(v.ids().skip(128_000).all(|t| !v.is_text(t)));
    find(&v, " the");
    find(&v, "\":");
    let v = Vocabulary::from_tokenizer_json_file(data_dir().join("tokenizers/llama3_1.json"), Some(TokenId(128_001))).unwrap();
    assert_eq!(v.eos_tokens(), &[TokenId(128_001)]);
}

/// The default model's GGUF in the model cache; a missing file fails the test with how to
/// get it (a test that skips when its fixture is absent would pass without checking anything).
fn gguf_path() -> PathBuf {
    let home = std::env::var_os("FORMWORK_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/formwork")))
        .expect("neither FORMWORK_HOME nor HOME is set: cannot find the model cache");
    let p = home.join("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(p.is_file(), "{} is missing: fetch it with `formwork pull smollm2` (scripts/test does)", p.display());
    p
}

#[test]
fn smollm2_gguf_matches_tokenizer_json() {
    let path = gguf_path();
    let f = GgufFile::open(&path).unwrap();
    assert!(matches!(f.version(), 2 | 3));
    assert_eq!(f.architecture(), Some("llama"));
    assert_eq!(f.context_length(), Some(8192));
    assert!(f.chat_template().unwrap().contains("<|im_start|>"));
    assert_eq!(f.tokenizer_model(), Some("gpt2"));
    let g = Vocabulary::from_gguf(&f).unwrap();
    let j = load("smollm2.json");
    assert_eq!(g.len(), j.len());
    for t in g.ids() {
        assert_eq!(g.token_bytes(t), j.token_bytes(t), "token {t}");
        assert_eq!(g.kind(t), j.kind(t), "token {t} {:?}", g.token_text(t));
    }
    assert_eq!(g.eos_token(), Some(TokenId(2)));
    assert_eq!(g.eos_tokens(), j.eos_tokens());
    assert_eq!(g.bos_token(), Some(TokenId(1)));
    assert!(!g.add_bos());
}
