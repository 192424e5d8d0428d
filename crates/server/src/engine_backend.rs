//! The real [`Backend`]: `formwork_engine::generate` over a loaded [`Model`], with output
//! constraints compiled through `formwork_schema` / the built-in JSON grammar and cached in a
//! [`ConstraintCache`] keyed by (constraint, vocabulary fingerprint).
//!
//! Final validation: output generated under a schema that ended normally (`stop`) is checked
//! with `formwork_schema::validate`; a mismatch is an internal error, never a success.
//! Output cut by the token budget (`length`) is returned as is with `done_reason: length`,
//! as the real services do.

use crate::tools;
use crate::backend::{
    Backend, BackendError, ConstraintRequest, JsonLayout, DoneReason, Job, Outcome, Piece, PromptSpec, Sampling,
    Think, ToolDef,
};
use formwork_engine::reasoning::{Reasoning, ReasoningFormat};
use formwork_engine::batch::Batcher;
use formwork_engine::request::{Event, Format, Request, RequestError, Whitespace};
use formwork_engine::retry::RetryError;
use formwork_engine::{EngineError, GenerateOptions, Model, ModelError, Prompt, StopReason};
use formwork_grammar::matcher::CompiledGrammar;
use formwork_grammar::{Expr, Grammar, GrammarBuilder, Limits};
use formwork_sampler::SamplerOptions;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Compiled grammars by the request's constraint (schema, strictness, layout) and vocabulary, with
/// least-recently-used eviction (the grammar crate's `GrammarCache` keys by compiled grammar
/// instead; this one spares the schema compile too). Shared
/// (`Arc`) by every model; a repeated schema is compiled once, and again only when its
/// compiled grammar is nearly out of parser states ([`CompiledGrammar::is_nearly_full`]).
#[derive(Debug)]
pub struct ConstraintCache {
    capacity: usize,
    map: Mutex<HashMap<String, (Arc<CompiledGrammar>, u64)>>,
    clock: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl ConstraintCache {
    /// A cache holding at most `capacity` grammars (at least one).
    pub fn new(capacity: usize) -> Self {
        ConstraintCache {
            capacity: capacity.max(1),
            map: Mutex::new(HashMap::new()),
            clock: AtomicU64::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// (hits, misses) so far.
    pub fn stats(&self) -> (u64, u64) {
        (self.hits.load(Ordering::Relaxed), self.misses.load(Ordering::Relaxed))
    }

    /// The grammar for `key`, compiling it with `compile` on a miss. Compilation runs outside
    /// the lock.
    pub fn get_or_try_insert<E>(
        &self,
        key: String,
        compile: impl FnOnce() -> Result<Arc<CompiledGrammar>, E>,
    ) -> Result<Arc<CompiledGrammar>, E> {
        let now = self.clock.fetch_add(1, Ordering::Relaxed);
        if let Some((g, used)) = self.map.lock().expect("grammar cache lock").get_mut(&key) {
            // A grammar nearly out of parser states is compiled afresh (and replaced) below.
            if !g.is_nearly_full() {
                *used = now;
                self.hits.fetch_add(1, Ordering::Relaxed);
                return Ok(g.clone());
            }
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let g = compile()?;
        let mut map = self.map.lock().expect("grammar cache lock");
        if map.len() >= self.capacity && !map.contains_key(&key) {
            if let Some(oldest) = map.iter().min_by_key(|(_, (_, used))| *used).map(|(k, _)| k.clone()) {
                map.remove(&oldest);
            }
        }
        map.insert(key, (g.clone(), now));
        Ok(g)
    }
}

/// What an [`EngineBackend`] generates with.
enum Runner {
    /// A model of its own (one sequence).
    Single(Box<dyn Model>),
    /// A slot of a batched model: each generation takes a sequence from the batcher (the
    /// free one whose cache shares the longest prefix with the prompt) and gives it back.
    Batched(Batcher),
}

/// A model driven by `formwork_engine`.
pub struct EngineBackend {
    runner: Runner,
    cache: Arc<ConstraintCache>,
    limits: Limits,
    reasoning: Option<ReasoningFormat>,
    /// The chat template cannot show tools, so the engine writes them into the system
    /// message and tool use goes through envelopes ([`tools::envelope`]).
    tools_in_system: bool,
}

/// Whether a model with chat template `template` (`None`: the ChatML fallback) gets its tools
/// from the engine, in the system message ([`formwork_engine::tool_prompt`]).
fn tools_in_system(template: Option<&str>) -> bool {
    !template.is_some_and(crate::capabilities::template_shows_tools)
}

impl EngineBackend {
    /// Wraps a loaded model. `cache` may be shared by several models. A model whose chat
    /// template shows a reasoning section (see [`ReasoningFormat::detect`]) reasons before
    /// answering, in the same generation, unless a job says `think: off`.
    pub fn new(model: Box<dyn Model>, cache: Arc<ConstraintCache>, limits: Limits) -> Self {
        let reasoning = ReasoningFormat::for_model(model.as_ref(), None);
        let tools_in_system = tools_in_system(model.info().chat_template.as_deref());
        EngineBackend { runner: Runner::Single(model), cache, limits, reasoning, tools_in_system }
    }

    /// The backends of a batched model's slots, one per sequence (give them to
    /// [`ModelWorker::spawn_pool`](crate::ModelWorker::spawn_pool)): each runs one request
    /// at a time, and their decodes are batched together by `batcher`.
    pub fn slots(batcher: &Batcher, cache: Arc<ConstraintCache>, limits: Limits) -> Vec<Box<dyn Backend>> {
        let reasoning = batcher.info().chat_template.as_deref().and_then(ReasoningFormat::detect);
        let tools_in_system = tools_in_system(batcher.info().chat_template.as_deref());
        (0..batcher.stats().slots)
            .map(|_| {
                Box::new(EngineBackend {
                    runner: Runner::Batched(batcher.clone()),
                    cache: cache.clone(),
                    limits: limits.clone(),
                    reasoning: reasoning.clone(),
                    tools_in_system,
                }) as Box<dyn Backend>
            })
            .collect()
    }

    fn info(&self) -> &formwork_engine::ModelInfo {
        match &self.runner {
            Runner::Single(m) => m.info(),
            Runner::Batched(b) => b.info(),
        }
    }

    fn vocab(&self) -> &Arc<formwork_vocab::Vocabulary> {
        match &self.runner {
            Runner::Single(m) => m.vocab(),
            Runner::Batched(b) => b.vocab(),
        }
    }

    /// Replaces the detected reasoning format (`None`: the model never reasons).
    pub fn with_reasoning(mut self, format: Option<ReasoningFormat>) -> Self {
        self.reasoning = format;
        self
    }

    /// The reasoning format in use.
    pub fn reasoning(&self) -> Option<&ReasoningFormat> {
        self.reasoning.as_ref()
    }

    /// The reasoning a job gets: `None` (plain generation) for models without a format and
    /// for raw prompts that did not ask for it; `given` is reasoning already generated.
    fn reasoning_for(&self, job: &Job, given: Option<String>) -> Option<Reasoning> {
        let format = self.reasoning.clone()?;
        let think = match (&job.think, given) {
            (_, Some(t)) => Think::Given(t),
            (None, None) if matches!(job.prompt, PromptSpec::Raw(_)) => return None,
            (None, None) => Think::On { effort: None },
            (Some(t), None) => t.clone(),
        };
        Some(Reasoning { format, think, budget: None })
    }

    /// The constraint's grammar for this model, from the cache; JSON answers laid out in
    /// `layout` (tool calls always flexible: the server reads them back).
    fn compile(&self, c: &ConstraintRequest, layout: JsonLayout) -> Result<Option<Arc<CompiledGrammar>>, BackendError> {
        let vocab = self.vocab().clone();
        let fp = vocab.fingerprint();
        let whitespace = match (c, layout) {
            (ConstraintRequest::ToolCalls { .. }, _) | (_, JsonLayout::Flexible) => Whitespace::default(),
            (_, JsonLayout::Compact) => Whitespace::Compact,
            (_, JsonLayout::Pretty) => Whitespace::Pretty { indent: 2 },
        };
        // `calls`: the most call envelopes in a row (tool calls), else one document.
        let (key, schema, strict, calls) = match c {
            ConstraintRequest::None | ConstraintRequest::TextOrCall { .. } | ConstraintRequest::Custom(_) => return Ok(None),
            ConstraintRequest::Json => (format!("{fp:016x}|json|{whitespace:?}"), None, false, 1),
            ConstraintRequest::Schema { schema, strict } => {
                (format!("{fp:016x}|schema|{strict}|{whitespace:?}|{schema}"), Some(schema.clone()), *strict, 1)
            }
            ConstraintRequest::ToolCalls { call_schema, max_calls } => {
                (format!("{fp:016x}|calls|{max_calls}|{call_schema}"), Some(call_schema.clone()), false, *max_calls)
            }
            ConstraintRequest::OneOf(options) => return self.compile_one_of(options).map(Some),
        };
        let limits = self.limits.clone();
        self.cache
            .get_or_try_insert(key, || {
                // The request's format, with the schema options generation uses (one place:
                // `Format::schema_options`).
                if let (Some(schema), true) = (&schema, calls <= 1) {
                    // One document: compiled lazily (definitions when first reached), from
                    // the request's own copy of the schema.
                    return Format::compile_schema(schema.clone(), strict, None, &vocab, &limits, whitespace)
                        .map_err(|e| BackendError::BadRequest { message: e.to_string(), param: None });
                }
                let format = match schema {
                    None => Format::Json,
                    Some(schema) => Format::JsonSchema { schema: Value::clone(&schema), strict, first_key: None },
                };
                let grammar = format
                    .grammar(&limits, whitespace)
                    .map_err(|e| BackendError::BadRequest { message: e.to_string(), param: None })?
                    .expect("a JSON format has a grammar");
                let grammar = if calls > 1 {
                    one_or_more(&grammar, calls).map_err(|e| BackendError::Internal(format!("building the tool-call grammar: {e}")))?
                } else {
                    grammar
                };
                CompiledGrammar::new(&grammar, vocab.clone(), &limits)
                    .map_err(|e| BackendError::BadRequest { message: format!("the schema's grammar cannot be compiled: {e}"), param: None })
            })
            .map(Some)
    }

    /// The grammar of exactly one of `options`, from the cache.
    fn compile_one_of(&self, options: &[String]) -> Result<Arc<CompiledGrammar>, BackendError> {
        let vocab = self.vocab().clone();
        let key = format!("{:016x}|one-of|{}", vocab.fingerprint(), serde_json::to_string(options).unwrap_or_default());
        let limits = self.limits.clone();
        self.cache.get_or_try_insert(key, || {
            let mut b = GrammarBuilder::new();
            b.define("root", Expr::alt(options.iter().map(|o| Expr::lit(o.as_str()))));
            let grammar = b.build("root").map_err(|e| BackendError::BadRequest { message: format!("the options' grammar cannot be built: {e}"), param: None })?;
            CompiledGrammar::new(&grammar, vocab.clone(), &limits)
                .map_err(|e| BackendError::BadRequest { message: format!("the options' grammar cannot be compiled: {e}"), param: None })
        })
    }

    fn run(
        &mut self,
        job: &Job,
        prompt: &Prompt,
        grammar: Option<&Arc<CompiledGrammar>>,
        reasoning: Option<&Reasoning>,
        on_text: &mut dyn FnMut(Piece<'_>) -> ControlFlow<()>,
    ) -> Result<formwork_engine::Generation, BackendError> {
        // Logprobs: the loop pushes each token's entry to `sink` before its text reaches the
        // callback, which sends them on ahead of the text (`Piece::Logprobs`).
        let sink = job.logprobs.map(|_| formwork_engine::LogprobSink::new());
        let opts = GenerateOptions {
            sampler: sampler(&job.sampling, self.info().context_length),
            num_predict: Some(job.num_predict as usize),
            stop: job.stop.clone(),
            num_ctx: job.num_ctx.map(|n| n as usize),
            force_tokens: true,
            logprobs: job.logprobs.map(|top| formwork_engine::LogprobOptions { top: top as usize, sink: sink.clone() }),
        };
        let format = match &job.constraint {
            ConstraintRequest::Custom(c) => Format::Custom(c.0.clone()),
            _ => grammar.map_or(Format::Text, |g| Format::Compiled(g.clone())),
        };
        let request = Request::new(prompt.clone()).options(opts).format(format).reasoning(reasoning.cloned());
        let mut sequence;
        let model: &mut dyn Model = match &mut self.runner {
            Runner::Single(m) => m.as_mut(),
            Runner::Batched(b) => {
                // Routing by prefix is a hint: a prompt that cannot be tokenized here fails
                // in `generate` with the proper error.
                let hint = b.prompt_tokens(prompt).unwrap_or_default();
                sequence = b.acquire(&hint);
                &mut sequence
            }
        };
        // One entry point, as `formwork run` uses: the format, reasoning and options composed.
        let send_logprobs = |on_text: &mut dyn FnMut(Piece<'_>) -> ControlFlow<()>| match sink.as_ref().map(|s| s.take()) {
            Some(l) if !l.is_empty() => on_text(Piece::Logprobs(&l)),
            _ => ControlFlow::Continue(()),
        };
        let answer = request.run(model, &mut |e| match e {
            Event::Thinking { text, .. } => {
                send_logprobs(on_text)?;
                on_text(Piece::Thinking(text))
            }
            Event::Answer { text, .. } => {
                send_logprobs(on_text)?;
                on_text(Piece::Text(text))
            }
            Event::Checked(_) => ControlFlow::Continue(()),
        });
        // Tokens whose text was held back (a possible stop string) or never shown.
        let _ = send_logprobs(on_text);
        match answer {
            Ok(a) => Ok(a.generation),
            Err(RequestError::Retry(RetryError::Engine(e))) => Err(engine_error(e)),
            Err(e) => Err(BackendError::Internal(e.to_string())),
        }
    }
}

/// `one`'s language up to `most` times in a row, separated by and ending with a little
/// whitespace (a space or newline, at most two): several tool calls in one turn.
fn one_or_more(one: &Grammar, most: u32) -> Result<Grammar, formwork_grammar::IrError> {
    let mut b = GrammarBuilder::new();
    // Defined in the same order, the rules keep their ids, so `one`'s bodies stay valid.
    for r in one.rules() {
        b.define(&r.name, r.expr.clone());
    }
    let item = Expr::Rule(one.root());
    let ws = Expr::repeat(Expr::class([(' ', ' '), ('\n', '\n')], false), 0, Some(2));
    let root = b.fresh_name("tool-calls");
    let more = Expr::repeat(Expr::seq([ws.clone(), item.clone()]), 0, Some(most.saturating_sub(1)));
    b.define(&root, Expr::seq([item, more, ws]));
    b.build(&root)
}

fn engine_error(e: EngineError) -> BackendError {
    match e {
        EngineError::Model(ModelError::ContextOverflow { .. }) | EngineError::EmptyPrompt | EngineError::Template(_) => {
            BackendError::BadRequest { message: e.to_string(), param: Some("messages".into()) }
        }
        EngineError::BudgetTooSmall { budget, needed, context: false } => BackendError::BadRequest {
            message: format!(
                "the requested format needs at least {needed} tokens for its shortest valid output, but the token limit \
                 (num_predict / max_tokens) allows only {budget}; raise it to at least {needed}"
            ),
            param: Some("max_tokens".into()),
        },
        EngineError::BudgetTooSmall { budget, needed, context: true } => BackendError::BadRequest {
            message: format!(
                "the requested format needs at least {needed} tokens for its shortest valid output, but the context has room \
                 for only {budget} after the prompt; shorten the prompt or raise num_ctx"
            ),
            param: Some("messages".into()),
        },
        other => BackendError::Internal(other.to_string()),
    }
}

/// Request sampling over Ollama's defaults.
fn sampler(s: &Sampling, ctx: usize) -> SamplerOptions {
    let d = SamplerOptions::default();
    SamplerOptions {
        temperature: s.temperature.unwrap_or(d.temperature),
        top_k: s.top_k.map_or(d.top_k, |k| usize::try_from(k).unwrap_or(0)),
        top_p: s.top_p.unwrap_or(d.top_p),
        min_p: s.min_p.unwrap_or(d.min_p),
        repeat_penalty: s.repeat_penalty.unwrap_or(d.repeat_penalty),
        repeat_last_n: s.repeat_last_n.map_or(d.repeat_last_n, |n| usize::try_from(n).unwrap_or(ctx)),
        presence_penalty: s.presence_penalty.unwrap_or(d.presence_penalty),
        frequency_penalty: s.frequency_penalty.unwrap_or(d.frequency_penalty),
        seed: s.seed,
    }
}

fn engine_prompt(p: &PromptSpec) -> Prompt {
    match p {
        PromptSpec::Raw(s) => Prompt::Raw(s.clone()),
        PromptSpec::Chat { messages, tools } => Prompt::Chat {
            messages: messages.clone(),
            tools: (!tools.is_empty()).then(|| tools_json(tools)),
        },
    }
}

fn tools_json(tools: &[ToolDef]) -> Value {
    Value::Array(
        tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}})
            })
            .collect(),
    )
}

