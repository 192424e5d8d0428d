//! OpenAI API types (`/v1/chat/completions`, `/v1/completions`, `/v1/models`).

use super::ollama::StopField;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Message content: a string or a list of parts (`{"type": "text", "text": ...}`).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// Parts; only text parts are supported.
    Parts(Vec<ContentPart>),
}

/// One content part.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct ContentPart {
    /// `text` (others, such as `image_url`, are rejected).
    #[serde(rename = "type")]
    pub kind: String,
    /// The text of a `text` part.
    #[serde(default)]
    pub text: Option<String>,
}

/// A tool call in a request or response: arguments are a JSON *string*.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct ToolCall {
    /// `call_...`.
    #[serde(default)]
    pub id: String,
    /// Always `function`.
    #[serde(rename = "type", default = "function_str")]
    pub kind: String,
    /// The call.
    pub function: FunctionCall,
}

fn function_str() -> String {
    "function".into()
}

/// The function part of a [`ToolCall`].
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct FunctionCall {
    /// Function name.
    pub name: String,
    /// Arguments as JSON text.
    pub arguments: String,
}

/// A request message.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct RequestMessage {
    /// `system`, `developer`, `user`, `assistant` or `tool`.
    pub role: String,
    /// Content (absent or null for an assistant message with only tool calls).
    #[serde(default)]
    pub content: Option<Content>,
    /// Participant name (ignored).
    #[serde(default)]
    pub name: Option<String>,
    /// Calls an assistant made.
    #[serde(default)]
    pub tool_calls: Option<Vec<ToolCall>>,
    /// For `tool` messages: the call answered.
    #[serde(default)]
    pub tool_call_id: Option<String>,
}

/// `response_format`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ResponseFormat {
    /// Free text.
    Text,
    /// Any JSON object.
    JsonObject,
    /// Output matching a schema.
    JsonSchema {
        /// The schema and its name.
        json_schema: JsonSchemaFormat,
    },
    /// formwork's extension: a query over a database configured at start
    /// (`formwork serve --database NAME=...`), named by `database`; the schema goes into the
    /// prompt as a system message.
    Sql {
        /// The configured database's name.
        database: String,
    },
}

/// `response_format.json_schema`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct JsonSchemaFormat {
    /// Name (required by OpenAI; defaults to `response`).
    #[serde(default)]
    pub name: Option<String>,
    /// Description (ignored).
    #[serde(default)]
    pub description: Option<String>,
    /// The schema (absent: any JSON).
    #[serde(default)]
    pub schema: Option<Value>,
    /// Strict mode.
    #[serde(default)]
    pub strict: Option<bool>,
}

/// A tool offered: `{"type": "function", "function": {...}}`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct Tool {
    /// `function`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The function.
    pub function: FunctionDef,
}

/// A function definition.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct FunctionDef {
    /// Name.
    pub name: String,
    /// Description.
    #[serde(default)]
    pub description: Option<String>,
    /// JSON Schema of the arguments (absent: an empty object).
    #[serde(default)]
    pub parameters: Option<Value>,
    /// Strict mode.
    #[serde(default)]
    pub strict: Option<bool>,
}

/// `tool_choice`: `"auto" | "none" | "required"` or `{"type": "function", "function": {"name"}}`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum ToolChoice {
    /// A mode.
    Mode(String),
    /// A named function.
    Named {
        /// `function`.
        #[serde(rename = "type")]
        kind: String,
        /// `{"name": ...}`.
        function: NamedFunction,
    },
}

/// The function named by [`ToolChoice::Named`].
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct NamedFunction {
    /// Its name.
    pub name: String,
}

/// `stream_options`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct StreamOptions {
    /// Send a last chunk with `usage`.
    #[serde(default)]
    pub include_usage: bool,
}

