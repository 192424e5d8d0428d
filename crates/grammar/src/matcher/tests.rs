//! Unit tests of the matcher on hand-built grammars and a tiny vocabulary.

use super::*;
use crate::{Expr, Grammar, GrammarBuilder, Limits, TokenRef};
use formwork_vocab::{TokenId, TokenMask, Vocabulary};
use std::sync::Arc;

fn grammar(f: impl FnOnce(&mut GrammarBuilder)) -> Grammar {
    let mut b = GrammarBuilder::new();
    f(&mut b);
    b.build("root").unwrap()
}

/// A small JSON-ish grammar: objects of string keys to strings, numbers or nested objects.
fn mini_json() -> Grammar {
    grammar(|b| {
        let value = b.rule_id("value");
        let string = b.rule_id("string");
        let ws = b.rule_id("ws");
        let object = b.rule_id("object");
        b.define(
            "ws",
            Expr::repeat(Expr::class([(' ', ' '), ('\n', '\n')], false), 0, Some(3)),
        );
        b.define(
            "string",
            Expr::seq([
                Expr::lit("\""),
                Expr::star(Expr::alt([
                    Expr::class([('"', '"'), ('\\', '\\'), ('\0', '\x1f')], true),
                    Expr::seq([
                        Expr::lit("\\"),
                        Expr::class([('"', '"'), ('\\', '\\'), ('n', 'n')], false),
                    ]),
                ])),
                Expr::lit("\""),
            ]),
        );
        let member = Expr::seq([
            Expr::Rule(string),
            Expr::Rule(ws),
            Expr::lit(":"),
            Expr::Rule(ws),
            Expr::Rule(value),
        ]);
        b.define(
            "object",
            Expr::seq([
                Expr::lit("{"),
                Expr::Rule(ws),
                Expr::opt(Expr::seq([
                    member.clone(),
                    Expr::star(Expr::seq([
                        Expr::Rule(ws),
                        Expr::lit(","),
                        Expr::Rule(ws),
                        member,
                    ])),
                    Expr::Rule(ws),
                ])),
                Expr::lit("}"),
            ]),
        );
        b.define(
            "value",
            Expr::alt([
                Expr::Rule(object),
                Expr::Rule(string),
                Expr::plus(Expr::class([('0', '9')], false)),
            ]),
        );
        b.define(
            "root",
            Expr::seq([Expr::Rule(ws), Expr::Rule(object), Expr::Rule(ws)]),
        );
    })
}

fn tiny_vocab() -> Arc<Vocabulary> {
    let toks = [
        "{",
        "}",
        "\"",
        ":",
        ",",
        " ",
        "\n",
        "a",
        "b",
        "1",
        "12",
        "{\"",
        "\":",
        "\",",
        "\"}",
        "\": ",
        ", \"",
        "ab",
        "é",
        "\\",
        "\\n",
        "\"a\"",
        "}}",
        " {",
        "x\"",
        "\u{1F600}",
        "\u{C3}",
    ];
    let mut v: Vec<Vec<u8>> = toks.iter().map(|s| s.as_bytes().to_vec()).collect();
    v[26] = vec![0xC3]; // half of "é": a byte-level token
    Arc::new(Vocabulary::from_strings(&v, &["</s>"]))
}

fn tokenize(v: &Vocabulary, text: &[u8]) -> Vec<TokenId> {
    // Greedy longest match.
    let mut out = Vec::new();
    let mut i = 0;
    while i < text.len() {
        let best = v
            .ids()
            .filter(|&t| v.is_text(t) && text[i..].starts_with(v.token_bytes(t)))
            .max_by_key(|&t| v.token_bytes(t).len())
            .unwrap_or_else(|| panic!("no token for {:?}", &text[i..]));
        out.push(best);
        i += v.token_bytes(best).len();
    }
    out
}

#[test]
fn accepts_byte_level() {
    let g = mini_json();
    let l = Limits::default();
    for ok in [
        "{}",
        " {\"a\": 1}\n",
        "{\"a\":{\"b\":\"x\\\"é😀\"}, \"c\":12}",
        "{\n}",
    ] {
        assert!(accepts(&g, ok.as_bytes(), &l).unwrap(), "{ok}");
    }
    for bad in [
        "",
        "{",
        "{\"a\"}",
        "{\"a\":1,}",
        "{}x",
        "{    }",
        "{\"\x01\":1}",
        "{\"a\":1}}",
    ] {
        assert!(!accepts(&g, bad.as_bytes(), &l).unwrap(), "{bad:?}");
    }
    // Invalid UTF-8 inside a string is rejected.
    assert!(!accepts(&g, b"{\"\xC3\":1}", &l).unwrap());
    assert!(
        !accepts(&g, b"{\"\xED\xA0\x80\":1}", &l).unwrap(),
        "surrogates are not text"
    );
}

