//! Answers as Ollama sends them: NDJSON lines while streaming (or one object), with tool
//! calls detected in the text, and logprobs in Ollama's shape.

use super::FL;
use crate::backend::{Outcome, TokenLogprob};
use crate::error::ApiError;
use crate::jobs::{self, Started};
use crate::tools::{self};
use crate::wire::ollama as w;
use crate::worker::Event;
use axum::body::Body;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use std::convert::Infallible;

/// A streamed piece for a line of an NDJSON response.
pub(super) enum StreamPiece {
    Text(String),
    Thinking(String),
}

/// An NDJSON response: one `piece` line per text event (with `detect_calls`, only once the
/// output's start shows it is text, see [`tools::detect`]; reasoning is streamed either way),
/// then the lines `last` makes of the outcome and the answer text not yet sent.
/// Logprobs (when the job asked) ride on the next line sent after they arrive: each line
/// carries its tokens', and `last` gets those not yet sent.
/// An error after the first line is sent as a final `{"error": "..."}` line. The producer
/// is a task that ends (dropping the job's receiver, which stops generation) when the
/// client goes away.
pub(super) fn ndjson<P, L, A, B>(mut started: Started, detect_calls: bool, piece: P, last: L) -> Response
where
    P: Fn(StreamPiece, Option<Vec<w::Logprob>>) -> A + Send + 'static,
    L: FnOnce(&Outcome, &str, Option<Vec<w::Logprob>>) -> Vec<B> + Send + 'static,
    A: Serialize,
    B: Serialize,
{
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<bytes::Bytes, Infallible>>(64);
    tokio::spawn(async move {
        fn line(v: &dyn erased::Ser) -> Result<bytes::Bytes, Infallible> {
            let mut b = v.to_vec();
            b.push(b'\n');
            Ok(bytes::Bytes::from(b))
        }
        let mut detector = tools::detect::CallDetector::new();
        let mut pending: Vec<TokenLogprob> = Vec::new();
        let take = |pending: &mut Vec<TokenLogprob>| (!pending.is_empty()).then(|| wire_logprobs(&std::mem::take(pending)));
        loop {
            match started.next().await {
                Event::Logprobs(l) => pending.extend(l),
                Event::Text(t) => {
                    let t = if !detect_calls {
                        t
                    } else {
                        match detector.push(&t) {
                            tools::detect::Route::Text(t) => t,
                            // Calls are sent whole once read (in `last`).
                            tools::detect::Route::Hold | tools::detect::Route::Call(_) => continue,
                        }
                    };
                    let l = line(&piece(StreamPiece::Text(t), take(&mut pending)));
                    if tx.send(l).await.is_err() {
                        return;
                    }
                }
                Event::Thinking(t) => {
                    let l = line(&piece(StreamPiece::Thinking(t), take(&mut pending)));
                    if tx.send(l).await.is_err() {
                        return;
                    }
                }
                Event::Done(Ok(o)) => {
                    let unsent = if detect_calls { detector.unsent(&o.text) } else { "" };
                    let lines: Vec<_> = last(&o, unsent, take(&mut pending)).iter().map(|l| line(l)).collect();
                    for l in lines {
                        if tx.send(l).await.is_err() {
                            return;
                        }
                    }
                    return;
                }
                Event::Done(Err(e)) => {
                    let e = jobs::backend_error(e).flavor(FL);
                    tracing::warn!("stream ended with an error: {}", e.message);
                    let l = line(&e.body());
                    let _ = tx.send(l).await;
                    return;
                }
            }
        }
    });
    let body = Body::from_stream(tokio_stream::wrappers::ReceiverStream::new(rx));
    ([(header::CONTENT_TYPE, "application/x-ndjson")], body).into_response()
}

/// `logprobs` / `top_logprobs` of a request: `None` when not asked; `Some(n)` alternatives.
pub(super) fn logprobs(logprobs: Option<bool>, top: Option<i64>) -> Result<Option<u8>, ApiError> {
    match (logprobs.unwrap_or(false), top) {
        (_, Some(n)) if !(0..=20).contains(&n) => {
            Err(ApiError::bad_request(format!("top_logprobs is {n}; it must be between 0 and 20")).param("top_logprobs"))
        }
        (false, Some(n)) if n > 0 => {
            Err(ApiError::bad_request("top_logprobs needs logprobs: true; set both").param("top_logprobs"))
        }
        (false, _) => Ok(None),
        (true, n) => Ok(Some(n.unwrap_or(0) as u8)),
    }
}

/// Token logprobs in Ollama's shape.
pub(super) fn wire_logprobs(l: &[TokenLogprob]) -> Vec<w::Logprob> {
    l.iter()
        .map(|e| w::Logprob {
            token: e.text(),
            logprob: e.logprob,
            bytes: e.bytes.clone(),
            top_logprobs: e.top.iter().map(|t| w::TopLogprob { token: t.text(), logprob: t.logprob, bytes: t.bytes.clone() }).collect(),
        })
        .collect()
}

/// Object-safe serialization to bytes, so one closure serves every line type.
mod erased {
    pub trait Ser {
        fn to_vec(&self) -> Vec<u8>;
    }
    impl<T: serde::Serialize> Ser for T {
        fn to_vec(&self) -> Vec<u8> {
            serde_json::to_vec(self).unwrap_or_else(|e| format!("{{\"error\":\"serialization failed: {e}\"}}").into_bytes())
        }
    }
}
