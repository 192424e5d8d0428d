//! Telling text from a tool call while output streams.
//!
//! With tools offered, output is a call when it starts (after whitespace) with `{` or
//! `<tool_call>`, and text otherwise ([`starts_call`]; the engine backend uses the same rule
//! to switch to the call grammar). Until the start decides, pieces are held back; text then
//! streams as it comes, and call output goes to the caller's call handling (OpenAI streams
//! it through [`super::scan::CallScanner`]; every API reads the finished calls with
//! [`super::parse_calls`]).

const TAG: &str = "<tool_call>";

/// Whether output starting with `text` is a call (`Some(true)`), text (`Some(false)`), or
/// not yet known (`None`: only whitespace, or a proper prefix of `<tool_call>`).
pub fn starts_call(text: &str) -> Option<bool> {
    let head = text.trim_start();
    if head.is_empty() {
        return None;
    }
    if head.starts_with('{') || head.starts_with(TAG) {
        return Some(true);
    }
    if TAG.starts_with(head) {
        return None;
    }
    Some(false)
}

/// Where a piece of streamed answer goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// Not known yet: held back.
    Hold,
    /// Answer text, to send now (with what was held before it).
    Text(String),
    /// Part of the calls (with what was held before it).
    Call(String),
}

/// Routes streamed answer pieces: text is passed on once the start says it is text, a call
/// is passed to the caller's call handling.
#[derive(Debug, Default)]
pub struct CallDetector {
    /// Pieces seen so far while undecided.
    held: String,
    decided: Option<bool>,
    /// Bytes of answer text already passed on.
    sent: usize,
}

impl CallDetector {
    /// A detector for a fresh answer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the next piece.
    pub fn push(&mut self, piece: &str) -> Route {
        if self.decided.is_none() {
            self.held.push_str(piece);
            self.decided = starts_call(&self.held);
        } else {
            self.held = piece.to_string();
        }
        match self.decided {
            None => Route::Hold,
            Some(true) => Route::Call(std::mem::take(&mut self.held)),
            Some(false) => {
                let out = std::mem::take(&mut self.held);
                self.sent += out.len();
                Route::Text(out)
            }
        }
    }

    /// Whether the output has started like a call.
    pub fn is_call(&self) -> bool {
        self.decided == Some(true)
    }

    /// For an answer that turned out not to be a call: the part of its final `text` not yet
    /// sent.
    pub fn unsent<'t>(&self, text: &'t str) -> &'t str {
        text.get(self.sent..).unwrap_or("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts() {
        assert_eq!(starts_call(""), None);
        assert_eq!(starts_call(" \n"), None);
        assert_eq!(starts_call("<tool"), None);
        assert_eq!(starts_call(" {\"name\""), Some(true));
        assert_eq!(starts_call("<tool_call>\n{"), Some(true));
        assert_eq!(starts_call("<b>"), Some(false));
        assert_eq!(starts_call("Hello"), Some(false));
    }

    #[test]
    fn text_streams_after_the_start_decides_and_nothing_is_lost() {
        let mut d = CallDetector::new();
        assert_eq!(d.push(" "), Route::Hold);
        assert_eq!(d.push("<"), Route::Hold);
        assert_eq!(d.push("b>Hi"), Route::Text(" <b>Hi".into()));
        assert_eq!(d.push(" there"), Route::Text(" there".into()));
        assert!(!d.is_call());
        assert_eq!(d.unsent(" <b>Hi there"), "");
        let mut d = CallDetector::new();
        assert_eq!(d.push("\n"), Route::Hold);
        assert_eq!(d.unsent("\n"), "\n", "held text is sent at the end");
    }

    #[test]
    fn calls_go_their_own_way() {
        let mut d = CallDetector::new();
        assert_eq!(d.push("<tool_"), Route::Hold);
        assert_eq!(d.push("call>{\"name\""), Route::Call("<tool_call>{\"name\"".into()));
        assert!(d.is_call());
        assert_eq!(d.push(": \"f\"}"), Route::Call(": \"f\"}".into()));
        let mut d = CallDetector::new();
        assert_eq!(d.push(" {"), Route::Call(" {".into()));
        assert_eq!(d.unsent(" {}"), " {}", "nothing of a call is sent as text");
    }
}
