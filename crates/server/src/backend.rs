//! The seam between the HTTP layer and a model: [`Backend`], the [`Job`] it runs and the
//! [`Outcome`] it returns.
//!
//! Handlers translate Ollama and OpenAI requests into one [`Job`]; a model's worker thread
//! (see [`crate::worker`]) hands jobs to its [`Backend`] one at a time. The real backend
//! runs `formwork_engine` over a loaded model, compiling (and caching) the job's
//! [`ConstraintRequest`]; tests use the fakes in `crate::testing` (feature `testing`).
//!
//! ## Whose types
//! What a conversation is made of is the engine's: [`ChatMessage`], [`ToolCall`], [`Think`]
//! and [`SchemaPlacement`] are `formwork_engine`'s own, built by the handlers and handed on
//! unchanged. What is declared here is what only the HTTP side has: a [`Job`] carries a
//! deadline, a context size and sampling as the request gave it ([`Sampling`]: `None` is the
//! default, resolved by the backend), tools as parsed definitions ([`ToolDef`]) and the
//! API-level [`ConstraintRequest`]; an [`Outcome`] ends with one of the two reasons both APIs
//! know ([`DoneReason`]); a streamed [`Piece`] may carry log-probabilities.

pub use formwork_model::logprob::{TokenLogprob, TopLogprob};
/// Messages, tool calls, reasoning and the schema instruction's place are the engine's own
/// types: handlers build them, the engine backend hands them on unchanged.
pub use formwork_engine::{reasoning::Think, ChatMessage, SchemaPlacement, ToolCall};
use formwork_model::embed::{normalize, Embed};
use formwork_model::{ModelError, TokenId};
use serde_json::Value;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A function the model may call.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolDef {
    /// The function name.
    pub name: String,
    /// What it does (shown to the model).
    pub description: Option<String>,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
}

/// What the model is prompted with.
#[derive(Clone, Debug, PartialEq)]
pub enum PromptSpec {
    /// A conversation, rendered with the model's chat template; `tools` are offered in it.
    Chat {
        /// The messages, in order.
        messages: Vec<ChatMessage>,
        /// Functions offered to the model.
        tools: Vec<ToolDef>,
    },
    /// Text given to the model as is (no template).
    Raw(String),
}

/// What the output must match.
#[derive(Clone, Debug, PartialEq)]
pub enum ConstraintRequest {
    /// Free text.
    None,
    /// Any JSON value (`format: "json"`, `json_object`).
    Json,
    /// A JSON Schema (`format: {...}`, `json_schema`, tool calls). `strict` follows OpenAI:
    /// objects admit no properties beyond those listed.
    Schema {
        /// The schema.
        schema: Arc<Value>,
        /// OpenAI strict mode.
        strict: bool,
    },
    /// `tool_choice` `required` or a named function: one to `max_calls` call envelopes, each
    /// matching `call_schema` (see [`crate::tools::call_schema`]), separated by whitespace.
    ToolCalls {
        /// Schema of one call envelope.
        call_schema: Arc<Value>,
        /// Most calls (1 without parallel calls).
        max_calls: u32,
    },
    /// `tool_choice: auto`: free text, or calls as in [`ConstraintRequest::ToolCalls`],
    /// written as `<tool_call>{...}</tool_call>` sections or as bare JSON objects. Backends
    /// that cannot constrain the call part generate freely; the server then treats only
    /// well-formed calls as calls.
    TextOrCall {
        /// Schema of one call envelope.
        call_schema: Arc<Value>,
        /// Most calls (1 without parallel calls).
        max_calls: u32,
    },
    /// Exactly one of these strings (the option letters of `POST /v1/systemone`): a
    /// grammar of their alternation, so the first token's masked distribution is spread
    /// over the options only.
    OneOf(Arc<[String]>),
    /// Another constraint, made fresh for the job (a configured database's SQL,
    /// `POST /api/sql`). Backends that cannot run it generate freely.
    #[cfg(feature = "engine")]
    Custom(CustomConstraint),
}