#[test]
fn masks_follow_the_grammar_and_eos_only_when_accepting() {
    let v = tiny_vocab();
    let cg = CompiledGrammar::new(&mini_json(), v.clone(), &Limits::default()).unwrap();
    let mut m = cg.matcher();
    let mut mask = TokenMask::new(v.len());
    m.compute_mask(&mut mask);
    let names = |mask: &TokenMask| -> Vec<String> {
        mask.iter_ones()
            .map(|t| String::from_utf8_lossy(v.token_bytes(t)).into_owned())
            .collect()
    };
    assert_eq!(names(&mask), vec!["{", " ", "\n", "{\"", " {"]);
    let text = "{\"a\": {\"ab\":12}, \"b\":\"é\\n\"}";
    let toks = tokenize(&v, text.as_bytes());
    for &t in &toks {
        m.compute_mask(&mut mask);
        assert!(
            mask.contains(t),
            "token {:?} not allowed",
            String::from_utf8_lossy(v.token_bytes(t))
        );
        assert!(!mask.contains(TokenId(27)), "EOS before the end");
        assert!(m.is_allowed(t));
        m.commit(t).unwrap();
    }
    assert!(m.is_accepting());
    m.compute_mask(&mut mask);
    assert!(mask.contains(TokenId(27)));
    assert_eq!(names(&mask), vec![" ", "\n", "</s>"]);
    // Every allowed token commits; every other is rejected.
    for t in v.ids() {
        let allowed = mask.contains(t);
        assert_eq!(m.is_allowed(t), allowed, "{t}");
        let r = m.commit(t);
        assert_eq!(r.is_ok(), allowed, "{t}: {r:?}");
        if r.is_ok() {
            m.rollback(1).unwrap();
        }
    }
    m.commit(TokenId(27)).unwrap();
    assert!(m.is_finished());
    m.compute_mask(&mut mask);
    assert!(mask.is_none());
    assert_eq!(m.commit(TokenId(0)), Err(MatchError::Ended));
}

#[test]
fn tokens_crossing_rule_boundaries_and_partial_utf8() {
    let v = tiny_vocab();
    let cg = CompiledGrammar::new(&mini_json(), v.clone(), &Limits::default()).unwrap();
    let mut m = cg.matcher();
    m.commit_bytes(b"{\"a").unwrap();
    let mut mask = TokenMask::new(v.len());
    m.compute_mask(&mut mask);
    // `":` closes the key and starts the member's colon; `",` and `"}` do not fit here.
    assert!(mask.contains(TokenId(12)));
    assert!(!mask.contains(TokenId(13)) && !mask.contains(TokenId(14)));
    // A token ending mid-character is allowed; the next must complete the character.
    assert!(mask.contains(TokenId(26)));
    m.commit(TokenId(26)).unwrap();
    m.compute_mask(&mut mask);
    assert!(
        mask.is_none(),
        "no token is a lone continuation byte: {:?}",
        mask.iter_ones().collect::<Vec<_>>()
    );
    assert!(m.commit_bytes(b"\xA9").is_ok());
}

#[test]
fn rollback_restores_state() {
    let v = tiny_vocab();
    let cg = CompiledGrammar::new(&mini_json(), v.clone(), &Limits::default()).unwrap();
    let mut m = cg.matcher();
    let mut before = TokenMask::new(v.len());
    let mut after = TokenMask::new(v.len());
    m.commit(TokenId(11)).unwrap(); // {"
    m.compute_mask(&mut before);
    m.commit(TokenId(7)).unwrap();
    m.commit(TokenId(12)).unwrap();
    assert_eq!(m.committed(), 3);
    m.rollback(2).unwrap();
    m.compute_mask(&mut after);
    assert_eq!(before, after);
    assert_eq!(
        m.rollback(5),
        Err(MatchError::RollbackTooFar {
            requested: 5,
            available: 1
        })
    );
    assert!(
        m.commit(TokenId(1)).is_ok(),
        "a closing brace is text inside a key"
    );
    assert!(m.commit(TokenId(0)).is_ok());
    assert!(m.commit(TokenId(12)).is_ok());
    assert!(m.commit(TokenId(3)).is_err(), "a second `:`");
    m.reset();
    assert_eq!(m.committed(), 0);
}

#[test]
fn forced_bytes_and_tokens() {
    let g = grammar(|b| {
        b.define(
            "root",
            Expr::seq([
                Expr::lit("{\"name\": "),
                Expr::alt([Expr::lit("1"), Expr::lit("2")]),
            ]),
        );
    });
    let v = Arc::new(Vocabulary::from_strings(
        &[
            "{", "\"", "{\"", "name", "\":", "\": ", ":", " ", "1", "2", "n",
        ],
        &["</s>"],
    ));
    let cg = CompiledGrammar::new(&g, v.clone(), &Limits::default()).unwrap();
    let mut m = cg.matcher();
    assert_eq!(m.forced_bytes(), b"{\"name\": ");
    // Greedy: `{"`, `name`; then `": ` reaches the end of the forced bytes and no token
    // extends it, so it is safe too.
    assert_eq!(m.forced_tokens(), vec![TokenId(2), TokenId(3), TokenId(5)]);
    m.commit_bytes(b"{\"name\": ").unwrap();
    assert!(m.forced_bytes().is_empty());
    assert!(m.forced_tokens().is_empty());
    // A token that could run past the forced bytes is not emitted.
    let g = grammar(|b| {
        b.define(
            "root",
            Expr::seq([
                Expr::lit("\""),
                Expr::star(Expr::class([('a', 'z')], false)),
                Expr::lit("\""),
            ]),
        );
    });
    let v = Arc::new(Vocabulary::from_strings(&["\"", "\"a", "a"], &[]));
    let cg = CompiledGrammar::new(&g, v, &Limits::default()).unwrap();
    let m = cg.matcher();
    assert_eq!(m.forced_bytes(), b"\"");
    assert!(m.forced_tokens().is_empty());
}

