//! One entry point: a [`Request`] says what to generate from, in what format, with or
//! without reasoning, validated or not, and [`Request::run`] does all of it on any
//! [`Model`] (one loaded model, or a [`crate::batch::Sequence`] of a batched one).
//!
//! The pieces it composes exist on their own ([`crate::generate`],
//! [`crate::reasoning::generate_with_reasoning`], [`crate::retry::generate_validated`]);
//! the request is the one place that combines them, so that every combination works:
//! reasoning with retries reasons on each attempt, a schema is compiled with the options
//! generation needs ([`Format::schema_options`]: canonical integers), the schema goes in the
//! prompt when asked, and forced tokens are on.
//!
//! Constraining a model to a schema (here a scripted fake; a loaded
//! `formwork_llama::LlamaModel` works the same):
//!
//! ```
//! use formwork_engine::{request::{Format, Request}, Prompt};
//! # let mut model = formwork_engine::testing::ScriptedModel::new(&["user", "assistant", "\n", "Pick", " a number.", "{", "}", "\"n\"", ":", "1", "2"], &["<|im_end|>", "<|im_start|>"]);
//! # model.script_text("{\"n\":1}");
//! let schema = serde_json::json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
//! let answer = Request::new(Prompt::user("Pick a number.")).format(Format::schema(schema)).retries(2).answer(&mut model)?;
//! assert_eq!((answer.text.as_str(), answer.valid), ("{\"n\":1}", Some(true)));
//! # Ok::<(), formwork_engine::request::RequestError>(())
//! ```
//!
//! Streaming, sampling and reasoning are options of the same request:
//!
//! ```
//! use formwork_engine::request::{Event, Format, Request};
//! use formwork_engine::{Prompt, SamplerOptions};
//! use std::ops::ControlFlow;
//! # let mut model = formwork_engine::testing::ScriptedModel::new(&["user", "assistant", "\n", "Pick", " a number.", "{", "}", "\"n\"", ":", "1", "2"], &["<|im_end|>", "<|im_start|>"]);
//! # model.script_text("{\"n\":1}");
//! let schema = serde_json::json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
//! let request = Request::new(Prompt::user("Pick a number.")).format(Format::schema(schema)).sampler(SamplerOptions::greedy());
//! let answer = request.run(&mut model, &mut |e| {
//!     if let Event::Answer { text, .. } = e { print!("{text}") }
//!     ControlFlow::Continue(())
//! })?;
//! assert_eq!(answer.text, "{\"n\":1}");
//! # Ok::<(), formwork_engine::request::RequestError>(())
//! ```

use crate::constraint::{Constraint, ConstraintFactory, GrammarConstraint};
use crate::generate::{GenerateOptions, Generation, Prompt};
use crate::instruct::{add_schema_instruction, SchemaPlacement};
use crate::model::Model;
use crate::reasoning::{attempt, Piece, Reasoning};
use crate::retry::{validated, Attempt, RetryError, RetryMode, Validation, Validator};
use formwork_grammar::{CompiledGrammar, Grammar, Limits};
pub use formwork_schema::Whitespace;
use formwork_sampler::SamplerOptions;
use formwork_vocab::Vocabulary;
use serde_json::Value;
use std::ops::ControlFlow;
use std::sync::Arc;

/// What the answer must be.
#[derive(Clone, Debug, Default)]
pub enum Format {
    /// Free text.
    #[default]
    Text,
    /// Any JSON object (the built-in JSON grammar).
    Json,
    /// JSON valid against a JSON Schema.
    JsonSchema {
        /// The schema.
        schema: Value,
        /// OpenAI's strict mode: every listed property required, no others.
        strict: bool,
        /// Objects at the root start with this key (tool calls: `name`).
        first_key: Option<String>,
    },
    /// A GBNF grammar (llama.cpp's format), as text.
    Gbnf(String),
    /// A grammar already compiled for the model's vocabulary (a server's cache).
    Compiled(Arc<CompiledGrammar>),
    /// Any other constraint, made fresh for each generation (the SQL of a database:
    /// `formwork-sql`).
    Custom(Arc<dyn ConstraintFactory>),
}

