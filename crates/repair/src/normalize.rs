//! The lenient reader behind [`crate::repair`]: one pass over a JSON-like value that writes
//! strict, compact JSON and records each kind of fault it fixed.
//!
//! It reads one object or array starting at a `{` / `[` and stops where that value closes,
//! so text after it is left alone. Accepted beyond JSON: `//`, `/* */` and `#` comments;
//! trailing commas; missing commas between members; single-quoted strings; unquoted keys;
//! Python's `True`/`False`/`None`; JavaScript's `undefined`/`NaN`/`Infinity` (as `null`);
//! numbers with a `+` sign, a bare `.5` / `5.`, leading zeros or hex digits; raw control
//! characters and invalid escapes inside strings; and a document cut off at the end, which is
//! closed (an incomplete last member is dropped).
//!
//! Work is linear in the input: one pass, an explicit stack (no recursion) bounded by
//! `max_depth`.

use crate::Fix;

/// Why a candidate could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NormalizeError {
    /// Something that no fix explains, at this byte offset of the whole text.
    Syntax { at: usize, why: String },
    /// Nesting deeper than the limit, at this byte offset.
    TooDeep { at: usize },
}

/// A candidate read successfully.
#[derive(Debug, Clone)]
pub(crate) struct Normalized {
    /// Strict, compact JSON.
    pub json: String,
    /// Byte offset just past the value (the end of the text when it was cut off).
    pub end: usize,
    /// False when the text ended before the value closed (and it was closed for it).
    pub complete: bool,
    /// The faults fixed, in order of first occurrence, each once.
    pub fixes: Vec<Fix>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Just after `{`, or after a `,` in an object: a key or `}`.
    Key,
    /// After a key: `:`.
    Colon,
    /// After `:`: a value.
    MemberValue,
    /// After `[`, or after a `,` in an array: a value or `]`.
    Element,
    /// After a complete member or element: `,` or the closing bracket.
    After,
}

#[derive(Debug)]
struct Frame {
    object: bool,
    state: State,
    /// Members/elements written so far.
    count: usize,
    /// Output length before the member/element now being read (its comma included), to cut
    /// an incomplete one at the end of the text.
    member_start: usize,
    /// A comma was read after the last member and not yet used.
    comma: bool,
}

enum Tok {
    Open(bool),
    Close(bool),
    Colon,
    Comma,
    /// A string, already written as JSON (with quotes); `closed` false when the text ended in it.
    Str { json: String, closed: bool },
    /// A number, normalised to JSON; `None` when it was cut off (`-`, `1e`) at the end.
    Num(Option<String>),
    Word(String),
    Eof,
}

struct Reader<'a> {
    s: &'a [u8],
    pos: usize,
    fixes: Vec<Fix>,
}