fn outcome(g: formwork_engine::Generation, text: String) -> Outcome {
    Outcome {
        text,
        thinking: g.thinking.clone(),
        done_reason: if g.done_reason == StopReason::Length { DoneReason::Length } else { DoneReason::Stop },
        prompt_tokens: g.prompt_tokens as u32,
        eval_tokens: g.eval_tokens as u32,
        prompt_eval_duration: g.prompt_eval_duration,
        eval_duration: g.eval_duration,
        // Asked for and none generated reads as `None` too: handlers know what they asked.
        logprobs: (!g.logprobs.is_empty()).then(|| g.logprobs.clone()),
    }
}

/// Checks finished constrained output.
fn validate(c: &ConstraintRequest, text: &str) -> Result<(), BackendError> {
    match c {
        ConstraintRequest::Json => serde_json::from_str::<Value>(text)
            .map(|_| ())
            .map_err(|e| BackendError::Internal(format!("constrained output is not JSON ({e}); please report this"))),
        ConstraintRequest::Schema { schema, .. } => formwork_schema::validate(schema, text).map_err(|errs| {
            BackendError::Internal(format!("constrained output failed schema validation: {}; please report this", errs.join("; ")))
        }),
        ConstraintRequest::ToolCalls { call_schema, max_calls } => {
            let mut n = 0;
            for call in serde_json::Deserializer::from_str(text).into_iter::<Value>() {
                let call = call.map_err(|e| BackendError::Internal(format!("constrained tool calls are not JSON ({e}); please report this")))?;
                n += 1;
                formwork_schema::validate(call_schema, &call.to_string()).map_err(|errs| {
                    BackendError::Internal(format!("a constrained tool call failed schema validation: {}; please report this", errs.join("; ")))
                })?;
            }
            if n == 0 || n > *max_calls {
                return Err(BackendError::Internal(format!("{n} tool calls where 1 to {max_calls} were allowed; please report this")));
            }
            Ok(())
        }
        ConstraintRequest::OneOf(options) => {
            if options.iter().any(|o| o == text) {
                Ok(())
            } else {
                Err(BackendError::Internal(format!("the answer {text:?} is none of the options; please report this")))
            }
        }
        // A custom constraint's output is what it allowed; its caller checks the rest.
        ConstraintRequest::None | ConstraintRequest::TextOrCall { .. } | ConstraintRequest::Custom(_) => Ok(()),
    }
}

