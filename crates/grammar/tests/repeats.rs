//! Masks inside bounded repetitions (`e{m,n}`: JSON Schema `maxLength`, `maxItems`) are
//! taken from canonical looping states for tokens shorter than the count left, and walked
//! for longer ones (see the matcher's `mask` module). On the real SmolLM2 vocabulary
//! (49,152 tokens, the longest 81 bytes), documents are walked token by token — their real
//! tokenization and seeded random walks that prefer long tokens, so counts run out inside
//! tokens — and every mask is compared bit by bit with the mask computed with the
//! shortcut off ([`CompiledGrammar::set_repeat_shortcut`]); near the ends of repetitions
//! each mask is also checked against `commit` for every token.

use formwork_grammar::{gbnf, CompiledGrammar, Grammar, Limits, Matcher, TokenIndex};
use formwork_testkit::{smollm2_vocab, tokenize};
use formwork_vocab::{TokenId, TokenMask, Vocabulary};
use std::sync::Arc;

/// A JSON string character: anything but `"`, `\` and controls (multi-byte UTF-8
/// included), or an escape.
const CHAR: &str = r#"char ::= [^"\\\x00-\x1f] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})"#;

fn grammar(rules: &str) -> Grammar {
    let text = format!("{rules}\n{CHAR}\n");
    gbnf::parse(&text, &Limits::default()).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// A pair of compiled grammars on one index: the shortcut on, and off.
fn pair(g: &Grammar, index: &Arc<TokenIndex>) -> (Arc<CompiledGrammar>, Arc<CompiledGrammar>) {
    let on = CompiledGrammar::with_index(g, index.clone(), &Limits::default()).unwrap();
    let off = CompiledGrammar::with_index(g, index.clone(), &Limits::default()).unwrap();
    off.set_repeat_shortcut(false);
    (on, off)
}

fn text_of(v: &Vocabulary, t: TokenId) -> String {
    String::from_utf8_lossy(v.token_bytes(t)).into_owned()
}

/// Compares the masks of `a` (shortcut on) and `b` (off) bit by bit, and with `full`
/// every bit against `commit` on `oracle` (at the same state). Returns `a`'s mask.
fn check_step(
    a: &mut Matcher,
    b: &mut Matcher,
    oracle: Option<&mut Matcher>,
    what: &str,
) -> TokenMask {
    let v = a.grammar().vocab().clone();
    let mut ma = TokenMask::new(v.len());
    let mut mb = TokenMask::new(v.len());
    a.compute_mask(&mut ma);
    b.compute_mask(&mut mb);
    if ma.words() != mb.words() {
        let diff: Vec<String> = v
            .ids()
            .filter(|&t| ma.contains(t) != mb.contains(t))
            .take(8)
            .map(|t| format!("{:?} (on: {})", text_of(&v, t), ma.contains(t)))
            .collect();
        panic!("{what}: masks differ with the shortcut on and off, e.g. {diff:?}");
    }
    if let Some(o) = oracle {
        for t in v.ids() {
            let ok = o.commit(t).is_ok();
            if ok {
                o.rollback(1).unwrap();
            }
            assert_eq!(
                ma.contains(t),
                ok,
                "{what}: token {:?}: mask vs commit",
                text_of(&v, t)
            );
        }
    }
    ma
}

/// Walks `toks`, checking every mask (and against `commit` in the last `exact_tail` steps
/// and the first two); then EOS must be allowed. Returns the trie nodes walked with the
/// shortcut on and off.
fn walk(
    g: &Grammar,
    index: &Arc<TokenIndex>,
    toks: &[TokenId],
    exact_tail: usize,
    what: &str,
) -> (u64, u64) {
    let (on, off) = pair(g, index);
    let oracle_g = CompiledGrammar::with_index(g, index.clone(), &Limits::default()).unwrap();
    oracle_g.set_repeat_shortcut(false);
    let (mut a, mut b, mut o) = (on.matcher(), off.matcher(), oracle_g.matcher());
    let v = index.vocab().clone();
    for (i, &t) in toks.iter().enumerate() {
        let full = i < 2 || i + exact_tail >= toks.len();
        let m = check_step(
            &mut a,
            &mut b,
            full.then_some(&mut o),
            &format!("{what}, step {i}"),
        );
        assert!(
            m.contains(t),
            "{what}: token {i} {:?} not allowed",
            text_of(&v, t)
        );
        a.commit(t).unwrap();
        b.commit(t).unwrap();
        o.commit(t).unwrap();
    }
    let m = check_step(&mut a, &mut b, Some(&mut o), &format!("{what}, at the end"));
    assert!(
        m.contains(v.eos_tokens()[0]),
        "{what}: EOS not allowed at the end"
    );
    (a.stats().trie_nodes_walked, b.stats().trie_nodes_walked)
}

/// Random walks: at each step a random allowed text token, the longest of a few draws (so
/// counts run out inside tokens); every mask compared on/off, the last steps also against
/// `commit`.
fn random_walks(
    g: &Grammar,
    index: &Arc<TokenIndex>,
    seeds: std::ops::Range<u64>,
    steps: usize,
    what: &str,
) {
    let v = index.vocab().clone();
    for seed in seeds {
        let (on, off) = pair(g, index);
        let oracle_g = CompiledGrammar::with_index(g, index.clone(), &Limits::default()).unwrap();
        oracle_g.set_repeat_shortcut(false);
        let (mut a, mut b, mut o) = (on.matcher(), off.matcher(), oracle_g.matcher());
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for i in 0..steps {
            let full = i % 8 == 7;
            let m = check_step(
                &mut a,
                &mut b,
                full.then_some(&mut o),
                &format!("{what}, seed {seed}, step {i}"),
            );
            let allowed: Vec<TokenId> = m.iter_ones().filter(|&t| v.is_text(t)).collect();
            if allowed.is_empty() {
                break;
            }
            let t = (0..4)
                .map(|_| allowed[(rnd() % allowed.len() as u64) as usize])
                .max_by_key(|&t| v.token_bytes(t).len())
                .unwrap();
            a.commit(t).unwrap();
            b.commit(t).unwrap();
            o.commit(t).unwrap();
        }
    }
}

fn index() -> Arc<TokenIndex> {
    TokenIndex::for_vocab(&smollm2_vocab())
}

/// A string of at most 100 characters: texts of 0..=100 characters, ASCII, multi-byte
/// UTF-8 and escapes, ending exactly at the limit and just below it.
#[test]
fn string_max_length_100() {
    let ix = index();
    let g = grammar(r#"root ::= "\"" char{0,100} "\"""#);
    let bodies: Vec<String> = vec![
        String::new(),
        "Hello, world! This is a short sentence.".into(),
        "x".repeat(100),
        "ab".repeat(49) + "é",
        "é".repeat(100),
        "日本語のテキスト、".repeat(11) + "終",
        "🙂".repeat(50) + &"a".repeat(50),
        "The quick brown fox jumps over the lazy dog; ".repeat(2) + "0123456789",
        r#"escapes \" \\ \n \t \u00e9 and "#.to_string() + &"-".repeat(62),
        " ".repeat(95) + "abcde",
    ];
    let (mut on, mut off) = (0, 0);
    for body in &bodies {
        let n = body
            .replace("\\\\", "#")
            .replace("\\u00e9", "#")
            .replace('\\', "")
            .chars()
            .count();
        assert!(n <= 100, "test body too long ({n}): {body}");
        let text = format!("\"{body}\"");
        let toks = tokenize(&text);
        let (a, b) = walk(&g, &ix, &toks, 6, &format!("{{0,100}} on {text:?}"));
        on += a;
        off += b;
    }
    // The shortcut is used: far fewer trie nodes walked (about 1:10 here).
    assert!(
        on * 3 < off,
        "trie nodes walked: {on} with the shortcut, {off} without"
    );
    random_walks(&g, &ix, 0..6, 40, "{0,100} random");
}

/// `{3,40}` between other fields, so the string's frames sit inside an object.
#[test]
fn string_length_3_to_40_inside_an_object() {
    let ix = index();
    let g = grammar(r#"root ::= "{\"name\":\"" char{3,40} "\",\"id\":" [0-9]{1,12} "}""#);
    for name in [
        "abc",
        "Zoë Ångström-Øster",
        &"q".repeat(40),
        &"ü".repeat(40),
        "a\\u0041\\\"zz yy xx ww vv uu tt ss rr qq",
    ] {
        let text = format!("{{\"name\":\"{name}\",\"id\":123456789012}}");
        walk(
            &g,
            &ix,
            &tokenize(&text),
            6,
            &format!("{{3,40}} on {text:?}"),
        );
    }
    random_walks(&g, &ix, 10..16, 30, "{3,40} random");
}

/// Arrays of arrays with `maxItems` on both levels (chains whose unit is a rule that
/// holds another chain), strings with `maxLength` inside.
#[test]
fn nested_arrays_with_max_items() {
    let ix = index();
    let g = grammar(
        r#"root ::= "[" (row ("," row){0,11})? "]"
row ::= "[" (str ("," str){0,9})? "]"
str ::= "\"" char{0,30} "\"""#,
    );
    let row = |n: usize, w: &str| format!("[{}]", vec![format!("\"{w}\""); n].join(","));
    let docs = [
        format!("[{}]", vec![row(10, "ab"); 12].join(",")),
        format!(
            "[{},{}]",
            row(3, "long string value é "),
            row(10, &"z".repeat(30))
        ),
        format!("[{}]", vec![row(1, ""); 12].join(",")),
        "[]".to_string(),
    ];
    for d in &docs {
        walk(
            &g,
            &ix,
            &tokenize(d),
            8,
            &format!("nested maxItems on {d:?}"),
        );
    }
    random_walks(&g, &ix, 20..26, 60, "nested maxItems random");
}

/// Mandatory copies (`minLength` 50, an exact count of 20): runs of identical elements
/// treated as endless loops while more than a token's length of them is left.
#[test]
fn mandatory_runs() {
    let ix = index();
    let g = grammar(r#"root ::= "\"" char{50,60} "\"" ":" [a-z]{20} "!""#);
    let text = format!(
        "\"{}\":{}!",
        "é".repeat(25) + &"w".repeat(30),
        "k".repeat(20)
    );
    walk(&g, &ix, &tokenize(&text), 6, "runs");
    random_walks(&g, &ix, 30..36, 40, "runs random");
}
