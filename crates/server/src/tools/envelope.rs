//! Tool use on a model whose chat template cannot show tools: every reply is one JSON
//! *envelope*, `{"tool_calls": [call, ...]}` or `{"response": "text"}` (the instruction the
//! model reads is `formwork_engine::tool_prompt`'s, which says why). [`envelope_schema`] is
//! the grammar's schema; [`EnvelopeReader`] turns the envelope, as it is generated, back
//! into what every handler reads from a model that calls natively: the text of the answer,
//! or the calls as `{"name", "arguments"}` objects one per line (what
//! [`parse_calls`](super::parse_calls), [`CallDetector`](super::detect::CallDetector) and
//! [`CallScanner`](super::scan::CallScanner) read).
//!
//! The first call is handed on as it is generated (its arguments stream); each later one is
//! handed on once it is complete, so that a call that repeats an earlier one of the same turn
//! ([`EnvelopeReader::repeated`]) never reaches the client, and one cut off by the token
//! limit is not half-written after whole ones.

use formwork_engine::tool_prompt::{CALLS_KEY, RESPONSE_KEY};
use serde_json::{json, Value};

/// The schema of an envelope: one to `max_calls` calls, each matching `call_schema` (see
/// [`call_schema`](super::call_schema)), or, when `text` (`tool_choice: auto`), a text answer.
pub fn envelope_schema(call_schema: &Value, max_calls: u32, text: bool) -> Value {
    let calls = |at: &str| {
        json!({
            "type": "object",
            "properties": {
                CALLS_KEY: {
                    "type": "array",
                    "items": super::relocate::relocate(call_schema, &format!("{at}/properties/{CALLS_KEY}/items")),
                    "minItems": 1,
                    "maxItems": max_calls.max(1),
                },
            },
            "required": [CALLS_KEY],
            "additionalProperties": false,
        })
    };
    if !text {
        return calls("");
    }
    json!({
        "anyOf": [
            calls("/anyOf/0"),
            {
                "type": "object",
                "properties": { RESPONSE_KEY: { "type": "string" } },
                "required": [RESPONSE_KEY],
                "additionalProperties": false,
            },
        ]
    })
}

/// Where an [`EnvelopeReader`] is in the envelope.
#[derive(Clone, Debug, PartialEq)]
enum At {
    /// Before the key's value: the text so far (`{`, whitespace, the key, `:`).
    Head(String),
    /// Inside the answer's string; `escape` holds an escape sequence not finished yet
    /// (from its backslash), `high` a UTF-16 high surrogate waiting for its low half.
    Text { escape: String, high: Option<u16> },
    /// Inside the calls' array: `depth` of the current call's brackets (0 between calls),
    /// and whether the reader is in a string of it (and just after a backslash there).
    Calls { depth: u32, in_string: bool, escaped: bool, calls: u32 },
    /// After the value (or after something unexpected: nothing more is read).
    Done,
}

/// Reads an envelope as it is generated (see the module docs): [`push`](Self::push) takes
/// the next piece of the envelope's text and returns the next piece of the plain output.
/// Written for output the envelope grammar allowed; anything else ends the reading.
#[derive(Clone, Debug)]
pub struct EnvelopeReader {
    at: At,
    /// The envelope's key was the calls'.
    calls: bool,
    /// The text of the call being read, and the calls read whole so far.
    call: String,
    done_calls: Vec<Value>,
    /// A call repeated an earlier one of the turn: reading stopped before it.
    repeated: bool,
    /// All the plain output so far.
    out: String,
}

impl Default for EnvelopeReader {
    fn default() -> Self {
        Self::new()
    }
}

impl EnvelopeReader {
    /// A reader at the start of an envelope.
    pub fn new() -> Self {
        EnvelopeReader {
            at: At::Head(String::new()),
            calls: false,
            call: String::new(),
            done_calls: Vec::new(),
            repeated: false,
            out: String::new(),
        }
    }

    /// The plain output so far: the answer's text, or the calls one per line.
    pub fn output(&self) -> &str {
        &self.out
    }

    /// Whether a call repeated an earlier call of the turn (the same function with the same
    /// arguments): a small model, once in the list, may go on writing the call it just
    /// wrote, and a client would run it again (a second email, a second timer). The repeat is
    /// not handed on, and nothing after it is read: the caller should stop generating.
    pub fn repeated(&self) -> bool {
        self.repeated
    }

    /// Whether the envelope holds calls (known once its key is read).
    pub fn is_calls(&self) -> bool {
        self.calls
    }

    /// Reads `piece`, the next text of the envelope; returns the plain output it adds.
    pub fn push(&mut self, piece: &str) -> String {
        let start = self.out.len();
        for c in piece.chars() {
            self.step(c);
        }
        self.out[start..].to_string()
    }

