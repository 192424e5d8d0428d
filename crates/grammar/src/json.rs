//! The built-in JSON grammar (`format: "json"`), and the JSON building blocks that the
//! JSON Schema compiler reuses.
//!
//! [`grammar`] gives the whole grammar; [`gbnf`] its GBNF text. The grammar follows
//! RFC 8259 exactly for strings (escapes, `\uXXXX`, no raw control characters) and numbers
//! (no leading zeros, no `+`, no bare `.`), with two choices made for generation:
//!
//! - **bounded whitespace**: every place where JSON allows whitespace takes at most
//!   [`JsonGrammarOptions::max_ws_run`] characters (default [`DEFAULT_MAX_WS_RUN`]), and the
//!   grammar is written so that two such places are never adjacent — so a model cannot
//!   loop on newlines until the token limit (the classic failure of unbounded `ws*`);
//! - **no leading whitespace**: the text starts with the value itself (so `{` can be
//!   forced at the first step), and may end with one bounded whitespace run (not when
//!   [`JsonGrammarOptions::trailing_whitespace`] is off, as generation has it).
//!
//! ```text
//! root    ::= object ws                       # or `value ws` when root_object_only is off
//! value   ::= object | array | string | number | "true" | "false" | "null"
//! object  ::= "{" ws (member (ws "," ws member)* ws)? "}"
//! member  ::= string ws ":" ws value
//! array   ::= "[" ws (value (ws "," ws value)* ws)? "]"
//! string  ::= "\"" char* "\""
//! char    ::= [^\x00-\x1F"\\] | "\\" (["/\\bfnrt] | "u" [0-9A-Fa-f]{4})
//! number  ::= integer ("." [0-9]+)? ([Ee] [+\x2D]? [0-9]+)?
//! integer ::= "-"? ("0" | [1-9] [0-9]*)
//! ws      ::= [\t\n\r ]{0,20}
//! ```
//!
//! A schema compiler calls [`add_value_rules`] on its own [`GrammarBuilder`] and refers to
//! the returned [`JsonRules`] (free-form values, strings, numbers, whitespace), and uses the
//! expression helpers ([`string_char`], [`string_literal`], [`ws`]) for constrained parts.

use crate::{Expr, Grammar, GrammarBuilder, RuleId};

/// Default bound on one run of whitespace between JSON tokens.
pub const DEFAULT_MAX_WS_RUN: u32 = 20;

/// Options of the built-in JSON grammar.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct JsonGrammarOptions {
    /// Only an object at the root (what `format: "json"` asks for). Default `true`.
    pub root_object_only: bool,
    /// Most consecutive whitespace characters between two JSON tokens; `None` for
    /// unbounded. Default `Some(DEFAULT_MAX_WS_RUN)`.
    pub max_ws_run: Option<u32>,
    /// A whitespace run may follow the value (`root ::= object ws`, as the documented GBNF
    /// and llama.cpp's `json.gbnf`). Default `true`. Generation turns it off, so the answer
    /// ends at its closing brace and the end of the output is forced one step sooner,
    /// instead of letting a model spend up to `max_ws_run` tokens on trailing newlines.
    pub trailing_whitespace: bool,
}

impl Default for JsonGrammarOptions {
    fn default() -> Self {
        JsonGrammarOptions { root_object_only: true, max_ws_run: Some(DEFAULT_MAX_WS_RUN), trailing_whitespace: true }
    }
}

/// The rules [`add_value_rules`] defined (all reachable from `value`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JsonRules {
    /// Any JSON value.
    pub value: RuleId,
    /// Any object `{...}`.
    pub object: RuleId,
    /// One `"key": value` member of an object.
    pub member: RuleId,
    /// Any array `[...]`.
    pub array: RuleId,
    /// Any string, with its quotes.
    pub string: RuleId,
    /// One character inside a string (unescaped or an escape sequence).
    pub string_char: RuleId,
    /// Any number (RFC 8259).
    pub number: RuleId,
    /// An integer: `-?(0|[1-9][0-9]*)`.
    pub integer: RuleId,
    /// One bounded whitespace run (possibly empty).
    pub ws: RuleId,
}

