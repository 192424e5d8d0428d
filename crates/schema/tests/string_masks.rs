//! Token masks inside strings equal the brute-force answer at every byte, on both real
//! vocabularies: strings before their `minLength` and under a large `maxLength` (the chain
//! accelerator), strings that run out (a chain into a dead end), patterns and formats,
//! non-ASCII text and keys (lead bytes joining a first-byte dispatch group), and states
//! whose loop only the full state shows (a URI's host, where the truncated state runs into
//! the context), and strings under a length bound and a pattern at once (set chains). Brute
//! force: each token's bytes stepped through a second copy of the grammar that never
//! computes a mask. Both key orders, since any-order objects truncate states at their group
//! frames. Class indexes are exercised with their suffix tries and counts built at once and
//! never built (every mask walking the main trie pruned).

mod common;

use formwork_grammar::matcher::{ClassBuilds, CompiledGrammar};
use formwork_schema::{compile, KeyOrder, SchemaOptions};
use formwork_vocab::{TokenMask, Vocabulary};
use serde_json::json;
use std::sync::Arc;

fn vocab(name: &str) -> Arc<Vocabulary> {
    Arc::new(Vocabulary::from_tokenizer_json_file(common::data_dir().join("tokenizers").join(name), None).unwrap())
}

/// Schemas and documents they accept, each with strings that exercise one mask path.
fn cases() -> Vec<(serde_json::Value, &'static str)> {
    let obj = |s: serde_json::Value| json!({"type": "object", "properties": {"a": s, "b": {"type": "string"}}, "required": ["a"]});
    vec![
        (obj(json!({"type": "string", "minLength": 8, "maxLength": 2048})), r#"{"a":"héllo wörld, 日本語 😀 ok","b":"x"}"#),
        (obj(json!({"type": "string", "maxLength": 32767})), r#"{"a":"abc \"q\" \u00e9 日本","b":""}"#),
        (obj(json!({"type": "string", "minLength": 3, "maxLength": 5})), r#"{"a":"añb日"}"#),
        (obj(json!({"type": "string", "minLength": 2})), r#"{"a":"éé","b":"ü"}"#),
        (obj(json!({"type": "string", "pattern": "[a-z\\d-]+"})), r#"{"a":"--Zé9-x"}"#),
        (obj(json!({"type": "string", "format": "email"})), r#"{"a":"jo.doe@example.com"}"#),
        (obj(json!({"type": "string", "format": "date-time"})), r#"{"a":"2024-01-02T03:04:05Z"}"#),
        (obj(json!({"type": "string", "format": "uri"})), r#"{"a":"https://user:pw@example.com:8080/a/b?x=1#f","b":"c"}"#),
        (
            json!({"type": "object", "additionalProperties": {"type": "string", "minLength": 4}}),
            r#"{"clé":"日本語です","ключ":"значение","k":"vvvv"}"#,
        ),
        (
            json!({"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 12000}}),
            r#"["a","日本","long string with spaces"]"#,
        ),
        // Unanchored patterns: a search that moves between partial-match states on any
        // character (a closed set, `mask::Closed`), with escapes and non-ASCII text on the
        // way, a match cut short and started again, and a match found then more text.
        (
            obj(
                json!({"type": "string", "pattern": "[a-fA-F0-9]{8}-[a-fA-F0-9]{4}-[a-fA-F0-9]{4}"}),
            ),
            r#"{"a":"x\"é 12ab-9 日本 123e4567-e89b-12d3 tail ü","b":"q"}"#,
        ),
        // A long counted search (about 40 states): the positions after the first are
        // states the first position's search already placed in the set, served by its
        // accelerator without dispatching on their first bytes.
        (
            obj(json!({"type": "string", "pattern": "[a-f0-9]{40}"})),
            r#"{"a":"e3b0 c442\"98fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 é-ok","b":"x"}"#,
        ),
        (
            obj(json!({"type": "string", "pattern": "[a-z\\d_\\.-]+@([a-z\\d_\\.-]+\\.)+[a-z]+"})),
            r#"{"a":"mail: Jo <jo.doe@mail.example.org> \u00e9 ok"}"#,
        ),
        (
            json!({"type": "array", "items": {"type": "string", "pattern": "^dev|alpha|beta$", "maxLength": 40}}),
            r#"["dev-1","an alpha release","Ωbeta"]"#,
        ),
        // A length bound times a search: the states after `k` characters
        // differ by what was matched, and the last ones run into the bound.
        (
            json!({"type": "array", "items": {"type": "string", "minLength": 12, "maxLength": 12, "pattern": "[0-9a-fA-F]+"}}),
            r#"["0123456789ab","zz\"é-q_x!1yy","xxxxxxxxxxxa"]"#,
        ),
        // Set chains (`mask::SetChain`): a search inside a length bound, where a character
        // leads to one of a few states per count, and some counts die for some paths.
        (
            json!({"type": "array", "items": {"type": "string", "minLength": 3, "maxLength": 9, "pattern": "[0-9]"}}),
            r#"["ab1","x\"y9zz","日本7","123456789"]"#,
        ),
        (
            json!({"type": "array", "items": {"type": "string", "maxLength": 16, "pattern": "x.*y"}}),
            r#"["axbyc","xy","zzxzz\\yzz","xxxxxxxxxxxxxxxy"]"#,
        ),
        (
            obj(json!({"type": "string", "maxLength": 24, "format": "email"})),
            r#"{"a":"jo.doe@mail.example.io","b":"x"}"#,
        ),
        (
            obj(json!({"type": "string", "minLength": 3, "maxLength": 20, "pattern": "^[^\\s]*[.]"})),
            r#"{"a":"ab日.cd \" ë"}"#,
        ),
        // ECMA-262 `.` takes every character but the line terminators, so its loop takes
        // every multi-byte character but those led by 0xE2 (U+2028 and U+2029): those
        // tokens are stepped (here `’` and `…`, led by 0xE2 too, but allowed). Before the
        // `.` the search loops on all but `.`, inside a closed set with the state after it.
        (
            obj(json!({"type": "string", "pattern": "^https?:\\/\\/.*?\\..*$"})),
            r#"{"a":"https://it’s-日本 x.example/…ok","b":"x"}"#,
        ),
        (obj(json!({"type": "string", "pattern": "^.+@.+\\..+$"})), r#"{"a":"jo’s@mail.ex…ample.io"}"#),
        // Unanchored `[^\s]+`: before a first non-space character, the space's subtree
        // (most of a vocabulary's words) is not walked: a closed set takes it.
        (obj(json!({"type": "string", "pattern": "[^\\s]+"})), r#"{"a":"  \t ü x y","b":"   "}"#),
    ]
}

fn check(v: &Arc<Vocabulary>, every: usize, builds: ClassBuilds) {
    let mut checked = 0;
    for (schema, doc) in cases() {
        for key_order in [KeyOrder::Any, KeyOrder::Listed] {
            let opts = SchemaOptions { key_order, ..Default::default() };
            let g = compile(&schema, &opts).unwrap_or_else(|e| panic!("{schema}: {e}"));
            let cg = Arc::new(CompiledGrammar::new(&g, v.clone(), &opts.limits).unwrap());
            cg.index().set_class_builds(builds);
            let oracle = Arc::new(CompiledGrammar::new(&g, v.clone(), &opts.limits).unwrap());
            let (mut m, mut o) = (cg.matcher(), oracle.matcher());
            let mut mask = TokenMask::new(v.len());
            let text = doc.as_bytes();
            for i in 0..=text.len() {
                if i % every == 0 || text.get(i.wrapping_sub(1)) == Some(&b'"') {
                    m.compute_mask(&mut mask);
                    for u in v.ids() {
                        assert_eq!(
                            mask.contains(u),
                            o.is_allowed(u),
                            "{schema} ({key_order:?}): token {:?} after {:?}",
                            String::from_utf8_lossy(v.token_bytes(u)),
                            String::from_utf8_lossy(&text[..i])
                        );
                    }
                    checked += 1;
                }
                if i < text.len() {
                    m.commit_bytes(&text[i..=i]).unwrap_or_else(|e| panic!("{schema}: {e} at {i} of {doc}"));
                    o.commit_bytes(&text[i..=i]).unwrap();
                }
            }
            assert!(m.is_accepting(), "{schema}: {doc} not accepted");
        }
    }
    eprintln!("{checked} masks equal brute force");
}

/// Class indexes with their suffix tries and counts built at once, and never (every
/// mask walks the main trie pruned): two vocabularies, since an index is per vocabulary.
#[test]
fn string_masks_equal_brute_force_smollm2() {
    check(&vocab("smollm2.json"), 1, ClassBuilds::Now);
    check(&vocab("smollm2.json"), 1, ClassBuilds::Never);
}

#[test]
fn string_masks_equal_brute_force_llama3() {
    // 128k tokens per mask: every 3rd byte (and every byte after a quote).
    check(&vocab("llama3_1.json"), if cfg!(debug_assertions) { 16 } else { 3 }, ClassBuilds::Background);
}