/// A [`formwork_engine::ConstraintFactory`] in a [`ConstraintRequest`]; two are equal when
/// they are the same factory.
#[cfg(feature = "engine")]
#[derive(Clone, Debug)]
pub struct CustomConstraint(pub Arc<dyn formwork_engine::ConstraintFactory>);

#[cfg(feature = "engine")]
impl PartialEq for CustomConstraint {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Sampling settings; `None` is the sampler's default.
#[derive(Clone, Debug, Default, PartialEq)]
#[allow(missing_docs)]
pub struct Sampling {
    pub temperature: Option<f32>,
    pub top_k: Option<i32>,
    pub top_p: Option<f32>,
    pub min_p: Option<f32>,
    pub seed: Option<u64>,
    pub repeat_penalty: Option<f32>,
    pub repeat_last_n: Option<i32>,
    pub presence_penalty: Option<f32>,
    pub frequency_penalty: Option<f32>,
}

/// One generation request, ready for a backend.
#[derive(Clone, Debug)]
pub struct Job {
    /// The prompt.
    pub prompt: PromptSpec,
    /// The output constraint.
    pub constraint: ConstraintRequest,
    /// Sampling.
    pub sampling: Sampling,
    /// Most tokens to generate (already clamped to the server's limit).
    pub num_predict: u32,
    /// Stop strings (not included in the output).
    pub stop: Vec<String>,
    /// Context length asked for (`num_ctx`); backends may ignore it.
    pub num_ctx: Option<u32>,
    /// When the request's wall-time budget runs out.
    pub deadline: Instant,
    /// Reasoning, for models that have a reasoning section: `None` is the model's default
    /// (on for chats, off for raw prompts).
    pub think: Option<Think>,
    /// Show the model the schema (or "reply with JSON") in the prompt; `None`: don't.
    /// Only `Json` and `Schema` constraints have something to show.
    pub schema_in_prompt: Option<SchemaPlacement>,
    /// Per-token log-probabilities: `None` off (nothing is computed); `Some(n)`: each
    /// generated token's logprob and the `n` most likely tokens of its step, under the
    /// masked distribution (see `formwork_engine::GenerateOptions::logprobs`), streamed as
    /// [`Piece::Logprobs`] and returned in [`Outcome::logprobs`].
    pub logprobs: Option<u8>,
    /// How JSON answers are laid out (the `whitespace` request field).
    pub whitespace: JsonLayout,
}

/// How a JSON answer is laid out (the `whitespace` request field, a formwork extension).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum JsonLayout {
    /// Whitespace between tokens as the model likes, in bounded runs.
    #[default]
    Flexible,
    /// No whitespace at all.
    Compact,
    /// One canonical indentation (two spaces): every whitespace token is forced.
    Pretty,
}

impl JsonLayout {
    /// The layout spelled `flexible`, `compact` or `pretty`.
    pub fn from_name(name: &str) -> Option<JsonLayout> {
        match name {
            "flexible" => Some(JsonLayout::Flexible),
            "compact" => Some(JsonLayout::Compact),
            "pretty" => Some(JsonLayout::Pretty),
            _ => None,
        }
    }
}

/// A piece of streamed output.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Piece<'a> {
    /// Reasoning text (Ollama `message.thinking`, OpenAI `reasoning_content`).
    Thinking(&'a str),
    /// Answer text.
    Text(&'a str),
    /// Log-probabilities of tokens just chosen (only when [`Job::logprobs`] asked), sent
    /// before the text piece that carries (the start of) their text.
    Logprobs(&'a [TokenLogprob]),
}

/// Why generation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DoneReason {
    /// End of turn, a stop string, or the constraint's end.
    Stop,
    /// The token budget (`num_predict` / `max_tokens`) was reached.
    Length,
}

/// The result of a finished job.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The generated text (stop string excluded); for a reasoning model the answer only.
    pub text: String,
    /// The reasoning, without its markers, when the model reasoned.
    pub thinking: Option<String>,
    /// Why it ended.
    pub done_reason: DoneReason,
    /// Tokens in the prompt.
    pub prompt_tokens: u32,
    /// Tokens generated.
    pub eval_tokens: u32,
    /// Time to evaluate the prompt.
    pub prompt_eval_duration: Duration,
    /// Time to generate.
    pub eval_duration: Duration,
    /// Every generated token's log-probability, in order, when [`Job::logprobs`] asked
    /// (the same entries the stream's [`Piece::Logprobs`] carried); else `None`.
    pub logprobs: Option<Vec<TokenLogprob>>,
}

