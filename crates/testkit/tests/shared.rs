//! The shared tokenizers load, and real tokenization agrees with the vocabulary's bytes.

use formwork_testkit::{llama3_vocab, shared_vocab, smollm2_vocab, tokenize, SharedTokenizer};
use formwork_vocab::TokenId;

fn detok(v: &formwork_vocab::Vocabulary, ids: &[TokenId]) -> Vec<u8> {
    ids.iter().flat_map(|&t| v.token_bytes(t).to_vec()).collect()
}

#[test]
fn smollm2_tokenization_round_trips_through_vocab_bytes() {
    let v = smollm2_vocab();
    assert_eq!(v.len(), 49_152);
    for text in ["{\"name\":\"Ada\",\"age\":37}", " the cat\n\tsat", "héllo — 日本語 🎉", "12345"] {
        let ids = tokenize(text);
        assert!(!ids.is_empty());
        assert!(ids.iter().all(|&t| v.is_text(t)), "{text:?}: {ids:?}");
        assert_eq!(detok(&v, &ids), text.as_bytes(), "{text:?}");
    }
    // SmolLM2 splits digits one by one.
    assert_eq!(tokenize("12345").len(), 5);
    assert!(std::sync::Arc::ptr_eq(&v, &shared_vocab("smollm2")));
}

#[test]
fn llama3_tokenization_round_trips_through_vocab_bytes() {
    let t = SharedTokenizer::Llama3;
    let v = llama3_vocab();
    assert_eq!(v.len(), 128_256);
    for text in ["{\"name\":\"Ada\",\"age\":37}", "héllo — 日本語 🎉 12345"] {
        let ids = t.tokenize(text);
        assert_eq!(detok(&v, &ids), text.as_bytes(), "{text:?}");
    }
    assert_eq!(t.eos(), TokenId(128_009));
}
