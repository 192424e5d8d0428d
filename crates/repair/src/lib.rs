//! # formwork-repair: JSON written by a model without a constraint
//!
//! Find it in free text, fix the common faults, and (optionally) check it against a schema
//! (through `formwork-schema`'s validator). Its own crate: it has nothing to do with
//! compiling schemas to grammars.
//!
//! Output of other systems (an unconstrained model, an API without structured output) often
//! wraps JSON in prose or a Markdown code fence and breaks it in a few predictable ways.
//! [`repair`] finds the JSON and fixes those faults, naming each fix ([`Fix`]) so that a caller
//! can see how far the text was from JSON; [`repair_and_validate`] also validates the result,
//! preferring among several JSON values in the text the first that validates.
//!
//! ```
//! use formwork_repair::{repair, Fix};
//! let text = "Sure! Here it is:\n```json\n{'name': 'Ada', age: 36,}\n```\nAnything else?";
//! let r = repair(text).unwrap();
//! assert_eq!(r.json, r#"{"name":"Ada","age":36}"#);
//! assert!(r.fixes.contains(&Fix::CodeFence) && r.fixes.contains(&Fix::TrailingComma));
//! ```
//!
//! ## How a value is chosen
//! 1. Text that is JSON as it stands (surrounding whitespace aside) is taken as is.
//! 2. Otherwise candidates are collected: first inside Markdown code fences (```` ```json ````,
//!    ```` ``` ````; an unclosed fence runs to the end), then in the prose outside them. A
//!    candidate starts at a `{` or `[` and ends where that value closes; it is read by a
//!    lenient reader (see below). A start that cannot be read is skipped and the search goes on
//!    from the next `{` / `[`, at most [`RepairOptions::max_candidates`] starts in all.
//! 3. Without a schema the first *complete* candidate wins (one that closes before the end of
//!    the text); when none is complete, the first one, closed. With a schema, the first
//!    candidate (complete ones first) that validates wins; when none does, the one rule 3 would
//!    pick, with its errors. Prose such as "see [1]" before the JSON is itself a complete
//!    array: give a schema to skip it.
//!
//! ## What the lenient reader fixes
//! Comments (`//`, `/* */`, `#`), trailing and doubled commas, missing commas between members,
//! single-quoted strings, unquoted keys, Python's `True`/`False`/`None`, `undefined`/`NaN`/
//! `Infinity` (as `null`), numbers written `+1`, `.5`, `5.`, `007` or `0x1F`, raw newlines and
//! tabs and invalid escapes (`\d`, `\'`) in strings, and a document cut off before its end
//! (the open string and brackets are closed; an incomplete last member such as `"key":` or
//! `"key": tru` is dropped). Anything else (a bare word as a value, a missing colon) makes the
//! candidate unreadable.
//!
//! ## Bounds
//! Input longer than [`RepairOptions::max_bytes`] is refused ([`RepairError::TooLarge`]); nesting
//! deeper than [`RepairOptions::max_depth`] is [`RepairError::TooDeep`]. Reading is one linear
//! pass per candidate start with an explicit stack (no recursion).

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod normalize;

use crate::normalize::{normalize, NormalizeError};
use serde_json::Value;
use std::fmt;

/// One kind of fault that was fixed (each is reported once, however often it occurred).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fix {
    /// The JSON was taken out of a Markdown code fence.
    CodeFence,
    /// Text before or after the JSON was removed.
    ProseRemoved,
    /// A later JSON value in the text was taken: earlier ones did not validate against the schema.
    LaterCandidate {
        /// How many readable candidates were passed over.
        skipped: usize,
    },
    /// `//`, `/* */` or `#` comments were removed.
    Comments,
    /// Trailing (or doubled) commas were removed.
    TrailingComma,
    /// Missing commas between members or elements were inserted.
    MissingComma,
    /// Single-quoted strings were double-quoted.
    SingleQuotes,
    /// Unquoted keys were quoted.
    UnquotedKeys,
    /// Python's `True`, `False`, `None` became `true`, `false`, `null`.
    PythonLiterals,
    /// `undefined`, `NaN`, `Infinity` became `null`.
    NonJsonValues,
    /// Numbers were rewritten in JSON syntax (`+1`, `.5`, `5.`, `007`, `0x1F`).
    NumberFormat,
    /// Raw control characters in strings were escaped, invalid escapes made literal.
    StringEscapes,
    /// The text ended inside a member (`"key":`, `"key": tru`); that member was dropped.
    IncompleteMemberDropped,
    /// The text ended before the document did; it was closed with `closed`.
    Unterminated {
        /// What was appended (quotes and brackets).
        closed: String,
    },
}