/// A backend failure, classified for the HTTP status it gets.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// The request cannot be served as asked (invalid or unsupported schema, prompt too long);
    /// 400. `param` names the request field at fault.
    #[error("{message}")]
    BadRequest {
        /// What is wrong and how to fix it.
        message: String,
        /// The field.
        param: Option<String>,
    },
    /// The request's wall-time budget ran out; 504.
    #[error("the request ran past the server's wall-time limit ({0:?}); ask for fewer tokens or raise the limit")]
    Timeout(Duration),
    /// A fault in the model or engine (including constrained output that failed final
    /// validation); 500.
    #[error("{0}")]
    Internal(String),
}

/// Static facts about a served model, for `/api/tags`, `/api/show` and `/v1/models`.
#[derive(Clone, Debug, Default)]
pub struct ModelMeta {
    /// The name clients use (`smollm2`).
    pub name: String,
    /// Where it was loaded from.
    pub path: Option<std::path::PathBuf>,
    /// File size in bytes.
    pub size: u64,
    /// Architecture family (`llama`).
    pub family: String,
    /// Parameter count in words (`135M`).
    pub parameter_size: String,
    /// Quantization (`Q8_0`).
    pub quantization_level: String,
    /// Context length the model is loaded with.
    pub context_length: u32,
    /// The chat template, if any.
    pub template: Option<String>,
    /// Whether the model is prompted with tools.
    pub supports_tools: bool,
    /// Whether it has a reasoning section (`think`).
    pub supports_thinking: bool,
    /// Its own system prompt and parameters (an alias's, an Ollama model's layers): the
    /// defaults of requests that leave them unset.
    pub defaults: formwork_models::Defaults,
}

/// One input of an embedding request: text, or tokens (OpenAI accepts token ids).
#[derive(Clone, Debug, PartialEq)]
pub enum EmbedInput {
    /// Text, tokenized by the model.
    Text(String),
    /// Token ids of the model's vocabulary.
    Tokens(Vec<u32>),
}

/// One embedding request, ready for a model's worker (see [`crate::embeddings`]).
#[derive(Clone, Debug)]
pub struct EmbedJob {
    /// The inputs, in order (at least one).
    pub inputs: Vec<EmbedInput>,
    /// Cut inputs longer than the model's embedding context (else refuse them, 400).
    pub truncate: bool,
    /// Keep only the first this many dimensions (then normalize again), as OpenAI's and
    /// Ollama's `dimensions` do.
    pub dimensions: Option<usize>,
    /// When the request's wall-time budget runs out.
    pub deadline: Instant,
}

/// The result of an [`EmbedJob`].
#[derive(Clone, Debug, PartialEq)]
pub struct Embeddings {
    /// One unit-length vector per input, in input order.
    pub vectors: Vec<Vec<f32>>,
    /// Tokens evaluated in all (after truncation).
    pub prompt_tokens: u32,
    /// Time spent evaluating.
    pub duration: Duration,
}

