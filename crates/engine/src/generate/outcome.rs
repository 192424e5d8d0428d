//! What a generation comes back with: its text and tokens, why it ended ([`StopReason`],
//! [`StopDetail`]), its timings and counts, and how the constraint was applied
//! ([`ConstraintStats`]).

use formwork_model::logprob::TokenLogprob;
use formwork_vocab::TokenId;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Why a generation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StopReason {
    /// An end-of-turn/EOS token, a stop string, or a constraint that is complete.
    Stop,
    /// `num_predict` tokens were generated, or the context is full.
    Length,
    /// The text callback returned `Break` (the client went away).
    Cancelled,
}

impl StopReason {
    /// `"stop"`, `"length"` or `"cancelled"` (Ollama's `done_reason` / OpenAI's `finish_reason`).
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Stop => "stop",
            StopReason::Length => "length",
            StopReason::Cancelled => "cancelled",
        }
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Exactly what ended a generation (the [`StopReason`] is derived from it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum StopDetail {
    /// The model chose this end-of-turn / EOS token.
    EndOfTurn {
        /// The token.
        token: TokenId,
    },
    /// This stop string appeared in the output.
    StopString {
        /// The stop string.
        stop: String,
    },
    /// The constraint accepted and nothing but EOS could follow.
    ConstraintComplete,
    /// `num_predict` tokens were generated.
    NumPredict,
    /// The context is full.
    ContextFull,
    /// The text callback returned `Break`.
    Cancelled,
    /// The token budget (`num_predict`, or the room left in the context) would have cut the
    /// model's answer, so the loop steered and closed the output early: the constraint
    /// accepts it (a complete, valid document), but it is shorter than the model wanted.
    /// Reported as [`StopReason::Length`].
    ClosedEarly,
}

impl StopDetail {
    /// The coarse reason.
    pub fn reason(&self) -> StopReason {
        match self {
            StopDetail::EndOfTurn { .. } | StopDetail::StopString { .. } | StopDetail::ConstraintComplete => StopReason::Stop,
            StopDetail::NumPredict | StopDetail::ContextFull | StopDetail::ClosedEarly => StopReason::Length,
            StopDetail::Cancelled => StopReason::Cancelled,
        }
    }
}

impl std::fmt::Display for StopDetail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StopDetail::EndOfTurn { token } => write!(f, "end-of-turn token {token}"),
            StopDetail::StopString { stop } => write!(f, "stop string {stop:?}"),
            StopDetail::ConstraintComplete => f.write_str("output complete (the grammar allows nothing more)"),
            StopDetail::NumPredict => f.write_str("num-predict tokens generated"),
            StopDetail::ContextFull => f.write_str("context full"),
            StopDetail::Cancelled => f.write_str("cancelled by the receiver"),
            StopDetail::ClosedEarly => {
                f.write_str("the token budget would have cut the answer; the output was closed early to stay valid")
            }
        }
    }
}

/// How the constraint was applied during a generation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ConstraintStats {
    /// Whether the sampler allowed the fast path (sample unmasked, check the token).
    pub fast_path: bool,
    /// Tokens chosen by the fast path without computing a mask.
    pub fast_accepts: usize,
    /// Full masks computed (mask-first steps, fast-path rejections, completion checks).
    pub masks: usize,
    /// Tokens appended without sampling because the constraint forced their text.
    pub forced: usize,
    /// Time spent in the constraint (masks, checks, commits).
    pub time: Duration,
}

/// The result of [`generate`](super::generate).
#[derive(Clone, Debug)]
pub struct Generation {
    /// The generated text (stop strings and special tokens excluded), equal to the
    /// concatenation of everything passed to the text callback.
    pub text: String,
    /// The generated tokens, including a final end-of-turn token if one was chosen.
    pub tokens: Vec<TokenId>,
    /// Why it ended.
    pub done_reason: StopReason,
    /// What exactly ended it.
    pub stop: StopDetail,
    /// Prompt length in tokens.
    pub prompt_tokens: usize,
    /// Of those, how many were reused from the model's cache (not evaluated again).
    pub cached_prompt_tokens: usize,
    /// Tokens generated (sampled), including a final end-of-turn token.
    pub eval_tokens: usize,
    /// Model load time: [`generate`](super::generate) leaves it zero, callers that loaded the model fill it in.
    pub load_duration: Duration,
    /// Time to evaluate the (uncached part of the) prompt.
    pub prompt_eval_duration: Duration,
    /// Time from the end of the prompt evaluation to the end: sampling, constraint and decoding.
    pub eval_duration: Duration,
    /// Wall time of the whole call (template, tokenizer, prompt, generation).
    pub total_duration: Duration,
    /// Constraint statistics, when a constraint was given.
    pub constraint: Option<ConstraintStats>,
    /// The sampler's seed (the given one, or the random one drawn), to reproduce the run.
    pub seed: u64,
    /// The reasoning section, without its markers, when
    /// [`crate::reasoning::generate_with_reasoning`] produced this (then `text` is the
    /// answer only); `None` from [`generate`](super::generate).
    pub thinking: Option<String>,
    /// One entry per generated text token (reasoning included; end-of-turn and special
    /// tokens excluded), when [`GenerateOptions::logprobs`](super::GenerateOptions::logprobs) asked; else empty.
    pub logprobs: Vec<TokenLogprob>,
}

impl Generation {
    /// Prompt tokens per second (over the evaluated part of the prompt).
    pub fn prompt_rate(&self) -> f64 {
        rate(self.prompt_tokens - self.cached_prompt_tokens, self.prompt_eval_duration)
    }

    /// Generated tokens per second.
    pub fn eval_rate(&self) -> f64 {
        rate(self.eval_tokens, self.eval_duration)
    }
}

fn rate(n: usize, d: Duration) -> f64 {
    let s = d.as_secs_f64();
    if s > 0.0 {
        n as f64 / s
    } else {
        0.0
    }
}