impl Backend for EngineBackend {
    /// The model's embedder: a single model's own, or the batched model's (shared by its
    /// slots; it evaluates in a context of its own, beside the batch).
    fn embedder(&self) -> Option<Arc<dyn formwork_model::embed::Embed>> {
        match &self.runner {
            Runner::Single(m) => m.embedder(),
            Runner::Batched(b) => b.embedder(),
        }
    }

    fn batcher(&self) -> Option<Batcher> {
        match &self.runner {
            Runner::Single(_) => None,
            Runner::Batched(b) => Some(b.clone()),
        }
    }

    fn generate(&mut self, job: &Job, on_text: &mut dyn FnMut(Piece<'_>) -> ControlFlow<()>) -> Result<Outcome, BackendError> {
        let mut prompt = engine_prompt(&job.prompt);
        if let Some(placement) = job.schema_in_prompt {
            match &job.constraint {
                ConstraintRequest::Json => {
                    formwork_engine::add_schema_instruction(&mut prompt, None, placement);
                }
                ConstraintRequest::Schema { schema, .. } => {
                    formwork_engine::add_schema_instruction(&mut prompt, Some(schema), placement);
                }
                ConstraintRequest::None
                | ConstraintRequest::TextOrCall { .. }
                | ConstraintRequest::ToolCalls { .. }
                | ConstraintRequest::OneOf(_)
                | ConstraintRequest::Custom(_) => {}
            }
        }
        let offers_tools = matches!(&job.prompt, PromptSpec::Chat { tools, .. } if !tools.is_empty());
        match &job.constraint {
            ConstraintRequest::TextOrCall { call_schema, max_calls } | ConstraintRequest::ToolCalls { call_schema, max_calls }
                if offers_tools && self.tools_in_system =>
            {
                let text = matches!(job.constraint, ConstraintRequest::TextOrCall { .. });
                return self.envelope(job, &prompt, call_schema.clone(), *max_calls, text, on_text);
            }
            ConstraintRequest::TextOrCall { call_schema, max_calls } => {
                return self.text_or_call(job, &prompt, call_schema.clone(), *max_calls, on_text);
            }
            _ => {}
        }
        let grammar = self.compile(&job.constraint, job.whitespace)?;
        let reasoning = self.reasoning_for(job, None);
        let g = self.run(job, &prompt, grammar.as_ref(), reasoning.as_ref(), on_text)?;
        // For a reasoning model `text` is the answer: validation applies to it alone.
        let text = g.text.clone();
        if g.done_reason == StopReason::Stop {
            validate(&job.constraint, &text)?;
        }
        Ok(outcome(g, text))
    }
}

impl EngineBackend {
    /// Tools on a model whose template cannot show them: the reply is generated as an
    /// envelope (calls, or with `text` an answer; see [`tools::envelope`]) and handed on as
    /// the answer's text or the calls one per line, as it is generated.
    fn envelope(
        &mut self,
        job: &Job,
        prompt: &Prompt,
        call_schema: Arc<Value>,
        max_calls: u32,
        text: bool,
        on_text: &mut dyn FnMut(Piece<'_>) -> ControlFlow<()>,
    ) -> Result<Outcome, BackendError> {
        let schema = Arc::new(tools::envelope::envelope_schema(&call_schema, max_calls, text));
        let constraint = ConstraintRequest::Schema { schema, strict: false };
        // Pretty: every whitespace token is forced, so the token after `{\n  "` is the choice
        // itself, not a run of whitespace the model may wander into first (flexible), and the
        // model keeps the `": "` it writes JSON with (compact takes it away, which cost
        // accuracy in `bench extract`).
        let grammar = self.compile(&constraint, JsonLayout::Pretty)?;
        if text {
            // A token limit with no room for even `{"response": ""}` is not the client's
            // error: the envelope is formwork's device. The reply is then free text, as for a
            // model that calls natively (a call only if it starts like one).
            let needed = grammar.as_ref().and_then(|g| g.matcher().completion_tokens()).map_or(0, |t| t.len());
            if (job.num_predict as usize) < needed {
                return self.text_or_call(job, prompt, call_schema, max_calls, on_text);
            }
        }
        let reasoning = self.reasoning_for(job, None);
        let mut reader = tools::envelope::EnvelopeReader::new();
        let g = self.run(job, prompt, grammar.as_ref(), reasoning.as_ref(), &mut |p| match p {
            Piece::Text(t) => {
                let plain = reader.push(t);
                if !plain.is_empty() {
                    on_text(Piece::Text(&plain))?;
                }
                if reader.repeated() {
                    return ControlFlow::Break(());
                }
                ControlFlow::Continue(())
            }
            other => on_text(other),
        })?;
        if reader.repeated() {
            // Stopped at a repeated call: the calls before it are the answer, each checked.
            tracing::debug!("a tool call repeated an earlier one of the turn; the calls end before it");
            let calls = ConstraintRequest::ToolCalls { call_schema, max_calls };
            validate(&calls, reader.output())?;
            let mut o = outcome(g, reader.output().to_string());
            o.done_reason = DoneReason::Stop;
            return Ok(o);
        }
        if g.done_reason == StopReason::Stop {
            validate(&constraint, &g.text)?;
        }
        tracing::debug!(calls = reader.is_calls(), "read the reply's envelope");
        Ok(outcome(g, reader.output().to_string()))
    }

    /// `tool_choice: auto`: generate freely; as soon as the output starts like a call
    /// ([`tools::detect::starts_call`]), stop and generate the calls again under the call
    /// grammar, so calls are always well formed and their arguments match the functions'
    /// parameters. A reasoning model's reasoning streams as it comes; the calls are generated
    /// after the same reasoning (written into the prompt), not after a new one.
    fn text_or_call(
        &mut self,
        job: &Job,
        prompt: &Prompt,
        call_schema: Arc<Value>,
        max_calls: u32,
        on_text: &mut dyn FnMut(Piece<'_>) -> ControlFlow<()>,
    ) -> Result<Outcome, BackendError> {
        let started = Instant::now();
        let mut seen = String::new();
        let mut wants_call = false;
        let reasoning = self.reasoning_for(job, None);
        let g = {
            let mut cb = |p: Piece<'_>| {
                let t = match p {
                    Piece::Thinking(_) | Piece::Logprobs(_) => return on_text(p),
                    Piece::Text(t) => t,
                };
                seen.push_str(t);
                if tools::detect::starts_call(&seen) == Some(true) {
                    wants_call = true;
                    return ControlFlow::Break(());
                }
                on_text(p)
            };
            self.run(job, prompt, None, reasoning.as_ref(), &mut cb)?
        };
        if !wants_call {
            return Ok(outcome(g, seen));
        }
        tracing::debug!("model chose a tool call after {:?}; generating it constrained", started.elapsed());
        let constraint = ConstraintRequest::ToolCalls { call_schema, max_calls };
        let grammar = self.compile(&constraint, JsonLayout::Flexible)?;
        let reasoning = g.thinking.clone().and_then(|t| self.reasoning_for(job, Some(t)));
        let g2 = self.run(job, prompt, grammar.as_ref(), reasoning.as_ref(), &mut |_| ControlFlow::Continue(()))?;
        let text = g2.text.clone();
        if g2.done_reason == StopReason::Stop {
            validate(&constraint, &text)?;
        }
        let mut o = outcome(g2, text);
        o.eval_tokens += g.eval_tokens as u32;
        o.eval_duration += g.eval_duration;
        Ok(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cached_grammar_nearly_out_of_states_is_compiled_afresh() {
        let vocab = Arc::new(formwork_engine::testing::ScriptedModel::new(&["a"], &["</s>"]).vocab().as_ref().clone());
        let mut b = GrammarBuilder::new();
        b.define("root", Expr::repeat(Expr::lit("a"), 0, Some(500)));
        let g = b.build("root").unwrap();
        let limits = Limits { max_states: 50, ..Limits::default() };
        let cache = ConstraintCache::new(4);
        let compile = || CompiledGrammar::new(&g, vocab.clone(), &limits);
        let first = cache.get_or_try_insert("k".into(), compile).unwrap();
        assert!(Arc::ptr_eq(&first, &cache.get_or_try_insert("k".into(), compile).unwrap()));
        let mut m = first.matcher();
        while !first.is_nearly_full() {
            m.commit_bytes(b"a").unwrap();
        }
        let fresh = cache.get_or_try_insert("k".into(), compile).unwrap();
        assert!(!Arc::ptr_eq(&first, &fresh));
        assert_eq!(cache.stats(), (1, 2));
        assert!(Arc::ptr_eq(&fresh, &cache.get_or_try_insert("k".into(), compile).unwrap()));
    }
}