/// A model as the server drives it. Runs on the model's own worker thread: `&mut self`, one
/// job at a time.
pub trait Backend: Send + 'static {
    /// The model's embedding capability, if it has one; the worker runs embedding requests
    /// with it (see [`crate::embeddings`]). Asked once when the worker starts (for
    /// `/api/show`'s capabilities) and again for each request. Default: none.
    fn embedder(&self) -> Option<Arc<dyn formwork_model::embed::Embed>> {
        None
    }

    /// The batcher this backend's decodes join, if its model is batched (`/metrics` reads
    /// its counters). Asked once when the worker starts. Default: none.
    fn batcher(&self) -> Option<formwork_engine::batch::Batcher> {
        None
    }

    /// Runs `job`, calling `on_text` with each piece of output (reasoning or answer text) as
    /// it is decided. When `on_text` returns `Break` (the client went away, or the deadline
    /// passed) the backend stops soon and returns what it has.
    ///
    /// A backend enforces `job.constraint` (the output matches it, checked by final
    /// validation; a mismatch is [`BackendError::Internal`], never success).
    fn generate(
        &mut self,
        job: &Job,
        on_text: &mut dyn FnMut(Piece<'_>) -> ControlFlow<()>,
    ) -> Result<Outcome, BackendError>;
}

impl EmbedJob {
    /// Runs an embedding job with `embedder` (on a model's worker thread): tokenize, truncate or
    /// refuse, embed, cut to `dimensions`.
    pub(crate) fn run(&self, embedder: &dyn Embed) -> Result<Embeddings, BackendError> {
        let job = self;
        let started = Instant::now();
        let full = embedder.dimensions();
        if let Some(d) = job.dimensions.filter(|&d| d > full) {
            return Err(BackendError::BadRequest {
                message: format!("dimensions is {d}, more than this model's {full}"),
                param: Some("dimensions".into()),
            });
        }
        let max = embedder.max_tokens();
        let n_vocab = embedder.vocab_size();
        let mut vectors = Vec::with_capacity(job.inputs.len());
        let mut total = 0usize;
        for (i, input) in job.inputs.iter().enumerate() {
            if Instant::now() >= job.deadline {
                return Err(BackendError::Timeout(started.elapsed()));
            }
            let mut tokens = match input {
                EmbedInput::Text(s) => embedder.tokenize(s).map_err(model_error)?,
                EmbedInput::Tokens(ts) => {
                    if let Some(t) = ts.iter().find(|&&t| t as usize >= n_vocab) {
                        return Err(BackendError::BadRequest {
                            message: format!("input[{i}] has token id {t}, out of range: this model's vocabulary has {n_vocab} tokens"),
                            param: Some("input".into()),
                        });
                    }
                    ts.iter().map(|&t| TokenId(t)).collect()
                }
            };
            if tokens.is_empty() {
                return Err(BackendError::BadRequest { message: format!("input[{i}] has no tokens"), param: Some("input".into()) });
            }
            if tokens.len() > max {
                if !job.truncate {
                    return Err(BackendError::BadRequest {
                        message: format!(
                            "input[{i}] is {} tokens, more than the {max} this model embeds at once; shorten it (on /api/embed, truncate: true cuts it to fit)",
                            tokens.len()
                        ),
                        param: Some("input".into()),
                    });
                }
                tokens.truncate(max);
            }
            let mut v = embedder.embed(&tokens).map_err(model_error)?;
            if let Some(d) = job.dimensions {
                v.truncate(d);
                normalize(&mut v);
            }
            total += tokens.len();
            vectors.push(v);
        }
        Ok(Embeddings { vectors, prompt_tokens: u32::try_from(total).unwrap_or(u32::MAX), duration: started.elapsed() })
    }
}

impl BackendError {
    /// The error for a model that has no embedder.
    pub(crate) fn cannot_embed(model: &str) -> BackendError {
        BackendError::BadRequest {
            message: format!("model '{model}' does not compute embeddings; use a GGUF model served by llama.cpp"),
            param: Some("model".into()),
        }
    }
}

/// An embedder's error as the request's: a text that cannot be tokenized is the client's.
fn model_error(e: ModelError) -> BackendError {
    match e {
        ModelError::Tokenize(_) => BackendError::BadRequest { message: e.to_string(), param: Some("input".into()) },
        other => BackendError::Internal(format!("embedding failed: {other}")),
    }
}
