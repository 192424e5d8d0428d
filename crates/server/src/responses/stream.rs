//! A streamed response: the SSE events the SDK's `responses.stream` helper reads.
//!
//! `response.created` and `response.in_progress` first; then each output item as it is
//! generated: `output_item.added`, its content (`content_part.added`, `output_text.delta`s,
//! `output_text.done`, `content_part.done` for a message; `function_call_arguments.delta`s
//! and `.done` for a call; `reasoning_text.delta`s and `.done` for reasoning), then
//! `output_item.done`; last `response.completed` (or `response.incomplete` when the token
//! budget ran out, or `error` and `response.failed`). Every event has a `sequence_number`.
//!
//! With tools offered, text and calls are told apart as the chat endpoint does
//! ([`CallDetector`]); calls are read while generated ([`CallScanner`]), and those of another
//! shape come whole at the end. The finished output is the same as a non-streamed
//! response's, and is what `response.completed` carries.

use super::{call_item, calls, finish, logprob_values, message_item, output_text, reasoning_item, set_logprobs, status_of, Plan};
use crate::backend::TokenLogprob;
use crate::error::{ApiError, Flavor};
use crate::jobs::{self, Started};
use crate::tools::detect::{CallDetector, Route};
use crate::tools::scan::{CallPiece, CallScanner};
use crate::tools::ToolMode;
use crate::stamps::new_id;
use crate::wire::responses as w;
use crate::worker::Event;
use crate::AppState;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use std::convert::Infallible;
use tokio::sync::mpsc::Sender;

/// The SSE response for a started job.
pub(crate) fn sse(state: AppState, first: Started, skeleton: w::Response, plan: Plan) -> Response {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<SseEvent, Infallible>>(64);
    tokio::spawn(async move {
        let mut out = Writer { tx, seq: 0, output: vec![], skeleton, logprobs: plan.logprobs, pending: vec![] };
        // A closed channel means the client went away: dropping the job stops it.
        let _ = out.run(state, first, plan).await;
    });
    Sse::new(tokio_stream::wrappers::ReceiverStream::new(rx)).keep_alive(KeepAlive::default()).into_response()
}

/// The client went away.
struct Gone;

/// Sends numbered events and keeps the output items as they stand.
struct Writer {
    tx: Sender<Result<SseEvent, Infallible>>,
    seq: u64,
    /// Output items, in order; open ones as they were added.
    output: Vec<w::OutputItem>,
    skeleton: w::Response,
    /// Whether the message text carries logprobs, and those not yet sent with a delta.
    logprobs: bool,
    pending: Vec<TokenLogprob>,
}

/// An output item being written: its index, id and text so far (and, for a message, the
/// logprobs sent with it).
struct Open {
    index: usize,
    id: String,
    text: String,
    logprobs: Vec<Value>,
}

/// A call being written.
struct OpenCall {
    open: Open,
    call_id: String,
    name: String,
}

impl Writer {
    async fn send(&mut self, event: w::StreamEvent) -> Result<(), Gone> {
        let name = event.name();
        let data = serde_json::to_string(&w::Sequenced { sequence_number: self.seq, event }).unwrap_or_default();
        self.seq += 1;
        self.tx.send(Ok(SseEvent::default().event(name).data(data))).await.map_err(|_| Gone)
    }

    /// Adds an item (in its in-progress form).
    async fn add(&mut self, item: w::OutputItem) -> Result<usize, Gone> {
        let output_index = self.output.len();
        self.output.push(item.clone());
        self.send(w::StreamEvent::OutputItemAdded { output_index, item }).await?;
        Ok(output_index)
    }

    /// Replaces an item by its finished form.
    async fn done(&mut self, output_index: usize, item: w::OutputItem) -> Result<(), Gone> {
        self.output[output_index] = item.clone();
        self.send(w::StreamEvent::OutputItemDone { output_index, item }).await
    }

    async fn open_message(&mut self) -> Result<Open, Gone> {
        let id = new_id("msg_");
        let item = w::OutputItem::Message { id: id.clone(), role: "assistant".into(), status: "in_progress".into(), content: vec![] };
        let index = self.add(item).await?;
        let part = output_text(String::new());
        self.send(w::StreamEvent::ContentPartAdded { item_id: id.clone(), output_index: index, content_index: 0, part }).await?;
        Ok(Open { index, id, text: String::new(), logprobs: vec![] })
    }

