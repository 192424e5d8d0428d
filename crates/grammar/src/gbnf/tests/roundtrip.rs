//! The round-trip property, property-tested (the cargo-fuzz target `gbnf_roundtrip` in
//! `fuzz/` runs the same check on raw bytes):
//!
//! - random canonical IR grammars: `parse(print(g)) == g` (or, when the root can match
//!   nothing, parsing reports exactly that);
//! - random GBNF-like text: parsing never panics, and whatever parses round-trips.
//!
//! Regressions found by fuzzing live at the bottom as ordinary tests.

use super::super::lower::productive_rules;
use crate::{gbnf, Expr, Grammar, GrammarBuilder, Limits, RuleId, TokenRef};
use formwork_vocab::TokenId;
use proptest::prelude::*;

/// The canonical form `gbnf::parse` produces (see the module docs of `gbnf`).
fn canon(e: Expr) -> Expr {
    match e {
        Expr::Seq(v) => {
            let mut out = Vec::new();
            for x in v {
                match canon(x) {
                    Expr::Seq(inner) => out.extend(inner),
                    x => out.push(x),
                }
            }
            if out.len() == 1 {
                out.pop().unwrap()
            } else {
                Expr::Seq(out)
            }
        }
        Expr::Alt(v) => {
            let mut out = Vec::new();
            for x in v {
                match canon(x) {
                    Expr::Alt(inner) => out.extend(inner),
                    x => out.push(x),
                }
            }
            if out.len() == 1 {
                out.pop().unwrap()
            } else {
                Expr::Alt(out)
            }
        }
        Expr::Repeat { expr, min, max } => Expr::Repeat { expr: Box::new(canon(*expr)), min, max },
        e => e,
    }
}

fn any_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => proptest::char::range('a', 'e'),
        2 => proptest::sample::select(vec!['"', '\\', '[', ']', '-', '^', '#', ' ', '\n', '\t', '\r', '\0', '.', '|', '(', ')']),
        1 => proptest::sample::select(vec!['é', '€', '中', '😀', '\u{7F}', '\u{A0}', '\u{2028}', '\u{FEFF}', '\u{D7FF}', '\u{E000}', char::MAX]),
        1 => any::<char>(),
    ]
}

fn leaf(n_rules: u32) -> impl Strategy<Value = Expr> {
    prop_oneof![
        3 => proptest::collection::vec(any_char(), 0..4).prop_map(|c| Expr::Literal(c.into_iter().collect())),
        2 => (proptest::collection::vec((any_char(), any_char()), 0..4), any::<bool>())
            .prop_map(|(r, neg)| Expr::class(r.into_iter().map(|(a, b)| if a <= b { (a, b) } else { (b, a) }), neg)),
        1 => Just(Expr::any_char()),
        2 => (0..n_rules).prop_map(|i| Expr::Rule(RuleId(i))),
        1 => prop_oneof![
            any::<u32>().prop_map(|i| Expr::Token(TokenRef::Id(TokenId(i)))),
            "[a-z|_/]{1,6}".prop_map(|s| Expr::Token(TokenRef::Name(format!("<{s}>")))),
            any::<u32>().prop_map(|i| Expr::NotToken(TokenRef::Id(TokenId(i)))),
            "[a-z|_/]{1,6}".prop_map(|s| Expr::NotToken(TokenRef::Name(format!("<{s}>")))),
        ],
    ]
}

fn expr(n_rules: u32) -> impl Strategy<Value = Expr> {
    leaf(n_rules).prop_recursive(5, 40, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Expr::Seq),
            proptest::collection::vec(inner.clone(), 1..4).prop_map(Expr::Alt),
            (inner, 0u32..4, proptest::option::of(0u32..4)).prop_map(|(e, a, b)| {
                let (min, max) = match b {
                    Some(b) => (a.min(b), Some(a.max(b))),
                    None => (a, None),
                };
                Expr::Repeat { expr: Box::new(e), min, max }
            }),
        ]
    })
}

fn grammar() -> impl Strategy<Value = Grammar> {
    (1u32..5).prop_flat_map(|n| {
        (proptest::collection::vec(expr(n), n as usize), 0..n).prop_map(move |(bodies, root)| {
            let mut b = GrammarBuilder::new();
            let names: Vec<String> =
                (0..n).map(|i| if i == root { "root".to_string() } else { format!("r{i}") }).collect();
            for name in &names {
                b.rule_id(name);
            }
            for (name, body) in names.iter().zip(bodies) {
                b.define(name, canon(body));
            }
            b.build("root").unwrap()
        })
    })
}

