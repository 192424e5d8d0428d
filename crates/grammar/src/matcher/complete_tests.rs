//! Tests of shortest completions and completion token plans.

use super::automaton::{DEAD, OVERFLOW};
use super::*;
use crate::{gbnf, Grammar, Limits};
use formwork_vocab::{TokenId, Vocabulary};
use std::collections::VecDeque;
use std::sync::Arc;

fn parse(text: &str) -> Grammar {
    gbnf::parse(text, &Limits::default()).unwrap()
}

/// Every single byte, plus a few merged JSON-ish tokens (byte-level BPE style).
fn byte_vocab() -> Arc<Vocabulary> {
    let mut toks: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    for s in ["{\"", "\":", "\":\"", "\",\"", "\"}", "}}", "]]", "],", "00", "aa", "aaa", ",\""] {
        toks.push(s.as_bytes().to_vec());
    }
    Arc::new(Vocabulary::from_strings(&toks, &["</s>"]))
}

fn matcher(g: &Grammar, vocab: &Arc<Vocabulary>) -> Matcher {
    CompiledGrammar::new(g, vocab.clone(), &Limits::default()).unwrap().matcher()
}

/// The fewest bytes from the matcher's state to an accepting one, by breadth-first search
/// over all 256 bytes (the reference for minimality; small grammars only).
fn bfs_distance(m: &Matcher, max: usize) -> Option<usize> {
    let g = m.grammar().clone();
    let aut = &g.aut;
    let start = m.cur();
    let mut seen = std::collections::HashSet::from([start]);
    let mut q = VecDeque::from([(start, 0usize)]);
    while let Some((s, d)) = q.pop_front() {
        if aut.info(s).accepting {
            return Some(d);
        }
        if d == max {
            continue;
        }
        for b in 0..=255u8 {
            let x = aut.step(s, b);
            if x != DEAD && x != OVERFLOW && seen.insert(x) {
                q.push_back((x, d + 1));
            }
        }
    }
    None
}

/// Commits `prefix`, then checks the completion: accepted, minimal, and its token plan
/// leaves the state as it was and ends accepting. Returns the completion.
fn check_after(g: &Grammar, prefix: &str) -> String {
    let vocab = byte_vocab();
    let mut m = matcher(g, &vocab);
    m.commit_bytes(prefix.as_bytes()).unwrap_or_else(|e| panic!("{prefix:?}: {e}"));
    let c = m.shortest_completion().unwrap_or_else(|| panic!("{prefix:?}: no completion"));
    assert_eq!(m.min_completion_len(), Some(c.len()), "{prefix:?}");
    assert_eq!(bfs_distance(&m, 64), Some(c.len()), "{prefix:?}: not minimal: {:?}", String::from_utf8_lossy(&c));
    let before = m.committed();
    let plan = m.completion_tokens().unwrap();
    assert_eq!(m.committed(), before, "the plan leaves the state unchanged");
    assert!(plan.len() <= c.len(), "single-byte tokens bound the plan");
    let spelled: Vec<u8> = plan.iter().flat_map(|&t| vocab.token_bytes(t).to_vec()).collect();
    assert_eq!(spelled, c);
    for &t in &plan {
        assert!(m.is_allowed(t), "{prefix:?}: plan token {t} not allowed");
        m.commit(t).unwrap();
    }
    assert!(m.is_accepting(), "{prefix:?} + {:?} is not accepted", String::from_utf8_lossy(&c));
    let mut whole = prefix.as_bytes().to_vec();
    whole.extend_from_slice(&c);
    assert!(accepts(g, &whole, &Limits::default()).unwrap());
    String::from_utf8(c).expect("completions are valid UTF-8")
}

const OBJECT: &str = r#"
root   ::= "{" ws "\"name\"" ws ":" ws string ws "," ws "\"age\"" ws ":" ws int ws ("," ws "\"tags\"" ws ":" ws arr ws)? "}"
ws     ::= [ \n]{0,4}
string ::= "\"" ([^"\\] | "\\" ["\\n])* "\""
int    ::= "-"? ("0" | [1-9] [0-9]*)
arr    ::= "[" ws (string (ws "," ws string)*)? ws "]"
"#;

