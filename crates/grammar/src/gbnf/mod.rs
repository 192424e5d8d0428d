//! GBNF: llama.cpp-compatible grammar text to IR and back.
//!
//! ```text
//! text ──parse_ast──▶ Ast (spans) ──Ast::to_grammar──▶ Grammar (IR) ──print──▶ text
//!       └───────────────────────── parse ───────────────────────────┘
//! ```
//!
//! ## Syntax (llama.cpp's `grammars/README.md`, plus a few relaxations)
//! - rules `name ::= body`; names are `[A-Za-z0-9-]` (and `_`); the start rule is `root`;
//! - sequences `a b c`, alternatives `a | b`, groups `( ... )`, empty alternatives
//!   (`"x" | ` or `()`);
//! - string literals `"..."` and character classes `[a-z0-9_]`, `[^"\\]`, with escapes
//!   `\n \r \t \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH` (and `\- \^ \' \/`);
//! - `.` (any character), postfix `*` `+` `?` `{m}` `{m,}` `{m,n}` `{,n}`, which may be
//!   stacked (`"a"*?`);
//! - special tokens by id `<[128009]>` or by name `<|im_end|>` / `<think>` ([`Expr::Token`]),
//!   and negated ones, any single token but that one: `!<[128009]>` ([`Expr::NotToken`]);
//! - `#` comments to the end of the line.
//!
//! Newlines are not significant: a rule ends where the next `name ::=` starts. That accepts
//! every grammar llama.cpp accepts (a rule ends at a newline outside parentheses) and, in
//! addition, `|` continuation lines.
//!
//! ## Canonical form
//! [`parse()`] produces a canonical IR: group parentheses vanish; no [`Expr::Seq`] has one
//! element or sits directly in another `Seq`; no [`Expr::Alt`] sits directly in another
//! `Alt`; rules are numbered in definition order. Literals are kept as written (adjacent
//! literals are not merged) and repetitions keep their counts (`x{1}` stays a repetition).
//! [`print()`] writes such a grammar so that parsing the text gives an equal [`Grammar`]
//! (the round-trip property, fuzzed by `fuzz/fuzz_targets/gbnf_roundtrip.rs` and
//! property-tested here). IR from other front ends prints as equivalent GBNF; it
//! round-trips exactly when it is canonical, its rule names are GBNF names and its root is
//! named `root`.
//!
//! ## Limits
//! [`Limits::max_source_bytes`], [`Limits::max_nesting`] (groups and stacked repetitions),
//! [`Limits::max_rules`], [`Limits::max_elements`] and [`Limits::max_repeat`] are checked
//! while parsing; each failure is a [`GbnfError`] naming the limit. The parser keeps open
//! groups on an explicit stack, so deep nesting fails cleanly rather than overflowing the
//! call stack.
//!
//! ## Errors
//! [`GbnfError`] = [`GbnfErrorKind`] + [`Span`]; its `Display` shows `line:column` and the
//! source line with a caret (`{:#}` gives the one-line form).

mod ast;
mod error;
mod lower;
mod parse;
mod print;

#[cfg(test)]
mod tests;

pub use ast::{Ast, ClassItem, Node, NodeKind, RepeatOp, RuleDef};
pub use error::{GbnfError, GbnfErrorKind, Span};
pub use print::print;

use crate::{Grammar, Limits};
#[allow(unused_imports)] // for the docs
use crate::Expr;

/// Parses GBNF text to the grammar IR (see the [module docs](self) for the syntax).
///
/// ```
/// use formwork_grammar::{gbnf, Limits};
/// let g = gbnf::parse(r#"root ::= "yes" | "no""#, &Limits::default()).unwrap();
/// assert_eq!(gbnf::print(&g), "root ::= \"yes\" | \"no\"\n");
/// let e = gbnf::parse("root ::= valu", &Limits::default()).unwrap_err();
/// assert_eq!(format!("{e:#}"), "undefined rule `valu` at 1:10");
/// ```
pub fn parse(text: &str, limits: &Limits) -> Result<Grammar, GbnfError> {
    let ast = parse_ast(text, limits)?;
    let g = ast.to_grammar(text)?;
    tracing::debug!(rules = g.rules().len(), bytes = text.len(), "parsed GBNF grammar");
    Ok(g)
}

/// Parses GBNF text to an [`Ast`] (syntax and limits only; names are not resolved).
pub fn parse_ast(text: &str, limits: &Limits) -> Result<Ast, GbnfError> {
    parse::parse_ast(text, limits)
}
