//! `POST /v1/systemone`: Ollama's System One API — questions about a state, each answered
//! with a probability distribution over its options instead of text.
//!
//! Request: `{"model", "state", "questions": {NAME: QUESTION, ...}, "keep_alive"}`. `state`
//! and each question's `instructions` are text or JSON (shown as indented JSON). Questions:
//! - `choice`: `criteria` maps 2–26 option keys to descriptions (`null`: the key);
//! - `noul`: is it true? `criteria` optionally `{"false": ..., "true": ...}` descriptions
//!   (default "No" and "Yes");
//! - `score`: `criteria` lists 2–26 descriptions from lowest to highest score.
//!
//! Response: `{"model", "answers": {NAME: ANSWER, ...}, "usage": {"input_tokens",
//! "output_tokens"}}`, answers in the order of the questions:
//! - choice: `{"type": "choice", "choice", "probabilities": {key: p}, "confidence"}`;
//! - noul: `{"type": "noul", "noul": P(true)}`;
//! - score: `{"type": "score", "score": Σ i·p(i) (zero-based, may be fractional), "legend":
//!   {"0": description, ...}, "probabilities": {"0": p, ...}, "confidence"}`.
//!
//! ## How a question is answered
//! Each question is one chat turn to the model: the state, the instructions, and the
//! options lettered `A`, `B`, ... (hence at most 26), asking for the letter. The answer is
//! constrained to exactly one of the letters ([`ConstraintRequest::OneOf`]), generated
//! greedily with one token, and the probabilities are the model's distribution for that
//! token under the mask: only letters can be sampled, so the logits of the letters,
//! softmaxed among themselves (the engine's masked logprobs, at temperature 1), are the
//! option probabilities. `confidence` is `1 − H(p) / ln n` (1 when one option holds all
//! the mass, 0 when all are equal): how concentrated the distribution is, not a
//! calibrated chance of being right. Questions run in their order, each on its own, with
//! the state first, so the model's prefix cache reuses the state across them.
//!
//! The body is bounded (the server's body limit, [`MAX_QUESTIONS`], [`MAX_TEXT_BYTES`]); a
//! prompt longer than the model's context is a 400, never cut.
//!
//! ```text
//! curl -s localhost:11434/v1/systemone -d '{"model": "smollm2",
//!   "state": "I was charged twice.", "questions": {"refund":
//!   {"type": "noul", "instructions": "Does the customer ask for a refund?"}}}'
//! ```

use crate::backend::{ChatMessage, ConstraintRequest, PromptSpec, Sampling, TokenLogprob};
use crate::error::{ApiError, ApiJson, Flavor, OllamaApi};
use crate::{jobs, AppState};
use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Instant;

/// Most questions in one request.
pub const MAX_QUESTIONS: usize = 64;
/// Longest state or instructions (as shown to the model), and longest option description,
/// in bytes.
pub const MAX_TEXT_BYTES: usize = 32 << 10;
/// Fewest and most options of a choice or score question (one letter each).
const OPTIONS: std::ops::RangeInclusive<usize> = 2..=26;

/// The body of `POST /v1/systemone`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SystemOneRequest {
    /// The model.
    pub model: String,
    /// What the questions are about: text, or a JSON object or array.
    pub state: Value,
    /// The questions, by name, in the order they are answered.
    pub questions: Map<String, Value>,
    /// Accepted; models stay loaded for the server's lifetime.
    #[serde(default)]
    pub keep_alive: Option<Value>,
}

/// One question, read and checked.
#[derive(Debug, PartialEq)]
enum Question {
    /// Pick one key; options are `(key, description)`.
    Choice { instructions: String, options: Vec<(String, String)> },
    /// True or false; descriptions of false and of true.
    Noul { instructions: String, no: String, yes: String },
    /// A score from 0 to `levels.len() - 1`.
    Score { instructions: String, levels: Vec<String> },
}