impl Fix {
    /// A stable snake_case name (`trailing_comma`, `code_fence`, ...), for APIs and scripts.
    pub fn name(&self) -> &'static str {
        match self {
            Fix::CodeFence => "code_fence",
            Fix::ProseRemoved => "prose_removed",
            Fix::LaterCandidate { .. } => "later_candidate",
            Fix::Comments => "comments",
            Fix::TrailingComma => "trailing_comma",
            Fix::MissingComma => "missing_comma",
            Fix::SingleQuotes => "single_quotes",
            Fix::UnquotedKeys => "unquoted_keys",
            Fix::PythonLiterals => "python_literals",
            Fix::NonJsonValues => "non_json_values",
            Fix::NumberFormat => "number_format",
            Fix::StringEscapes => "string_escapes",
            Fix::IncompleteMemberDropped => "incomplete_member_dropped",
            Fix::Unterminated { .. } => "unterminated",
        }
    }
}

impl fmt::Display for Fix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fix::CodeFence => f.write_str("extracted from a code fence"),
            Fix::ProseRemoved => f.write_str("removed the text around the JSON"),
            Fix::LaterCandidate { skipped } => write!(f, "skipped {skipped} earlier JSON value(s) that did not validate"),
            Fix::Comments => f.write_str("removed comments"),
            Fix::TrailingComma => f.write_str("removed trailing commas"),
            Fix::MissingComma => f.write_str("inserted missing commas"),
            Fix::SingleQuotes => f.write_str("replaced single quotes with double quotes"),
            Fix::UnquotedKeys => f.write_str("quoted unquoted keys"),
            Fix::PythonLiterals => f.write_str("replaced Python literals (True/False/None)"),
            Fix::NonJsonValues => f.write_str("replaced undefined/NaN/Infinity with null"),
            Fix::NumberFormat => f.write_str("rewrote numbers in JSON syntax"),
            Fix::StringEscapes => f.write_str("escaped control characters / fixed invalid escapes in strings"),
            Fix::IncompleteMemberDropped => f.write_str("dropped an incomplete last member"),
            Fix::Unterminated { closed } => write!(f, "closed the unterminated document with `{closed}`"),
        }
    }
}

/// Bounds on the work done for one text.
#[derive(Clone, Debug)]
pub struct RepairOptions {
    /// Longest input accepted, in bytes (default 1 MiB).
    pub max_bytes: usize,
    /// Deepest nesting of objects and arrays (default 100; `serde_json` stops at 128).
    pub max_depth: usize,
    /// Most candidate starts (`{` / `[`) tried (default 32).
    pub max_candidates: usize,
}

impl Default for RepairOptions {
    fn default() -> Self {
        RepairOptions { max_bytes: 1 << 20, max_depth: 100, max_candidates: 32 }
    }
}

/// The JSON found in a text.
#[derive(Clone, Debug, PartialEq)]
pub struct Repaired {
    /// The value.
    pub value: Value,
    /// The value as compact JSON.
    pub json: String,
    /// What had to be fixed, in order of first occurrence (empty: the text was JSON).
    pub fixes: Vec<Fix>,
}

/// [`Repaired`] and the result of validating it.
#[derive(Clone, Debug, PartialEq)]
pub struct Checked {
    /// The chosen value.
    pub repaired: Repaired,
    /// Validation errors (with instance paths); empty when the value is valid.
    pub errors: Vec<String>,
}

impl Checked {
    /// True when the value validates against the schema.
    pub fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }
}

/// Why no JSON could be recovered.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RepairError {
    /// The input is over [`RepairOptions::max_bytes`].
    #[error("the text is {len} bytes, over the repair limit of {max} bytes (RepairOptions::max_bytes); pass a smaller text")]
    TooLarge {
        /// Input length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The text has no `{` or `[` and is not JSON itself.
    #[error("no JSON found: the text is not JSON and has no `{{` or `[` where an object or array could start")]
    NoJson,
    /// Candidates were found but none could be read.
    #[error("no JSON could be recovered: the first candidate, at line {line} column {column}, fails at line {fail_line} column {fail_column}: {why}")]
    Unrepairable {
        /// Line (1-based) where the first candidate starts.
        line: usize,
        /// Column (1-based, in characters).
        column: usize,
        /// Line where reading it failed.
        fail_line: usize,
        /// Column where reading it failed.
        fail_column: usize,
        /// What was wrong there.
        why: String,
    },
    /// Nesting deeper than [`RepairOptions::max_depth`].
    #[error("the JSON is nested deeper than {max} levels (RepairOptions::max_depth)")]
    TooDeep {
        /// The limit.
        max: usize,
    },
    /// The schema given to [`repair_and_validate`] is not a valid JSON Schema.
    #[error("the schema itself is invalid: {0}")]
    InvalidSchema(String),
}

