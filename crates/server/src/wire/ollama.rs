//! Ollama API types (`/api/chat`, `/api/generate`, `/api/tags`, `/api/show`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `format`: `"json"` or a JSON Schema object (`""` and `null` mean none).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Format {
    /// `"json"` (or `""`).
    Named(String),
    /// A JSON Schema.
    Schema(Value),
}

/// `options`. Every field is optional; unknown ones (`num_gpu`, `mirostat`, ...) are ignored.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[allow(missing_docs)]
pub struct Options {
    pub temperature: Option<f32>,
    pub top_k: Option<i32>,
    pub top_p: Option<f32>,
    pub min_p: Option<f32>,
    pub seed: Option<i64>,
    pub num_predict: Option<i64>,
    pub stop: Option<StopField>,
    pub repeat_penalty: Option<f32>,
    pub repeat_last_n: Option<i32>,
    pub presence_penalty: Option<f32>,
    pub frequency_penalty: Option<f32>,
    pub num_ctx: Option<u32>,
}

/// `stop`: one string or a list.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum StopField {
    /// One stop string.
    One(String),
    /// Several.
    Many(Vec<String>),
}

impl StopField {
    /// The stop strings, empty ones dropped.
    pub fn into_vec(self) -> Vec<String> {
        match self {
            StopField::One(s) => vec![s],
            StopField::Many(v) => v,
        }
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect()
    }
}

/// A function call in a message: `{"function": {"name", "arguments": {...}}}` (arguments are
/// an object in Ollama, not a string as in OpenAI).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct ToolCall {
    /// The call.
    pub function: ToolCallFunction,
}

/// The function part of a [`ToolCall`].
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct ToolCallFunction {
    /// Function name.
    pub name: String,
    /// Arguments object.
    #[serde(default)]
    pub arguments: Value,
}

/// A chat message.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct Message {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// Text.
    #[serde(default)]
    pub content: String,
    /// The reasoning section, when `think` is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    /// Images (base64); not supported by text models, accepted and rejected with a message.
    #[serde(default, skip_serializing)]
    pub images: Option<Vec<String>>,
    /// Calls made by the assistant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    /// For `tool` messages: the function's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
}

/// A tool offered to the model: `{"type": "function", "function": {name, description, parameters}}`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct Tool {
    /// Always `function`.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// The function.
    pub function: ToolFunction,
}

/// The function of a [`Tool`].
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct ToolFunction {
    /// Name.
    pub name: String,
    /// Description.
    #[serde(default)]
    pub description: Option<String>,
    /// JSON Schema of the arguments.
    #[serde(default)]
    pub parameters: Option<Value>,
}

/// `POST /api/chat`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct ChatRequest {
    /// Model name (`smollm2`, `smollm2:latest`).
    pub model: String,
    /// The conversation; empty means "load the model" (answered with `done_reason: load`).
    #[serde(default)]
    pub messages: Vec<Message>,
    /// Tools offered.
    #[serde(default)]
    pub tools: Option<Vec<Tool>>,
    /// Output format.
    #[serde(default)]
    pub format: Option<Format>,
    /// Sampling and limits.
    #[serde(default)]
    pub options: Option<Options>,
    /// Stream NDJSON (default true).
    #[serde(default)]
    pub stream: Option<bool>,
    /// Accepted; models stay loaded for the server's lifetime.
    #[serde(default)]
    pub keep_alive: Option<Value>,
    /// `true`/`false` or `"high"|"medium"|"low"`.
    #[serde(default)]
    pub think: Option<Value>,
    /// formwork extension: show the model the `format` schema in the prompt (`true` or
    /// `"user"`: end of the last user message; `"system"`: system message). Off by default.
    #[serde(default)]
    pub schema_in_prompt: Option<Value>,
    /// formwork extension: how a JSON answer is laid out, `"flexible"` (default),
    /// `"compact"` or `"pretty"`.
    #[serde(default)]
    pub whitespace: Option<Value>,
    /// Return each generated token's log-probability ([`Logprob`]).
    #[serde(default)]
    pub logprobs: Option<bool>,
    /// With `logprobs`: how many of the most likely tokens to return per position (0 to 20).
    #[serde(default)]
    pub top_logprobs: Option<i64>,
}

