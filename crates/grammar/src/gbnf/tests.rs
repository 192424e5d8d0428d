//! Tests of the GBNF front end: syntax, errors, limits, the round-trip property and the
//! data-driven corpus in `testdata/corpus/`.

use super::*;
use crate::{Expr, Limits, RuleId, TokenRef};
use formwork_vocab::TokenId;

mod ambiguous;
mod corpus;
mod oracle;
mod roundtrip;

fn p(text: &str) -> Grammar {
    parse(text, &Limits::default()).unwrap_or_else(|e| panic!("{e}"))
}

fn root_expr(text: &str) -> Expr {
    let g = p(text);
    g.rule(g.root()).expr.clone()
}

fn err(text: &str) -> GbnfError {
    err_with(text, &Limits::default())
}

fn err_with(text: &str, limits: &Limits) -> GbnfError {
    match parse(text, limits) {
        Ok(g) => panic!("expected an error for {text:?}, got {g:?}"),
        Err(e) => e,
    }
}

fn one_line(e: &GbnfError) -> String {
    format!("{e:#}")
}

#[test]
fn literals_and_escapes() {
    assert_eq!(root_expr(r#"root ::= "a\n\t\r\\\"\x41\u00e9\U0001F600""#), Expr::lit("a\n\t\r\\\"Aé😀"));
    assert_eq!(root_expr(r#"root ::= "\[\]\-\^\'\/""#), Expr::lit("[]-^'/"));
    assert_eq!(root_expr("root ::= \"\""), Expr::lit(""));
    assert_eq!(root_expr("root ::= \"é€😀\""), Expr::lit("é€😀"));
}

#[test]
fn classes_ranges_negation_and_any() {
    assert_eq!(root_expr("root ::= [a-z0-9_]"), Expr::class([('a', 'z'), ('0', '9'), ('_', '_')], false));
    assert_eq!(root_expr("root ::= [^\"\\\\]"), Expr::class([('"', '"'), ('\\', '\\')], true));
    assert_eq!(root_expr("root ::= [-a]"), Expr::class([('-', '-'), ('a', 'a')], false));
    assert_eq!(root_expr("root ::= [a-]"), Expr::class([('-', '-'), ('a', 'a')], false));
    assert_eq!(root_expr(r"root ::= [\]\[\x00-\x1F]"), Expr::class([(']', ']'), ('[', '['), ('\0', '\u{1F}')], false));
    assert_eq!(root_expr("root ::= [α-ω€]"), Expr::class([('α', 'ω'), ('€', '€')], false));
    assert_eq!(root_expr("root ::= ."), Expr::any_char());
    assert_eq!(root_expr("root ::= [^a]"), Expr::Class(vec![('\0', '`'), ('b', char::MAX)]));
}

#[test]
fn sequences_alternatives_groups_and_repetitions() {
    let a = || Expr::lit("a");
    let b = || Expr::lit("b");
    assert_eq!(root_expr(r#"root ::= "a" "b""#), Expr::Seq(vec![a(), b()]));
    assert_eq!(root_expr(r#"root ::= "a" | "b""#), Expr::Alt(vec![a(), b()]));
    // Groups vanish; nested sequences and alternations flatten.
    assert_eq!(root_expr(r#"root ::= ("a" ("b")) | ("a" | ("b"))"#), Expr::Alt(vec![Expr::Seq(vec![a(), b()]), a(), b()]));
    assert_eq!(root_expr(r#"root ::= "a" ("a" | "b")"#), Expr::Seq(vec![a(), Expr::Alt(vec![a(), b()])]));
    assert_eq!(root_expr(r#"root ::= "a"*"#), Expr::star(a()));
    assert_eq!(root_expr(r#"root ::= "a"+"#), Expr::plus(a()));
    assert_eq!(root_expr(r#"root ::= "a"?"#), Expr::opt(a()));
    assert_eq!(root_expr(r#"root ::= "a"{3}"#), Expr::repeat(a(), 3, Some(3)));
    assert_eq!(root_expr(r#"root ::= "a"{2,}"#), Expr::repeat(a(), 2, None));
    assert_eq!(root_expr(r#"root ::= "a"{ 2 , 5 }"#), Expr::repeat(a(), 2, Some(5)));
    assert_eq!(root_expr(r#"root ::= "a"{,5}"#), Expr::repeat(a(), 0, Some(5)));
    assert_eq!(root_expr(r#"root ::= "a"*?"#), Expr::opt(Expr::star(a())));
    assert_eq!(root_expr(r#"root ::= ("a" "b")*"#), Expr::star(Expr::Seq(vec![a(), b()])));
}

#[test]
fn empty_alternatives_and_empty_bodies() {
    assert_eq!(root_expr(r#"root ::= "a" | "#), Expr::Alt(vec![Expr::lit("a"), Expr::empty()]));
    assert_eq!(root_expr(r#"root ::= ( | "a")"#), Expr::Alt(vec![Expr::empty(), Expr::lit("a")]));
    assert_eq!(root_expr("root ::= ()"), Expr::empty());
    assert_eq!(root_expr("root ::= "), Expr::empty());
    assert_eq!(root_expr(r#"root ::= "a" () "b""#), Expr::Seq(vec![Expr::lit("a"), Expr::lit("b")]));
}

#[test]
fn rules_comments_newlines_and_ids() {
    let g = p("# a comment\nroot ::= (\n  item # trailing\n  | \"x\"\n)+\n\nitem ::= [a-z]\n  | [0-9] # continuation\nunused-1_x ::= item\n");
    let names: Vec<_> = g.rules().iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["root", "item", "unused-1_x"]);
    assert_eq!(g.rule(g.root()).expr, Expr::plus(Expr::Alt(vec![Expr::Rule(RuleId(1)), Expr::lit("x")])));
    assert_eq!(g.rules()[1].expr, Expr::Alt(vec![Expr::class([('a', 'z')], false), Expr::class([('0', '9')], false)]));
    // Ids follow definition order, even when a rule is used before it is defined.
    let g = p("a ::= b c\nb ::= \"b\"\nroot ::= a\nc ::= \"c\"");
    let names: Vec<_> = g.rules().iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "root", "c"]);
    assert_eq!(g.root(), RuleId(2));
    // Carriage returns and tabs are whitespace.
    p("root ::=\t\"a\"\r\n\t| \"b\"\r\n");
}

#[test]
fn token_references() {
    assert_eq!(root_expr("root ::= <[128009]>"), Expr::Token(TokenRef::Id(TokenId(128009))));
    assert_eq!(root_expr("root ::= <|im_end|>"), Expr::Token(TokenRef::Name("<|im_end|>".into())));
    assert_eq!(
        root_expr("root ::= <think> [a-z]* </think>"),
        Expr::Seq(vec![
            Expr::Token(TokenRef::Name("<think>".into())),
            Expr::star(Expr::class([('a', 'z')], false)),
            Expr::Token(TokenRef::Name("</think>".into())),
        ])
    );
    assert!(matches!(err("root ::= <[12x]>").kind, GbnfErrorKind::BadToken(_)));
    assert!(matches!(err("root ::= <[99999999999]>").kind, GbnfErrorKind::BadToken(_)));
    assert!(matches!(err("root ::= <im_end").kind, GbnfErrorKind::BadToken(_)));
    assert!(matches!(err("root ::= <>").kind, GbnfErrorKind::BadToken(_)));
}

#[test]
fn negated_token_references() {
    assert_eq!(root_expr("root ::= !<[2]>"), Expr::NotToken(TokenRef::Id(TokenId(2))));
    assert_eq!(
        root_expr("root ::= \"a\" !<|im_end|>* <[7]>"),
        Expr::Seq(vec![
            Expr::lit("a"),
            Expr::star(Expr::NotToken(TokenRef::Name("<|im_end|>".into()))),
            Expr::Token(TokenRef::Id(TokenId(7))),
        ])
    );
    // Printed back as written, and parsed again to the same grammar.
    let text = "root ::= \"a\" !<[2]>+ (!<|im_end|> | <[3]>)\n";
    let g = p(text);
    assert_eq!(print(&g), text);
    assert_eq!(p(&print(&g)), g);
    // Errors point at the reference.
    let e = err("root ::= !<[2x]>");
    assert!(matches!(e.kind, GbnfErrorKind::BadToken(_)));
    assert!(e.to_string().contains("`<[2x]>` is not a token id"), "{e}");
    assert!(matches!(err("root ::= !<[2]").kind, GbnfErrorKind::BadToken(_)));
    assert!(matches!(err("root ::= ! <[2]>").kind, GbnfErrorKind::UnexpectedChar('!')));
}

#[test]
fn errors_name_the_problem_and_the_place() {
    let cases: &[(&str, &str)] = &[
        ("root ::= pair\npair ::= key \":\" valu\nkey ::= \"k\"", "undefined rule `valu` at 2:18"),
        ("item ::= \"a\"", "no `root` rule: a grammar starts at the rule named `root` at 1:1"),
        ("root ::= \"a\"\nroot ::= \"b\"", "rule `root` is defined twice at 2:1"),
        ("root ::= \"abc", "unterminated string literal: missing closing `\"` at 1:10"),
        ("root ::= [abc", "unterminated character class: missing closing `]` at 1:10"),
        ("root ::= \"a\\q\"", "bad escape sequence `\\q` at 1:12"),
        ("root ::= \"\\x4\"", "bad escape sequence `\\x4` at 1:11"),
        ("root ::= \"\\uD800\"", "bad escape sequence `\\uD800` at 1:11"),
        ("root ::= \"\\U00110000\"", "bad escape sequence `\\U00110000` at 1:11"),
        ("root ::= []", "empty character class at 1:10"),
        ("root ::= [^]", "empty character class at 1:10"),
        ("root ::= [z-a]", "class range `z-a` ends before it starts at 1:11"),
        ("root ::= (\"a\"", "unclosed group: missing `)` at 1:10"),
        ("root ::= \"a\")", "`)` without a matching `(` at 1:13"),
        ("root ::= * \"a\"", "`*` has nothing before it to repeat at 1:10"),
        ("root ::= (| +)", "`+` has nothing before it to repeat at 1:13"),
        ("root ::= \"a\"{}", "malformed repetition: expected `{m}`, `{m,}`, `{m,n}` or `{,n}` at 1:13"),
        ("root ::= \"a\"{,}", "malformed repetition: expected `{m}`, `{m,}`, `{m,n}` or `{,n}` at 1:13"),
        ("root ::= \"a\"{x}", "malformed repetition: expected `{m}`, `{m,}`, `{m,n}` or `{,n}` at 1:13"),
        ("root ::= \"a\"{2", "malformed repetition: expected `{m}`, `{m,}`, `{m,n}` or `{,n}` at 1:13"),
        ("root ::= \"a\"{5,2}", "repetition {5,2} has its minimum above its maximum at 1:13"),
        ("root \"a\"", "expected `::=` after the rule name, found a string literal at 1:6"),
        ("\"a\" ::= b", "expected a rule definition `name ::= ...`, found a string literal at 1:1"),
        ("root ::= \"a\" ; ", "unexpected character `;` at 1:14"),
        ("root ::= \"a\" :: \"b\"", "unexpected character `:` at 1:14"),
        ("root ::= root \"a\"", "rule `root` matches nothing: every alternative needs itself again (recursion without a way out) or an empty character class at 1:1"),
        ("root ::= [^\\x00-\\U0010FFFF]", "rule `root` matches nothing: every alternative needs itself again (recursion without a way out) or an empty character class at 1:1"),
    ];
    for (text, want) in cases {
        assert_eq!(one_line(&err(text)), *want, "for {text:?}");
    }
}

#[test]
fn error_display_has_a_caret_and_help() {
    let e = err("root ::= pair\npair ::= key \":\" valu\nkey ::= \"k\"");
    assert_eq!(
        e.to_string(),
        "undefined rule `valu` at 2:18\n  |\n2 | pair ::= key \":\" valu\n  |                  ^^^^\n  = help: define it with `valu ::= ...` or fix the name"
    );
    assert_eq!(e.span, Span::new(31, 35));
}

#[test]
fn limits_are_enforced_with_clear_errors() {
    let small = Limits { max_source_bytes: 10, ..Limits::default() };
    let e = err_with("root ::= \"hello\"", &small);
    assert_eq!(e.kind, GbnfErrorKind::SourceTooLarge { len: 16, max: 10 });
    assert!(e.to_string().contains("Limits::max_source_bytes"));

    let e = err("root ::= \"a\"{10001}");
    assert_eq!(e.kind, GbnfErrorKind::RepeatTooLarge { count: 10001, max: 10_000 });
    assert!(e.to_string().contains("Limits::max_repeat"), "{e}");
    let e = err("root ::= \"a\"{0,99999999999999999999999}");
    assert!(matches!(e.kind, GbnfErrorKind::RepeatTooLarge { max: 10_000, .. }), "{e}");
    p("root ::= \"a\"{10000}");

    let few_rules = Limits { max_rules: 2, ..Limits::default() };
    let e = err_with("root ::= a\na ::= b\nb ::= \"x\"", &few_rules);
    assert_eq!((e.kind.clone(), e.line()), (GbnfErrorKind::TooManyRules { max: 2 }, 3));

    let few_elements = Limits { max_elements: 3, ..Limits::default() };
    let e = err_with("root ::= \"a\" \"b\" \"c\" \"d\"", &few_elements);
    assert_eq!(e.kind, GbnfErrorKind::TooManyElements { max: 3 });
}

#[test]
fn deep_nesting_fails_cleanly_without_overflowing_the_stack() {
    let n = 100_000;
    let text = format!("root ::= {}\"a\"{}", "(".repeat(n), ")".repeat(n));
    let e = err(&text);
    assert_eq!(e.kind, GbnfErrorKind::NestingTooDeep { max: 200 });
    assert_eq!(e.column(), 10 + 200);
    // Unclosed, and stacked repetitions, too.
    assert_eq!(err(&format!("root ::= {}", "(".repeat(n))).kind, GbnfErrorKind::NestingTooDeep { max: 200 });
    assert_eq!(err(&format!("root ::= \"a\"{}", "*".repeat(n))).kind, GbnfErrorKind::NestingTooDeep { max: 200 });
    // At the limit it parses.
    let ok = format!("root ::= {}\"a\"{}", "(".repeat(200), ")".repeat(200));
    assert_eq!(root_expr(&ok), Expr::lit("a"));
    let ok = format!("root ::= \"a\"{}", "?".repeat(200));
    p(&ok);
}

#[test]
fn large_flat_grammars_parse_in_linear_time() {
    let mut text = String::from("root ::= r0\n");
    for i in 0..20_000 {
        text.push_str(&format!("r{i} ::= \"x{i}\" [a-z]* | r{}\n", i + 1));
    }
    text.push_str("r20000 ::= \"end\"\n");
    let t = std::time::Instant::now();
    let g = p(&text);
    assert_eq!(g.rules().len(), 20_002);
    assert_eq!(parse(&print(&g), &Limits::default()).unwrap(), g);
    assert!(t.elapsed().as_secs() < 20, "took {:?}", t.elapsed());
}

#[test]
fn ast_keeps_spans_and_groups() {
    let text = "root ::= (\"ab\" [x-z])* | x\nx ::= <[7]>";
    let ast = parse_ast(text, &Limits::default()).unwrap();
    assert_eq!(ast.rules.len(), 2);
    let r = &ast.rules[0];
    assert_eq!((r.name.as_str(), r.name_span), ("root", Span::new(0, 4)));
    let NodeKind::Alt(branches) = &r.body.kind else { panic!("{:?}", r.body) };
    assert_eq!(&text[r.body.span.start..r.body.span.end], "(\"ab\" [x-z])* | x");
    let NodeKind::Repeat { node, op } = &branches[0].kind else { panic!() };
    assert_eq!(*op, RepeatOp::Star);
    assert_eq!(&text[node.span.start..node.span.end], "(\"ab\" [x-z])");
    let NodeKind::Group(inner) = &node.kind else { panic!() };
    let NodeKind::Seq(items) = &inner.kind else { panic!() };
    let NodeKind::Class { negated: false, items: ci } = &items[1].kind else { panic!() };
    assert_eq!((ci[0].lo, ci[0].hi, &text[ci[0].span.start..ci[0].span.end]), ('x', 'z', "x-z"));
    assert_eq!(branches[1].kind, NodeKind::RuleRef("x".into()));
    // Undefined names are found only when lowering.
    assert!(parse_ast("root ::= nope", &Limits::default()).is_ok());
}

#[test]
fn print_normalizes() {
    let g = p("root   ::=\"a\"\"b\"|(x)  [^\\n]\n# c\nx::=[a-cx] . [\\x00-\\U0010FFFF] [b-c] [-^\\]] \"\\u00A0\\x01\\\\\\\"\"{2,} <[5]> <|eot|>");
    assert_eq!(
        print(&g),
        "root ::= \"a\" \"b\" | x [^\\n]\nx ::= [a-cx] . . [bc] [\\x2D\\]\\x5E] \"\\xA0\\x01\\\\\\\"\"{2,} <[5]> <|eot|>\n"
    );
}

#[test]
fn print_renames_names_that_gbnf_cannot_spell() {
    let mut b = crate::GrammarBuilder::new();
    let other = b.rule_id("root");
    let odd = b.rule_id("a.b c");
    let clash = b.rule_id("a-b-c");
    b.define("start", Expr::seq([Expr::Rule(other), Expr::Rule(odd), Expr::Rule(clash)]));
    b.define("root", Expr::lit("r"));
    b.define("a.b c", Expr::lit("x"));
    b.define("a-b-c", Expr::lit("y"));
    let g = b.build("start").unwrap();
    let text = print(&g);
    assert_eq!(text, "root-1 ::= \"r\"\na-b-c-1 ::= \"x\"\na-b-c ::= \"y\"\nroot ::= root-1 a-b-c-1 a-b-c\n");
    p(&text);
}