#[test]
fn named_special_tokens_only_where_named() {
    let mut toks: Vec<Vec<u8>> = vec![b"a".to_vec(), b"<|tool|>".to_vec()];
    toks.push(b"</s>".to_vec());
    let v = Arc::new(
        Vocabulary::new(
            toks,
            vec![
                formwork_vocab::TokenKind::Normal,
                formwork_vocab::TokenKind::Special,
                formwork_vocab::TokenKind::Special,
            ],
            vec![TokenId(2)],
        )
        .unwrap(),
    );
    let g = grammar(|b| {
        b.define(
            "root",
            Expr::seq([
                Expr::lit("a"),
                Expr::Token(TokenRef::Name("<|tool|>".into())),
                Expr::lit("a"),
            ]),
        );
    });
    let cg = CompiledGrammar::new(&g, v.clone(), &Limits::default()).unwrap();
    let mut m = cg.matcher();
    let mut mask = TokenMask::new(v.len());
    m.compute_mask(&mut mask);
    assert_eq!(mask.iter_ones().collect::<Vec<_>>(), vec![TokenId(0)]);
    m.commit(TokenId(0)).unwrap();
    m.compute_mask(&mut mask);
    assert_eq!(mask.iter_ones().collect::<Vec<_>>(), vec![TokenId(1)]);
    assert!(m.forced_bytes().is_empty(), "a special token may come next");
    m.commit(TokenId(1)).unwrap();
    m.commit(TokenId(0)).unwrap();
    m.compute_mask(&mut mask);
    assert_eq!(mask.iter_ones().collect::<Vec<_>>(), vec![TokenId(2)]);
    // Grammar text never produces the special token's name.
    assert!(!accepts(&g, b"a<|tool|>a", &Limits::default()).unwrap());
    let bad = grammar(|b| {
        b.define("root", Expr::Token(TokenRef::Name("<|nope|>".into())));
    });
    assert!(matches!(
        CompiledGrammar::new(&bad, v, &Limits::default()),
        Err(CompileError::UnknownToken { .. })
    ));
}

#[test]
fn ambiguity_is_bounded() {
    // Two readings at every level of `x` (through `w` they stay apart: `a x b | a x c` would
    // be factored into `a x (b | c)` when lowering). They used to multiply, 2^depth stacks;
    // readings that share their top frames are now one stack over a join of their parents,
    // so twenty levels stay far below the limit.
    let g = grammar(|b| {
        let x = b.rule_id("x");
        let w = b.rule_id("w");
        b.define(
            "x",
            Expr::alt([
                Expr::seq([Expr::lit("a"), Expr::Rule(x), Expr::lit("b")]),
                Expr::seq([Expr::lit("a"), Expr::Rule(w), Expr::lit("c")]),
                Expr::lit("z"),
            ]),
        );
        b.define("w", Expr::Rule(x));
        b.define("root", Expr::Rule(x));
    });
    let limits = Limits {
        max_stacks: 64,
        ..Limits::default()
    };
    let v = Arc::new(Vocabulary::from_strings(&["a", "z", "b", "c"], &[]));
    let cg = CompiledGrammar::new(&g, v.clone(), &limits).unwrap();
    let mut m = cg.matcher();
    for _ in 0..20 {
        m.commit(TokenId(0)).unwrap();
    }
    m.commit(TokenId(1)).unwrap();
    // Any mix of the two closings, one per level.
    for i in 0..20 {
        m.commit(TokenId(if i % 3 == 0 { 3 } else { 2 })).unwrap();
    }
    assert!(m.is_accepting());

    // A grammar that keeps more than 64 distinct positions alive at once still hits the
    // limit, with an error rather than a hang: `a`, then one of 100 rules, each its own
    // digits.
    let g = grammar(|b| {
        let rules: Vec<_> = (0..100).map(|i| b.rule_id(&format!("r{i}"))).collect();
        for i in 0..100 {
            b.define(&format!("r{i}"), Expr::lit(format!("{i:03}")));
        }
        b.define("root", Expr::seq([Expr::lit("a"), Expr::alt(rules.iter().map(|&r| Expr::Rule(r)))]));
    });
    let cg = CompiledGrammar::new(&g, v, &limits).unwrap();
    let mut m = cg.matcher();
    assert_eq!(m.commit(TokenId(0)), Err(MatchError::TooManyStacks { limit: 64 }));
}