    fn step(&mut self, c: char) {
        match &mut self.at {
            At::Head(head) => {
                head.push(c);
                let h = head.trim_start();
                let Some(after_brace) = h.strip_prefix('{') else {
                    if !h.is_empty() {
                        self.at = At::Done;
                    }
                    return;
                };
                // `"key"`, whitespace, `:`, whitespace, then the value's first character.
                let rest = after_brace.trim_start();
                let Some(key_on) = rest.strip_prefix('"') else { return };
                let Some(end) = key_on.find('"') else { return };
                let (key, after_key) = (&key_on[..end], key_on[end + 1..].trim_start());
                let Some(value) = after_key.strip_prefix(':') else { return };
                let value = value.trim_start();
                match (key, value.chars().next()) {
                    (_, None) => {}
                    (k, Some('"')) if k == RESPONSE_KEY => self.at = At::Text { escape: String::new(), high: None },
                    (k, Some('[')) if k == CALLS_KEY => {
                        self.calls = true;
                        self.at = At::Calls { depth: 0, in_string: false, escaped: false, calls: 0 };
                    }
                    _ => self.at = At::Done,
                }
            }
            At::Text { escape, high } => {
                if escape.is_empty() {
                    match c {
                        '"' => self.at = At::Done,
                        '\\' => escape.push(c),
                        c => self.out.push(c),
                    }
                    return;
                }
                escape.push(c);
                let decoded = match escape.as_str() {
                    e if e.len() == 6 && e.starts_with("\\u") => match u16::from_str_radix(&e[2..], 16) {
                        Ok(unit) => Some(unit),
                        Err(_) => None,
                    },
                    e if e.starts_with("\\u") => {
                        if e[2..].chars().all(|c| c.is_ascii_hexdigit()) {
                            return;
                        }
                        None
                    }
                    "\\n" => Some(u16::from(b'\n')),
                    "\\t" => Some(u16::from(b'\t')),
                    "\\r" => Some(u16::from(b'\r')),
                    "\\b" => Some(0x08),
                    "\\f" => Some(0x0c),
                    "\\\"" => Some(u16::from(b'"')),
                    "\\\\" => Some(u16::from(b'\\')),
                    "\\/" => Some(u16::from(b'/')),
                    _ => None,
                };
                escape.clear();
                let Some(unit) = decoded else {
                    self.at = At::Done;
                    return;
                };
                match (high.take(), unit) {
                    (None, 0xD800..=0xDBFF) => *high = Some(unit),
                    (Some(h), 0xDC00..=0xDFFF) => {
                        let c = 0x10000 + ((u32::from(h) - 0xD800) << 10) + (u32::from(unit) - 0xDC00);
                        self.out.push(char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER));
                    }
                    (h, unit) => {
                        if h.is_some() {
                            self.out.push(char::REPLACEMENT_CHARACTER);
                        }
                        if (0xD800..=0xDBFF).contains(&unit) {
                            *high = Some(unit);
                        } else {
                            self.out.push(char::from_u32(u32::from(unit)).unwrap_or(char::REPLACEMENT_CHARACTER));
                        }
                    }
                }
            }
            At::Calls { depth, in_string, escaped, calls } => {
                if *depth == 0 {
                    match c {
                        '{' => {
                            *calls += 1;
                            *depth = 1;
                            self.call.clear();
                            self.call.push(c);
                            if *calls == 1 {
                                self.out.push(c);
                            }
                        }
                        ']' => self.at = At::Done,
                        c if c == ',' || c.is_whitespace() => {}
                        _ => self.at = At::Done,
                    }
                    return;
                }
                self.call.push(c);
                if *calls == 1 {
                    self.out.push(c);
                }
                if *in_string {
                    if *escaped {
                        *escaped = false;
                    } else if c == '\\' {
                        *escaped = true;
                    } else if c == '"' {
                        *in_string = false;
                    }
                    return;
                }
                match c {
                    '"' => *in_string = true,
                    '{' | '[' => *depth += 1,
                    '}' | ']' => *depth -= 1,
                    _ => {}
                }
                if *depth > 0 {
                    return;
                }
                // A call is complete: the first has been handed on as it came; a later one is
                // handed on whole, unless it repeats an earlier call of the turn.
                let first = *calls == 1;
                let call: Value = serde_json::from_str(&self.call).unwrap_or(Value::Null);
                if self.done_calls.contains(&call) {
                    self.repeated = true;
                    self.at = At::Done;
                    return;
                }
                if !first {
                    self.out.push('\n');
                    self.out.push_str(&self.call);
                }
                self.done_calls.push(call);
            }
            At::Done => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain output of `envelope` pushed in pieces of `n` characters.
    fn read(envelope: &str, n: usize) -> String {
        let mut r = EnvelopeReader::new();
        let chars: Vec<char> = envelope.chars().collect();
        let mut out = String::new();
        for piece in chars.chunks(n) {
            out.push_str(&r.push(&piece.iter().collect::<String>()));
        }
        assert_eq!(out, r.output());
        out
    }

    #[test]
    fn an_answer_is_its_text_in_any_pieces() {
        let text = "Hi \"you\"\nline\t2 \\ / é 😀 \u{1}";
        let envelope = json!({ "response": text }).to_string();
        for n in 1..5 {
            assert_eq!(read(&envelope, n), text, "pieces of {n}");
        }
        // Escapes as a model may write them: \u for plain characters, a surrogate pair.
        assert_eq!(read(r#"{ "response" : "a\u0062\/\ud83d\ude00!" }"#, 1), "ab/😀!");
        let mut r = EnvelopeReader::new();
        r.push("{\n  \"response\": \"x");
        assert!(!r.is_calls());
    }

    #[test]
    fn calls_are_one_per_line() {
        let one = r#"{"name": "get_weather", "arguments": {"city": "Pa]ri{s\"", "n": [1, {"a": []}]}}"#;
        let two = r#"{"name":"get_time","arguments":{}}"#;
        let envelope = format!("{{\"tool_calls\": [ {one},\n {two} ]}}");
        for n in 1..4 {
            assert_eq!(read(&envelope, n), format!("{one}\n{two}"), "pieces of {n}");
        }
        let mut r = EnvelopeReader::new();
        r.push(r#"{"tool_calls":[{"name":"#);
        assert!(r.is_calls());
    }

    #[test]
    fn a_repeated_call_ends_the_calls() {
        let a = r#"{"name": "set_timer", "arguments": {"minutes": 10}}"#;
        let b = r#"{"name":"set_timer","arguments":{"minutes":5}}"#;
        let mut r = EnvelopeReader::new();
        let mut out = String::new();
        for c in format!(r#"{{"tool_calls": [{a}, {b}, {a}, {b}]}}"#).chars() {
            out.push_str(&r.push(&c.to_string()));
            if r.repeated() {
                break;
            }
        }
        assert!(r.repeated());
        assert_eq!(out, format!("{a}\n{b}"));
        // The same arguments written differently are the same call.
        let mut r = EnvelopeReader::new();
        r.push(&format!(r#"{{"tool_calls": [{b}, {{"arguments": {{"minutes": 5}}, "name": "set_timer"}}]}}"#));
        assert!(r.repeated());
        assert_eq!(r.output(), b);
    }

    #[test]
    fn a_cut_envelope_gives_what_was_read() {
        assert_eq!(read(r#"{"response": "It is sun"#, 2), "It is sun");
        assert_eq!(read(r#"{"response": "ab\"#, 1), "ab");
        assert_eq!(read(r#"{"tool_calls": [{"name": "x", "argu"#, 3), r#"{"name": "x", "argu"#);
        // A later call is handed on whole or not at all.
        assert_eq!(read(r#"{"tool_calls": [{"name": "x"}, {"name": "y", "argu"#, 3), r#"{"name": "x"}"#);
        assert_eq!(read("", 1), "");
    }

    #[test]
    fn anything_else_reads_as_nothing() {
        assert_eq!(read("plain text", 1), "");
        assert_eq!(read(r#"{"other": "x"}"#, 1), "");
        assert_eq!(read(r#"{"response": 3}"#, 1), "");
    }

    #[test]
    fn the_schema_accepts_envelopes_and_nothing_else() {
        let call = super::super::call_schema(&[&crate::backend::ToolDef {
            name: "get_weather".into(),
            description: None,
            parameters: json!({"type": "object", "properties": {"city": {"$ref": "#/$defs/City"}}, "required": ["city"],
                "$defs": {"City": {"type": "string", "enum": ["Paris", "Oslo"]}}}),
        }])
        .unwrap();
        let auto = envelope_schema(&call, 2, true);
        let ok = |s: &Value, doc: Value| formwork_schema::validate(s, &doc.to_string()).is_ok();
        let paris = json!({"name": "get_weather", "arguments": {"city": "Paris"}});
        assert!(ok(&auto, json!({"response": "hi"})));
        assert!(ok(&auto, json!({"tool_calls": [paris.clone(), paris.clone()]})));
        assert!(!ok(&auto, json!({"tool_calls": [paris.clone(), paris.clone(), paris.clone()]})), "at most max_calls");
        assert!(!ok(&auto, json!({"tool_calls": []})));
        assert!(!ok(&auto, json!({"tool_calls": [{"name": "get_weather", "arguments": {"city": "Rome"}}]})), "the $ref resolves");
        assert!(!ok(&auto, json!({"response": "hi", "tool_calls": [paris.clone()]})));
        let required = envelope_schema(&call, 1, false);
        assert!(ok(&required, json!({"tool_calls": [paris]})));
        assert!(!ok(&required, json!({"response": "hi"})));
    }
}
