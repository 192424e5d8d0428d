//! [`GbnfError`]: what went wrong in a GBNF text, and where.
//!
//! Every error carries a [`Span`] of byte offsets into the source. Its `Display` names the
//! problem with a 1-based `line:column` and shows the source line with carets under the
//! place, so that a message printed to a terminal or returned by the server is enough to
//! find and fix the mistake:
//!
//! ```text
//! undefined rule `valu` at 3:14
//!   |
//! 3 | pair ::= key valu
//!   |              ^^^^
//!   = help: define it with `valu ::= ...` or fix the name
//! ```

use std::fmt;

/// A range of bytes `start..end` in the GBNF source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Span {
    /// Offset of the first byte.
    pub start: usize,
    /// Offset one past the last byte (`== start` for a point).
    pub end: usize,
}

impl Span {
    /// A span from `start` to `end`.
    pub fn new(start: usize, end: usize) -> Span {
        Span { start, end }
    }

    /// An empty span at `at` (for "expected something here" errors).
    pub fn point(at: usize) -> Span {
        Span { start: at, end: at }
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span { start: self.start.min(other.start), end: self.end.max(other.end) }
    }
}

/// What kind of mistake a [`GbnfError`] reports.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GbnfErrorKind {
    /// The source is larger than `Limits::max_source_bytes`.
    SourceTooLarge {
        /// Size of the source in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Groups or stacked repetitions nest deeper than `Limits::max_nesting`.
    NestingTooDeep {
        /// The limit.
        max: usize,
    },
    /// More rules than `Limits::max_rules`.
    TooManyRules {
        /// The limit.
        max: usize,
    },
    /// More grammar elements than `Limits::max_elements`.
    TooManyElements {
        /// The limit.
        max: usize,
    },
    /// A repetition count above `Limits::max_repeat`.
    RepeatTooLarge {
        /// The count written.
        count: u64,
        /// The limit.
        max: u32,
    },
    /// `{m,n}` with `m > n`.
    RepeatMinAboveMax {
        /// Least count.
        min: u32,
        /// Greatest count.
        max: u32,
    },
    /// A `{...}` that is not `{m}`, `{m,}`, `{m,n}` or `{,n}`.
    BadRepetition,
    /// `*`, `+`, `?` or `{...}` with nothing before it to repeat.
    NothingToRepeat(char),
    /// A rule is referenced but never defined.
    UndefinedRule(String),
    /// A rule is defined twice (the span points at the second definition).
    DuplicateRule(String),
    /// No rule named `root`.
    MissingRoot,
    /// The root rule cannot derive any finite string (for example `root ::= root "a"`, or a
    /// rule made only of classes that match nothing).
    MatchesNothing(String),
    /// A string literal without its closing `"`.
    UnterminatedString,
    /// A character class without its closing `]`.
    UnterminatedClass,
    /// A `(` without its closing `)`.
    UnclosedGroup,
    /// A `)` without an opening `(`.
    UnmatchedCloseParen,
    /// A `<...>` token reference without its closing `>`, or with a bad id.
    BadToken(String),
    /// An escape sequence that GBNF does not know, or that names no Unicode scalar value.
    BadEscape(String),
    /// `[]` or `[^]`.
    EmptyClass,
    /// A class range whose end comes before its start, such as `[z-a]`.
    BadClassRange {
        /// Range start.
        lo: char,
        /// Range end.
        hi: char,
    },
    /// A rule definition was expected (`name ::= ...`) but something else was found.
    ExpectedRule(String),
    /// `::=` was expected after a rule name.
    ExpectedDefine(String),
    /// A character that cannot start any GBNF element.
    UnexpectedChar(char),
    /// The grammar IR rejected the lowered grammar (a bug in the lowering if it happens).
    Ir(crate::IrError),
}