#[test]
fn a_grammar_stops_at_max_states_with_an_error_naming_it() {
    // Every `a` of `a{0,500}` is a new parser state; allow 40 in all.
    let g = grammar(|b| {
        b.define("root", Expr::repeat(Expr::lit("a"), 0, Some(500)));
    });
    let limits = Limits { max_states: 40, ..Limits::default() };
    let v = Arc::new(Vocabulary::from_strings(&["a"], &["</s>"]));
    let cg = CompiledGrammar::new(&g, v.clone(), &limits).unwrap();
    let mut m = cg.matcher();
    let mut mask = TokenMask::new(v.len());
    let err = (0..100).find_map(|_| m.commit(TokenId(0)).err());
    assert_eq!(err, Some(MatchError::TooManyStates { limit: 40 }));
    assert!(err.unwrap().to_string().contains("max_states"));
    // Masks stay computable (the refused step reads as dead) and within the limit.
    m.compute_mask(&mut mask);
    assert!(m.stats().states <= 40 + 8, "{}", m.stats().states);
    // A fresh compile with the default limit takes all 500.
    let cg = CompiledGrammar::new(&g, v, &Limits::default()).unwrap();
    let mut m = cg.matcher();
    assert!((0..500).all(|_| m.commit(TokenId(0)).is_ok()));
    assert!(m.is_accepting());
}

#[test]
fn huge_and_bad_grammars_fail_fast() {
    let t = std::time::Instant::now();
    let g = grammar(|b| {
        b.define("root", Expr::repeat(Expr::lit("a"), 0, Some(u32::MAX)));
    });
    assert!(matches!(
        accepts(&g, b"a", &Limits::default()),
        Err(CompileError::RepeatTooLarge { .. })
    ));
    let g = grammar(|b| {
        let r = b.rule_id("root");
        b.define(
            "root",
            Expr::alt([Expr::seq([Expr::Rule(r), Expr::lit("a")]), Expr::lit("b")]),
        );
    });
    let e = accepts(&g, b"ba", &Limits::default()).unwrap_err();
    assert!(e.to_string().contains("left-recursive"), "{e}");
    let g = grammar(|b| {
        b.define("root", Expr::Class(vec![]));
    });
    assert!(matches!(
        accepts(&g, b"", &Limits::default()),
        Err(CompileError::MatchesNothing { .. })
    ));
    // Deep nesting built by hand.
    let mut e = Expr::lit("x");
    for _ in 0..5000 {
        e = Expr::Alt(vec![Expr::Seq(vec![e, Expr::lit("y")]), Expr::lit("z")]);
    }
    let g = grammar(|b| {
        b.define("root", e);
    });
    assert!(matches!(
        accepts(&g, b"z", &Limits::default()),
        Err(CompileError::NestingTooDeep { .. })
    ));
    assert!(t.elapsed().as_secs() < 5);
}

#[test]
fn deep_expressions_lower_without_recursion() {
    for d in [100usize, 1500] {
        let mut e = Expr::lit("x");
        for _ in 0..d {
            e = Expr::Alt(vec![Expr::Seq(vec![e, Expr::lit("y")]), Expr::lit("z")]);
        }
        let g = grammar(|b| {
            b.define("root", e);
        });
        assert_eq!(
            accepts(
                &g,
                b"z",
                &Limits {
                    max_nesting: 100_000,
                    ..Limits::default()
                }
            ),
            Ok(true),
            "{d}"
        );
    }
}

/// Every mask equals the brute-force answer (commit each token, then roll back), along a
/// deeply nested document, so truncated (context-independent) masks are exercised.
#[test]
fn masks_equal_brute_force_in_deep_contexts() {
    for g in [mini_json(), crate::json::grammar(&Default::default())] {
        brute_force_along(&g);
    }
}

fn brute_force_along(g: &Grammar) {
    let v = tiny_vocab();
    let cg = CompiledGrammar::new(g, v.clone(), &Limits::default()).unwrap();
    let oracle_cg = CompiledGrammar::new(g, v.clone(), &Limits::default()).unwrap();
    let text =
        "{\"a\": {\"b\": {\"ab\": {\"a\": \"é\\n\", \"b\": {}}, \"ab\": 1}}, \"b\": \"a\\\"\"}";
    let toks = tokenize(&v, text.as_bytes());
    let mut m = cg.matcher();
    let mut o = oracle_cg.matcher();
    let mut mask = TokenMask::new(v.len());
    for &t in &toks {
        m.compute_mask(&mut mask);
        for u in v.ids() {
            let ok = o.commit(u).is_ok();
            if ok {
                o.rollback(1).unwrap();
            }
            assert_eq!(
                mask.contains(u),
                ok,
                "token {u} after {} commits",
                o.committed()
            );
        }
        m.commit(t).unwrap();
        o.commit(t).unwrap();
    }
}

#[test]
fn string_states_self_loop() {
    let v = tiny_vocab();
    let g = crate::json::grammar(&Default::default());
    let cg = CompiledGrammar::new(&g, v.clone(), &Limits::default()).unwrap();
    let mut m = cg.matcher();
    m.commit_bytes(b"{\"a\": {\"b\": {\"c\": \"x").unwrap();
    let s = *m.states.last().unwrap();
    let mut aut = cg.aut.stepper();
    let t = aut.truncate(s, 4);
    let mut c = 0;
    for b in 0..=255u8 {
        if aut.step(t, b) == t {
            c += 1;
        }
    }
    let mut cs = 0;
    for b in 0..=255u8 {
        if aut.step(s, b) == s {
            cs += 1;
        }
    }
    assert!(
        c > 80 && cs > 80,
        "self-loop bytes: truncated {c}, full {cs}"
    );
}