impl Reader<'_> {
    fn fix(&mut self, f: Fix) {
        if !self.fixes.contains(&f) {
            self.fixes.push(f);
        }
    }

    fn err(&self, at: usize, why: impl Into<String>) -> NormalizeError {
        NormalizeError::Syntax { at, why: why.into() }
    }

    /// Skips whitespace and comments.
    fn skip(&mut self) {
        while self.pos < self.s.len() {
            match self.s[self.pos] {
                b' ' | b'\t' | b'\n' | b'\r' => self.pos += 1,
                b'/' if self.s.get(self.pos + 1) == Some(&b'/') => {
                    self.fix(Fix::Comments);
                    self.skip_line();
                }
                b'#' => {
                    self.fix(Fix::Comments);
                    self.skip_line();
                }
                b'/' if self.s.get(self.pos + 1) == Some(&b'*') => {
                    self.fix(Fix::Comments);
                    let rest = &self.s[self.pos + 2..];
                    self.pos = match rest.windows(2).position(|w| w == b"*/") {
                        Some(i) => self.pos + 2 + i + 2,
                        None => self.s.len(),
                    };
                }
                _ => break,
            }
        }
    }

    fn skip_line(&mut self) {
        while self.pos < self.s.len() && self.s[self.pos] != b'\n' {
            self.pos += 1;
        }
    }

    fn next(&mut self) -> Result<(usize, Tok), NormalizeError> {
        self.skip();
        let at = self.pos;
        let Some(&c) = self.s.get(at) else { return Ok((at, Tok::Eof)) };
        let tok = match c {
            b'{' | b'[' => {
                self.pos += 1;
                Tok::Open(c == b'{')
            }
            b'}' | b']' => {
                self.pos += 1;
                Tok::Close(c == b'}')
            }
            b':' => {
                self.pos += 1;
                Tok::Colon
            }
            b',' => {
                self.pos += 1;
                Tok::Comma
            }
            b'"' | b'\'' => self.string(c),
            b'0'..=b'9' | b'-' | b'+' | b'.' => self.number()?,
            c if c.is_ascii_alphabetic() || c == b'_' || c == b'$' => {
                let start = self.pos;
                while self.pos < self.s.len() && matches!(self.s[self.pos], b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'$' | b'-') {
                    self.pos += 1;
                }
                Tok::Word(String::from_utf8_lossy(&self.s[start..self.pos]).into_owned())
            }
            _ => {
                let ch = std::str::from_utf8(&self.s[at..]).ok().and_then(|s| s.chars().next()).unwrap_or('\u{fffd}');
                return Err(self.err(at, format!("unexpected character `{ch}`")));
            }
        };
        Ok((at, tok))
    }

    /// A string delimited by `quote`, written as a JSON string.
    fn string(&mut self, quote: u8) -> Tok {
        if quote == b'\'' {
            self.fix(Fix::SingleQuotes);
        }
        self.pos += 1;
        let mut out: Vec<u8> = vec![b'"'];
        while self.pos < self.s.len() {
            let c = self.s[self.pos];
            self.pos += 1;
            match c {
                c if c == quote => {
                    out.push(b'"');
                    return Tok::Str { json: bytes_to_string(out), closed: true };
                }
                b'"' => out.extend_from_slice(b"\\\""),
                b'\\' => {
                    let Some(&e) = self.s.get(self.pos) else { break };
                    match e {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {
                            out.extend_from_slice(&[b'\\', e]);
                            self.pos += 1;
                        }
                        b'u' if self.s.len() >= self.pos + 5 && self.s[self.pos + 1..self.pos + 5].iter().all(u8::is_ascii_hexdigit) => {
                            out.extend_from_slice(&self.s[self.pos - 1..self.pos + 5]);
                            self.pos += 5;
                        }
                        b'\'' => {
                            out.push(b'\'');
                            self.pos += 1;
                            if quote != b'\'' {
                                self.fix(Fix::StringEscapes);
                            }
                        }
                        _ => {
                            // `\d`, `\x41`, `\u` without four hex digits: keep the backslash as text.
                            out.extend_from_slice(b"\\\\");
                            self.fix(Fix::StringEscapes);
                        }
                    }
                }
                c if c < 0x20 => {
                    self.fix(Fix::StringEscapes);
                    match c {
                        b'\n' => out.extend_from_slice(b"\\n"),
                        b'\r' => out.extend_from_slice(b"\\r"),
                        b'\t' => out.extend_from_slice(b"\\t"),
                        c => out.extend_from_slice(format!("\\u{c:04x}").as_bytes()),
                    }
                }
                c => out.push(c),
            }
        }
        out.push(b'"');
        Tok::Str { json: bytes_to_string(out), closed: false }
    }

    fn number(&mut self) -> Result<Tok, NormalizeError> {
        let start = self.pos;
        while self.pos < self.s.len() && matches!(self.s[self.pos], b'0'..=b'9' | b'a'..=b'z' | b'A'..=b'Z' | b'.' | b'+' | b'-' | b'_') {
            // A sign only starts the number or follows an exponent marker.
            let c = self.s[self.pos];
            if (c == b'+' || c == b'-') && self.pos > start && !matches!(self.s[self.pos - 1], b'e' | b'E') {
                break;
            }
            self.pos += 1;
        }
        let raw = std::str::from_utf8(&self.s[start..self.pos]).unwrap_or_default();
        let at_end = self.pos == self.s.len();
        match normalize_number(raw) {
            Some(NumberForm::Json(j, changed)) => {
                if changed {
                    self.fix(Fix::NumberFormat);
                }
                Ok(Tok::Num(Some(j)))
            }
            Some(NumberForm::NonFinite) => {
                self.fix(Fix::NonJsonValues);
                Ok(Tok::Num(Some("null".into())))
            }
            None if at_end => Ok(Tok::Num(None)),
            None => Err(self.err(start, format!("`{raw}` is not a number"))),
        }
    }
}

