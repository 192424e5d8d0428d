//! Streaming text out of generated token bytes: incremental UTF-8 decoding and stop strings.
//!
//! Tokens are byte strings, and a character can be split across tokens (byte-level BPE and
//! SentencePiece byte fallback both do it), so bytes are decoded incrementally: an
//! incomplete UTF-8 sequence at the end waits for the next token; an invalid sequence
//! becomes U+FFFD. Of the decoded text, the longest suffix that could still grow into a
//! stop string is held back; everything before it is certain and emitted at once. When a
//! stop string appears, the text before it is emitted and the stop string is not.

use std::ops::ControlFlow;

/// What happened to a push.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Pushed {
    /// Keep generating.
    Continue,
    /// This stop string completed; the text before it was emitted.
    StopString(String),
    /// The callback asked to stop (client disconnect).
    Cancelled,
}

/// Incremental decoder + stop-string matcher. Everything passed to the callback is also
/// appended to [`TextStream::text`].
#[derive(Debug)]
pub(crate) struct TextStream {
    stops: Vec<String>,
    /// Bytes of an incomplete UTF-8 sequence at the end of the output.
    pending: Vec<u8>,
    /// Decoded text not emitted yet: a suffix that may be the start of a stop string.
    held: String,
    /// Everything emitted.
    text: String,
}

impl TextStream {
    pub(crate) fn new(stops: &[String]) -> Self {
        TextStream {
            stops: stops.iter().filter(|s| !s.is_empty()).cloned().collect(),
            pending: Vec::new(),
            held: String::new(),
            text: String::new(),
        }
    }

    /// All text emitted so far.
    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    /// Appends a token's bytes; emits what became certain.
    pub(crate) fn push(&mut self, bytes: &[u8], emit: &mut dyn FnMut(&str) -> ControlFlow<()>) -> Pushed {
        self.pending.extend_from_slice(bytes);
        let decoded = decode_prefix(&mut self.pending, false);
        if decoded.is_empty() {
            return Pushed::Continue;
        }
        self.held.push_str(&decoded);
        if let Some((pos, stop)) = self.first_stop() {
            let stop = stop.to_string();
            let before = self.held[..pos].to_string();
            self.held.clear();
            self.pending.clear();
            // The generation ends either way; a Break here changes nothing.
            let _ = self.emit(&before, emit);
            return Pushed::StopString(stop);
        }
        let keep = self.hold_back();
        let cut = self.held.len() - keep;
        if cut == 0 {
            return Pushed::Continue;
        }
        let out: String = self.held.drain(..cut).collect();
        match self.emit(&out, emit) {
            ControlFlow::Continue(()) => Pushed::Continue,
            ControlFlow::Break(()) => Pushed::Cancelled,
        }
    }

    /// End of generation: emits the held text and any incomplete bytes (as U+FFFD).
    pub(crate) fn finish(&mut self, emit: &mut dyn FnMut(&str) -> ControlFlow<()>) -> Pushed {
        let tail = decode_prefix(&mut self.pending, true);
        self.held.push_str(&tail);
        let out = std::mem::take(&mut self.held);
        match self.emit(&out, emit) {
            ControlFlow::Continue(()) => Pushed::Continue,
            ControlFlow::Break(()) => Pushed::Cancelled,
        }
    }

    fn emit(&mut self, s: &str, emit: &mut dyn FnMut(&str) -> ControlFlow<()>) -> ControlFlow<()> {
        if s.is_empty() {
            return ControlFlow::Continue(());
        }
        self.text.push_str(s);
        emit(s)
    }

    /// Byte position in `held` of the earliest stop-string match.
    fn first_stop(&self) -> Option<(usize, &str)> {
        self.stops.iter().filter_map(|s| self.held.find(s.as_str()).map(|p| (p, s.as_str()))).min_by_key(|x| x.0)
    }

    /// Length of the longest suffix of `held` that is a proper prefix of a stop string.
    fn hold_back(&self) -> usize {
        let h = self.held.as_bytes();
        let mut best = 0;
        for s in &self.stops {
            let s = s.as_bytes();
            let max = (s.len() - 1).min(h.len());
            for k in (best + 1..=max).rev() {
                if h[h.len() - k..] == s[..k] && self.held.is_char_boundary(h.len() - k) {
                    best = k;
                    break;
                }
            }
        }
        best
    }
}