/// Why a [`Format`] cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// The JSON Schema is invalid, or uses a keyword that cannot be enforced.
    #[error("invalid or unsupported JSON Schema: {0}")]
    Schema(#[from] formwork_schema::SchemaError),
    /// The GBNF text does not parse.
    #[error("invalid GBNF grammar: {0}")]
    Gbnf(#[from] formwork_grammar::gbnf::GbnfError),
    /// The grammar cannot be compiled (too large, left-recursive, matches nothing...).
    #[error("the grammar cannot be compiled: {0}")]
    Compile(#[from] formwork_grammar::CompileError),
    /// A [`Format::Custom`] constraint cannot be made for this model.
    #[error("{0}")]
    Custom(String),
}

impl Format {
    /// The schema options generation uses: canonical integers (`3`, never `3.0`), no
    /// whitespace around the root value, plus the
    /// request's strict mode, first key, whitespace style and limits. The one place they
    /// are chosen.
    pub fn schema_options(strict: bool, first_key: Option<&str>, whitespace: Whitespace, limits: &Limits) -> formwork_schema::SchemaOptions {
        formwork_schema::SchemaOptions {
            strict,
            force_first_key: first_key.map(str::to_string),
            whitespace,
            root_whitespace: false,
            limits: limits.clone(),
            canonical_integers: true,
            ..Default::default()
        }
    }

    /// The grammar of this format (`None` for free text, an already compiled grammar and a
    /// custom constraint), JSON laid out in `whitespace`.
    pub fn grammar(&self, limits: &Limits, whitespace: Whitespace) -> Result<Option<Grammar>, FormatError> {
        Ok(match self {
            Format::Text | Format::Compiled(_) | Format::Custom(_) => None,
            Format::Json if whitespace == Whitespace::default() => {
                // The answer ends at its closing brace, as a schema's does (`root_whitespace`).
                let opts = formwork_grammar::json::JsonGrammarOptions { trailing_whitespace: false, ..Default::default() };
                Some(formwork_grammar::json::grammar(&opts))
            }
            // The built-in grammar is flexible; other layouts come from the schema compiler.
            Format::Json => Some(formwork_schema::compile(&serde_json::json!({"type": "object"}), &Self::schema_options(false, None, whitespace, limits))?),
            Format::JsonSchema { schema, strict, first_key } => {
                Some(formwork_schema::compile(schema, &Self::schema_options(*strict, first_key.as_deref(), whitespace, limits))?)
            }
            Format::Gbnf(text) => Some(formwork_grammar::gbnf::parse(text, limits)?),
        })
    }

    /// What [`compile`](Self::compile) makes of a `JsonSchema` format, for a schema the
    /// caller shares: the lazy grammar keeps this document rather than a copy of it (the
    /// server holds request schemas as `Arc`s; a large schema's copy was 6 % of its compile).
    pub fn compile_schema(
        schema: Arc<serde_json::Value>,
        strict: bool,
        first_key: Option<&str>,
        vocab: &Arc<Vocabulary>,
        limits: &Limits,
        whitespace: Whitespace,
    ) -> Result<Arc<CompiledGrammar>, FormatError> {
        let (lazy, _) = formwork_schema::compile_lazy_shared(schema, &Self::schema_options(strict, first_key, whitespace, limits))?;
        let index = formwork_grammar::TokenIndex::for_vocab(vocab);
        Ok(CompiledGrammar::lazy(lazy, index, limits)?)
    }

    /// The grammar compiled for `vocab` (`None` for free text and a custom constraint). A
    /// schema compiles lazily: refusals and warnings now, the locations the output does not
    /// reach never ([`formwork_schema::compile_lazy`]).
    pub fn compile(&self, vocab: &Arc<Vocabulary>, limits: &Limits, whitespace: Whitespace) -> Result<Option<Arc<CompiledGrammar>>, FormatError> {
        if let Format::Compiled(c) = self {
            return Ok(Some(c.clone()));
        }
        if let Format::JsonSchema { schema, strict, first_key } = self {
            return Self::compile_schema(Arc::new(schema.clone()), *strict, first_key.as_deref(), vocab, limits, whitespace).map(Some);
        }
        match self.grammar(limits, whitespace)? {
            Some(g) => Ok(Some(CompiledGrammar::new(&g, vocab.clone(), limits)?)),
            None => Ok(None),
        }
    }

    /// JSON valid against `schema` (not strict, no key forced first).
    pub fn schema(schema: Value) -> Self {
        Format::JsonSchema { schema, strict: false, first_key: None }
    }

    /// The JSON the answer must be: the schema, `{"type": "object"}` for [`Format::Json`],
    /// `None` for text and grammars (what a validator checks and the prompt may show).
    pub fn json_schema(&self) -> Option<Value> {
        match self {
            Format::Json => Some(serde_json::json!({"type": "object"})),
            Format::JsonSchema { schema, .. } => Some(schema.clone()),
            _ => None,
        }
    }
}

/// What [`Request::run`] streams.
#[derive(Debug)]
pub enum Event<'a> {
    /// Reasoning text of attempt `attempt` (1-based).
    Thinking {
        /// The attempt.
        attempt: usize,
        /// The text.
        text: &'a str,
    },
    /// Answer text of attempt `attempt` (1-based). Without validation there is one attempt.
    Answer {
        /// The attempt.
        attempt: usize,
        /// The text.
        text: &'a str,
    },
    /// An attempt was validated (only with validation).
    Checked(&'a Attempt),
}

/// The result of [`Request::run`].
#[derive(Clone, Debug)]
pub struct Answer {
    /// The last attempt's generation (`thinking` holds its reasoning).
    pub generation: Generation,
    /// The final answer: the repaired JSON when repair was asked, else the generated text.
    pub text: String,
    /// `None` without validation; else whether the final answer passed every validator.
    pub valid: Option<bool>,
    /// Every attempt, in order (empty without validation).
    pub attempts: Vec<Attempt>,
    /// The grammar matcher's counters (with a format, without validation).
    pub matcher: Option<formwork_grammar::MatchStats>,
}

/// Failures of a [`Request`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// The format cannot be used.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// Generation or a validator failed.
    #[error(transparent)]
    Retry(#[from] RetryError),
}

impl From<crate::EngineError> for RequestError {
    fn from(e: crate::EngineError) -> Self {
        RequestError::Retry(RetryError::Engine(e))
    }
}

/// A generation request: prompt, format, options, reasoning and validation (see the module
/// docs). Built with the methods below; [`Request::run`] executes it.
#[derive(Debug)]
pub struct Request {
    prompt: Prompt,
    options: GenerateOptions,
    format: Format,
    schema_in_prompt: Option<SchemaPlacement>,
    reasoning: Option<Reasoning>,
    validation: Option<Validation>,
    validate_format: bool,
    limits: Limits,
    whitespace: Whitespace,
    /// The format's grammar, built by [`Request::prepare`] (vocabulary-independent).
    grammar: Option<Grammar>,
    /// A schema's lazy grammar, made by [`Request::prepare`] and taken by the first
    /// [`Request::compile`] (so a prepared schema compiles once, not twice; a later compile
    /// makes its own).
    lazy: std::sync::Mutex<Option<formwork_grammar::LazyGrammar>>,
}

impl Request {
    /// A request for `prompt`: free text, default sampling, forced tokens on, no reasoning,
    /// no validation.
    pub fn new(prompt: Prompt) -> Self {
        Request {
            prompt,
            options: GenerateOptions { force_tokens: true, ..Default::default() },
            format: Format::Text,
            schema_in_prompt: None,
            reasoning: None,
            validation: None,
            validate_format: true,
            limits: Limits::default(),
            whitespace: Whitespace::default(),
            grammar: None,
            lazy: std::sync::Mutex::new(None),
        }
    }

    /// The answer's format.
    pub fn format(mut self, format: Format) -> Self {
        self.format = format;
        self
    }

    /// All generation options at once (sampler, `num_predict`, stop strings, `num_ctx`,
    /// forced tokens).
    pub fn options(mut self, options: GenerateOptions) -> Self {
        self.options = options;
        self
    }

    /// The sampler's options.
    pub fn sampler(mut self, sampler: SamplerOptions) -> Self {
        self.options.sampler = sampler;
        self
    }

    /// At most `n` generated tokens.
    pub fn num_predict(mut self, n: usize) -> Self {
        self.options.num_predict = Some(n);
        self
    }

    /// Show the model the schema ([`Format::json_schema`]) in the prompt, placed so.
    pub fn schema_in_prompt(mut self, placement: SchemaPlacement) -> Self {
        self.schema_in_prompt = Some(placement);
        self
    }

    /// Reason first, then answer (the format constrains the answer only); `None`: off.
    pub fn reasoning(mut self, reasoning: Option<Reasoning>) -> Self {
        self.reasoning = reasoning;
        self
    }

    /// Validate each answer and retry up to `retries` more times; the format's schema is a
    /// validator (see [`Request::validate_format`]).
    pub fn retries(mut self, retries: usize) -> Self {
        self.validation.get_or_insert_with(Validation::default).retries = retries;
        self
    }

    /// Validate with these validators and settings (the format's schema is added to them
    /// unless [`Request::validate_format`] turned that off).
    pub fn validation(mut self, validation: Validation) -> Self {
        self.validation = Some(validation);
        self
    }

    /// Whether the format's schema is one of the validators (default true).
    pub fn validate_format(mut self, on: bool) -> Self {
        self.validate_format = on;
        self
    }

    /// What a retry sees (with validation).
    pub fn retry_mode(mut self, mode: RetryMode) -> Self {
        self.validation.get_or_insert_with(Validation::default).mode = mode;
        self
    }

    /// How JSON answers are laid out (flexible by default; see [`Whitespace`]).
    pub fn whitespace(mut self, whitespace: Whitespace) -> Self {
        self.whitespace = whitespace;
        self
    }

    /// Bounds on compiling the format.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The prompt as it will be sent (with the schema instruction, when asked for).
    pub fn prompt(&self) -> Prompt {
        let mut prompt = self.prompt.clone();
        if let (Some(placement), Some(schema)) = (self.schema_in_prompt, self.format.json_schema()) {
            let shown = matches!(self.format, Format::JsonSchema { .. }).then_some(&schema);
            add_schema_instruction(&mut prompt, shown, placement);
        }
        prompt
    }

    /// Builds the format's grammar now (a schema or GBNF that is invalid fails here, before
    /// a model is loaded); [`Request::run`] then only compiles it for the model's vocabulary.
    /// A schema is only checked here (its refusals come up front either way), and compiled
    /// lazily for the vocabulary (see [`Format::compile`]).
    pub fn prepare(mut self) -> Result<Self, FormatError> {
        if let Format::JsonSchema { schema, strict, first_key } = &self.format {
            let (lazy, _) = formwork_schema::compile_lazy(schema, &Format::schema_options(*strict, first_key.as_deref(), self.whitespace, &self.limits))?;
            *self.lazy.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(lazy);
            return Ok(self);
        }
        self.grammar = self.format.grammar(&self.limits, self.whitespace)?;
        Ok(self)
    }

    /// Compiles the format for `vocab` (`None` for free text).
    pub fn compile(&self, vocab: &Arc<Vocabulary>) -> Result<Option<Arc<CompiledGrammar>>, FormatError> {
        let prepared = self.lazy.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        if let Some(lazy) = prepared {
            let index = formwork_grammar::TokenIndex::for_vocab(vocab);
            return Ok(Some(CompiledGrammar::lazy(lazy, index, &self.limits)?));
        }
        match &self.grammar {
            Some(g) => Ok(Some(CompiledGrammar::new(g, vocab.clone(), &self.limits)?)),
            None => self.format.compile(vocab, &self.limits, self.whitespace),
        }
    }

    /// Runs the request on `model` and returns the answer (no streaming: [`Request::run`]
    /// with a callback that lets everything through).
    pub fn answer(self, model: &mut dyn Model) -> Result<Answer, RequestError> {
        self.run(model, &mut |_| ControlFlow::Continue(()))
    }

    /// Runs the request on `model`, streaming [`Event`]s to `on_event` (returning `Break`
    /// cancels: the generation stops and is not retried).
    pub fn run(self, model: &mut dyn Model, on_event: &mut dyn FnMut(Event<'_>) -> ControlFlow<()>) -> Result<Answer, RequestError> {
        let compiled = self.compile(model.vocab())?;
        let prompt = self.prompt();
        let Request { options, format, reasoning, validation, validate_format, .. } = self;
        let reasoning = reasoning.as_ref();
        let custom = match &format {
            Format::Custom(factory) => Some(factory.clone()),
            _ => None,
        };
        let vocab = model.vocab().clone();
        let Some(mut validation) = validation else {
            let (generation, matcher) = if let Some(factory) = &custom {
                let mut c = factory.make(&vocab).map_err(FormatError::Custom)?;
                (attempt(model, &prompt, &options, reasoning, Some(c.as_mut()), &mut |p| on_event(event(1, p)))?, None)
            } else {
                let mut constraint = compiled.as_ref().map(GrammarConstraint::new);
                let c = constraint.as_mut().map(|c| c as &mut dyn Constraint);
                let generation = attempt(model, &prompt, &options, reasoning, c, &mut |p| on_event(event(1, p)))?;
                (generation, constraint.map(|c| c.matcher().stats()))
            };
            return Ok(Answer { text: generation.text.clone(), generation, valid: None, attempts: Vec::new(), matcher });
        };
        if let Some(factory) = &custom {
            factory.make(&vocab).map_err(FormatError::Custom)?; // fail before the first attempt
        }
        // A fresh constraint per attempt (their matcher counters are not kept).
        let mut make = || match &custom {
            Some(factory) => factory.make(&vocab).ok(),
            None => compiled.as_ref().map(|c| Box::new(GrammarConstraint::new(c)) as Box<dyn Constraint>),
        };
        if validate_format {
            if let Some(schema) = format.json_schema() {
                validation.validators.insert(0, Validator::Schema(schema));
            }
        }
        // Both callbacks stream to `on_event`; they are never called one inside the other.
        let on_event = std::cell::RefCell::new(on_event);
        let v = validated(
            model,
            &prompt,
            &options,
            reasoning,
            &mut make,
            &mut validation,
            &mut |n, p| (on_event.borrow_mut())(event(n, p)),
            &mut |a| {
                let _ = (on_event.borrow_mut())(Event::Checked(a));
            },
        )?;
        Ok(Answer { generation: v.generation, text: v.text, valid: Some(v.valid), attempts: v.attempts, matcher: None })
    }
}

fn event(attempt: usize, p: Piece<'_>) -> Event<'_> {
    match p {
        Piece::Thinking(text) => Event::Thinking { attempt, text },
        Piece::Answer(text) => Event::Answer { attempt, text },
    }
}
