//! Nested repetitions (`((e*){0,99}){0,99}`) collapse to one repetition where the languages
//! are equal, so a grammar whose nesting only looks ambiguous compiles and matches. The
//! language is checked against an independent oracle: the set of repetition counts each
//! nesting allows, computed by summing counts layer by layer.

use formwork_grammar::{accepts, gbnf, CompiledGrammar, Grammar, Limits};
use formwork_vocab::{TokenMask, Vocabulary};
use std::sync::Arc;

fn parse(text: &str) -> Grammar {
    gbnf::parse(text, &Limits::default()).unwrap_or_else(|e| panic!("{e}"))
}

fn accepted(g: &Grammar, s: &str) -> bool {
    accepts(g, s.as_bytes(), &Limits::default()).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn the_llama_cpp_example_compiles_with_the_language_of_its_body() {
    let nested = parse("root ::= ((((([^x]*){0,99}){0,99}){0,99}){0,99}){0,99}");
    let flat = parse("root ::= [^x]*");
    for s in ["", "a", "abc", "y y\n", "é€😀", "xa", "ax", "x", "aaxaa", &"z".repeat(300)] {
        assert_eq!(accepted(&nested, s), accepted(&flat, s), "{s:?}");
    }
    assert!(accepted(&nested, "abc") && !accepted(&nested, "abx"));
    // Compiled against a vocabulary: masks allow every token without an `x`.
    let v = Arc::new(Vocabulary::from_strings(&["a", "x", "ab", "bx", " "], &["</s>"]));
    let cg = CompiledGrammar::new(&nested, v.clone(), &Limits::default()).unwrap();
    let mut m = cg.matcher();
    let mut mask = TokenMask::new(v.len());
    for _ in 0..3 {
        m.compute_mask(&mut mask);
        let allowed: Vec<String> = mask.iter_ones().map(|t| String::from_utf8_lossy(v.token_bytes(t)).into_owned()).collect();
        assert_eq!(allowed, ["a", "ab", " ", "</s>"]);
        m.commit_bytes(b"ab").unwrap();
    }
}

/// Repetition operators, each with its bounds.
const OPS: &[(&str, u32, Option<u32>)] = &[
    ("*", 0, None),
    ("+", 1, None),
    ("?", 0, Some(1)),
    ("{0}", 0, Some(0)),
    ("{2}", 2, Some(2)),
    ("{1,2}", 1, Some(2)),
    ("{0,2}", 0, Some(2)),
    ("{2,}", 2, None),
    ("{0,3}", 0, Some(3)),
];

/// Longest string checked.
const N: usize = 13;

/// The counts of `"a"` that the nesting `layers` (innermost first) allows, up to `N`:
/// `X{m,n}` allows every sum of `k` counts of `X`, for `m ≤ k ≤ n`.
fn counts(layers: &[(u32, Option<u32>)]) -> Vec<bool> {
    let mut set = vec![false; N + 1];
    set[1] = true;
    for &(m, n) in layers {
        let mut power = vec![false; N + 1]; // sums of exactly k counts
        power[0] = true;
        let mut out = vec![false; N + 1];
        // Past N + 1 copies, a power adds no sum up to N that an earlier one lacks.
        for k in 0..=n.map_or(N as u32 + 1, |n| n.min(N as u32 + 1)) {
            if k >= m {
                out.iter_mut().zip(&power).for_each(|(o, p)| *o |= p);
            }
            let mut next = vec![false; N + 1];
            for (i, _) in power.iter().enumerate().filter(|(_, p)| **p) {
                for (j, _) in set.iter().enumerate().filter(|(_, s)| **s) {
                    if i + j <= N {
                        next[i + j] = true;
                    }
                }
            }
            power = next;
        }
        set = out;
    }
    set
}

#[test]
fn nested_repetitions_keep_their_language() {
    let mut chains: Vec<Vec<usize>> = (0..OPS.len()).map(|i| vec![i]).collect();
    for _ in 0..2 {
        let longer: Vec<Vec<usize>> = chains.iter().filter(|c| c.len() == chains.last().unwrap().len()).flat_map(|c| (0..OPS.len()).map(move |i| [c.clone(), vec![i]].concat())).collect();
        chains.extend(longer);
    }
    for chain in &chains {
        let mut text = "\"a\"".to_string();
        for (k, &i) in chain.iter().enumerate() {
            text = if k == 0 { format!("{text}{}", OPS[i].0) } else { format!("({text}){}", OPS[i].0) };
        }
        let g = parse(&format!("root ::= {text} \"b\""));
        let want = counts(&chain.iter().map(|&i| (OPS[i].1, OPS[i].2)).collect::<Vec<_>>());
        for (c, &ok) in want.iter().enumerate() {
            let s = format!("{}b", "a".repeat(c));
            assert_eq!(accepted(&g, &s), ok, "{text} on {s:?}");
        }
        assert!(!accepted(&g, "ba") && !accepted(&g, "aab b"), "{text}");
    }
}

#[test]
fn a_collapse_past_max_repeat_keeps_the_nesting() {
    // With `max_repeat` 50, `("a"{0,10}){0,5}` collapses to `"a"{0,50}`; `("a"{0,10}){0,6}`
    // would be `"a"{0,60}`, past the limit, so it stays nested (each layer is within it).
    let limits = Limits { max_repeat: 50, ..Limits::default() };
    let g = gbnf::parse("root ::= (\"a\"{0,10}){0,5}", &limits).unwrap();
    assert!(accepts(&g, "a".repeat(50).as_bytes(), &limits).unwrap());
    assert!(!accepts(&g, "a".repeat(51).as_bytes(), &limits).unwrap());
    let g = gbnf::parse("root ::= (\"a\"{0,10}){0,6}", &limits).unwrap();
    assert!(accepts(&g, "a".repeat(60).as_bytes(), &limits).unwrap());
    assert!(!accepts(&g, "a".repeat(61).as_bytes(), &limits).unwrap());
}