/// Finds and repairs the JSON in `text` with the default [`RepairOptions`].
pub fn repair(text: &str) -> Result<Repaired, RepairError> {
    repair_with(text, &RepairOptions::default())
}

/// Finds and repairs the JSON in `text` (see the module docs for which value is chosen).
pub fn repair_with(text: &str, opts: &RepairOptions) -> Result<Repaired, RepairError> {
    let cands = candidates(text, opts, false)?;
    let i = default_pick(&cands);
    Ok(finish(text, &cands, i, 0))
}

/// Finds and repairs the JSON in `text`, then validates it against `schema` (draft from its
/// `$schema`, else 2020-12; formats asserted). Among several JSON values in the text, the first
/// that validates is chosen.
pub fn repair_and_validate(text: &str, schema: &Value, opts: &RepairOptions) -> Result<Checked, RepairError> {
    let validator = formwork_schema::Validator::new(schema).map_err(RepairError::InvalidSchema)?;
    let cands = candidates(text, opts, true)?;
    let errors_of = |v: &Value| -> Vec<String> {
        validator.errors(v)
    };
    let mut order: Vec<usize> = (0..cands.len()).filter(|&i| cands[i].complete).collect();
    order.extend((0..cands.len()).filter(|&i| !cands[i].complete));
    for (rank, &i) in order.iter().enumerate() {
        if validator.is_valid(&cands[i].value) {
            return Ok(Checked { repaired: finish(text, &cands, i, rank), errors: Vec::new() });
        }
    }
    let i = default_pick(&cands);
    let errors = errors_of(&cands[i].value);
    Ok(Checked { repaired: finish(text, &cands, i, 0), errors })
}

/// A value read from the text.
#[derive(Debug)]
struct Candidate {
    start: usize,
    end: usize,
    complete: bool,
    value: Value,
    fixes: Vec<Fix>,
    /// The code fence it came from.
    fence: Option<Fence>,
}

/// A Markdown code fence: the byte ranges of its opening marker line, content and closing marker.
#[derive(Clone, Copy, Debug)]
struct Fence {
    open: usize,
    content: (usize, usize),
    close_end: usize,
}

fn default_pick(cands: &[Candidate]) -> usize {
    cands.iter().position(|c| c.complete).unwrap_or(0)
}

fn finish(text: &str, cands: &[Candidate], i: usize, skipped: usize) -> Repaired {
    let c = &cands[i];
    let mut fixes = Vec::new();
    let ws = |s: &str| s.trim().is_empty();
    let prose = match c.fence {
        Some(f) => {
            fixes.push(Fix::CodeFence);
            !ws(&text[..f.open]) || !ws(&text[f.content.0..c.start]) || !ws(&text[c.end.min(f.content.1)..f.content.1]) || !ws(&text[f.close_end..])
        }
        None => !ws(&text[..c.start]) || !ws(&text[c.end..]),
    };
    if prose {
        fixes.push(Fix::ProseRemoved);
    }
    if skipped > 0 {
        fixes.push(Fix::LaterCandidate { skipped });
    }
    fixes.extend(c.fixes.iter().cloned());
    let json = serde_json::to_string(&c.value).unwrap_or_default();
    Repaired { value: c.value.clone(), json, fixes }
}