/// `POST /v1/chat/completions`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[allow(missing_docs)]
pub struct ChatCompletionRequest {
    pub model: String,
    pub messages: Vec<RequestMessage>,
    #[serde(default)]
    pub response_format: Option<ResponseFormat>,
    #[serde(default)]
    pub tools: Option<Vec<Tool>>,
    #[serde(default)]
    pub tool_choice: Option<ToolChoice>,
    #[serde(default)]
    pub parallel_tool_calls: Option<bool>,
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    #[serde(default)]
    pub max_tokens: Option<u32>,
    #[serde(default)]
    pub max_completion_tokens: Option<u32>,
    #[serde(default)]
    pub temperature: Option<f32>,
    #[serde(default)]
    pub top_p: Option<f32>,
    #[serde(default)]
    pub seed: Option<i64>,
    #[serde(default)]
    pub stop: Option<StopField>,
    #[serde(default)]
    pub n: Option<u32>,
    #[serde(default)]
    pub presence_penalty: Option<f32>,
    #[serde(default)]
    pub frequency_penalty: Option<f32>,
    /// formwork extension (`extra_body` in the `openai` client): show the model the
    /// `response_format` schema in the prompt: `true`/`"user"` or `"system"`. Off by default.
    #[serde(default)]
    pub schema_in_prompt: Option<Value>,
    /// formwork extension (`extra_body`): how a JSON answer is laid out, `"flexible"`
    /// (default), `"compact"` or `"pretty"`.
    #[serde(default)]
    pub whitespace: Option<Value>,
    /// Reasoning models: `"none"` answers directly; `"minimal"`, `"low"`, `"medium"`,
    /// `"high"` reason first (the effort goes to templates that take one). Ignored by other
    /// models.
    #[serde(default)]
    pub reasoning_effort: Option<String>,
    /// Return the log-probability of each generated token (`choices[].logprobs`).
    #[serde(default)]
    pub logprobs: Option<bool>,
    /// With `logprobs`: how many of the most likely tokens to return per position (0 to 20).
    #[serde(default)]
    pub top_logprobs: Option<i64>,
}

/// `POST /v1/completions`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[allow(missing_docs)]
pub struct CompletionRequest {
    pub model: String,
    pub prompt: PromptField,
    #[serde(default)]
    pub max_tokens: Option<u32>,
    #[serde(default)]
    pub temperature: Option<f32>,
    #[serde(default)]
    pub top_p: Option<f32>,
    #[serde(default)]
    pub seed: Option<i64>,
    #[serde(default)]
    pub stop: Option<StopField>,
    #[serde(default)]
    pub n: Option<u32>,
    #[serde(default)]
    pub stream: Option<bool>,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    #[serde(default)]
    pub presence_penalty: Option<f32>,
    #[serde(default)]
    pub frequency_penalty: Option<f32>,
    #[serde(default)]
    pub echo: Option<bool>,
    #[serde(default)]
    pub suffix: Option<String>,
    /// Return the log-probabilities of the generated tokens and of the `logprobs` most
    /// likely tokens at each position (0 to 5, as OpenAI).
    #[serde(default)]
    pub logprobs: Option<i64>,
}

/// `choices[].logprobs` of a chat completion (or of one chunk: its tokens).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatLogprobs {
    /// One entry per generated token.
    pub content: Vec<ChatTokenLogprob>,
    /// Always `null` (no refusals).
    pub refusal: Option<Vec<ChatTokenLogprob>>,
}

/// One generated token in [`ChatLogprobs::content`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatTokenLogprob {
    /// The token's text (its bytes as UTF-8, invalid sequences replaced).
    pub token: String,
    /// Natural log of its probability.
    pub logprob: f32,
    /// The token's raw bytes.
    pub bytes: Option<Vec<u8>>,
    /// The `top_logprobs` most likely tokens at this position, best first.
    pub top_logprobs: Vec<ChatTopLogprob>,
}

/// An alternative in [`ChatTokenLogprob::top_logprobs`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatTopLogprob {
    /// The token's text.
    pub token: String,
    /// Natural log of its probability.
    pub logprob: f32,
    /// The token's raw bytes.
    pub bytes: Option<Vec<u8>>,
}

/// `choices[].logprobs` of a legacy completion (or of one chunk: its tokens).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompletionLogprobs {
    /// Each token's text.
    pub tokens: Vec<String>,
    /// Each token's log-probability.
    pub token_logprobs: Vec<f32>,
    /// Per token, the most likely tokens at its position: text → log-probability.
    pub top_logprobs: Vec<serde_json::Map<String, Value>>,
    /// Each token's offset in the choice's text, in characters (after the prompt with `echo`).
    pub text_offset: Vec<u32>,
}

/// `prompt` of `/v1/completions`: a string or a list of strings.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum PromptField {
    /// One prompt.
    One(String),
    /// Several prompts (one choice each).
    Many(Vec<String>),
}

/// `usage`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct Usage {
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    pub total_tokens: u32,
}