fn bytes_to_string(b: Vec<u8>) -> String {
    // Only ASCII bytes are ever inserted or dropped, so UTF-8 sequences stay whole.
    String::from_utf8(b).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

enum NumberForm {
    /// JSON text, and whether it differs from the input.
    Json(String, bool),
    /// `Infinity`, `-inf`, `NaN`.
    NonFinite,
}

fn normalize_number(raw: &str) -> Option<NumberForm> {
    let (neg, body) = match raw.as_bytes().first()? {
        b'-' => (true, &raw[1..]),
        b'+' => (false, &raw[1..]),
        _ => (false, raw),
    };
    if matches!(body, "Infinity" | "inf" | "NaN") {
        return Some(NumberForm::NonFinite);
    }
    let sign = if neg { "-" } else { "" };
    if let Some(hex) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        let v = u64::from_str_radix(hex, 16).ok()?;
        return Some(NumberForm::Json(format!("{sign}{v}"), true));
    }
    let (mantissa, exp) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let (int, frac) = match mantissa.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (mantissa, None),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !(digits(int) || int.is_empty() && frac.is_some_and(digits)) || frac.is_some_and(|f| !f.is_empty() && !digits(f)) {
        return None;
    }
    let int = match int.trim_start_matches('0') {
        "" => "0",
        t => t,
    };
    let mut out = format!("{sign}{int}");
    if let Some(f) = frac.filter(|f| !f.is_empty()) {
        out.push('.');
        out.push_str(f);
    }
    if let Some(e) = exp {
        let (esign, edigits) = match e.as_bytes().first() {
            Some(b'-') => ("-", &e[1..]),
            Some(b'+') => ("+", &e[1..]),
            _ => ("", e),
        };
        if !digits(edigits) {
            return None;
        }
        out.push('e');
        out.push_str(esign);
        out.push_str(edigits);
    }
    let changed = out != raw;
    Some(NumberForm::Json(out, changed))
}

/// Reads the object or array that starts at `text[start]` (a `{` or `[`).
pub(crate) fn normalize(text: &str, start: usize, max_depth: usize) -> Result<Normalized, NormalizeError> {
    let mut r = Reader { s: text.as_bytes(), pos: start, fixes: Vec::new() };
    let mut out = String::new();
    let mut stack: Vec<Frame> = Vec::new();
    loop {
        let (at, tok) = r.next()?;
        let Some(top) = stack.last_mut() else {
            // Only the first token is read with an empty stack.
            let Tok::Open(object) = tok else { return Err(r.err(at, "expected `{` or `[`")) };
            out.push(if object { '{' } else { '[' });
            stack.push(Frame { object, state: if object { State::Key } else { State::Element }, count: 0, member_start: out.len(), comma: false });
            continue;
        };
        if let Tok::Eof = tok {
            close_at_end(&mut r, &mut out, &mut stack);
            return Ok(Normalized { json: out, end: r.s.len(), complete: false, fixes: r.fixes });
        }
        match (top.state, tok) {
            (State::Key | State::Element | State::After, Tok::Comma) if top.state == State::After || top.comma || top.count == 0 => {
                if top.state == State::After {
                    top.comma = true;
                    top.state = if top.object { State::Key } else { State::Element };
                } else {
                    // `[,` or `,,`: a stray comma.
                    r.fix(Fix::TrailingComma);
                }
            }
            (State::Key | State::Element | State::After, Tok::Close(object)) => {
                if object != top.object {
                    let want = if top.object { '}' } else { ']' };
                    return Err(r.err(at, format!("expected `{want}` to close the {} here", if top.object { "object" } else { "array" })));
                }
                if top.comma {
                    r.fix(Fix::TrailingComma);
                }
                out.push(if object { '}' } else { ']' });
                stack.pop();
                match stack.last_mut() {
                    Some(parent) => value_done(parent),
                    None => return Ok(Normalized { json: out, end: r.pos, complete: true, fixes: r.fixes }),
                }
            }
            (State::Key | State::After, tok @ (Tok::Str { .. } | Tok::Word(_) | Tok::Num(_))) if top.object => {
                begin_member(&mut r, top, &mut out);
                match tok {
                    Tok::Str { json, closed } => {
                        if !closed {
                            // The text ends inside a key: nothing of this member is usable.
                            out.truncate(top.member_start);
                            r.fix(Fix::IncompleteMemberDropped);
                            close_at_end(&mut r, &mut out, &mut stack);
                            return Ok(Normalized { json: out, end: r.s.len(), complete: false, fixes: r.fixes });
                        }
                        out.push_str(&json);
                    }
                    Tok::Word(w) => {
                        r.fix(Fix::UnquotedKeys);
                        out.push_str(&serde_json::Value::String(w).to_string());
                    }
                    Tok::Num(Some(n)) => {
                        r.fix(Fix::UnquotedKeys);
                        out.push_str(&serde_json::Value::String(n).to_string());
                    }
                    _ => {
                        out.truncate(top.member_start);
                        r.fix(Fix::IncompleteMemberDropped);
                        close_at_end(&mut r, &mut out, &mut stack);
                        return Ok(Normalized { json: out, end: r.s.len(), complete: false, fixes: r.fixes });
                    }
                }
                top.state = State::Colon;
            }
            (State::Colon, Tok::Colon) => {
                out.push(':');
                top.state = State::MemberValue;
            }
            (State::Colon, _) => return Err(r.err(at, "expected `:` after the key")),
            (State::MemberValue | State::Element | State::After, tok) => {
                if top.state != State::MemberValue {
                    if top.object {
                        return Err(r.err(at, "expected a key"));
                    }
                    begin_member(&mut r, top, &mut out);
                }
                match tok {
                    Tok::Open(object) => {
                        if stack.len() >= max_depth {
                            return Err(NormalizeError::TooDeep { at });
                        }
                        out.push(if object { '{' } else { '[' });
                        stack.push(Frame { object, state: if object { State::Key } else { State::Element }, count: 0, member_start: out.len(), comma: false });
                        continue;
                    }
                    Tok::Str { json, closed } => {
                        out.push_str(&json);
                        if !closed {
                            r.fix(Fix::Unterminated { closed: String::new() });
                        }
                    }
                    Tok::Num(Some(n)) => out.push_str(&n),
                    Tok::Num(None) => {
                        let top = stack.last_mut().expect("a frame");
                        out.truncate(top.member_start);
                        r.fix(Fix::IncompleteMemberDropped);
                        close_at_end(&mut r, &mut out, &mut stack);
                        return Ok(Normalized { json: out, end: r.s.len(), complete: false, fixes: r.fixes });
                    }
                    Tok::Word(w) => match literal(&w) {
                        Some((json, fix)) => {
                            out.push_str(json);
                            if let Some(f) = fix {
                                r.fix(f);
                            }
                        }
                        None if r.pos == r.s.len() && ["true", "false", "null"].iter().any(|l| l.starts_with(&w)) => {
                            // `tru` at the very end: cut off.
                            let top = stack.last_mut().expect("a frame");
                            out.truncate(top.member_start);
                            r.fix(Fix::IncompleteMemberDropped);
                            close_at_end(&mut r, &mut out, &mut stack);
                            return Ok(Normalized { json: out, end: r.s.len(), complete: false, fixes: r.fixes });
                        }
                        None => return Err(r.err(at, format!("`{w}` is not a JSON value (strings need quotes)"))),
                    },
                    Tok::Colon => return Err(r.err(at, "unexpected `:`")),
                    Tok::Comma | Tok::Close(_) | Tok::Eof => return Err(r.err(at, "expected a value")),
                }
                value_done(stack.last_mut().expect("a frame"));
            }
            (State::Key, Tok::Comma) => return Err(r.err(at, "unexpected `,`")),
            (State::Key, _) => return Err(r.err(at, "expected a key or `}`")),
        }
    }
}