impl Question {
    /// Reads question `name` (its JSON pointer for errors is `/questions/name`).
    fn parse(name: &str, v: &Value) -> Result<Question, ApiError> {
        let at = |msg: String| ApiError::bad_request(format!("questions.{name}: {msg}")).param("questions");
        let Value::Object(o) = v else { return Err(at("must be an object with `type` and `instructions`".into())) };
        for k in o.keys() {
            if !["type", "instructions", "criteria"].contains(&k.as_str()) {
                return Err(at(format!("unknown field `{k}` (a question has `type`, `instructions` and `criteria`)")));
            }
        }
        let instructions = match o.get("instructions") {
            None | Some(Value::Null) => return Err(at("`instructions` is required".into())),
            Some(v) => shown(v).map_err(|m| at(format!("instructions {m}")))?,
        };
        let ty = o.get("type").and_then(Value::as_str).unwrap_or("choice");
        let criteria = o.get("criteria").filter(|c| !c.is_null());
        let text = |v: &Value, what: &str| -> Result<String, ApiError> {
            match v {
                Value::String(s) if s.len() <= MAX_TEXT_BYTES => Ok(s.clone()),
                Value::String(s) => Err(at(format!("{what} is {} bytes, over the limit of {MAX_TEXT_BYTES}", s.len()))),
                other => Err(at(format!("{what} must be a string, not {other}"))),
            }
        };
        let count = |n: usize| -> Result<(), ApiError> {
            if OPTIONS.contains(&n) {
                Ok(())
            } else {
                Err(at(format!("has {n} criteria; give between {} and {} (one letter each)", OPTIONS.start(), OPTIONS.end())))
            }
        };
        match ty {
            "choice" => {
                let Some(Value::Object(c)) = criteria else {
                    return Err(at("a choice needs `criteria`: an object of option keys to descriptions (or null)".into()));
                };
                count(c.len())?;
                let options = c
                    .iter()
                    .map(|(k, d)| match d {
                        Value::Null => Ok((k.clone(), k.clone())),
                        d => Ok((k.clone(), text(d, &format!("criteria.{k}"))?)),
                    })
                    .collect::<Result<Vec<_>, ApiError>>()?;
                if options.iter().any(|(k, _)| k.is_empty()) {
                    return Err(at("an option key is empty".into()));
                }
                Ok(Question::Choice { instructions, options })
            }
            "noul" => {
                let (mut no, mut yes) = ("No".to_string(), "Yes".to_string());
                match criteria {
                    None => {}
                    Some(Value::Object(c)) => {
                        for (k, d) in c {
                            match k.as_str() {
                                "false" => no = text(d, "criteria.false")?,
                                "true" => yes = text(d, "criteria.true")?,
                                _ => return Err(at(format!("noul criteria has `{k}`; only `false` and `true` describe a noul question"))),
                            }
                        }
                    }
                    Some(other) => return Err(at(format!("noul criteria must be an object {{\"false\": ..., \"true\": ...}}, not {other}"))),
                }
                Ok(Question::Noul { instructions, no, yes })
            }
            "score" => {
                let Some(Value::Array(c)) = criteria else {
                    return Err(at("a score needs `criteria`: a list of descriptions from the lowest score to the highest".into()));
                };
                count(c.len())?;
                let levels = c.iter().enumerate().map(|(i, d)| text(d, &format!("criteria[{i}]"))).collect::<Result<Vec<_>, _>>()?;
                Ok(Question::Score { instructions, levels })
            }
            other => Err(at(format!("unknown type `{other}`: use `choice`, `noul` or `score`"))),
        }
    }

    /// The options as shown to the model, in letter order.
    fn shown_options(&self) -> Vec<String> {
        match self {
            Question::Choice { options, .. } => {
                options.iter().map(|(k, d)| if k == d { k.clone() } else { format!("{k}: {d}") }).collect()
            }
            Question::Noul { no, yes, .. } => vec![yes.clone(), no.clone()],
            Question::Score { levels, .. } => levels.clone(),
        }
    }

    fn instructions(&self) -> &str {
        match self {
            Question::Choice { instructions, .. } | Question::Noul { instructions, .. } | Question::Score { instructions, .. } => instructions,
        }
    }

    /// The user turn asking this question about `state`.
    fn prompt(&self, state: &str) -> String {
        let mut s = format!("State:\n{state}\n\nQuestion: {}\n", self.instructions());
        if matches!(self, Question::Score { .. }) {
            s.push_str("The options go from the lowest to the highest.\n");
        }
        s.push_str("\nOptions:\n");
        for (i, o) in self.shown_options().iter().enumerate() {
            s.push_str(&format!("{}. {o}\n", letter(i)));
        }
        s.push_str("\nAnswer with the letter of one option.");
        s
    }

    /// The answer, from the probabilities of the options in letter order (summing to 1).
    fn answer(&self, p: &[f64]) -> Value {
        match self {
            Question::Choice { options, .. } => {
                let best = argmax(p);
                let probabilities: Map<String, Value> = options.iter().zip(p).map(|((k, _), &x)| (k.clone(), json!(x))).collect();
                json!({"type": "choice", "choice": options[best].0, "probabilities": probabilities, "confidence": confidence(p)})
            }
            // Letter A is true ("Yes"), B false.
            Question::Noul { .. } => json!({"type": "noul", "noul": p[0]}),
            Question::Score { levels, .. } => {
                let score: f64 = p.iter().enumerate().map(|(i, &x)| i as f64 * x).sum();
                let legend: Map<String, Value> = levels.iter().enumerate().map(|(i, d)| (i.to_string(), json!(d))).collect();
                let probabilities: Map<String, Value> = p.iter().enumerate().map(|(i, &x)| (i.to_string(), json!(x))).collect();
                json!({"type": "score", "score": score, "legend": legend, "probabilities": probabilities, "confidence": confidence(p)})
            }
        }
    }
}