/// Ambiguity plus depth: several stacks share their top frames but differ below, so
/// truncated masks must defer to the full state for tokens that close rules.
#[test]
fn masks_equal_brute_force_with_ambiguous_contexts() {
    let g = grammar(|b| {
        let x = b.rule_id("x");
        let inner = Expr::alt([
            Expr::seq([Expr::lit("("), Expr::Rule(x), Expr::lit(")")]),
            Expr::seq([Expr::lit("("), Expr::Rule(x), Expr::lit("]")]),
            Expr::star(Expr::class([('a', 'b')], false)),
        ]);
        b.define("x", inner);
        b.define("root", Expr::seq([Expr::Rule(x), Expr::lit(";")]));
    });
    let v = Arc::new(Vocabulary::from_strings(
        &[
            "(", ")", "]", ";", "a", "b", "ab", "((", "))", ")]", "])", "]]", "a)", "b]", "a))",
            ")];", "];", ");", "aa(",
        ],
        &["</s>"],
    ));
    let cg = CompiledGrammar::new(&g, v.clone(), &Limits::default()).unwrap();
    let text: &[u8] = b"((((((ab)])])];";
    for k in 0..=text.len() {
        let ok = (0..=k).all(|j| {
            let mut mm = cg.matcher();
            mm.commit_bytes(&text[..j]).is_ok()
        });
        assert!(
            ok,
            "prefix {:?} rejected",
            String::from_utf8_lossy(&text[..k])
        );
    }
    assert_eq!(accepts(&g, text, &Limits::default()), Ok(true));
    masks_match_brute_force_along(&g, &v, text);
}

/// A bounded repetition inside ambiguous contexts: the readings share the string's frames,
/// so its stacks sit over joins (see `automaton::join`), and masks inside it go through
/// canonical states, which replace the repetition's frames in each member of a join. Every
/// mask along the text equals brute force, also for tokens longer than the budget left.
#[test]
fn masks_equal_brute_force_in_bounded_repeats_under_joins() {
    let g = grammar(|b| {
        let x = b.rule_id("x");
        let w1 = b.rule_id("w1");
        let w2 = b.rule_id("w2");
        b.define(
            "x",
            Expr::alt([
                Expr::seq([Expr::lit("("), Expr::Rule(w1), Expr::lit(")")]),
                Expr::seq([Expr::lit("("), Expr::Rule(w2), Expr::lit("]")]),
                Expr::repeat(Expr::class([('a', 'b')], false), 0, Some(300)),
            ]),
        );
        b.define("w1", Expr::Rule(x));
        b.define("w2", Expr::Rule(x));
        b.define("root", Expr::seq([Expr::Rule(x), Expr::lit(";")]));
    });
    let ab40 = "ab".repeat(20);
    let v = Arc::new(Vocabulary::from_strings(
        &["(", ")", "]", ";", "a", "b", "ab", "abab", "abababab", ab40.as_str(), "b)", "a]", "ab);", "((", "))", "])"],
        &["</s>"],
    ));
    let cg = CompiledGrammar::new(&g, v.clone(), &Limits::default()).unwrap();
    let mut text = b"((((".to_vec();
    text.extend(std::iter::repeat_n(b"ab".as_slice(), 140).flatten());
    text.extend_from_slice(b")])];");
    assert_eq!(accepts(&g, &text, &Limits::default()), Ok(true));
    let mut m = cg.matcher();
    m.commit_bytes(&text[..10]).unwrap();
    assert!(
        m.grammar().aut.info(m.cur()).stacks.len() <= 4,
        "the four readings of the string are one stack per position"
    );
    masks_match_brute_force_along(&g, &v, &text);
}

/// First-byte dispatch: a partial key that may still become a listed key (`alpha`,
/// `alpine`) or is already any other word leads, on most letters, to the one looping
/// "other word" state; the mask taken from that state's mask must equal brute force, also
/// for tokens that cross the closing quote and for tokens that continue a listed key.
#[test]
fn masks_equal_brute_force_on_key_prefixes() {
    let g = grammar(|b| {
        let key = Expr::alt([
            Expr::lit("alpha"),
            Expr::lit("alpine"),
            Expr::star(Expr::class([('a', 'z')], false)),
        ]);
        let pair = Expr::seq([Expr::lit("\""), key, Expr::lit("\":1")]);
        b.define(
            "root",
            Expr::seq([
                Expr::lit("{"),
                pair.clone(),
                Expr::star(Expr::seq([Expr::lit(","), pair])),
                Expr::lit("}"),
            ]),
        );
    });
    let mut words: Vec<String> = Vec::new();
    for a in 'a'..='z' {
        words.push(a.to_string());
        for c in ['a', 'e', 'h', 'i', 'l', 'n', 'p', 'z'] {
            words.push(format!("{a}{c}"));
        }
        words.push(format!("{a}\""));
        words.push(format!("{a}\":"));
    }
    for w in [
        "{\"", "\":", "1", ",\"", "}", "\"", "pha", "ph", "ine", "ha\"", "alp", "pine\":1", "\":1}",
    ] {
        words.push(w.to_string());
    }
    let refs: Vec<&str> = words.iter().map(String::as_str).collect();
    let v = Arc::new(Vocabulary::from_strings(&refs, &["</s>"]));
    let text: &[u8] = b"{\"alpha\":1,\"alpx\":1,\"alpine\":1,\"zz\":1,\"al\":1}";
    assert_eq!(accepts(&g, text, &Limits::default()), Ok(true));
    masks_match_brute_force_along(&g, &v, text);
}

