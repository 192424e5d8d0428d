//! The generation loop: prompt → tokens → (sample, constrain, stream) until a stop rule.

use crate::constraint::Constraint;
use crate::model::{Model, ModelError};
use crate::stream::{Pushed, TextStream};
use crate::template::{ChatTemplate, TemplateError};
use formwork_sampler::{Sampler, SamplerOptions};
use formwork_vocab::{TokenId, TokenKind, TokenMask, Vocabulary};

pub use crate::chat::{ChatMessage, ToolCall, ToolCallFunction};
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

mod budget;
mod logprobs;
mod outcome;

pub use formwork_model::logprob::{TokenLogprob, TopLogprob};
pub use logprobs::{LogprobOptions, LogprobSink};
pub use outcome::{ConstraintStats, Generation, StopDetail, StopReason};

/// What to generate from.
#[derive(Clone, Debug)]
pub enum Prompt {
    /// A chat, rendered with the model's chat template (ChatML when it has none) with the
    /// assistant's turn opened (`add_generation_prompt`). `tools` is a JSON array of tool
    /// definitions, passed to the template as `tools`.
    Chat {
        /// The conversation so far.
        messages: Vec<ChatMessage>,
        /// Tool definitions, if any.
        tools: Option<serde_json::Value>,
    },
    /// Text sent to the model as is (special-token names in it are recognised).
    Raw(String),
}

impl Prompt {
    /// A chat of one user message, no tools.
    pub fn user(text: impl Into<String>) -> Self {
        Prompt::Chat { messages: vec![ChatMessage::new("user", text)], tools: None }
    }
}

/// Options of one generation.
#[derive(Clone, Debug, Default)]
pub struct GenerateOptions {
    /// Sampling parameters (temperature, top-k, ..., seed).
    pub sampler: SamplerOptions,
    /// At most this many tokens are generated (`None`: until a stop rule or the context is full).
    pub num_predict: Option<usize>,
    /// Stop strings: generation ends when one appears; it is not part of the output.
    pub stop: Vec<String>,
    /// Context length to use; capped at the length the model was loaded with (a backend
    /// that must grow its context reloads before calling [`generate`]).
    pub num_ctx: Option<usize>,
    /// Append the text a constraint forces ([`Constraint::forced_bytes`]: a key name, `": "`)
    /// without sampling, tokenized canonically by the model, and evaluate it in one batch
    /// (see [`generate`]). Off by default; `formwork run` and the server turn it on.
    pub force_tokens: bool,
    /// Report each generated text token's log-probability and its step's `top` most likely
    /// tokens, in [`Generation::logprobs`] (and, as they are chosen, in the sink). The
    /// distribution is the model's softmax over the tokens the constraint allows (no
    /// temperature, truncation or penalties); forced tokens have logprob 0. See
    /// `generate/logprobs.rs` for the details and the cost. `None` (the default): nothing is
    /// computed.
    pub logprobs: Option<LogprobOptions>,
}

/// Errors of the generation loop.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The backend failed (including a prompt longer than the context).
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The chat template failed.
    #[error(transparent)]
    Template(#[from] TemplateError),
    /// The sampler failed (for example NaN logits).
    #[error("sampling failed: {0}")]
    Sampler(String),
    /// The constraint failed: no token can continue, or a commit was refused.
    #[error("the output constraint failed: {0}")]
    Constraint(String),
    /// The prompt rendered to no tokens.
    #[error("the prompt is empty; give some text or messages")]
    EmptyPrompt,
    /// The token budget cannot hold even the shortest output the constraint allows.
    #[error(
        "the output format needs {needed} tokens to finish a valid output, but {} allows only {budget}; \
         raise it to at least {needed}",
        if *.context { "the context (after the prompt)" } else { "num_predict" }
    )]
    BudgetTooSmall {
        /// Tokens the budget allows.
        budget: usize,
        /// Tokens of the constraint's shortest completion plan from the start.
        needed: usize,
        /// The room left in the context is the limit (else `num_predict`).
        context: bool,
    },
    /// The backend returned fewer logits than the vocabulary has tokens.
    #[error("the model returned {got} logits for a vocabulary of {expected} tokens; the model and its vocabulary do not match")]
    LogitsSize {
        /// Logits returned.
        got: usize,
        /// Vocabulary size.
        expected: usize,
    },
}