    async fn text_delta(&mut self, m: &mut Open, delta: String) -> Result<(), Gone> {
        if delta.is_empty() {
            return Ok(());
        }
        m.text.push_str(&delta);
        let logprobs = logprob_values(&std::mem::take(&mut self.pending));
        m.logprobs.extend(logprobs.iter().cloned());
        let ev = w::StreamEvent::OutputTextDelta { item_id: m.id.clone(), output_index: m.index, content_index: 0, delta, logprobs };
        self.send(ev).await
    }

    /// Logprobs of tokens whose text comes next (kept only when the request asked).
    fn logprobs(&mut self, l: Vec<TokenLogprob>) {
        if self.logprobs {
            self.pending.extend(l);
        }
    }

    async fn close_message(&mut self, mut m: Open, status: &str) -> Result<(), Gone> {
        // Tokens whose text never made a delta of its own (the end of the answer).
        m.logprobs.extend(logprob_values(&std::mem::take(&mut self.pending)));
        let (item_id, output_index) = (m.id.clone(), m.index);
        let text = m.text;
        let logprobs = m.logprobs;
        self.send(w::StreamEvent::OutputTextDone { item_id: item_id.clone(), output_index, content_index: 0, text: text.clone(), logprobs: logprobs.clone() })
            .await?;
        let mut part = output_text(text.clone());
        part.logprobs = logprobs.clone();
        self.send(w::StreamEvent::ContentPartDone { item_id: item_id.clone(), output_index, content_index: 0, part }).await?;
        let mut item = message_item(item_id, text, status);
        set_logprobs(&mut item, logprobs);
        self.done(output_index, item).await
    }

    async fn open_reasoning(&mut self) -> Result<Open, Gone> {
        let id = new_id("rs_");
        let item = w::OutputItem::Reasoning { id: id.clone(), summary: vec![], content: vec![], status: "in_progress".into() };
        let index = self.add(item).await?;
        Ok(Open { index, id, text: String::new(), logprobs: vec![] })
    }

    async fn close_reasoning(&mut self, r: Open) -> Result<(), Gone> {
        let ev = w::StreamEvent::ReasoningTextDone { item_id: r.id.clone(), output_index: r.index, content_index: 0, text: r.text.clone() };
        self.send(ev).await?;
        self.done(r.index, reasoning_item(r.id, r.text)).await
    }

    async fn open_call(&mut self, name: String, call_id: String) -> Result<OpenCall, Gone> {
        let id = new_id("fc_");
        let index = self.add(call_item(id.clone(), call_id.clone(), name.clone(), String::new(), "in_progress")).await?;
        Ok(OpenCall { open: Open { index, id, text: String::new(), logprobs: vec![] }, call_id, name })
    }

    async fn call_delta(&mut self, c: &mut OpenCall, delta: String) -> Result<(), Gone> {
        c.open.text.push_str(&delta);
        self.send(w::StreamEvent::FunctionCallArgumentsDelta { item_id: c.open.id.clone(), output_index: c.open.index, delta }).await
    }

    /// Closes a call with its final arguments.
    async fn close_call(&mut self, c: OpenCall, arguments: String) -> Result<(), Gone> {
        let OpenCall { open, call_id, name } = c;
        let ev = w::StreamEvent::FunctionCallArgumentsDone {
            item_id: open.id.clone(),
            output_index: open.index,
            name: name.clone(),
            arguments: arguments.clone(),
        };
        self.send(ev).await?;
        self.done(open.index, call_item(open.id, call_id, name, arguments, "completed")).await
    }

    /// `error`, then `response.failed` with the output so far.
    async fn fail(&mut self, e: ApiError) -> Result<(), Gone> {
        let e = super::rename_params(e).flavor(Flavor::OpenAi);
        let code = e.code.map(str::to_string).or_else(|| Some("server_error".into()));
        self.send(w::StreamEvent::Error { code, message: e.message.clone(), param: e.param.clone() }).await?;
        let mut response = self.skeleton.clone();
        response.status = "failed".into();
        response.error = Some(w::ResponseError { code: "server_error".into(), message: e.message });
        response.output = self.output.clone();
        self.send(w::StreamEvent::Failed { response }).await
    }