/// `POST /api/generate`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct GenerateRequest {
    /// Model name.
    pub model: String,
    /// The prompt; empty means "load the model".
    #[serde(default)]
    pub prompt: String,
    /// A system message (replaces the default).
    #[serde(default)]
    pub system: Option<String>,
    /// Text after the insertion point (fill-in-the-middle); not supported.
    #[serde(default)]
    pub suffix: Option<String>,
    /// Send `prompt` to the model without the chat template.
    #[serde(default)]
    pub raw: Option<bool>,
    /// A Go-template override; not supported (ignored with a log line).
    #[serde(default)]
    pub template: Option<String>,
    /// Output format.
    #[serde(default)]
    pub format: Option<Format>,
    /// Sampling and limits.
    #[serde(default)]
    pub options: Option<Options>,
    /// Stream NDJSON (default true).
    #[serde(default)]
    pub stream: Option<bool>,
    /// Accepted; models stay loaded.
    #[serde(default)]
    pub keep_alive: Option<Value>,
    /// Reasoning.
    #[serde(default)]
    pub think: Option<Value>,
    /// formwork extension: show the model the `format` schema in the prompt (see
    /// [`ChatRequest::schema_in_prompt`]).
    #[serde(default)]
    pub schema_in_prompt: Option<Value>,
    /// How a JSON answer is laid out (see [`ChatRequest::whitespace`]).
    #[serde(default)]
    pub whitespace: Option<Value>,
    /// Images; not supported by text models.
    #[serde(default)]
    pub images: Option<Vec<String>>,
    /// Return each generated token's log-probability ([`Logprob`]).
    #[serde(default)]
    pub logprobs: Option<bool>,
    /// With `logprobs`: how many of the most likely tokens to return per position (0 to 20).
    #[serde(default)]
    pub top_logprobs: Option<i64>,
}

/// Timing and token counts of a finished response (nanoseconds, as Ollama reports them).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct Stats {
    pub total_duration: u64,
    pub load_duration: u64,
    pub prompt_eval_count: u32,
    pub prompt_eval_duration: u64,
    pub eval_count: u32,
    pub eval_duration: u64,
}

/// A `/api/chat` response or stream chunk.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// The model name as requested.
    pub model: String,
    /// RFC 3339 time with nanoseconds.
    pub created_at: String,
    /// The message (a piece of it in a stream chunk).
    pub message: Message,
    /// Whether this is the last chunk.
    pub done: bool,
    /// `stop`, `length` or `load` on the last chunk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub done_reason: Option<String>,
    /// Stats on the last chunk.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub stats: Option<Stats>,
    /// With `logprobs`: the log-probabilities of this chunk's tokens (all of them in a
    /// response that is not streamed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<Vec<Logprob>>,
}

/// A `/api/generate` response or stream chunk.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GenerateResponse {
    /// The model name as requested.
    pub model: String,
    /// RFC 3339 time.
    pub created_at: String,
    /// Text (a piece in a stream chunk).
    pub response: String,
    /// Reasoning text, when `think` is on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    /// Whether this is the last chunk.
    pub done: bool,
    /// `stop`, `length` or `load` on the last chunk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub done_reason: Option<String>,
    /// Stats on the last chunk.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub stats: Option<Stats>,
    /// With `logprobs`: the log-probabilities of this chunk's tokens (all of them in a
    /// response that is not streamed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<Vec<Logprob>>,
}

/// One generated token's log-probability, as Ollama (0.12.x and later) reports it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Logprob {
    /// The token's text (its bytes as UTF-8, invalid sequences replaced).
    pub token: String,
    /// Natural log of its probability.
    pub logprob: f32,
    /// The token's raw bytes.
    #[serde(default)]
    pub bytes: Vec<u8>,
    /// The most likely tokens at this position, best first (`top_logprobs` of them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub top_logprobs: Vec<TopLogprob>,
}

/// An alternative token at one position.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TopLogprob {
    /// The token's text.
    pub token: String,
    /// Natural log of its probability.
    pub logprob: f32,
    /// The token's raw bytes.
    #[serde(default)]
    pub bytes: Vec<u8>,
}

/// `POST /api/show` request (`model`, or the older `name`).
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct ShowRequest {
    /// The model.
    #[serde(default)]
    pub model: Option<String>,
    /// Older clients send `name`.
    #[serde(default)]
    pub name: Option<String>,
    /// Include large metadata arrays (ignored).
    #[serde(default)]
    pub verbose: Option<bool>,
}

/// Model details in `/api/tags` and `/api/show`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct ModelDetails {
    pub parent_model: String,
    pub format: String,
    pub family: String,
    pub families: Vec<String>,
    pub parameter_size: String,
    pub quantization_level: String,
}

/// One entry of `/api/tags`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct ModelEntry {
    pub name: String,
    pub model: String,
    pub modified_at: String,
    pub size: u64,
    pub digest: String,
    pub details: ModelDetails,
}

/// `GET /api/tags`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TagsResponse {
    /// Served models.
    pub models: Vec<ModelEntry>,
}

/// One entry of `GET /api/ps`: a loaded model. formwork keeps models loaded for the
/// server's lifetime, so `expires_at` is far in the future (as Ollama reports `keep_alive:
/// -1`); `slots`, `slots_busy` and `queued` are formwork's additions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct PsEntry {
    pub name: String,
    pub model: String,
    pub size: u64,
    pub digest: String,
    pub details: ModelDetails,
    pub expires_at: String,
    pub size_vram: u64,
    pub context_length: u32,
    pub slots: usize,
    pub slots_busy: usize,
    pub queued: usize,
}

/// `GET /api/ps`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PsResponse {
    /// Loaded models.
    pub models: Vec<PsEntry>,
}

/// `POST /api/show` response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct ShowResponse {
    pub modelfile: String,
    pub parameters: String,
    pub template: String,
    pub details: ModelDetails,
    pub model_info: serde_json::Map<String, Value>,
    pub capabilities: Vec<String>,
    pub modified_at: String,
}