/// The whole JSON grammar.
pub fn grammar(opts: &JsonGrammarOptions) -> Grammar {
    let mut b = GrammarBuilder::new();
    b.rule_id("root");
    let r = add_value_rules(&mut b, opts);
    let top = if opts.root_object_only { r.object } else { r.value };
    let root = if opts.trailing_whitespace { Expr::seq([Expr::Rule(top), Expr::Rule(r.ws)]) } else { Expr::Rule(top) };
    b.define("root", root);
    b.build("root").expect("the built-in JSON grammar is well formed")
}

/// The JSON grammar as GBNF text (what [`crate::gbnf::print`] gives for [`grammar`]).
pub fn gbnf(opts: &JsonGrammarOptions) -> String {
    crate::gbnf::print(&grammar(opts))
}

/// Defines the JSON value rules in `b` under fresh names (`value`, `object`, ... or, when
/// taken, `value-1` and so on) and returns their ids. Defines no `root`.
pub fn add_value_rules(b: &mut GrammarBuilder, opts: &JsonGrammarOptions) -> JsonRules {
    let mut fresh = |base: &str| {
        let n = b.fresh_name(base);
        (b.rule_id(&n), n)
    };
    let (value, value_n) = fresh("value");
    let (object, object_n) = fresh("object");
    let (member, member_n) = fresh("member");
    let (array, array_n) = fresh("array");
    let (string, string_n) = fresh("string");
    let (string_char_id, char_n) = fresh("char");
    let (number, number_n) = fresh("number");
    let (integer, integer_n) = fresh("integer");
    let (ws_id, ws_n) = fresh("ws");
    let r = |id| Expr::Rule(id);
    let w = || r(ws_id);

    b.define(
        &value_n,
        Expr::alt([
            r(object),
            r(array),
            r(string),
            r(number),
            Expr::lit("true"),
            Expr::lit("false"),
            Expr::lit("null"),
        ]),
    );
    b.define(&object_n, Expr::seq([Expr::lit("{"), w(), opt_list(member, ws_id), Expr::lit("}")]));
    b.define(&member_n, Expr::seq([r(string), w(), Expr::lit(":"), w(), r(value)]));
    b.define(&array_n, Expr::seq([Expr::lit("["), w(), opt_list(value, ws_id), Expr::lit("]")]));
    b.define(&string_n, Expr::seq([Expr::lit("\""), Expr::star(r(string_char_id)), Expr::lit("\"")]));
    b.define(&char_n, string_char());
    b.define(&number_n, number_expr(integer));
    b.define(&integer_n, integer_expr());
    b.define(&ws_n, ws(opts));
    JsonRules {
        value,
        object,
        member,
        array,
        string,
        string_char: string_char_id,
        number,
        integer,
        ws: ws_id,
    }
}

/// `(item (ws "," ws item)* ws)?`: the inside of an object or array after its opening
/// bracket and whitespace.
pub fn opt_list(item: RuleId, ws_rule: RuleId) -> Expr {
    let w = Expr::Rule(ws_rule);
    let more = Expr::seq([w.clone(), Expr::lit(","), w.clone(), Expr::Rule(item)]);
    Expr::opt(Expr::seq([Expr::Rule(item), Expr::star(more), w]))
}

/// One JSON whitespace run, bounded by `opts.max_ws_run`.
pub fn ws(opts: &JsonGrammarOptions) -> Expr {
    let class = Expr::class([(' ', ' '), ('\t', '\t'), ('\n', '\n'), ('\r', '\r')], false);
    match opts.max_ws_run {
        Some(0) => Expr::empty(),
        Some(n) => Expr::repeat(class, 0, Some(n)),
        None => Expr::star(class),
    }
}

/// One character inside a JSON string: any scalar except `"`, `\` and U+0000..U+001F, or
/// an escape `\" \\ \/ \b \f \n \r \t \uXXXX`.
pub fn string_char() -> Expr {
    Expr::alt([unescaped_char(), escape()])
}

/// One unescaped string character: `[^"\\\x00-\x1F]`.
pub fn unescaped_char() -> Expr {
    Expr::class([('"', '"'), ('\\', '\\'), ('\0', '\u{1F}')], true)
}

/// One escape sequence: `"\\" (["\\/bfnrt] | "u" [0-9A-Fa-f]{4})`.
pub fn escape() -> Expr {
    let simple = Expr::class("\"\\/bfnrt".chars().map(|c| (c, c)), false);
    let hex = Expr::class([('0', '9'), ('A', 'F'), ('a', 'f')], false);
    Expr::seq([Expr::lit("\\"), Expr::alt([simple, Expr::seq([Expr::lit("u"), Expr::repeat(hex, 4, Some(4))])])])
}