/// Decodes the longest valid UTF-8 prefix of `buf` and removes it from `buf`. Invalid
/// sequences become U+FFFD. An incomplete sequence at the end stays in `buf`, unless
/// `flush`, when it becomes U+FFFD too.
pub(crate) fn decode_prefix(buf: &mut Vec<u8>, flush: bool) -> String {
    let mut out = String::new();
    let mut rest: &[u8] = buf;
    loop {
        match std::str::from_utf8(rest) {
            Ok(s) => {
                out.push_str(s);
                rest = &[];
                break;
            }
            Err(e) => {
                let (good, bad) = rest.split_at(e.valid_up_to());
                out.push_str(std::str::from_utf8(good).unwrap_or_default());
                match e.error_len() {
                    Some(n) => {
                        out.push(char::REPLACEMENT_CHARACTER);
                        rest = &bad[n..];
                    }
                    None if flush => {
                        out.push(char::REPLACEMENT_CHARACTER);
                        rest = &[];
                        break;
                    }
                    None => {
                        rest = bad;
                        break;
                    }
                }
            }
        }
    }
    let keep = rest.to_vec();
    *buf = keep;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(stops: &[&str], pieces: &[&[u8]]) -> (Vec<String>, Pushed, String) {
        let stops: Vec<String> = stops.iter().map(|s| s.to_string()).collect();
        let mut ts = TextStream::new(&stops);
        let mut chunks = Vec::new();
        let mut last = Pushed::Continue;
        for p in pieces {
            last = ts.push(p, &mut |s| {
                chunks.push(s.to_string());
                ControlFlow::Continue(())
            });
            if last != Pushed::Continue {
                break;
            }
        }
        if last == Pushed::Continue {
            ts.finish(&mut |s| {
                chunks.push(s.to_string());
                ControlFlow::Continue(())
            });
        }
        let text = ts.text().to_string();
        (chunks, last, text)
    }

    #[test]
    fn utf8_split_across_tokens_is_never_emitted_broken() {
        // "é" = C3 A9, "€" = E2 82 AC
        let (chunks, last, text) = run(&[], &[b"caf", b"\xC3", b"\xA9 ", b"\xE2\x82", b"\xAC!"]);
        assert_eq!(last, Pushed::Continue);
        assert_eq!(chunks, vec!["caf", "é ", "€!"]);
        assert_eq!(text, "café €!");
    }

    #[test]
    fn invalid_and_truncated_bytes_become_replacement_characters() {
        let (_, _, text) = run(&[], &[b"a\xFFb", b"\xE2\x82"]);
        assert_eq!(text, "a\u{FFFD}b\u{FFFD}");
    }

    #[test]
    fn stop_string_across_token_boundaries_is_not_emitted() {
        let (chunks, last, text) = run(&["</answer>"], &[b"42 </", b"ans", b"wer> trailing"]);
        assert_eq!(last, Pushed::StopString("</answer>".into()));
        assert_eq!(text, "42 ");
        assert_eq!(chunks.concat(), "42 ");
    }

    #[test]
    fn text_that_only_looked_like_a_stop_string_is_released() {
        let (chunks, last, text) = run(&["STOP"], &[b"a ST", b"OR", b"E"]);
        assert_eq!(last, Pushed::Continue);
        assert_eq!(chunks, vec!["a ", "STOR", "E"]);
        assert_eq!(text, "a STORE");
        // held at the end without a match: flushed by finish()
        let (_, _, text) = run(&["STOP"], &[b"x ST"]);
        assert_eq!(text, "x ST");
    }

    #[test]
    fn earliest_of_several_stop_strings_wins() {
        let (_, last, text) = run(&["bb", "a b"], &[b"xa bb"]);
        assert_eq!(last, Pushed::StopString("a b".into()));
        assert_eq!(text, "x");
    }

    #[test]
    fn stop_string_with_multibyte_characters() {
        let (_, last, text) = run(&["é!"], &[b"ok \xC3", b"\xA9", b"!no"]);
        assert_eq!(last, Pushed::StopString("é!".into()));
        assert_eq!(text, "ok ");
    }

    #[test]
    fn callback_break_cancels() {
        let mut ts = TextStream::new(&[]);
        let r = ts.push(b"hello", &mut |_| ControlFlow::Break(()));
        assert_eq!(r, Pushed::Cancelled);
    }
}