/// Unordered groups (objects in any key order), nested, with extra keys: every mask equals
/// brute force. Key choices truncate at the group's family frames and dispatch on the key's
/// first byte, with parts cached across the object's keys; the brute force only steps.
#[test]
fn masks_equal_brute_force_in_unordered_groups() {
    // Without presence clauses, and with two (alpine brings beta; alpha or beta), which
    // every object below satisfies.
    let t = |present: &[u32], absent: &[u32]| crate::Presence { present: present.to_vec(), absent: absent.to_vec() };
    for presence in [vec![], vec![vec![t(&[], &[1]), t(&[1, 2], &[])], vec![t(&[0], &[]), t(&[2], &[])]]] {
        let g = grammar(|b| {
            let obj = b.rule_id("obj");
            let val = Expr::alt([Expr::lit("1"), Expr::Rule(obj)]);
            let member = |k: &str| Expr::seq([Expr::lit(format!("\"{k}\":")), val.clone()]);
            let other = Expr::seq([Expr::lit("\""), Expr::star(Expr::class([('a', 'z')], false)), Expr::lit("\":"), val.clone()]);
            let group = crate::Unordered {
                members: vec![(member("alpha"), false), (member("alpine"), false), (member("beta"), true)],
                extra: Some(other),
                sep: Expr::lit(","),
                min: 1,
                max: None,
                presence: presence.clone(),
            };
            b.define("obj", Expr::seq([Expr::lit("{"), Expr::Unordered(Box::new(group)), Expr::lit("}")]));
            b.define("root", Expr::Rule(obj));
        });
        let mut words: Vec<String> = Vec::new();
        for a in 'a'..='z' {
            words.push(a.to_string());
            for c in ['a', 'e', 'h', 'i', 'l', 'n', 'p', 't', 'z'] {
                words.push(format!("{a}{c}"));
            }
            words.push(format!("{a}\""));
            words.push(format!("{a}\":"));
            words.push(format!("{a}\":1"));
        }
        for w in [
            "{\"", "\":", "1", ",\"", "}", "\"", "pha", "ph", "ine", "ha\"", "alp", "pine\":1", "\":1}", "\":{\"", "1}", "},\"",
            "}}", "beta", "\"beta\":", "eta\":1}", ",", "{",
        ] {
            words.push(w.to_string());
        }
        let refs: Vec<&str> = words.iter().map(String::as_str).collect();
        let v = Arc::new(Vocabulary::from_strings(&refs, &["</s>"]));
        let texts: [&[u8]; 3] = [
            b"{\"alpha\":{\"zz\":1,\"beta\":1,\"alpine\":{\"beta\":{\"alp\":1,\"beta\":1}}},\"alpx\":1,\"beta\":1}",
            b"{\"beta\":{\"beta\":1,\"alpha\":1},\"alpine\":1,\"alpha\":{\"alpine\":1,\"beta\":1}}",
            b"{\"q\":1,\"beta\":{\"alpine\":1,\"alpha\":1,\"beta\":1,\"z\":1},\"alpha\":1}",
        ];
        for text in texts {
            assert_eq!(accepts(&g, text, &Limits::default()), Ok(true), "{}", String::from_utf8_lossy(text));
            masks_match_brute_force_along(&g, &v, text);
        }
    }
}

