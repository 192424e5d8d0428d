//! Reading tool calls while they are generated, for streams that show a call's arguments as
//! they come (OpenAI's `tool_calls[].function.arguments` fragments).
//!
//! Calls are generated as envelopes, `{"name": "f", "arguments": {...}}`, one after another
//! with whitespace between (see [`super`]); the call grammar writes `name` first. A
//! [`CallScanner`] takes the output in pieces of any size and reports each call's start once
//! its name is complete, then the text of its arguments as it arrives. Output of another
//! shape (a `<tool_call>` tag, `arguments` before `name`) stops the scanner: what it has not
//! reported is then read from the whole output at the end ([`super::parse_calls`]).
//!
//! Cost: each byte is looked at once; only a key or the name (short strings) is buffered.

/// What the scanner found in a piece of output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallPiece {
    /// Call `index` (from 0) starts: its function name.
    Start {
        /// Position of the call in the turn.
        index: usize,
        /// The function.
        name: String,
    },
    /// More of call `index`'s arguments (JSON text; all fragments together are the object).
    Arguments {
        /// Position of the call in the turn.
        index: usize,
        /// The fragment.
        text: String,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum State {
    /// Before an envelope (whitespace, then `{`).
    Between,
    /// In an envelope, before a key, `,` or `}`.
    Envelope,
    /// In a key (its text so far, raw).
    Key(String),
    /// After a key, before `:`.
    Colon(String),
    /// Before a value of this key.
    Value(String),
    /// In the name's string (raw text so far, quotes included).
    Name(String),
    /// In the arguments value: container depth, inside a string, after a backslash.
    Arguments { depth: u32, in_string: bool, escaped: bool },
    /// The output is not envelopes as expected: nothing more is reported.
    Stopped,
}

/// Reads call envelopes incrementally; see the module docs.
#[derive(Debug)]
pub struct CallScanner {
    state: State,
    /// Calls started so far.
    started: usize,
    /// Whether the current envelope's name has been read.
    named: bool,
}

impl Default for CallScanner {
    fn default() -> Self {
        CallScanner { state: State::Between, started: 0, named: false }
    }
}

impl CallScanner {
    /// A scanner at the start of the output.
    pub fn new() -> Self {
        Self::default()
    }

    /// Calls whose start was reported.
    pub fn started(&self) -> usize {
        self.started
    }

    /// Whether the output stopped looking like envelopes.
    pub fn stopped(&self) -> bool {
        self.state == State::Stopped
    }

    /// Reads the next piece of output.
    pub fn push(&mut self, piece: &str) -> Vec<CallPiece> {
        let mut out = Vec::new();
        // Start of the arguments text within `piece`, while in the arguments.
        let mut args_from: Option<usize> = matches!(self.state, State::Arguments { .. }).then_some(0);
        for (i, c) in piece.char_indices() {
            let state = std::mem::replace(&mut self.state, State::Stopped);
            self.state = match state {
                State::Stopped => return out,
                State::Between if c.is_whitespace() => State::Between,
                State::Between if c == '{' => {
                    self.named = false;
                    State::Envelope
                }
                State::Envelope if c.is_whitespace() || c == ',' => State::Envelope,
                State::Envelope if c == '"' => State::Key(String::new()),
                State::Envelope if c == '}' && self.named => State::Between,
                State::Key(mut k) => match c {
                    '"' if !ends_in_escape(&k) => State::Colon(k),
                    _ => {
                        k.push(c);
                        State::Key(k)
                    }
                },
                State::Colon(k) if c.is_whitespace() => State::Colon(k),
                State::Colon(k) if c == ':' => State::Value(k),
                State::Value(k) if c.is_whitespace() => State::Value(k),
                State::Value(k) if k == "name" && c == '"' && !self.named => State::Name("\"".into()),
                State::Value(k) if k == "arguments" && c == '{' && self.named => {
                    args_from = Some(i);
                    State::Arguments { depth: 1, in_string: false, escaped: false }
                }
                State::Name(mut raw) => {
                    let closes = c == '"' && !ends_in_escape(&raw);
                    raw.push(c);
                    if !closes {
                        State::Name(raw)
                    } else {
                        match serde_json::from_str::<String>(&raw) {
                            Ok(name) => {
                                out.push(CallPiece::Start { index: self.started, name });
                                self.started += 1;
                                self.named = true;
                                State::Envelope
                            }
                            Err(_) => State::Stopped,
                        }
                    }
                }
                State::Arguments { depth, in_string, escaped } => {
                    let (depth, in_string, escaped) = match (in_string, escaped, c) {
                        (true, true, _) => (depth, true, false),
                        (true, false, '\\') => (depth, true, true),
                        (true, false, '"') => (depth, false, false),
                        (true, false, _) => (depth, true, false),
                        (false, _, '"') => (depth, true, false),
                        (false, _, '{' | '[') => (depth + 1, false, false),
                        (false, _, '}' | ']') => (depth - 1, false, false),
                        (false, _, _) => (depth, false, false),
                    };
                    if depth == 0 {
                        let from = args_from.take().unwrap_or(0);
                        let end = i + c.len_utf8();
                        out.push(CallPiece::Arguments { index: self.started - 1, text: piece[from..end].to_string() });
                        State::Envelope
                    } else {
                        State::Arguments { depth, in_string, escaped }
                    }
                }
                _ => State::Stopped,
            };
        }
        if let (Some(from), State::Arguments { .. }) = (args_from, &self.state) {
            if from < piece.len() {
                out.push(CallPiece::Arguments { index: self.started - 1, text: piece[from..].to_string() });
            }
        }
        out
    }
}

/// Whether the raw string text `raw` (without its closing quote) ends in an odd number of
/// backslashes, so that a quote after it is escaped.
fn ends_in_escape(raw: &str) -> bool {
    raw.bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `text` in pieces of `size` bytes (at char boundaries); returns the starts and
    /// each call's arguments, joined.
    fn scan(text: &str, size: usize) -> (CallScanner, Vec<(String, String)>) {
        let mut s = CallScanner::new();
        let mut calls: Vec<(String, String)> = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            let mut cut = size.min(rest.len());
            while !rest.is_char_boundary(cut) {
                cut += 1;
            }
            for p in s.push(&rest[..cut]) {
                match p {
                    CallPiece::Start { index, name } => {
                        assert_eq!(index, calls.len());
                        calls.push((name, String::new()));
                    }
                    CallPiece::Arguments { index, text } => calls[index].1.push_str(&text),
                }
            }
            rest = &rest[cut..];
        }
        (s, calls)
    }

    #[test]
    fn calls_in_pieces_of_every_size() {
        let text = "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa}ri\\\"s\", \"t\": [1, {\"x\": \"é\"}]}}\n\
                    {\"name\":\"ping\",\"arguments\":{}} ";
        for size in 1..text.len() {
            let (s, calls) = scan(text, size);
            assert!(!s.stopped(), "size {size}");
            assert_eq!(s.started(), 2);
            assert_eq!(calls[0].0, "get_weather");
            assert_eq!(calls[0].1, r#"{"city": "Pa}ri\"s", "t": [1, {"x": "é"}]}"#, "size {size}");
            assert_eq!(calls[1], ("ping".to_string(), "{}".to_string()));
        }
    }

    #[test]
    fn other_shapes_stop_it() {
        for text in ["<tool_call>{\"name\"", "{\"arguments\": {}, \"name\": \"f\"}", "Hello", "{\"name\": 3}"] {
            let (s, calls) = scan(text, 3);
            assert!(s.stopped(), "{text}");
            assert!(calls.is_empty(), "{text}");
        }
        let (s, calls) = scan(r#"{"name": "a\"b", "arguments": {}}"#, 4);
        assert!(!s.stopped());
        assert_eq!(calls, [("a\"b".to_string(), "{}".to_string())]);
    }
}
