//! # formwork-engine: the generation loop
//!
//! Turns a chat request into tokens: renders the model's chat template, runs the decode
//! loop with the sampler, applies an optional constraint (a grammar), stops on end-of-turn /
//! stop strings / token budget, streams text and reports timings. It defines the [`Model`]
//! trait that backends (`formwork-llama`) implement; tests use `testing::ScriptedModel`
//! (feature `testing`).
//!
//! ## Key types
//! - [`Model`] / [`ModelInfo`]: what the loop needs from a backend (tokenize, decode → logits,
//!   truncate the KV cache, and optionally [`Model::cached_tokens`] for prefix reuse).
//! - [`batch`]: many sequences on one model. A [`batch::BatchModel`] evaluates several
//!   sequences in one call; a [`batch::Batcher`] steps them together (continuous batching,
//!   chunked prefill, prefix reuse per slot) and hands out [`batch::Sequence`]s, each a
//!   [`Model`], so the same loop serves one sequence (the CLI) and many (the server).
//! - [`Prompt`]: a chat ([`ChatMessage`]s + optional tools JSON) or raw text.
//! - [`GenerateOptions`]: sampler options, `num_predict`, stop strings, `num_ctx`, forced
//!   tokens, and [`LogprobOptions`] (per-token log-probabilities, off by default).
//! - [`Constraint`]: what a grammar must provide (`compute_mask`, `is_allowed`, `commit`,
//!   `is_accepting`); [`GrammarConstraint`] adapts the grammar matcher.
//! - [`Generation`]: text, tokens, [`StopReason`] (and the exact [`StopDetail`]), token counts, durations, constraint stats.
//! - [`ChatTemplate`]: Jinja chat templates via minijinja (see [`template`]); tools for
//!   templates that cannot show them are written into the system prompt ([`tool_prompt`]).
//! - [`retry::generate_validated`]: validate each answer (schema, extra rules, a command) and
//!   retry with the errors fed back to the model (see [`retry`]).
//! - [`reasoning`]: reasoning models in one pass — free reasoning, then the constrained
//!   answer ([`reasoning::generate_with_reasoning`]), streamed as thinking/answer pieces.
//! - [`request::Request`]: **the one entry point** — prompt, [`request::Format`] (JSON,
//!   a JSON Schema, GBNF, a compiled grammar), options, reasoning and validation with retries
//!   in one builder; every combination composes (reasoning on each retried attempt).
//! - [`add_schema_instruction`]: puts the schema (and a short instruction) in the prompt, so
//!   the model knows what the grammar will ask of it (see [`instruct`]).
//!
//! ## The loop a caller writes
//! ```
//! use formwork_engine::{generate, ChatMessage, GenerateOptions, Prompt};
//! use std::ops::ControlFlow;
//! # use formwork_engine::testing::ScriptedModel;
//! # let mut model = ScriptedModel::new(&["user", "assistant", "\n", "Name three colours.", "Red", ", green", ", blue."], &["<|im_end|>", "<|im_start|>"]);
//! # model.script_text("Red, green, blue.");
//! let prompt = Prompt::Chat { messages: vec![ChatMessage::new("user", "Name three colours.")], tools: None };
//! let opts = GenerateOptions { num_predict: Some(128), stop: vec!["\n\n".into()], ..Default::default() };
//! let mut out = String::new();
//! let g = generate(&mut model, &prompt, &opts, None, &mut |text| {
//!     out.push_str(text);                     // streamed as soon as it is certain
//!     ControlFlow::Continue(())               // Break(()) = the client went away: stop now
//! })?;
//! assert_eq!(out, g.text);
//! eprintln!("{} tokens, {:.1} tokens/s, {}", g.eval_tokens, g.eval_rate(), g.done_reason);
//! # Ok::<(), formwork_engine::EngineError>(())
//! ```
//!
//! ## What [`generate`] guarantees
//! - **Prompt**: chats are rendered with the model's template (ChatML with a warning when it
//!   has none) and tokenized with special-token names recognised; BOS is added when the model
//!   wants it and the text does not already start with it. A prompt that does not leave room
//!   for one generated token in the context is [`ModelError::ContextOverflow`] — an error,
//!   never a crash. `num_ctx` larger than the loaded context is capped (with a warning).
//! - **Prefix reuse**: when the backend reports [`Model::cached_tokens`], the cache is
//!   truncated to the longest common prefix with the new prompt and only the rest is
//!   evaluated (at least one token, to get logits). `Generation::cached_prompt_tokens` says
//!   how many were reused.
//! - **Stops**: at any of the vocabulary's EOS/end-of-turn tokens ([`StopReason::Stop`]), at a
//!   stop string (`Stop`; the stop string and anything after it are not emitted), when a
//!   constraint is complete (accepting and only EOS could follow: `Stop`), after
//!   `num_predict` tokens or when the context is full ([`StopReason::Length`]), or when the
//!   callback returns `Break` ([`StopReason::Cancelled`]).
//! - **Streaming**: token bytes are decoded incrementally; a character split across tokens
//!   is emitted once complete, never broken (invalid bytes become U+FFFD). The longest tail
//!   that could still become a stop string is held back until it is decided. Special
//!   (control) tokens produce no text. The concatenated callback text equals
//!   `Generation::text`.
//! - **Constraint** (when given): EOS is allowed exactly when the constraint accepts. Which
//!   path is used depends on the sampler ([`formwork_sampler::Sampler::fast_path_is_exact`]):
//!   - *fast path* — greedy (`temperature <= 0`), or plain temperature sampling with top-k,
//!     top-p and min-p disabled: sample from the unmasked logits, check just that token with
//!     [`Constraint::is_allowed`], and compute the full mask only when it is rejected. The
//!     result has exactly the masked distribution (and, greedy, the same token).
//!   - *mask first* — any truncating filter in force (top-k < vocabulary, top-p < 1,
//!     min-p > 0; Ollama's defaults have top-k 40 and top-p 0.9): compute the mask, then
//!     sample with it.
//!
//!   `Generation::constraint` reports which path ran, fast accepts, masks computed and time.
//! - **Budgets** (truncation-proof output): with a constraint that offers
//!   [`Constraint::completion_plan`] (grammars do), the loop never lets `num_predict` or the
//!   context cut the output mid-document: a sampled token after which the output could not be
//!   finished in the tokens left is refused (and another sampled), and when no slack is left
//!   the plan's tokens are forced ([`StopDetail::ClosedEarly`], reported as `length`). A
//!   budget below the shortest valid output is [`EngineError::BudgetTooSmall`].
//! - **Logprobs** (only when [`GenerateOptions::logprobs`] asks; off, nothing is computed):
//!   [`Generation::logprobs`] holds one [`TokenLogprob`] per generated text token (reasoning
//!   included; end-of-turn and special tokens not), also pushed to a [`LogprobSink`] as each
//!   token is chosen, before its text reaches the callback (for streaming). The numbers are
//!   the **masked** distribution the token was drawn from: the model's softmax over the
//!   tokens the constraint allows (masked tokens: probability 0, never among the
//!   alternatives; the allowed ones sum to 1). Temperature, top-k/top-p/min-p and penalties
//!   are not applied (the model's distribution, as OpenAI and Ollama report it, so greedy
//!   runs give informative numbers). **Forced tokens** (forced text, a budget plan's tokens)
//!   were the only choice: logprob `0`, their only alternative themselves. Cost: per sampled
//!   token an O(vocabulary) log-sum-exp and top-n pass, and under a constraint the full mask
//!   at every step (the fast path otherwise skips it).
//!
//! ## Features
//! - `testing`: `testing::ScriptedModel`, a deterministic fake model for loop tests.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod batch;
mod chat;
mod constraint;
mod generate;
pub mod instruct;
mod model;
pub mod reasoning;
pub mod request;
pub mod retry;
mod stream;
pub mod template;
pub mod tool_prompt;
#[cfg(feature = "testing")]
pub mod testing;

pub use constraint::{Constraint, ConstraintFactory, GrammarConstraint};
pub use generate::{
    generate, render_prompt, tokenize_prompt, ChatMessage, ConstraintStats, EngineError, GenerateOptions, Generation,
    LogprobOptions, LogprobSink, Prompt, StopDetail, StopReason, TokenLogprob, ToolCall, ToolCallFunction, TopLogprob,
};
pub use instruct::{add_schema_instruction, schema_instruction, SchemaPlacement};
pub use model::{Model, ModelError, ModelInfo};
pub use template::{ChatTemplate, TemplateError};
pub use formwork_sampler::SamplerOptions;