impl fmt::Display for GbnfErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use GbnfErrorKind::*;
        match self {
            SourceTooLarge { len, max } => write!(
                f,
                "grammar is {len} bytes, more than the limit of {max} bytes (Limits::max_source_bytes)"
            ),
            NestingTooDeep { max } => write!(
                f,
                "groups and repetitions nest more than {max} deep (Limits::max_nesting); \
                 flatten the grammar with helper rules"
            ),
            TooManyRules { max } => write!(f, "more than {max} rules (Limits::max_rules)"),
            TooManyElements { max } => {
                write!(f, "more than {max} grammar elements (Limits::max_elements)")
            }
            RepeatTooLarge { count, max } => write!(
                f,
                "repetition count {count} is above the limit of {max} (Limits::max_repeat); \
                 write an unbounded repetition (`*`, `+`, `{{m,}}`) instead"
            ),
            RepeatMinAboveMax { min, max } => {
                write!(f, "repetition {{{min},{max}}} has its minimum above its maximum")
            }
            BadRepetition => {
                write!(f, "malformed repetition: expected `{{m}}`, `{{m,}}`, `{{m,n}}` or `{{,n}}`")
            }
            NothingToRepeat(c) => write!(f, "`{c}` has nothing before it to repeat"),
            UndefinedRule(n) => write!(f, "undefined rule `{n}`"),
            DuplicateRule(n) => write!(f, "rule `{n}` is defined twice"),
            MissingRoot => write!(f, "no `root` rule: a grammar starts at the rule named `root`"),
            MatchesNothing(n) => write!(
                f,
                "rule `{n}` matches nothing: every alternative needs itself again \
                 (recursion without a way out) or an empty character class"
            ),
            UnterminatedString => write!(f, "unterminated string literal: missing closing `\"`"),
            UnterminatedClass => write!(f, "unterminated character class: missing closing `]`"),
            UnclosedGroup => write!(f, "unclosed group: missing `)`"),
            UnmatchedCloseParen => write!(f, "`)` without a matching `(`"),
            BadToken(why) => write!(f, "bad token reference: {why}"),
            BadEscape(e) => write!(f, "bad escape sequence `{e}`"),
            EmptyClass => write!(f, "empty character class"),
            BadClassRange { lo, hi } => write!(
                f,
                "class range `{}-{}` ends before it starts",
                lo.escape_debug(),
                hi.escape_debug()
            ),
            ExpectedRule(found) => {
                write!(f, "expected a rule definition `name ::= ...`, found {found}")
            }
            ExpectedDefine(found) => write!(f, "expected `::=` after the rule name, found {found}"),
            UnexpectedChar(c) => write!(f, "unexpected character `{}`", c.escape_debug()),
            Ir(e) => write!(f, "{e}"),
        }
    }
}

impl GbnfErrorKind {
    fn help(&self) -> Option<String> {
        use GbnfErrorKind::*;
        Some(match self {
            UndefinedRule(n) => format!("define it with `{n} ::= ...` or fix the name"),
            DuplicateRule(_) => "merge the two definitions with `|`".into(),
            MissingRoot => "add `root ::= ...`".into(),
            BadEscape(_) => {
                "known escapes: \\n \\r \\t \\\\ \\\" \\[ \\] \\- \\^ \\xHH \\uHHHH \\UHHHHHHHH".into()
            }
            EmptyClass => "a class needs at least one character; use `[^...]` to negate".into(),
            UnexpectedChar(_) => "GBNF elements are rule names, \"literals\", [classes], `.`, \
                 `<token>`, groups `( )` and the operators `| * + ? {m,n}`"
                .into(),
            _ => return None,
        })
    }
}

/// An error in a GBNF text: a [`GbnfErrorKind`] at a [`Span`] of the source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GbnfError {
    /// What went wrong.
    pub kind: GbnfErrorKind,
    /// Where, as byte offsets into the source.
    pub span: Span,
    line: usize,
    column: usize,
    snippet: Snippet,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Snippet {
    /// The source line (or a window of it), tabs replaced by spaces.
    text: String,
    /// Chars before the caret within `text`.
    caret_at: usize,
    /// Number of carets.
    caret_len: usize,
}