    async fn run(&mut self, state: AppState, mut s: Started, plan: Plan) -> Result<(), Gone> {
        self.send(w::StreamEvent::Created { response: self.skeleton.clone() }).await?;
        self.send(w::StreamEvent::InProgress { response: self.skeleton.clone() }).await?;
        let detect = plan.mode != ToolMode::None;
        let mut detector = CallDetector::new();
        let mut scanner = CallScanner::new();
        let mut reasoning: Option<Open> = None;
        let mut message: Option<Open> = None;
        // Calls streamed so far; the last one may still be open.
        let mut streamed: Vec<OpenCall> = Vec::new();
        let o = loop {
            match s.next().await {
                Event::Thinking(t) => {
                    if reasoning.is_none() {
                        reasoning = Some(self.open_reasoning().await?);
                    }
                    let r = reasoning.as_mut().expect("opened above");
                    r.text.push_str(&t);
                    let ev = w::StreamEvent::ReasoningTextDelta { item_id: r.id.clone(), output_index: r.index, content_index: 0, delta: t };
                    self.send(ev).await?;
                    // Logprobs are the message text's: a reasoning token's are dropped.
                    self.pending.clear();
                }
                Event::Text(t) => {
                    if let Some(r) = reasoning.take() {
                        self.close_reasoning(r).await?;
                    }
                    match if detect { detector.push(&t) } else { Route::Text(t) } {
                        Route::Hold => {}
                        Route::Text(t) => {
                            if message.is_none() {
                                message = Some(self.open_message().await?);
                            }
                            let mut m = message.take().expect("opened above");
                            self.text_delta(&mut m, t).await?;
                            message = Some(m);
                        }
                        Route::Call(t) => {
                            for p in scanner.push(&t) {
                                match p {
                                    CallPiece::Start { name, .. } => {
                                        let c = self.open_call(name, new_id("call_")).await?;
                                        streamed.push(c);
                                    }
                                    CallPiece::Arguments { text, .. } => {
                                        if let Some(mut c) = streamed.pop() {
                                            self.call_delta(&mut c, text).await?;
                                            streamed.push(c);
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                Event::Logprobs(l) => self.logprobs(l),
                Event::Done(r) => match r.map_err(jobs::backend_error) {
                    Ok(o) => break o,
                    Err(e) => return self.fail(e).await,
                },
            }
        };
        if let Some(r) = reasoning.take() {
            self.close_reasoning(r).await?;
        }
        let calls = match calls(&o, &plan) {
            Ok(c) => c,
            Err(e) => return self.fail(e).await,
        };
        let names_match = calls.len() >= streamed.len() && calls.iter().zip(&streamed).all(|(c, s)| c.function.name == s.name);
        if !names_match || (calls.is_empty() && !streamed.is_empty()) {
            return self.fail(ApiError::internal("the streamed tool calls differ from the calls read at the end; please report this")).await;
        }
        if calls.is_empty() {
            let mut m = match message.take() {
                Some(m) => m,
                None => self.open_message().await?,
            };
            let rest = if detect { detector.unsent(&o.text).to_string() } else { String::new() };
            self.text_delta(&mut m, rest).await?;
            self.close_message(m, status_of(o.done_reason)).await?;
        } else {
            let mut calls = calls.into_iter();
            // (`streamed` first in the zip: it is never longer, so no call is taken and lost.)
            for (streamed_call, c) in std::mem::take(&mut streamed).into_iter().zip(calls.by_ref()) {
                // The arguments as streamed when they are the call read at the end, else as read.
                let same = serde_json::from_str::<Value>(&streamed_call.open.text).ok()
                    == serde_json::from_str::<Value>(&c.function.arguments).ok();
                let arguments = if same { streamed_call.open.text.clone() } else { c.function.arguments };
                self.close_call(streamed_call, arguments).await?;
            }
            for c in calls {
                let mut open = self.open_call(c.function.name, c.id).await?;
                self.call_delta(&mut open, c.function.arguments.clone()).await?;
                self.close_call(open, c.function.arguments).await?;
            }
        }
        let response = finish(&state, self.skeleton.clone(), self.output.clone(), &o, plan);
        if response.status == "incomplete" {
            self.send(w::StreamEvent::Incomplete { response }).await
        } else {
            self.send(w::StreamEvent::Completed { response }).await
        }
    }
}