/// The same members of an unordered group read in two orders lead to one parser state, so
/// their masks are shared: a family rule is told apart by its key when it is expanded, not
/// when it is named, and a rule of a key built before takes that rule's alternatives.
#[test]
fn unordered_members_in_either_order_reach_one_state() {
    let g = grammar(|b| {
        let member = |k: &str| Expr::seq([Expr::lit(format!("\"{k}\":")), Expr::alt([Expr::lit("1"), Expr::lit("22")])]);
        let group = crate::Unordered {
            members: ["a", "b", "c", "d"].iter().map(|k| (member(k), false)).collect(),
            extra: None,
            sep: Expr::lit(","),
            min: 0,
            max: None,
            presence: vec![],
        };
        b.define("root", Expr::seq([Expr::lit("{"), Expr::Unordered(Box::new(group)), Expr::lit("}")]));
    });
    let v = Arc::new(Vocabulary::from_strings(&["{", "\"", "a", "b", "c", "d", "\":", "1", "2", ",", "}"], &["</s>"]));
    let cg = CompiledGrammar::new(&g, v.clone(), &Limits::default()).unwrap();
    let mut mask = TokenMask::new(v.len());
    let mut state_after = |text: &[u8]| {
        let mut m = cg.matcher();
        for i in 0..text.len() {
            m.compute_mask(&mut mask);
            m.commit_bytes(&text[i..i + 1]).unwrap();
        }
        m.cur()
    };
    let ab = state_after(b"{\"a\":1,\"b\":22");
    let ba = state_after(b"{\"b\":22,\"a\":1");
    assert_eq!(ab, ba, "two orders of the same members");
    let abc = state_after(b"{\"a\":1,\"b\":22,\"c\":1");
    let cba = state_after(b"{\"c\":1,\"b\":22,\"a\":1");
    let bca = state_after(b"{\"b\":22,\"c\":1,\"a\":1");
    assert_eq!(abc, cba);
    assert_eq!(abc, bca);
    assert_ne!(ab, abc, "different members seen");
    // And the language is still each member at most once.
    assert_eq!(accepts(&g, b"{\"b\":22,\"a\":1,\"b\":1}", &Limits::default()), Ok(false));
    assert_eq!(accepts(&g, b"{\"d\":1,\"b\":22,\"a\":1,\"c\":1}", &Limits::default()), Ok(true));
}

/// Walks `text` byte by byte through `g` and checks every mask on the way (and at the end)
/// against brute force: each token stepped through a second, independent copy of the grammar.
fn masks_match_brute_force_along(g: &Grammar, v: &Arc<Vocabulary>, text: &[u8]) {
    let cg = CompiledGrammar::new(g, v.clone(), &Limits::default()).unwrap();
    let oracle = CompiledGrammar::new(g, v.clone(), &Limits::default()).unwrap();
    let mut m = cg.matcher();
    let mut o = oracle.matcher();
    let mut mask = TokenMask::new(v.len());
    for i in 0..=text.len() {
        m.compute_mask(&mut mask);
        for u in v.ids() {
            assert_eq!(
                mask.contains(u),
                o.is_allowed(u),
                "token {:?} after {:?}",
                String::from_utf8_lossy(v.token_bytes(u)),
                String::from_utf8_lossy(&text[..i])
            );
        }
        if i < text.len() {
            m.commit_bytes(&text[i..=i]).unwrap();
            o.commit_bytes(&text[i..=i]).unwrap();
        }
    }
    assert!(m.is_accepting());
}

#[test]
fn a_clone_goes_on_independently_and_eos_ends_until_rolled_back() {
    let v = tiny_vocab();
    let cg = CompiledGrammar::new(&mini_json(), v.clone(), &Limits::default()).unwrap();
    let mut m = cg.matcher();
    m.commit(TokenId(11)).unwrap(); // {"
    let mut fork = m.clone();
    let (mut a, mut b) = (TokenMask::new(v.len()), TokenMask::new(v.len()));
    m.compute_mask(&mut a);
    fork.compute_mask(&mut b);
    assert_eq!(a, b);
    fork.commit(TokenId(7)).unwrap();
    assert_eq!((m.committed(), fork.committed()), (1, 2));
    m.compute_mask(&mut b);
    assert_eq!(a, b, "the original is unchanged by its fork's commits");

    let mut m = cg.matcher();
    m.commit(TokenId(0)).unwrap(); // {
    m.commit(TokenId(1)).unwrap(); // }
    assert!(m.is_accepting() && !m.is_ended());
    m.commit(TokenId(27)).unwrap(); // </s>
    assert!(m.is_ended() && m.is_finished());
    m.rollback(1).unwrap();
    assert!(!m.is_ended() && m.is_accepting());
}

/// A vocabulary with text tokens, a special token, EOS and an unused slot:
/// 0 `a`, 1 `b`, 2 `ab`, 3 `c`, 4 `<|tool|>` (special), 5 `</s>` (EOS), 6 unused.
fn negation_vocab() -> Arc<Vocabulary> {
    use formwork_vocab::TokenKind::{Normal, Special, Unused};
    let toks: Vec<Vec<u8>> = ["a", "b", "ab", "c", "<|tool|>", "</s>", "<unused>"].iter().map(|s| s.as_bytes().to_vec()).collect();
    Arc::new(Vocabulary::new(toks, vec![Normal, Normal, Normal, Normal, Special, Special, Unused], vec![TokenId(5)]).unwrap())
}

/// Checks the mask at every step of `path` against `is_allowed` and against committing
/// each token on an independent matcher; returns the mask after each step.
fn negation_masks(g: &Grammar, v: &Arc<Vocabulary>, path: &[u32]) -> Vec<Vec<u32>> {
    let cg = CompiledGrammar::new(g, v.clone(), &Limits::default()).unwrap();
    let oracle = CompiledGrammar::new(g, v.clone(), &Limits::default()).unwrap();
    let (mut m, mut o, mut q) = (cg.matcher(), oracle.matcher(), oracle.matcher());
    let mut mask = TokenMask::new(v.len());
    let mut out = Vec::new();
    for i in 0..=path.len() {
        m.compute_mask(&mut mask);
        for u in v.ids() {
            let ok = o.commit(u).is_ok();
            if ok {
                o.rollback(1).unwrap();
            }
            assert_eq!(mask.contains(u), ok, "token {u} after {:?}", &path[..i]);
            assert_eq!(q.is_allowed(u), ok, "is_allowed({u}) after {:?}", &path[..i]);
        }
        out.push(mask.iter_ones().map(|t| t.0).collect());
        if let Some(&t) = path.get(i) {
            for x in [&mut m, &mut o, &mut q] {
                x.commit(TokenId(t)).unwrap();
            }
        }
    }
    out
}