/// Renders a [`Prompt`] to the text the model sees (chat template applied for chats).
pub fn render_prompt(model: &dyn Model, prompt: &Prompt) -> Result<String, TemplateError> {
    match prompt {
        Prompt::Raw(s) => Ok(s.clone()),
        Prompt::Chat { messages, tools } => {
            let info = model.info();
            let t = ChatTemplate::new(info.chat_template.as_deref(), info.bos_token.as_deref(), info.eos_token.as_deref())?;
            t.render(messages, tools.as_ref(), true)
        }
    }
}

/// Renders and tokenizes a prompt. BOS is added when the model asks for it and the
/// rendered text does not already start with the BOS text (templates that write
/// `{{ bos_token }}` themselves would otherwise get two).
pub fn tokenize_prompt(model: &dyn Model, prompt: &Prompt) -> Result<Vec<TokenId>, EngineError> {
    let text = render_prompt(model, prompt)?;
    let info = model.info();
    let has_bos = info.bos_token.as_deref().is_some_and(|b| !b.is_empty() && text.starts_with(b));
    Ok(model.tokenize(&text, info.add_bos && !has_bos, true)?)
}

/// Generates a continuation of `prompt`, streaming text to `on_text` as soon as it is certain.
///
/// See the crate docs for the stop rules, prefix reuse, streaming guarantees and how the
/// constraint is applied (fast path vs mask first).
///
/// **Budget** (with a constraint that implements [`Constraint::completion_plan`], like
/// [`GrammarConstraint`](crate::GrammarConstraint)): the output is never cut by
/// `num_predict` or a full context. The loop keeps a plan that finishes a valid output
/// within the tokens left, refuses tokens after which it would not fit, and forces the
/// plan when no slack is left; such an output ends with [`StopDetail::ClosedEarly`]
/// (`done_reason` `length`: the model's own answer was cut, but the output is complete).
/// A budget smaller than the shortest valid output is [`EngineError::BudgetTooSmall`];
/// `num_predict: Some(0)` generates nothing, as without a constraint.
pub fn generate(
    model: &mut dyn Model,
    prompt: &Prompt,
    opts: &GenerateOptions,
    mut constraint: Option<&mut dyn Constraint>,
    on_text: &mut dyn FnMut(&str) -> ControlFlow<()>,
) -> Result<Generation, EngineError> {
    let start = Instant::now();
    let vocab = model.vocab().clone();
    let prompt_tokens = tokenize_prompt(&*model, prompt)?;
    if prompt_tokens.is_empty() {
        return Err(EngineError::EmptyPrompt);
    }
    let loaded_ctx = model.info().context_length;
    let ctx = match opts.num_ctx {
        Some(n) if n > loaded_ctx => {
            tracing::warn!(requested = n, loaded = loaded_ctx, "num_ctx is larger than the loaded context; using the loaded one");
            loaded_ctx
        }
        Some(n) => n,
        None => loaded_ctx,
    };
    if prompt_tokens.len() >= ctx {
        return Err(ModelError::ContextOverflow { needed: prompt_tokens.len(), context: ctx }.into());
    }

    // Budget steering (see `budget`): only with a constraint that can plan its completion,
    // and a budget it fits in (checked before the prompt is evaluated).
    let t_plan = Instant::now();
    let steer = match constraint.as_deref_mut() {
        Some(c) if opts.num_predict != Some(0) => match c.completion_plan() {
            Some(plan) => {
                let (budget, context) = budget::room(opts.num_predict, ctx, 0, prompt_tokens.len());
                if plan.len() > budget {
                    return Err(EngineError::BudgetTooSmall { budget, needed: plan.len(), context });
                }
                true
            }
            None => false,
        },
        _ => false,
    };
    let plan_time = t_plan.elapsed();

    // Prefix reuse: keep the cached tokens the new prompt starts with; evaluate at least the
    // last prompt token so that we get its logits.
    let common = model.cached_tokens().map_or(0, |c| common_prefix(c, &prompt_tokens));
    let reuse = common.min(prompt_tokens.len() - 1);
    model.truncate(reuse)?;
    tracing::debug!(prompt_tokens = prompt_tokens.len(), reused = reuse, "evaluating prompt");

    // Forced tokens (`opts.force_tokens`): taken from `queue` instead of sampled; tokens not
    // yet evaluated wait in `pending` and go to the model in one batch. The output may start
    // with forced text too.
    let mut queue: std::collections::VecDeque<TokenId> = Default::default();
    let mut pending: Vec<TokenId> = Vec::new();
    if let (true, Some(c)) = (opts.force_tokens, constraint.as_deref_mut()) {
        let room = budget::room(opts.num_predict, ctx, 0, prompt_tokens.len()).0;
        queue.extend(forced_tokens(&*model, c, room));
    }

    let t_prompt = Instant::now();
    let mut logits = check_logits(model.decode(&prompt_tokens[reuse..])?, vocab.len())?;
    let prompt_eval_duration = t_prompt.elapsed();
    let t_eval = Instant::now();

    let mut sampler = Sampler::new(opts.sampler.clone()).map_err(|e| EngineError::Sampler(e.to_string()))?;
    let fast_path = sampler.fast_path_is_exact(vocab.len());
    let mut stats = ConstraintStats { fast_path, time: plan_time, ..Default::default() };
    let mut steering = budget::Steering::default();
    let mut mask = TokenMask::new(vocab.len());
    let mut stream = TextStream::new(&opts.stop);
    let mut history = prompt_tokens.clone();
    let mut generated: Vec<TokenId> = Vec::new();
    let eos = vocab.eos_tokens().to_vec();
    let mut recorder = opts.logprobs.as_ref().map(logprobs::Recorder::new);

    let stop = loop {
        if opts.num_predict.is_some_and(|n| generated.len() >= n) {
            break StopDetail::NumPredict;
        }
        let budget = steer.then(|| budget::room(opts.num_predict, ctx, generated.len(), history.len()).0);
        let forced = match (queue.pop_front(), constraint.as_deref_mut()) {
            (Some(f), Some(c)) => match budget {
                Some(r) => steering.take_forced(c, f, r, &mut stats).then_some(f),
                None => Some(f),
            },
            _ => None,
        };
        // Whether `t` was the only token possible (forced text or the budget's plan).
        let mut only_choice = forced.is_some();
        let masks_before = stats.masks;
        let t = match forced {
            Some(f) => {
                stats.forced += 1;
                f
            }
            None => {
                queue.clear();
                if !pending.is_empty() {
                    logits = check_logits(model.decode(&pending)?, vocab.len())?;
                    pending.clear();
                }
                match (budget, constraint.as_deref_mut()) {
                    (Some(r), Some(c)) => {
                        let step = budget::Step { sampler: &mut sampler, logits, history: &history, vocab: &vocab, mask: &mut mask, stats: &mut stats };
                        let t = steering.pick(step, c, r)?;
                        only_choice = steering.last_forced;
                        t
                    }
                    (_, c) => pick(&mut sampler, logits, &history, c, &vocab, &mut mask, &mut stats)?,
                }
            }
        };
        generated.push(t);
        if eos.contains(&t) {
            break StopDetail::EndOfTurn { token: t };
        }
        if let Some(rec) = recorder.as_mut().filter(|_| vocab.kind(t) != TokenKind::Special) {
            if only_choice {
                rec.forced(t, &vocab);
            } else {
                // The mask the token was drawn from: the one this step computed (with any
                // tokens the budget refused removed), or, when the fast path accepted
                // without one, the full mask now (before the commit).
                let m = match constraint.as_deref_mut() {
                    None => None,
                    Some(c) => {
                        if stats.masks == masks_before {
                            let t0 = Instant::now();
                            fill_mask(c, &vocab, &mut mask);
                            stats.masks += 1;
                            stats.time += t0.elapsed();
                        }
                        Some(&mask)
                    }
                };
                rec.sampled(t, logits, m, &vocab)?;
            }
        }
        if let Some(c) = constraint.as_deref_mut() {
            let t0 = Instant::now();
            let r = c.commit(t);
            stats.time += t0.elapsed();
            r.map_err(|e| EngineError::Constraint(format!("token {t} was chosen but the constraint refused it: {e}")))?;
        }
        history.push(t);
        if vocab.kind(t) != TokenKind::Special {
            match stream.push(vocab.token_bytes(t), on_text) {
                Pushed::Continue => {}
                Pushed::StopString(stop) => break StopDetail::StopString { stop },
                Pushed::Cancelled => break StopDetail::Cancelled,
            }
        }
        if let Some(c) = constraint.as_deref_mut() {
            if is_complete(c, &vocab, &mut mask, &mut stats) {
                break StopDetail::ConstraintComplete;
            }
        }
        if opts.num_predict.is_some_and(|n| generated.len() >= n) {
            break StopDetail::NumPredict;
        }
        if history.len() >= ctx {
            tracing::debug!(ctx, "context full");
            break StopDetail::ContextFull;
        }
        pending.push(t);
        // The previous logits are spent (and must not hold the model borrowed).
        logits = &[];
        if opts.force_tokens && queue.is_empty() {
            if let Some(c) = constraint.as_deref_mut() {
                let t0 = Instant::now();
                let room = budget::room(opts.num_predict, ctx, generated.len(), history.len()).0;
                queue.extend(forced_tokens(&*model, c, room));
                stats.time += t0.elapsed();
            }
        }
        if queue.is_empty() {
            logits = check_logits(model.decode(&pending)?, vocab.len())?;
            pending.clear();
        }
    };
    let stop = match stop {
        StopDetail::StopString { .. } | StopDetail::Cancelled => stop,
        _ => match stream.finish(on_text) {
            Pushed::Cancelled => StopDetail::Cancelled,
            _ => stop,
        },
    };
    // The budget made the loop refuse or force tokens, and the output is complete: say so
    // (a `length` stop whose output is nevertheless valid).
    let stop = match stop {
        StopDetail::EndOfTurn { .. } | StopDetail::ConstraintComplete | StopDetail::NumPredict | StopDetail::ContextFull
            if steering.intervened && constraint.as_deref().is_some_and(|c| c.is_accepting()) =>
        {
            StopDetail::ClosedEarly
        }
        _ => stop,
    };

    Ok(Generation {
        text: stream.text().to_string(),
        eval_tokens: generated.len(),
        tokens: generated,
        done_reason: stop.reason(),
        stop,
        prompt_tokens: prompt_tokens.len(),
        cached_prompt_tokens: reuse,
        load_duration: Duration::ZERO,
        prompt_eval_duration,
        eval_duration: t_eval.elapsed(),
        total_duration: start.elapsed(),
        constraint: constraint.is_some().then_some(stats),
        seed: sampler.seed(),
        thinking: None,
        logprobs: recorder.map(|r| r.entries).unwrap_or_default(),
    })
}