/// Text or JSON as the model is shown it (JSON indented), within [`MAX_TEXT_BYTES`].
fn shown(v: &Value) -> Result<String, String> {
    let s = match v {
        Value::String(s) => s.clone(),
        Value::Object(_) | Value::Array(_) => serde_json::to_string_pretty(v).unwrap_or_default(),
        other => return Err(format!("must be text, a JSON object or an array, not {other}")),
    };
    if s.trim().is_empty() {
        return Err("is empty".into());
    }
    if s.len() > MAX_TEXT_BYTES {
        return Err(format!("is {} bytes, over the limit of {MAX_TEXT_BYTES}", s.len()));
    }
    Ok(s)
}

/// The letter of option `i` (`A` for 0).
fn letter(i: usize) -> String {
    char::from(b'A' + i as u8).to_string()
}

fn argmax(p: &[f64]) -> usize {
    p.iter().enumerate().fold(0, |best, (i, &x)| if x > p[best] { i } else { best })
}

/// `1 − H(p) / ln n`: 1 for a certain answer, 0 for a uniform one.
fn confidence(p: &[f64]) -> f64 {
    let h: f64 = p.iter().filter(|&&x| x > 0.0).map(|&x| -x * x.ln()).sum();
    (1.0 - h / (p.len() as f64).ln()).clamp(0.0, 1.0)
}

/// The options' probabilities from the first generated token's logprobs: the masked
/// distribution over the letters (what `top` holds under the one-of constraint), softmaxed
/// again among the letters found (a letter the model gave no mass, or a backend that
/// reports other tokens, gets 0). `None` when no letter is in it.
fn probabilities(lp: &TokenLogprob, n: usize) -> Option<Vec<f64>> {
    let mut logits = vec![f64::NEG_INFINITY; n];
    let entries = lp.top.iter().map(|t| (t.bytes.as_slice(), t.logprob)).chain(std::iter::once((lp.bytes.as_slice(), lp.logprob)));
    for (bytes, l) in entries {
        if let [b @ b'A'..=b'Z'] = bytes {
            let i = (b - b'A') as usize;
            if i < n && l.is_finite() {
                logits[i] = f64::from(l);
            }
        }
    }
    let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !max.is_finite() {
        return None;
    }
    let z: f64 = logits.iter().map(|&l| (l - max).exp()).sum();
    Some(logits.iter().map(|&l| (l - max).exp() / z).collect())
}

/// `POST /v1/systemone` (see the module docs).
pub async fn systemone(State(state): State<AppState>, ApiJson(req, _): ApiJson<SystemOneRequest, OllamaApi>) -> Result<Json<Value>, ApiError> {
    inner(state, req).await.map_err(|e| e.flavor(Flavor::Ollama))
}

async fn inner(state: AppState, req: SystemOneRequest) -> Result<Json<Value>, ApiError> {
    let received = Instant::now();
    let worker = state.model(&req.model)?.clone();
    let shown_state = shown(&req.state).map_err(|m| ApiError::bad_request(format!("state {m}")).param("state"))?;
    if req.questions.is_empty() {
        return Err(ApiError::bad_request("questions is empty: ask at least one").param("questions"));
    }
    if req.questions.len() > MAX_QUESTIONS {
        return Err(ApiError::bad_request(format!("{} questions, over the limit of {MAX_QUESTIONS}", req.questions.len())).param("questions"));
    }
    let questions = req.questions.iter().map(|(k, v)| Ok((k.clone(), Question::parse(k, v)?))).collect::<Result<Vec<_>, ApiError>>()?;
    let cfg = state.config();
    let greedy = Sampling { temperature: Some(0.0), ..Default::default() };
    let (mut input_tokens, mut output_tokens) = (0u64, 0u64);
    let mut answers = Map::new();
    for (name, q) in &questions {
        let n = q.shown_options().len();
        let letters: Arc<[String]> = (0..n).map(letter).collect();
        let messages = vec![
            ChatMessage {
                role: "system".into(),
                content: "You answer questions about a state by choosing one of the lettered options. Reply with the letter only.".into(),
                ..Default::default()
            },
            ChatMessage { role: "user".into(), content: q.prompt(&shown_state), ..Default::default() },
        ];
        let prompt = PromptSpec::Chat { messages, tools: Vec::new() };
        let mut job = jobs::job(cfg, received, prompt, ConstraintRequest::OneOf(letters), greedy.clone(), 1, Vec::new(), None);
        job.logprobs = Some(n as u8);
        // A reasoning model answers directly: the one token is the letter.
        job.think = Some(crate::backend::Think::Off);
        let outcome = jobs::collect(jobs::start(&worker, job).await?).await?;
        input_tokens += u64::from(outcome.prompt_tokens);
        output_tokens += u64::from(outcome.eval_tokens);
        let p = outcome
            .logprobs
            .as_ref()
            .and_then(|l| l.first())
            .and_then(|lp| probabilities(lp, n))
            .ok_or_else(|| ApiError::internal(format!("question {name}: the model gave no distribution over the options; please report this")))?;
        answers.insert(name.clone(), q.answer(&p));
    }
    Ok(Json(json!({
        "model": req.model,
        "answers": answers,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    })))
}

#[cfg(test)]
mod tests;