#[test]
fn negated_token_references_take_any_other_whole_token() {
    let v = negation_vocab();
    let g = crate::gbnf::parse("root ::= \"a\" !<[2]> \"b\"", &Limits::default()).unwrap();
    // After `a`, any token but `ab`: text or special, never EOS or the unused slot; a text
    // token is taken whole (`b`, then `b` again).
    let masks = negation_masks(&g, &v, &[0, 4, 1]);
    assert_eq!(masks, [vec![0], vec![0, 1, 3, 4], vec![1], vec![5]]);
    assert_eq!(negation_masks(&g, &v, &[0, 1, 1])[2], [1]);
    let cg = CompiledGrammar::new(&g, v.clone(), &Limits::default()).unwrap();
    let mut m = cg.matcher();
    m.commit(TokenId(0)).unwrap();
    assert!(m.forced_bytes().is_empty() && !m.is_finished(), "a whole token comes next");
    assert!(matches!(m.commit(TokenId(2)), Err(MatchError::TokenRejected { .. })));
    assert!(matches!(m.commit(TokenId(6)), Err(MatchError::TokenRejected { .. })));
    // By name too; an unknown token is an error naming it.
    let g = crate::gbnf::parse("root ::= !<|tool|> \"c\"", &Limits::default()).unwrap();
    assert_eq!(negation_masks(&g, &v, &[2, 3])[0], [0, 1, 2, 3]);
    let g = crate::gbnf::parse("root ::= !<[99]>", &Limits::default()).unwrap();
    assert!(matches!(CompiledGrammar::new(&g, v, &Limits::default()), Err(CompileError::UnknownToken { .. })));
    // Without a vocabulary nothing takes it: text never spells a whole token.
    let g = crate::gbnf::parse("root ::= \"a\" !<[2]>?", &Limits::default()).unwrap();
    assert!(accepts(&g, b"a", &Limits::default()).unwrap());
    assert!(!accepts(&g, b"ab", &Limits::default()).unwrap());
}

#[test]
fn tokens_read_as_text_and_taken_whole_go_on_both_ways() {
    let v = negation_vocab();
    // `a` is the text of the first branch and a whole token for the second: both go on.
    let g = crate::gbnf::parse("root ::= \"a\" \"b\" | !<[3]> \"c\"", &Limits::default()).unwrap();
    assert_eq!(negation_masks(&g, &v, &[0, 1]), [vec![0, 1, 2, 4], vec![1, 3], vec![5]]);
    assert_eq!(negation_masks(&g, &v, &[2, 3]), [vec![0, 1, 2, 4], vec![3, 5], vec![5]]);
    // Next to a plain token reference: `<|tool|>` either way, any other token by negation.
    let g = crate::gbnf::parse("root ::= (<[4]> | !<[4]>) \"c\"", &Limits::default()).unwrap();
    assert_eq!(negation_masks(&g, &v, &[4, 3])[0], [0, 1, 2, 3, 4]);
    // Two negations exclude nothing between them; repeated, they loop (`c` both ends the
    // input as text and goes on as a whole token).
    let g = crate::gbnf::parse("root ::= (!<[0]> | !<[1]>)* \"c\"", &Limits::default()).unwrap();
    let masks = negation_masks(&g, &v, &[0, 1, 4, 2, 3]);
    assert!(masks[..5].iter().all(|m| m == &[0, 1, 2, 3, 4]), "{masks:?}");
    assert_eq!(masks[5], [0, 1, 2, 3, 4, 5]);
}

/// `accepts` tells a limit hit (too many stacks at once) from a rejection.
#[test]
fn accepts_reports_a_stack_limit_as_undecided_not_rejected() {
    // After `b`, three stacks (one per rule): over a limit of 2; after `a`, two.
    let g = crate::gbnf::parse("root ::= \"a\" (x | y) | \"b\" (x | y | z)\nx ::= [1-3] \"p\"\ny ::= [12] \"q\"\nz ::= \"1\" \"r\"", &Limits::default()).unwrap();
    let tight = Limits { max_stacks: 2, ..Limits::default() };
    match accepts(&g, b"b1r", &tight) {
        Err(CompileError::Undecided { offset: 0, error: MatchError::TooManyStacks { limit: 2 } }) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(accepts(&g, b"a1p", &tight), Ok(true), "two stacks fit");
    assert_eq!(accepts(&g, b"a1r", &tight), Ok(false));
    assert_eq!(accepts(&g, b"b1r", &Limits::default()), Ok(true));
}