#[test]
fn object_with_required_keys() {
    let g = parse(OBJECT);
    assert_eq!(check_after(&g, ""), r#"{"name":"","age":0}"#);
    assert_eq!(check_after(&g, "{ \"na"), r#"me":"","age":0}"#);
    assert_eq!(check_after(&g, r#"{"name": "Bo"#), r#"","age":0}"#);
    // Mid escape, mid number, optional key started.
    assert_eq!(check_after(&g, r#"{"name": "a\"#), r#"n","age":0}"#);
    // `0` and `1` are both shortest: ties go to the first alternative.
    assert_eq!(check_after(&g, r#"{"name":"x","age":-"#), "0}");
    assert_eq!(check_after(&g, r#"{"name":"x","age":12"#), "}");
    assert_eq!(check_after(&g, r#"{"name":"x","age":1,"t"#), r#"ags":[]}"#);
    assert_eq!(check_after(&g, r#"{"name":"x","age":1,"tags":["a","#), r#"""]}"#);
    assert_eq!(check_after(&g, r#"{"name":"x","age":1}"#), "");
}

#[test]
fn nested_arrays() {
    let g = parse(
        r#"
root  ::= value
value ::= "[" (value ("," value)*)? "]" | [0-9]+ "." [0-9]+ | "true"
"#,
    );
    assert_eq!(check_after(&g, ""), "[]");
    assert_eq!(check_after(&g, "[[["), "]]]");
    assert_eq!(check_after(&g, "[[1.5,"), "[]]]");
    assert_eq!(check_after(&g, "[[12"), ".0]]");
    assert_eq!(check_after(&g, "[[1."), "0]]");
    assert_eq!(check_after(&g, "[t"), "rue]");
}

#[test]
fn strings_with_min_length_and_alternatives_of_different_lengths() {
    let g = parse(r#"root ::= "\"" [a-z]{3,8} "\"" ("!" | "?!" | "...")"#);
    assert_eq!(check_after(&g, ""), "\"aaa\"!");
    assert_eq!(check_after(&g, "\"x"), "aa\"!");
    assert_eq!(check_after(&g, "\"xyzw"), "\"!");
    assert_eq!(check_after(&g, "\"xyz\"?"), "!");
    assert_eq!(check_after(&g, "\"xyz\"."), "..");
    let g = parse(r#"root ::= ("abcd" | "xy" | "pqr") ";""#);
    assert_eq!(check_after(&g, ""), "xy;");
    assert_eq!(check_after(&g, "a"), "bcd;");
    assert_eq!(check_after(&g, "pq"), "r;");
}

#[test]
fn multi_byte_characters_stay_valid() {
    // Only non-ASCII characters allowed: the completion must spell whole characters.
    let g = parse(r#"root ::= [α-ω一-龥]{2} "." "#);
    let c = check_after(&g, "");
    assert_eq!(c.chars().count(), 3, "{c:?}");
    // Mid-character: the first byte of a three-byte character.
    let vocab = byte_vocab();
    let mut m = matcher(&g, &vocab);
    m.commit_bytes(&"一".as_bytes()[..1]).unwrap();
    let c = m.shortest_completion().unwrap();
    let mut whole = "一".as_bytes()[..1].to_vec();
    whole.extend_from_slice(&c);
    let s = String::from_utf8(whole).expect("valid UTF-8");
    assert_eq!(s.chars().count(), 3, "{s:?}");
    assert_eq!(bfs_distance(&m, 16), Some(c.len()));
}

#[test]
fn special_tokens_and_unspellable_completions() {
    // Special tokens (named by the grammar) are not bytes: a state that can only finish
    // through one has no byte completion.
    let vocab = Arc::new(Vocabulary::from_strings(&["a", "b"], &["</s>", "<|end|>"]));
    let g = parse(r#"root ::= "a" <|end|> | "b""#);
    let mut m = matcher(&g, &vocab);
    assert_eq!(m.shortest_completion().as_deref(), Some(&b"b"[..]));
    m.commit_bytes(b"a").unwrap();
    assert_eq!(m.min_completion_len(), None);
    assert_eq!(m.shortest_completion(), None);
    assert_eq!(m.completion_tokens(), None);
    // "c" has no token: the completion exists in bytes but cannot be spelled.
    let g = parse(r#"root ::= "a" "c""#);
    let mut m = matcher(&g, &vocab);
    assert_eq!(m.shortest_completion().as_deref(), Some(&b"ac"[..]));
    assert_eq!(m.completion_tokens(), None);
    assert!(!m.completion_bytes_bound_tokens());
    let g = parse(r#"root ::= "a" "b""#);
    let mut m = matcher(&g, &vocab);
    assert_eq!(m.completion_tokens().map(|p| p.len()), Some(2));
    assert!(m.completion_bytes_bound_tokens());
}

#[test]
fn plans_use_few_tokens_and_ended_matchers_need_nothing() {
    let g = parse(OBJECT);
    let vocab = byte_vocab();
    let mut m = matcher(&g, &vocab);
    m.commit_bytes(br#"{"name": "Bo"#).unwrap();
    let plan = m.completion_tokens().unwrap();
    let text: Vec<String> = plan.iter().map(|&t| vocab.token_text(t)).collect();
    // `","age":0}` = `","` `a` `g` `e` `":` `0` `}`: merged tokens where they fit.
    assert_eq!(text.concat(), r#"","age":0}"#);
    assert!(plan.len() <= 7, "{text:?}");
    // After a token, without committing it.
    let q = vocab.ids().find(|&t| vocab.token_bytes(t) == b"\"}").unwrap();
    assert_eq!(m.min_completion_len_after(q), None, "not allowed here");
    let comma = vocab.ids().find(|&t| vocab.token_bytes(t) == b"\",\"").unwrap();
    assert_eq!(m.min_completion_len_after(comma), Some(r#"age":0}"#.len()));
    m.commit_bytes(br#"","age":0}"#).unwrap();
    let eos = vocab.eos_tokens()[0];
    m.commit(eos).unwrap();
    assert_eq!(m.min_completion_len(), Some(0));
    assert_eq!(m.completion_tokens(), Some(vec![]));
    assert_eq!(m.min_completion_len_after(TokenId(0)), None);
}

#[test]
fn random_prefixes_complete_minimally() {
    // Walk random valid paths through the grammar; at every step the completion is accepted
    // and as short as a breadth-first search says.
    let g = parse(OBJECT);
    let vocab = byte_vocab();
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for _ in 0..40 {
        let mut m = matcher(&g, &vocab);
        let mut prefix = Vec::new();
        for _ in 0..30 {
            let c = m.shortest_completion().unwrap();
            assert_eq!(bfs_distance(&m, 40), Some(c.len()), "after {:?}", String::from_utf8_lossy(&prefix));
            let mut whole = prefix.clone();
            whole.extend_from_slice(&c);
            assert!(accepts(&g, &whole, &Limits::default()).unwrap());
            // A random allowed printable byte.
            let ok: Vec<u8> = (0x20..0x7f)
                .filter(|&b| m.commit_bytes(&[b]).is_ok() && m.rollback(1).is_ok())
                .collect();
            if ok.is_empty() {
                break;
            }
            let b = ok[(next() % ok.len() as u64) as usize];
            m.commit_bytes(&[b]).unwrap();
            prefix.push(b);
        }
    }
}

/// Stacks that share their top frames are one stack over a join of their parents (see
/// `automaton::join`); a completion through the join takes its cheapest member.
#[test]
fn completions_through_joins_take_the_cheapest_continuation() {
    let g = parse(
        r#"
root ::= "k" w0 "-long-tail" | "k" w1 "-22" | "k" w2 "-333"
w0   ::= str
w1   ::= str
w2   ::= str
str  ::= "\"" [a-z]* "\""
"#,
    );
    assert_eq!(check_after(&g, "k\"ab"), "\"-22");
    assert_eq!(check_after(&g, "k\"ab\"-l"), "ong-tail");
    // Two readings at every level, one join per level.
    let g = parse(r#"root ::= "[" root "]" | "[" root "] " | "x""#);
    assert_eq!(check_after(&g, "[[[[x"), "]]]]");
    assert_eq!(check_after(&g, "[[[[x] "), "]]]");
}
