//! Tests of lowering and its checks.

use super::*;
use crate::GrammarBuilder;

fn build(f: impl FnOnce(&mut GrammarBuilder)) -> Grammar {
    let mut b = GrammarBuilder::new();
    f(&mut b);
    b.build("root").unwrap()
}

#[test]
fn classes_lower_to_disjoint_utf8_alternatives() {
    let g = build(|b| {
        b.define("root", Expr::any_char());
    });
    let f = lower(&g, None, &Limits::default()).unwrap();
    let Symbol::Rule(r) = f.elems[f.alts[0][0] as usize] else {
        panic!("expected a class rule")
    };
    let leads: Vec<ByteSet> = f.alts[r as usize]
        .iter()
        .map(|&s| match f.elems[s as usize] {
            Symbol::Bytes(i) => f.sets[i as usize],
            _ => panic!(),
        })
        .collect();
    for (i, a) in leads.iter().enumerate() {
        for b in &leads[i + 1..] {
            let mut x = *a;
            for k in 0..4 {
                x.0[k] &= b.0[k];
            }
            assert!(x.is_empty(), "lead bytes overlap");
        }
    }
    assert_eq!(leads.len(), 8); // ASCII, C2-DF, E0, E1-EC|EE-EF, ED, F0, F1-F3, F4
}

#[test]
fn left_recursion_is_refused_with_the_cycle() {
    let g = build(|b| {
        let x = b.rule_id("x");
        b.define(
            "x",
            Expr::alt([
                Expr::seq([Expr::Rule(x), Expr::lit("+"), Expr::lit("1")]),
                Expr::lit("1"),
            ]),
        );
        b.define("root", Expr::Rule(x));
    });
    let e = lower(&g, None, &Limits::default()).unwrap_err();
    assert!(
        matches!(&e, CompileError::LeftRecursion { rule, .. } if rule == "x"),
        "{e}"
    );
    // Indirect, through a nullable prefix.
    let g = build(|b| {
        let a = b.rule_id("a");
        let n = b.rule_id("n");
        b.define("n", Expr::opt(Expr::lit("z")));
        b.define(
            "b",
            Expr::seq([Expr::Rule(n), Expr::Rule(a), Expr::lit("y")]),
        );
        let bb = b.rule_id("b");
        b.define(
            "a",
            Expr::alt([Expr::seq([Expr::Rule(bb), Expr::lit("x")]), Expr::lit("q")]),
        );
        b.define("root", Expr::Rule(a));
    });
    let e = lower(&g, None, &Limits::default()).unwrap_err();
    assert!(matches!(e, CompileError::LeftRecursion { .. }), "{e}");
    // Star of a nullable thing is fine (tail recursion pushes nothing).
    let g = build(|b| {
        b.define("root", Expr::star(Expr::opt(Expr::lit("a"))));
    });
    assert!(lower(&g, None, &Limits::default()).is_ok());
}

#[test]
fn nothing_and_size_limits() {
    let g = build(|b| {
        b.define("root", Expr::seq([Expr::lit("a"), Expr::Class(vec![])]));
    });
    assert!(matches!(
        lower(&g, None, &Limits::default()),
        Err(CompileError::MatchesNothing { .. })
    ));
    let g = build(|b| {
        let r = b.rule_id("root");
        b.define("root", Expr::seq([Expr::lit("a"), Expr::Rule(r)]));
    });
    assert!(matches!(
        lower(&g, None, &Limits::default()),
        Err(CompileError::MatchesNothing { .. })
    ));
    let g = build(|b| {
        b.define("root", Expr::repeat(Expr::lit("a"), 0, Some(1_000_000)));
    });
    assert!(matches!(
        lower(&g, None, &Limits::default()),
        Err(CompileError::RepeatTooLarge { .. })
    ));
    // Nested repetitions share their unit rule: linear size, no blow-up.
    let g = build(|b| {
        b.define(
            "root",
            Expr::repeat(
                Expr::repeat(Expr::repeat(Expr::lit("ab"), 0, Some(1000)), 1000, None),
                0,
                Some(1000),
            ),
        );
    });
    assert!(lower(&g, None, &Limits::default()).unwrap().elems.len() < 20_000);
    let g = build(|b| {
        b.define("root", Expr::lit("x".repeat(500)));
    });
    let small = Limits {
        max_elements: 100,
        ..Limits::default()
    };
    assert!(matches!(
        lower(&g, None, &small),
        Err(CompileError::TooManyElements { .. })
    ));
}

#[test]
fn alternatives_are_left_factored() {
    // Shared prefixes of all lengths, a duplicate, an empty alternative and a nested group:
    // after lowering no rule has two alternatives starting with the same element, and the
    // language is unchanged.
    let words = ["\\\"", "\\\\", "\\u0041", "\\u0042", "abc", "abd", "ab", "abc", "x", ""];
    let g = build(|b| {
        b.define("root", Expr::alt(words.iter().map(|w| Expr::lit(*w)).chain([crate::json::escape()])));
    });
    let f = lower(&g, None, &Limits::default()).unwrap();
    for (r, alts) in f.alts.iter().enumerate() {
        let firsts: Vec<Symbol> = alts.iter().map(|&p| f.elems[p as usize]).filter(|&e| e != Symbol::End).collect();
        for (i, a) in firsts.iter().enumerate() {
            assert!(!firsts[i + 1..].contains(a), "rule {} has two alternatives starting with {a:?}", f.names.get(r as u32));
        }
    }
    let accepts = |w: &str| crate::matcher::accepts(&g, w.as_bytes(), &Limits::default()).unwrap();
    for w in words.iter().chain(&["\\n", "\\u00ff", "\\/"]) {
        assert!(accepts(w), "{w:?} is rejected");
    }
    for w in ["\\", "\\u004", "a", "abcd", "\\x", "xx"] {
        assert!(!accepts(w), "{w:?} is accepted");
    }
}
