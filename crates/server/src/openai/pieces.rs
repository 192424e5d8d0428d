//! What the answers carry besides text: logprobs in the chat and completions shapes, and the
//! deltas of a stream (the role once, tool-call fragments).

use crate::backend::TokenLogprob;
use crate::error::ApiError;
use crate::tools::scan::CallPiece;
use crate::stamps::new_id;
use crate::wire::openai as w;
use serde_json::Value;

/// `logprobs` / `top_logprobs` of a chat request: `None` when not asked, else how many
/// alternatives. `top_logprobs` without `logprobs: true`, or outside 0..=20, is refused.
pub(super) fn chat_logprobs_request(logprobs: Option<bool>, top: Option<i64>) -> Result<Option<u8>, ApiError> {
    match (logprobs.unwrap_or(false), top) {
        (_, Some(n)) if !(0..=20).contains(&n) => Err(ApiError::bad_request(format!(
            "Invalid 'top_logprobs': {n}; it must be an integer between 0 and 20"
        ))
        .param("top_logprobs")),
        (false, Some(_)) => {
            Err(ApiError::bad_request("'top_logprobs' is only allowed when 'logprobs' is true").param("top_logprobs"))
        }
        (false, None) => Ok(None),
        (true, n) => Ok(Some(n.unwrap_or(0) as u8)),
    }
}

/// Token logprobs as a chat choice's `logprobs` (`{"content": [...], "refusal": null}`).
pub(super) fn chat_logprobs(l: &[TokenLogprob]) -> Value {
    serde_json::to_value(w::ChatLogprobs { content: token_logprobs(l), refusal: None }).unwrap_or_default()
}

/// Token logprobs in the shape both chat `logprobs.content` and the Responses API's
/// `output_text.logprobs` use: `{token, logprob, bytes, top_logprobs}` per token.
pub(crate) fn token_logprobs(l: &[TokenLogprob]) -> Vec<w::ChatTokenLogprob> {
    l.iter()
        .map(|e| w::ChatTokenLogprob {
            token: e.text(),
            logprob: e.logprob,
            bytes: Some(e.bytes.clone()),
            top_logprobs: e
                .top
                .iter()
                .map(|t| w::ChatTopLogprob { token: t.text(), logprob: t.logprob, bytes: Some(t.bytes.clone()) })
                .collect(),
        })
        .collect()
}

/// Token logprobs as a legacy completion's `logprobs`; `offset` (characters of text before
/// these tokens) advances past them.
pub(super) fn completion_logprobs(l: &[TokenLogprob], offset: &mut u32) -> Value {
    let mut out = w::CompletionLogprobs { tokens: vec![], token_logprobs: vec![], top_logprobs: vec![], text_offset: vec![] };
    for e in l {
        let text = e.text();
        out.text_offset.push(*offset);
        *offset += text.chars().count() as u32;
        out.tokens.push(text);
        out.token_logprobs.push(e.logprob);
        out.top_logprobs.push(e.top.iter().map(|t| (t.text(), Value::from(t.logprob))).collect());
    }
    serde_json::to_value(out).unwrap_or_default()
}

/// `d` with the role when it is the first delta of its choice (and `content: null` when it
/// starts a tool call, as OpenAI sends it).
pub(super) fn with_role(role_sent: &mut bool, mut d: w::Delta) -> w::Delta {
    if !*role_sent {
        d.role = Some("assistant".into());
        if d.tool_calls.is_some() && d.content.is_none() {
            d.content = Some(None);
        }
        *role_sent = true;
    }
    d
}

/// The delta for a piece of a call read while it streams; `streamed` gets each started
/// call's name.
pub(super) fn call_delta(p: CallPiece, streamed: &mut Vec<String>) -> w::Delta {
    let call = match p {
        CallPiece::Start { index, name } => {
            streamed.push(name.clone());
            w::DeltaToolCall {
                index: index as u32,
                id: Some(new_id("call_")),
                kind: Some("function".into()),
                function: w::DeltaFunction { name: Some(name), arguments: Some(String::new()) },
            }
        }
        CallPiece::Arguments { index, text } => {
            w::DeltaToolCall { index: index as u32, id: None, kind: None, function: w::DeltaFunction { name: None, arguments: Some(text) } }
        }
    };
    w::Delta { tool_calls: Some(vec![call]), ..Default::default() }
}
