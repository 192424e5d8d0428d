//! Regular expressions (Rust `regex` syntax) to grammar IR: the whole output must match.
//!
//! The pattern is parsed by regex-syntax into its HIR and lowered one node at a time:
//! literals to [`Expr::Literal`], Unicode classes to [`Expr::Class`], concatenation,
//! alternation and repetition (`*`, `+`, `?`, `{m,n}`) to the same IR forms; capture groups
//! vanish. The grammar matches the **whole** output, so `^` and `$` (and `\A`, `\z`) at the
//! ends are redundant and accepted there; anchors anywhere else and word boundaries are
//! refused, as are byte classes outside ASCII (a grammar speaks in characters). Lookaround
//! and backreferences do not parse in Rust's syntax, so they are refused too.
//!
//! ## Limits
//! [`Limits::max_source_bytes`] bounds the pattern, [`Limits::max_nesting`] is regex-syntax's
//! nest limit (so the lowering's recursion is bounded), and the repetition counts are
//! checked against [`Limits::max_repeat`] when the grammar is compiled.
//!
//! ```
//! use formwork_grammar::{accepts, regex, Limits};
//! let l = Limits::default();
//! let g = regex::parse(r"^[0-9]{3}-[a-z]+$", &l).unwrap();
//! assert!(accepts(&g, b"123-abc", &l).unwrap());
//! assert!(!accepts(&g, b"12-abc", &l).unwrap());
//! assert!(regex::parse(r"a\bb", &l).is_err());
//! ```

use crate::{Expr, Grammar, GrammarBuilder, Limits};
use regex_syntax::hir::{Class, Hir, HirKind, Look};

/// Why a pattern cannot become a grammar: a syntax error (regex-syntax's message, which
/// points at the place with a caret) or a construct no grammar over the whole output can
/// express.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RegexError {
    /// What is wrong, and where.
    pub message: String,
}

fn err(message: impl Into<String>) -> RegexError {
    RegexError { message: message.into() }
}

/// Parses `pattern` to a grammar whose one rule, `root`, matches exactly the strings the
/// pattern matches in full.
pub fn parse(pattern: &str, limits: &Limits) -> Result<Grammar, RegexError> {
    if pattern.len() > limits.max_source_bytes {
        return Err(err(format!(
            "the pattern is {} bytes, over the limit of {} (raise Limits::max_source_bytes)",
            pattern.len(),
            limits.max_source_bytes
        )));
    }
    let nest = u32::try_from(limits.max_nesting).unwrap_or(u32::MAX);
    let hir = regex_syntax::ParserBuilder::new()
        .nest_limit(nest)
        .build()
        .parse(pattern)
        .map_err(|e| err(e.to_string()))?;
    let root = lower(&hir, true, true)?;
    let mut b = GrammarBuilder::new();
    b.define("root", root);
    b.build("root").map_err(|e| err(format!("internal error building the grammar: {e}")))
}

/// Lowers one node. `at_start` / `at_end`: nothing can come before / after this node, so a
/// start / end anchor here is redundant. Recursion depth is bounded by the parser's nest limit.
fn lower(h: &Hir, at_start: bool, at_end: bool) -> Result<Expr, RegexError> {
    Ok(match h.kind() {
        HirKind::Empty => Expr::empty(),
        HirKind::Literal(lit) => {
            let s = std::str::from_utf8(&lit.0).map_err(|_| err("a literal that is not UTF-8 (use Unicode mode)"))?;
            Expr::lit(s)
        }
        HirKind::Class(Class::Unicode(c)) => Expr::class(c.ranges().iter().map(|r| (r.start(), r.end())), false),
        HirKind::Class(Class::Bytes(c)) => {
            if c.ranges().iter().any(|r| r.end() > 0x7F) {
                return Err(err("a byte class with non-ASCII bytes (`(?-u)`): grammars match characters"));
            }
            Expr::class(c.ranges().iter().map(|r| (r.start() as char, r.end() as char)), false)
        }
        HirKind::Look(look) => match look {
            Look::Start | Look::StartLF | Look::StartCRLF if at_start => Expr::empty(),
            Look::End | Look::EndLF | Look::EndCRLF if at_end => Expr::empty(),
            Look::Start | Look::StartLF | Look::StartCRLF | Look::End | Look::EndLF | Look::EndCRLF => {
                return Err(err("an anchor (`^`, `$`) that is not at the start or end of the pattern: the grammar always matches the whole output"))
            }
            _ => return Err(err("word boundaries (`\\b`, `\\B`) are not supported")),
        },
        HirKind::Repetition(r) => Expr::repeat(lower(&r.sub, false, false)?, r.min, r.max),
        HirKind::Capture(c) => lower(&c.sub, at_start, at_end)?,
        HirKind::Concat(items) => {
            let n = items.len();
            let mut out = Vec::with_capacity(n);
            for (i, x) in items.iter().enumerate() {
                out.push(lower(x, at_start && i == 0, at_end && i + 1 == n)?);
            }
            Expr::seq(out)
        }
        HirKind::Alternation(items) => {
            let mut out = Vec::with_capacity(items.len());
            for x in items {
                out.push(lower(x, at_start, at_end)?);
            }
            Expr::alt(out)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accepts;

    fn check(pattern: &str, yes: &[&str], no: &[&str]) {
        let l = Limits::default();
        let g = parse(pattern, &l).unwrap();
        for s in yes {
            assert!(accepts(&g, s.as_bytes(), &l).unwrap(), "{pattern} should match {s:?}");
        }
        for s in no {
            assert!(!accepts(&g, s.as_bytes(), &l).unwrap(), "{pattern} should not match {s:?}");
        }
    }

    #[test]
    fn whole_output_semantics() {
        check(r"\d+(\.\d+)?", &["1", "12.5"], &["", "1.", "a1", "1a"]);
        check(r"^(yes|no)$", &["yes", "no"], &["yesno", "y", ""]);
        check(r"[a-c]{2,3}x?", &["ab", "abc", "abcx"], &["a", "abcd", "x"]);
        check(r"(?i)ok", &["ok", "OK", "oK"], &["o"]);
        check(r"é.", &["éa", "éé"], &["é", "é\n"]);
        check(r"a*", &["", "aaaa"], &["b"]);
        // Unicode classes reach past ASCII.
        check(r"\w+", &["héllo", "日本"], &["a b"]);
    }

    #[test]
    fn refusals_name_the_construct() {
        let l = Limits::default();
        assert!(parse(r"a\bb", &l).unwrap_err().message.contains("word boundaries"));
        assert!(parse(r"a^b", &l).unwrap_err().message.contains("anchor"));
        assert!(parse(r"(?-u)\xFF", &l).is_err(), "bytes that are not UTF-8");
        check(r"(?-u)[a-c]+", &["abc"], &["d"]);
        assert!(parse(r"(a", &l).is_err());
        assert!(parse(r"(?=a)", &l).is_err(), "lookaround does not parse");
        let small = Limits { max_nesting: 3, ..Limits::default() };
        assert!(parse("((((((a))))))", &small).is_err());
        let tiny = Limits { max_source_bytes: 4, ..Limits::default() };
        assert!(parse("abcdef", &tiny).unwrap_err().message.contains("max_source_bytes"));
    }
}