/// Pieces of GBNF text, valid and not, for the text-level property.
fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(vec![
            "root", " ::= ", "::=", "a", "b-c", "x_1", " ", "\n", "\"a\"", "\"\\n\"", "\"\\x4", "\"\\u00e9\"",
            "\"", "[a-z]", "[^\"\\\\]", "[", "]", "[^", "-", "^", "\\", ".", "(", ")", "|", "*", "+", "?",
            "{2}", "{1,}", "{0,3}", "{,2}", "{3,1}", "{", "}", ",", "# c\n", "<[3]>", "<|eot|>", "<", ">", "!",
            "\"\\\"\"", "\r\n", "\t", "{99999}", "é", "\"中\"",
        ]).prop_map(str::to_string),
        1 => any_char().prop_map(|c| c.to_string()),
    ]
}

/// Valid GBNF text for one element, group or repetition (rule names `root`, `a`, `b`).
fn valid_body() -> impl Strategy<Value = String> {
    let atom = prop_oneof![
        proptest::sample::select(vec![
            "\"a\"", "\"\"", "\"\\n\\t\\\"\\\\\"", "\"\\x41\\u00e9\\U0001F600\"", "\"中 é\"", "[a-z]", "[^a-z]",
            "[\\]\\[\\-^]", "[-a-]", "[^\\n]", "[\\x00-\\U0010FFFF]", "[é-ü]", ".", "root", "a", "b", "<[7]>", "<|eot|>",
        ])
        .prop_map(str::to_string),
        proptest::collection::vec(any_char(), 0..3).prop_map(|c| {
            let s: String = c.into_iter().collect();
            format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
        }),
    ];
    atom.prop_recursive(4, 30, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(|v| v.join(" ")),
            proptest::collection::vec(inner.clone(), 1..4).prop_map(|v| format!("({})", v.join(" | "))),
            proptest::collection::vec(inner.clone(), 0..3).prop_map(|v| format!("(\n  {} # c\n)", v.join("\n  "))),
            (inner, proptest::sample::select(vec!["*", "+", "?", "{2}", "{1,}", "{0,3}", "{,2}", "*?"]))
                .prop_map(|(e, op)| format!("({e}){op}")),
        ]
    })
}

/// GBNF-like text: usually a valid grammar of three rules, sometimes corrupted by a fragment.
fn text() -> impl Strategy<Value = String> {
    (valid_body(), valid_body(), valid_body(), proptest::option::weighted(0.3, (fragment(), any::<proptest::sample::Index>())))
        .prop_map(|(r, a, b, corrupt)| {
            let mut t = format!("root ::= {r}\na ::= {a} | \"x\"\nb ::= \"y\" | {b}\n");
            if let Some((frag, at)) = corrupt {
                let mut i = at.index(t.len() + 1);
                while !t.is_char_boundary(i) {
                    i -= 1;
                }
                t.insert_str(i, &frag);
            }
            t
        })
}

/// The property the fuzz target checks: parse, and if that succeeds, print and parse again.
pub(super) fn check_text_round_trip(text: &str) -> Result<(), String> {
    let limits = Limits::default();
    let Ok(g) = gbnf::parse(text, &limits) else { return Ok(()) };
    let printed = gbnf::print(&g);
    match gbnf::parse(&printed, &limits) {
        Ok(back) if back == g => Ok(()),
        Ok(back) => Err(format!("round trip changed the grammar\ntext: {text:?}\nprinted: {printed}\n{g:?}\n{back:?}")),
        Err(e) => Err(format!("printed text does not parse: {e}\ntext: {text:?}\nprinted: {printed}")),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn canonical_ir_round_trips(g in grammar()) {
        let printed = gbnf::print(&g);
        let parsed = gbnf::parse(&printed, &Limits::default());
        if productive_rules(&g)[g.root().index()] {
            let back = parsed.map_err(|e| TestCaseError::fail(format!("{e}\n{printed}")))?;
            prop_assert_eq!(back, g, "{}", printed);
        } else {
            let e = parsed.expect_err("an unproductive root must be reported");
            prop_assert!(matches!(e.kind, gbnf::GbnfErrorKind::MatchesNothing(_)), "{}", e);
        }
    }

    #[test]
    fn gbnf_like_text_never_panics_and_round_trips(t in text()) {
        check_text_round_trip(&t).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn arbitrary_text_never_panics(t in "\\PC{0,60}") {
        check_text_round_trip(&t).map_err(TestCaseError::fail)?;
        check_text_round_trip(&format!("root ::= {t}")).map_err(TestCaseError::fail)?;
    }
}