/// Collects the candidates of `text` in order (fenced first). Without `all`, stops at the first
/// complete one.
fn candidates(text: &str, opts: &RepairOptions, all: bool) -> Result<Vec<Candidate>, RepairError> {
    if text.len() > opts.max_bytes {
        return Err(RepairError::TooLarge { len: text.len(), max: opts.max_bytes });
    }
    let trimmed = text.trim_start_matches('\u{feff}').trim();
    if let Ok(value) = serde_json::from_str::<Value>(trimmed) {
        let start = text.len() - text.trim_start_matches('\u{feff}').trim_start().len();
        return Ok(vec![Candidate { start, end: start + trimmed.len(), complete: true, value, fixes: Vec::new(), fence: None }]);
    }
    let fences = fences(text);
    let mut scan = Scan { text, opts, all, out: Vec::new(), tries: 0, first_failure: None, too_deep: false };
    for f in &fences {
        let (a, b) = f.content;
        let inner = text[a..b].trim();
        if let Ok(value) = serde_json::from_str::<Value>(inner) {
            let start = a + (text[a..b].len() - text[a..b].trim_start().len());
            scan.out.push(Candidate { start, end: start + inner.len(), complete: true, value, fixes: Vec::new(), fence: Some(*f) });
        } else {
            scan.region(a, b, Some(*f));
        }
        if scan.done() {
            return Ok(scan.out);
        }
    }
    // The prose between (and around) the fences.
    let mut pos = 0;
    for f in fences.iter().map(|f| (f.open, f.close_end)).chain([(text.len(), text.len())]) {
        scan.region(pos, f.0, None);
        if scan.done() {
            break;
        }
        pos = f.1;
    }
    if scan.out.is_empty() {
        if scan.too_deep {
            return Err(RepairError::TooDeep { max: opts.max_depth });
        }
        return Err(match scan.first_failure {
            None => RepairError::NoJson,
            Some((start, at, why)) => {
                let (line, column) = line_col(text, start);
                let (fail_line, fail_column) = line_col(text, at);
                RepairError::Unrepairable { line, column, fail_line, fail_column, why }
            }
        });
    }
    Ok(scan.out)
}

struct Scan<'a> {
    text: &'a str,
    opts: &'a RepairOptions,
    all: bool,
    out: Vec<Candidate>,
    tries: usize,
    /// (candidate start, failure offset, why) of the first unreadable start.
    first_failure: Option<(usize, usize, String)>,
    too_deep: bool,
}

impl Scan<'_> {
    fn done(&self) -> bool {
        self.tries >= self.opts.max_candidates || (!self.all && self.out.iter().any(|c| c.complete))
    }

    /// Reads candidates starting in `text[a..b]`, each bounded by `b`.
    fn region(&mut self, a: usize, b: usize, fence: Option<Fence>) {
        let bytes = self.text.as_bytes();
        let mut pos = a;
        while !self.done() {
            let Some(off) = bytes[pos..b].iter().position(|&c| c == b'{' || c == b'[') else { return };
            let start = pos + off;
            self.tries += 1;
            match normalize(&self.text[..b], start, self.opts.max_depth) {
                Ok(n) => match serde_json::from_str::<Value>(&n.json) {
                    Ok(value) => {
                        pos = n.end;
                        self.out.push(Candidate { start, end: n.end, complete: n.complete, value, fixes: n.fixes, fence });
                        continue;
                    }
                    Err(e) => self.fail(start, start, format!("the repaired text is still not JSON ({e})")),
                },
                Err(NormalizeError::TooDeep { at }) => {
                    // Every start before `at` is as deep: go on from there.
                    self.too_deep = true;
                    pos = at.max(start + 1);
                    continue;
                }
                Err(NormalizeError::Syntax { at, why }) => self.fail(start, at, why),
            }
            pos = start + 1;
        }
    }

    fn fail(&mut self, start: usize, at: usize, why: String) {
        if self.first_failure.is_none() {
            self.first_failure = Some((start, at, why));
        }
    }
}

/// The code fences of `text`: a line (or line start) with three backticks and an optional
/// language word opens one, the next three backticks close it (or the end of the text).
fn fences(text: &str) -> Vec<Fence> {
    let mut out = Vec::new();
    let mut pos = 0;
    while let Some(i) = text[pos..].find("```") {
        let open = pos + i;
        let after = open + 3;
        // The language word (`json`, `JSON`, `json5`, `javascript`...), then the content.
        let word_end = after + text[after..].find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-')).unwrap_or(text.len() - after);
        let content_start = match text[word_end..].find('\n') {
            Some(nl) if text[word_end..word_end + nl].trim().is_empty() => word_end + nl + 1,
            _ => word_end,
        };
        let (content_end, close_end) = match text[content_start..].find("```") {
            Some(j) => (content_start + j, content_start + j + 3),
            None => (text.len(), text.len()),
        };
        out.push(Fence { open, content: (content_start, content_end), close_end });
        pos = close_end;
        if pos >= text.len() {
            break;
        }
    }
    out
}

/// 1-based line and column (in characters) of byte offset `at`.
fn line_col(text: &str, at: usize) -> (usize, usize) {
    let at = at.min(text.len());
    let before = &text.as_bytes()[..at];
    let line = before.iter().filter(|&&c| c == b'\n').count() + 1;
    let line_start = before.iter().rposition(|&c| c == b'\n').map_or(0, |p| p + 1);
    let column = String::from_utf8_lossy(&before[line_start..]).chars().count() + 1;
    (line, column)
}