/// `POST /api/embed` request. `input` is a string or a list of strings (checked by the
/// handler, for a message naming the element at fault); absent or empty, the answer has no
/// embeddings (Ollama's way to load a model). `options` and `keep_alive` are accepted and
/// ignored (models stay loaded).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct EmbedRequest {
    /// The model.
    #[serde(default)]
    pub model: String,
    /// A string or a list of strings.
    #[serde(default)]
    pub input: Option<Value>,
    /// Cut inputs longer than the model's embedding context (default); `false`: refuse them.
    #[serde(default)]
    pub truncate: Option<bool>,
    /// Keep only the first this many dimensions (re-normalized).
    #[serde(default)]
    pub dimensions: Option<i64>,
    /// Accepted, ignored.
    #[serde(default)]
    pub options: Option<Value>,
    /// Accepted, ignored.
    #[serde(default)]
    pub keep_alive: Option<Value>,
}

/// `POST /api/embed` response: one unit-length vector per input.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EmbedResponse {
    /// The model, as the request named it.
    pub model: String,
    /// One vector per input, in input order.
    pub embeddings: Vec<Vec<f32>>,
    /// Nanoseconds from receipt to answer.
    pub total_duration: u64,
    /// Nanoseconds spent loading the model (0: it was loaded).
    pub load_duration: u64,
    /// Tokens evaluated (after truncation).
    pub prompt_eval_count: u32,
}

/// `POST /api/embeddings` (legacy) request: one `prompt`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct EmbeddingsRequest {
    /// The model.
    #[serde(default)]
    pub model: String,
    /// The text; absent or empty gives an empty embedding.
    #[serde(default)]
    pub prompt: Option<String>,
    /// Accepted, ignored.
    #[serde(default)]
    pub options: Option<Value>,
    /// Accepted, ignored.
    #[serde(default)]
    pub keep_alive: Option<Value>,
}

/// `POST /api/embeddings` (legacy) response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EmbeddingsResponse {
    /// The vector (unit length; empty for an empty prompt).
    pub embedding: Vec<f32>,
}

/// `POST /api/pull` request (`model`, or the older `name`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct PullRequest {
    /// The model.
    #[serde(default)]
    pub model: Option<String>,
    /// Older clients send `name`.
    #[serde(default)]
    pub name: Option<String>,
    /// Stream progress lines (default `true`).
    #[serde(default)]
    pub stream: Option<bool>,
    /// Pull from the registry over plain HTTP; honoured only for the registries the server
    /// allows (`formwork serve --pull-registry`).
    #[serde(default)]
    pub insecure: Option<bool>,
}

/// `POST /api/copy` request.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct CopyRequest {
    /// The model to copy.
    #[serde(default)]
    pub source: String,
    /// The new alias's name.
    #[serde(default)]
    pub destination: String,
}

/// `DELETE /api/delete` request (`model`, or the older `name`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct DeleteRequest {
    /// The model.
    #[serde(default)]
    pub model: Option<String>,
    /// Older clients send `name`.
    #[serde(default)]
    pub name: Option<String>,
}

/// `POST /api/create` request: the new model's name, its base (`from`, a model name) and
/// its defaults, or the legacy `modelfile` text. `quantize`, `files` and `adapters` are
/// refused (formwork makes aliases, it does not build weights).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct CreateRequest {
    /// The new model's name.
    #[serde(default)]
    pub model: Option<String>,
    /// Older clients send `name`.
    #[serde(default)]
    pub name: Option<String>,
    /// The base model's name.
    #[serde(default)]
    pub from: Option<String>,
    /// The system prompt.
    #[serde(default)]
    pub system: Option<String>,
    /// A prompt template (kept and shown; formwork renders the GGUF's chat template).
    #[serde(default)]
    pub template: Option<String>,
    /// Generation parameters (`temperature`, `top_k`, `stop`, ...).
    #[serde(default)]
    pub parameters: Option<Value>,
    /// The legacy form: a Modelfile's text.
    #[serde(default)]
    pub modelfile: Option<String>,
    /// Stream progress lines (default `true`).
    #[serde(default)]
    pub stream: Option<bool>,
    /// Refused: formwork does not quantize.
    #[serde(default)]
    pub quantize: Option<String>,
    /// Refused: models are made from names, never from uploaded files.
    #[serde(default)]
    pub files: Option<Value>,
    /// Refused: adapters are not supported.
    #[serde(default)]
    pub adapters: Option<Value>,
    /// Accepted, ignored.
    #[serde(default)]
    pub license: Option<Value>,
    /// Refused when non-empty: preset messages are not supported.
    #[serde(default)]
    pub messages: Option<Value>,
}

/// One progress line of `/api/pull` and `/api/create` (and their non-streamed answer).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProgressResponse {
    /// `pulling manifest`, `downloading`, `verifying sha256 digest`, `success`...
    pub status: String,
    /// The layer being downloaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// Its size in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// Bytes done so far.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed: Option<u64>,
}

impl ProgressResponse {
    /// A line with only a status.
    pub fn status(s: impl Into<String>) -> Self {
        ProgressResponse { status: s.into(), ..Default::default() }
    }
}