/// The tokens to append for the constraint's forced text, at most `max`: the model's own
/// tokenization of the forced bytes (their longest valid UTF-8 prefix), kept only when the
/// tokens spell exactly those bytes and are all text tokens, and without the last token,
/// which the text that follows could merge into another (so what is forced is what the
/// model's tokenizer would produce for the whole output, near enough: the first forced
/// token starts after a sampled one, whose boundary stays). Empty when nothing is forced.
fn forced_tokens(model: &dyn Model, c: &mut (dyn Constraint + '_), max: usize) -> Vec<TokenId> {
    let bytes = c.forced_bytes();
    let text = match std::str::from_utf8(&bytes) {
        Ok(t) => t,
        Err(e) => std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default(),
    };
    if text.is_empty() || max == 0 {
        return Vec::new();
    }
    let Ok(mut toks) = model.tokenize(text, false, false) else {
        return Vec::new();
    };
    let vocab = model.vocab();
    let spelled: Vec<u8> = toks.iter().flat_map(|&t| vocab.token_bytes(t).iter().copied()).collect();
    // A tokenizer that adds a leading space (SentencePiece's dummy prefix) or maps the
    // text to special tokens does not spell it: force nothing.
    if spelled != text.as_bytes() || toks.iter().any(|&t| vocab.kind(t) == TokenKind::Special) {
        return Vec::new();
    }
    toks.pop();
    toks.truncate(max);
    toks
}

fn common_prefix(a: &[TokenId], b: &[TokenId]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

fn check_logits(logits: &[f32], n_vocab: usize) -> Result<&[f32], EngineError> {
    if logits.len() < n_vocab {
        return Err(EngineError::LogitsSize { got: logits.len(), expected: n_vocab });
    }
    // Backends may pad the output layer past the vocabulary; those slots are never sampled.
    Ok(&logits[..n_vocab])
}

/// Chooses the next token.
///
/// Without a constraint: a plain sample. With one:
/// - **fast path** (when [`Sampler::fast_path_is_exact`]: greedy, or plain temperature
///   sampling where masking commutes with the filters): sample from the unmasked
///   distribution and check that one token with [`Constraint::is_allowed`] (EOS: allowed iff
///   accepting); only on rejection compute the full mask and sample again with it. For
///   greedy this picks the masked argmax; for plain sampling the result is distributed
///   exactly as masked sampling (p(t) + P(reject)·p(t)/P(allowed) = p(t)/P(allowed)).
/// - **mask first** otherwise (top-k / top-p / min-p / penalties, whose filtering depends on
///   which tokens are masked): compute the mask, then sample with it.
pub(crate) fn pick(
    sampler: &mut Sampler,
    logits: &[f32],
    history: &[TokenId],
    constraint: Option<&mut (dyn Constraint + '_)>,
    vocab: &Vocabulary,
    mask: &mut TokenMask,
    stats: &mut ConstraintStats,
) -> Result<TokenId, EngineError> {
    let sampler_err = |e: formwork_sampler::SampleError| EngineError::Sampler(e.to_string());
    let Some(c) = constraint else {
        return sampler.sample(logits, None, history).map_err(sampler_err);
    };
    let eos = vocab.eos_tokens();
    if stats.fast_path {
        let t = sampler.sample(logits, None, history).map_err(sampler_err)?;
        let t0 = Instant::now();
        let ok = if eos.contains(&t) { c.is_accepting() } else { c.is_allowed(t) };
        stats.time += t0.elapsed();
        if ok {
            stats.fast_accepts += 1;
            return Ok(t);
        }
    }
    let t0 = Instant::now();
    fill_mask(c, vocab, mask);
    stats.masks += 1;
    stats.time += t0.elapsed();
    if mask.is_none() {
        return Err(EngineError::Constraint(
            "no token can continue the output and the constraint is not complete (the grammar cannot be finished with this vocabulary)".into(),
        ));
    }
    sampler.sample(logits, Some(mask), history).map_err(sampler_err)
}

/// The constraint's mask with EOS bits set exactly when it accepts.
pub(crate) fn fill_mask(c: &mut (dyn Constraint + '_), vocab: &Vocabulary, mask: &mut TokenMask) {
    mask.clear();
    c.compute_mask(mask);
    let accepting = c.is_accepting();
    for &e in vocab.eos_tokens() {
        if accepting {
            mask.insert(e);
        } else {
            mask.remove(e);
        }
    }
}

/// True when the constraint accepts and nothing but EOS may follow: the output is done.
fn is_complete(c: &mut (dyn Constraint + '_), vocab: &Vocabulary, mask: &mut TokenMask, stats: &mut ConstraintStats) -> bool {
    if !c.is_accepting() {
        return false;
    }
    if let Some(done) = c.is_complete() {
        return done;
    }
    let t0 = Instant::now();
    fill_mask(c, vocab, mask);
    stats.masks += 1;
    stats.time += t0.elapsed();
    let eos = vocab.eos_tokens();
    mask.iter_ones().all(|t| eos.contains(&t))
}
