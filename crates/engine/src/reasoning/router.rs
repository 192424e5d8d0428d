//! Splits the loop's streamed text into reasoning and answer pieces.
//!
//! The [`super::ReasoningConstraint`] sees every token before its text is streamed and
//! records, in text offsets of the streamed output, where a possible close marker starts
//! (`held_from`), where the reasoning ends and where the answer starts. The router cuts the
//! streamed text at those offsets: text that may still turn out to be the marker is held
//! back, the marker itself is dropped. Reasoning is trimmed of surrounding whitespace and the
//! answer of leading whitespace, as the pieces stream (trailing whitespace of the reasoning
//! is held until more reasoning follows).

use super::Piece;
use std::ops::ControlFlow;

/// Text offsets recorded by the constraint (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Offsets {
    /// A partial close marker starts here: do not release text from here on yet.
    pub held_from: Option<usize>,
    /// The reasoning ends (the close marker starts) here.
    pub thinking_end: Option<usize>,
    /// The answer starts here (the close marker ends).
    pub answer_start: Option<usize>,
}

/// The streaming splitter.
#[derive(Debug, Default)]
pub(crate) struct Router {
    /// Received text not routed yet; it starts at offset `routed`.
    buf: String,
    routed: usize,
    thinking: String,
    answer: String,
    /// Trailing whitespace of the reasoning, emitted only if more reasoning follows.
    ws: String,
}

impl Router {
    pub(crate) fn thinking(&self) -> &str {
        &self.thinking
    }

    pub(crate) fn answer(&self) -> &str {
        &self.answer
    }

    /// Routes `text` (the next piece of the streamed output) given the current offsets.
    pub(crate) fn push(&mut self, text: &str, o: Offsets, emit: &mut dyn FnMut(Piece<'_>) -> ControlFlow<()>) -> ControlFlow<()> {
        self.buf.push_str(text);
        self.route(o, false, emit)
    }

    /// The generation ended: releases held text (a partial marker is reasoning after all).
    pub(crate) fn finish(&mut self, o: Offsets, emit: &mut dyn FnMut(Piece<'_>) -> ControlFlow<()>) -> ControlFlow<()> {
        self.route(o, true, emit)
    }

    fn route(&mut self, o: Offsets, end: bool, emit: &mut dyn FnMut(Piece<'_>) -> ControlFlow<()>) -> ControlFlow<()> {
        let end_off = self.routed + self.buf.len();
        let think_limit = match (o.thinking_end, o.held_from) {
            (Some(e), _) => e,
            (None, Some(h)) if !end => h,
            _ => end_off,
        }
        .clamp(self.routed, end_off);
        let thinking = self.take(think_limit);
        self.emit_thinking(&thinking, emit)?;
        if let Some(a) = o.answer_start {
            let a = a.clamp(self.routed, end_off);
            self.take(a);
            let answer = self.take(end_off);
            self.emit_answer(&answer, emit)?;
        }
        ControlFlow::Continue(())
    }

    /// Removes the text up to offset `to` from the buffer and returns it.
    fn take(&mut self, to: usize) -> String {
        let n = to - self.routed;
        self.routed = to;
        self.buf.drain(..n).collect()
    }

    fn emit_thinking(&mut self, s: &str, emit: &mut dyn FnMut(Piece<'_>) -> ControlFlow<()>) -> ControlFlow<()> {
        let s = if self.thinking.is_empty() { s.trim_start() } else { s };
        let body = s.trim_end();
        if body.is_empty() {
            if !self.thinking.is_empty() {
                self.ws.push_str(s);
            }
            return ControlFlow::Continue(());
        }
        let mut piece = std::mem::take(&mut self.ws);
        piece.push_str(body);
        self.ws.push_str(&s[body.len()..]);
        self.thinking.push_str(&piece);
        emit(Piece::Thinking(&piece))
    }

    fn emit_answer(&mut self, s: &str, emit: &mut dyn FnMut(Piece<'_>) -> ControlFlow<()>) -> ControlFlow<()> {
        let s = if self.answer.is_empty() { s.trim_start() } else { s };
        if s.is_empty() {
            return ControlFlow::Continue(());
        }
        self.answer.push_str(s);
        emit(Piece::Answer(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(steps: &[(&str, Offsets)], end: Offsets) -> (Vec<String>, String, String) {
        let mut r = Router::default();
        let mut out = Vec::new();
        let mut emit = |p: Piece<'_>| {
            out.push(match p {
                Piece::Thinking(t) => format!("T:{t}"),
                Piece::Answer(a) => format!("A:{a}"),
            });
            ControlFlow::Continue(())
        };
        for (t, o) in steps {
            let _ = r.push(t, *o, &mut emit);
        }
        let _ = r.finish(end, &mut emit);
        let (t, a) = (r.thinking().to_string(), r.answer().to_string());
        (out, t, a)
    }

    #[test]
    fn held_text_waits_and_the_marker_is_dropped() {
        // Text: "\nhmm {x} </think>\n\n{}" — offsets as the constraint would record them.
        let none = Offsets::default();
        let held = Offsets { held_from: Some(9), ..none };
        let done = Offsets { held_from: None, thinking_end: Some(9), answer_start: Some(17) };
        let (out, t, a) = collect(&[("\nhmm {x} ", none), ("</th", held), ("ink>\n\n{", done), ("}", done)], done);
        assert_eq!(out, vec!["T:hmm {x}", "A:{", "A:}"]);
        assert_eq!((t.as_str(), a.as_str()), ("hmm {x}", "{}"));
    }

    #[test]
    fn a_near_miss_is_released_as_reasoning() {
        let none = Offsets::default();
        let held = Offsets { held_from: Some(2), ..none };
        let (out, t, a) = collect(&[("a ", none), ("</th", held), ("e end", none)], none);
        assert_eq!(out, vec!["T:a", "T: </the end"]);
        assert_eq!((t.as_str(), a.as_str()), ("a </the end", ""));
        // Held at the end of the generation: reasoning after all.
        let (_, t, _) = collect(&[("a ", none), ("</th", held)], held);
        assert_eq!(t, "a </th");
    }

    #[test]
    fn whitespace_between_reasoning_pieces_is_kept_around_them_dropped() {
        let none = Offsets::default();
        let (out, t, _) = collect(&[("\n one", none), ("  ", none), ("\n", none), ("two \n", none)], none);
        assert_eq!(out, vec!["T:one", "T:  \ntwo"]);
        assert_eq!(t, "one  \ntwo");
    }

    #[test]
    fn break_stops_routing() {
        let mut r = Router::default();
        let flow = r.push("x", Offsets::default(), &mut |_| ControlFlow::Break(()));
        assert!(flow.is_break());
    }
}