/// The JSON encoding of `value` (quoted and escaped) as a literal, for `const`/`enum`.
pub fn string_literal(value: &str) -> Expr {
    Expr::Literal(serde_json::to_string(value).expect("a string always serializes"))
}

/// `"-"? ("0" | [1-9] [0-9]*)`
pub fn integer_expr() -> Expr {
    let digit = Expr::class([('0', '9')], false);
    Expr::seq([
        Expr::opt(Expr::lit("-")),
        Expr::alt([Expr::lit("0"), Expr::seq([Expr::class([('1', '9')], false), Expr::star(digit)])]),
    ])
}

/// `integer ("." [0-9]+)? ([Ee] [+\-]? [0-9]+)?` with `integer` a rule.
pub fn number_expr(integer: RuleId) -> Expr {
    let digits = || Expr::plus(Expr::class([('0', '9')], false));
    Expr::seq([
        Expr::Rule(integer),
        Expr::opt(Expr::seq([Expr::lit("."), digits()])),
        Expr::opt(Expr::seq([
            Expr::class([('E', 'E'), ('e', 'e')], false),
            Expr::opt(Expr::class([('+', '+'), ('-', '-')], false)),
            digits(),
        ])),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{gbnf, Limits};

    #[test]
    fn json_grammar_prints_and_round_trips() {
        for root_object_only in [true, false] {
            for max_ws_run in [None, Some(0), Some(1), Some(20)] {
                let opts = JsonGrammarOptions { root_object_only, max_ws_run, ..Default::default() };
                let g = grammar(&opts);
                let text = gbnf(&opts);
                let back = gbnf::parse(&text, &Limits::default()).unwrap_or_else(|e| panic!("{e}\n{text}"));
                assert_eq!(back, g, "{text}");
            }
        }
    }

    #[test]
    fn without_trailing_whitespace_nothing_follows_the_value() {
        let accepts = |g: &Grammar, s: &str| crate::matcher::accepts(g, s.as_bytes(), &crate::Limits::default()).unwrap();
        let opts = JsonGrammarOptions { trailing_whitespace: false, ..Default::default() };
        let g = grammar(&opts);
        assert!(gbnf(&opts).starts_with("root ::= object\n"), "{}", gbnf(&opts));
        assert!(accepts(&g, "{\"a\": [1, 2]}"));
        assert!(!accepts(&g, "{\"a\": 1}\n"));
        assert!(!accepts(&g, "{} "));
        // The default keeps the documented trailing run.
        assert!(accepts(&grammar(&JsonGrammarOptions::default()), "{} \n"));
    }

    #[test]
    fn json_grammar_text_is_as_documented() {
        let text = gbnf(&JsonGrammarOptions::default());
        let expected = [
            r#"root ::= object ws"#,
            r#"value ::= object | array | string | number | "true" | "false" | "null""#,
            r#"object ::= "{" ws (member (ws "," ws member)* ws)? "}""#,
            r#"member ::= string ws ":" ws value"#,
            r#"array ::= "[" ws (value (ws "," ws value)* ws)? "]""#,
            r#"string ::= "\"" char* "\"""#,
            r#"char ::= [^\x00-\x1F"\\] | "\\" (["/\\bfnrt] | "u" [0-9A-Fa-f]{4})"#,
            r#"number ::= integer ("." [0-9]+)? ([Ee] [+\x2D]? [0-9]+)?"#,
            r#"integer ::= "-"? ("0" | [1-9] [0-9]*)"#,
            r#"ws ::= [\t\n\r ]{0,20}"#,
        ];
        assert_eq!(text.lines().collect::<Vec<_>>(), expected);
    }

    #[test]
    fn building_blocks_take_fresh_names_next_to_a_schema() {
        let mut b = GrammarBuilder::new();
        b.define("value", Expr::lit("x"));
        let r = add_value_rules(&mut b, &JsonGrammarOptions::default());
        b.define("root", Expr::seq([Expr::Rule(r.string), Expr::Rule(r.integer)]));
        let g = b.build("root").unwrap();
        assert_eq!(g.rule(r.value).name, "value-1");
        assert_eq!(g.rule(r.ws).name, "ws");
    }

    #[test]
    fn string_literal_is_json_encoded() {
        assert_eq!(string_literal("a\"b\n"), Expr::lit(r#""a\"b\n""#));
    }
}