/// The assistant message of a choice.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResponseMessage {
    /// `assistant`.
    pub role: String,
    /// Text; `null` when the answer is tool calls.
    pub content: Option<String>,
    /// Always `null` (formwork never refuses).
    pub refusal: Option<String>,
    /// The reasoning of a reasoning model (as DeepSeek's and vLLM's APIs return it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// Calls made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
}

/// One choice of a chat completion.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct Choice {
    pub index: u32,
    pub message: ResponseMessage,
    pub logprobs: Option<Value>,
    pub finish_reason: String,
}

/// `chat.completion`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct ChatCompletion {
    pub id: String,
    pub object: String,
    pub created: u64,
    pub model: String,
    pub system_fingerprint: String,
    pub choices: Vec<Choice>,
    pub usage: Usage,
}

/// The `delta` of a stream chunk.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct Delta {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Absent (`None`), `null` (`Some(None)`: the first delta of an answer that is tool
    /// calls, as OpenAI sends it), or text.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub content: Option<Option<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<DeltaToolCall>>,
}

/// A tool call, or more of its arguments, in a stream chunk: the first delta of a call has
/// its `id`, `type` and `function.name`; later ones only `index` and argument text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct DeltaToolCall {
    pub index: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub function: DeltaFunction,
}

/// The function part of a [`DeltaToolCall`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct DeltaFunction {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<String>,
}

/// One choice of a stream chunk.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct ChunkChoice {
    pub index: u32,
    pub delta: Delta,
    pub logprobs: Option<Value>,
    pub finish_reason: Option<String>,
}

/// `chat.completion.chunk`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct ChatCompletionChunk {
    pub id: String,
    pub object: String,
    pub created: u64,
    pub model: String,
    pub system_fingerprint: String,
    pub choices: Vec<ChunkChoice>,
    /// Present (as `null`, then set on the last chunk) only with `include_usage`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Option<Usage>>,
}

/// One choice of a text completion.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct CompletionChoice {
    pub text: String,
    pub index: u32,
    pub logprobs: Option<Value>,
    pub finish_reason: Option<String>,
}

/// `text_completion` (also the stream chunk shape).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct Completion {
    pub id: String,
    pub object: String,
    pub created: u64,
    pub model: String,
    pub system_fingerprint: String,
    pub choices: Vec<CompletionChoice>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// One entry of `/v1/models`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct ModelObject {
    pub id: String,
    pub object: String,
    pub created: u64,
    pub owned_by: String,
}

/// `GET /v1/models`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct ModelList {
    pub object: String,
    pub data: Vec<ModelObject>,
}

/// A field that is present (even as `null`) deserializes to `Some`.
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// `POST /v1/embeddings` request. `input` is a string, a list of strings, a list of token
/// ids or a list of such lists (checked by the handler, for a message naming the element at
/// fault).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct EmbeddingsRequest {
    /// The model.
    #[serde(default)]
    pub model: String,
    /// What to embed.
    #[serde(default)]
    pub input: Option<Value>,
    /// `"float"` (default) or `"base64"` (little-endian `f32`s).
    #[serde(default)]
    pub encoding_format: Option<String>,
    /// Keep only the first this many dimensions (re-normalized).
    #[serde(default)]
    pub dimensions: Option<i64>,
    /// Accepted, ignored.
    #[serde(default)]
    pub user: Option<String>,
}

/// One vector: a list of floats, or their little-endian bytes in base64.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum EmbeddingVector {
    /// `encoding_format: "float"`.
    Float(Vec<f32>),
    /// `encoding_format: "base64"`.
    Base64(String),
}

/// One entry of an embedding list.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EmbeddingObject {
    /// Always `"embedding"`.
    pub object: String,
    /// The input's position in the request.
    pub index: usize,
    /// The vector (unit length).
    pub embedding: EmbeddingVector,
}

/// Token counts of an embedding request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EmbeddingUsage {
    /// Tokens evaluated (after truncation).
    pub prompt_tokens: u32,
    /// The same.
    pub total_tokens: u32,
}

/// `POST /v1/embeddings` response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EmbeddingList {
    /// Always `"list"`.
    pub object: String,
    /// One entry per input, in input order.
    pub data: Vec<EmbeddingObject>,
    /// The model, as served.
    pub model: String,
    /// Token counts.
    pub usage: EmbeddingUsage,
}