/// Writes the comma before a new member (inserting a missing one) and marks where it starts.
fn begin_member(r: &mut Reader<'_>, top: &mut Frame, out: &mut String) {
    top.member_start = out.len();
    if top.count > 0 {
        if !top.comma {
            r.fix(Fix::MissingComma);
        }
        out.push(',');
    }
    top.comma = false;
}

fn value_done(top: &mut Frame) {
    top.count += 1;
    top.state = State::After;
    top.comma = false;
}

/// The JSON for a bare word in value position, and the fix it needs.
fn literal(w: &str) -> Option<(&'static str, Option<Fix>)> {
    Some(match w {
        "true" => ("true", None),
        "false" => ("false", None),
        "null" => ("null", None),
        "True" => ("true", Some(Fix::PythonLiterals)),
        "False" => ("false", Some(Fix::PythonLiterals)),
        "None" => ("null", Some(Fix::PythonLiterals)),
        "undefined" | "NaN" | "Infinity" => ("null", Some(Fix::NonJsonValues)),
        _ => return None,
    })
}

/// The text ended with containers open: drop an incomplete last member, close the rest.
fn close_at_end(r: &mut Reader<'_>, out: &mut String, stack: &mut Vec<Frame>) {
    if let Some(top) = stack.last() {
        if matches!(top.state, State::Colon | State::MemberValue) {
            out.truncate(top.member_start);
            r.fix(Fix::IncompleteMemberDropped);
        } else if top.comma {
            r.fix(Fix::TrailingComma);
        }
    }
    let mut closed = String::new();
    if let Some(Fix::Unterminated { .. }) = r.fixes.iter().find(|f| matches!(f, Fix::Unterminated { .. })) {
        closed.push('"');
    }
    while let Some(f) = stack.pop() {
        let c = if f.object { '}' } else { ']' };
        out.push(c);
        closed.push(c);
    }
    r.fixes.retain(|f| !matches!(f, Fix::Unterminated { .. }));
    r.fixes.push(Fix::Unterminated { closed });
}