/// Longest piece of a source line shown in an error.
const WINDOW: usize = 100;

impl GbnfError {
    /// An error of `kind` at `span` of `source` (line, column and snippet are computed here).
    pub fn new(kind: GbnfErrorKind, span: Span, source: &str) -> GbnfError {
        let start = floor_char_boundary(source, span.start.min(source.len()));
        let end = floor_char_boundary(source, span.end.clamp(start, source.len()));
        let line_start = source[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = source[start..].find('\n').map_or(source.len(), |i| start + i);
        let line = source[..start].matches('\n').count() + 1;
        let column = source[line_start..start].chars().count() + 1;
        let before: Vec<char> = source[line_start..start].chars().collect();
        let after: Vec<char> = source[start..line_end].chars().collect();
        let width = source[start..end.min(line_end)].chars().count().max(1);
        // Keep a window around the caret so a megabyte-long line prints as one short line.
        let skip = before.len().saturating_sub(WINDOW / 2);
        let take_after = WINDOW.saturating_sub(before.len() - skip).max(width.min(WINDOW));
        let mut text: String = before[skip..].iter().chain(after.iter().take(take_after)).collect();
        text = text.replace(['\t', '\r'], " ");
        let caret_at = before.len() - skip;
        let caret_len = width.min(WINDOW);
        GbnfError { kind, span, line, column, snippet: Snippet { text, caret_at, caret_len } }
    }

    /// 1-based line of the error's start.
    pub fn line(&self) -> usize {
        self.line
    }

    /// 1-based column (in characters) of the error's start.
    pub fn column(&self) -> usize {
        self.column
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

impl fmt::Display for GbnfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at {}:{}", self.kind, self.line, self.column)?;
        if f.alternate() {
            return Ok(());
        }
        let num = self.line.to_string();
        let pad = " ".repeat(num.len());
        write!(f, "\n{pad} |\n{num} | {}\n{pad} | ", self.snippet.text.trim_end())?;
        write!(f, "{}{}", " ".repeat(self.snippet.caret_at), "^".repeat(self.snippet.caret_len))?;
        if let Some(h) = self.kind.help() {
            write!(f, "\n{pad} = help: {h}")?;
        }
        Ok(())
    }
}

impl std::error::Error for GbnfError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_points_at_line_and_column() {
        let src = "root ::= pair\npair ::= key\n  | key valu\nkey ::= \"k\"\n";
        let at = src.find("valu").unwrap();
        let e = GbnfError::new(GbnfErrorKind::UndefinedRule("valu".into()), Span::new(at, at + 4), src);
        assert_eq!((e.line(), e.column()), (3, 9));
        let shown = e.to_string();
        assert!(shown.starts_with("undefined rule `valu` at 3:9\n"), "{shown}");
        assert!(shown.contains("3 |   | key valu\n  |         ^^^^"), "{shown}");
        assert_eq!(format!("{e:#}"), "undefined rule `valu` at 3:9");
    }

    #[test]
    fn long_lines_are_windowed() {
        let src = format!("root ::= {}\"x", "\"a\" ".repeat(10_000));
        let at = src.len() - 2;
        let e = GbnfError::new(GbnfErrorKind::UnterminatedString, Span::point(at), &src);
        let shown = e.to_string();
        assert!(shown.lines().all(|l| l.len() < 2 * WINDOW), "{shown}");
        let text_line = shown.lines().nth(2).unwrap();
        let caret_line = shown.lines().nth(3).unwrap();
        let caret = caret_line.find('^').unwrap();
        assert_eq!(&text_line[caret..caret + 2], "\"x");
    }

    #[test]
    fn columns_count_characters_not_bytes() {
        let src = "root ::= \"é\" \\q";
        let at = src.find('\\').unwrap();
        let e = GbnfError::new(GbnfErrorKind::UnexpectedChar('\\'), Span::new(at, at + 1), src);
        assert_eq!(e.column(), 14);
    }
}
