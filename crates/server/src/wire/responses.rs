//! OpenAI Responses API types (`/v1/responses`), as the official SDK sends and reads them.
//!
//! Requests are read loosely (every field optional where the SDK may leave it out; unknown
//! fields ignored), then checked by the handler, which names the field at fault. Responses
//! are written with every field the SDK's `Response` model declares as required.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `POST /v1/responses`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[allow(missing_docs)]
pub struct CreateRequest {
    pub model: String,
    /// A string (one user message) or a list of input items.
    #[serde(default)]
    pub input: Option<Input>,
    /// A system message put before the conversation (not carried over by
    /// `previous_response_id`, as in OpenAI's API).
    #[serde(default)]
    pub instructions: Option<String>,
    #[serde(default)]
    pub previous_response_id: Option<String>,
    #[serde(default)]
    pub text: Option<TextConfig>,
    #[serde(default)]
    pub tools: Option<Vec<Tool>>,
    #[serde(default)]
    pub tool_choice: Option<ToolChoice>,
    #[serde(default)]
    pub parallel_tool_calls: Option<bool>,
    #[serde(default)]
    pub max_tool_calls: Option<u32>,
    #[serde(default)]
    pub max_output_tokens: Option<u32>,
    #[serde(default)]
    pub temperature: Option<f32>,
    #[serde(default)]
    pub top_p: Option<f32>,
    /// formwork extension (as on `/v1/chat/completions`): a sampling seed.
    #[serde(default)]
    pub seed: Option<i64>,
    #[serde(default)]
    pub stream: Option<bool>,
    /// Keep the response for `previous_response_id` and `GET /v1/responses/{id}` (default true).
    #[serde(default)]
    pub store: Option<bool>,
    /// `{"effort": ...}`, as `reasoning_effort` on chat completions.
    #[serde(default)]
    pub reasoning: Option<Reasoning>,
    /// Echoed back.
    #[serde(default)]
    pub metadata: Option<Value>,
    /// Echoed back.
    #[serde(default)]
    pub user: Option<String>,
    /// `auto` or `disabled` (accepted; formwork never drops input to fit).
    #[serde(default)]
    pub truncation: Option<String>,
    // Parameters that would change the output and are not supported: refused by name.
    #[serde(default)]
    pub background: Option<bool>,
    #[serde(default)]
    pub conversation: Option<Value>,
    #[serde(default)]
    pub prompt: Option<Value>,
    /// Alternatives per token (0 to 20) in the message text's `logprobs`; asking for them
    /// also asks for the logprobs themselves.
    #[serde(default)]
    pub top_logprobs: Option<u32>,
    /// Extra output: `message.output_text.logprobs` adds each message token's logprob;
    /// other values are accepted and change nothing.
    #[serde(default)]
    pub include: Option<Vec<String>>,
}

/// `input`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Input {
    /// One user message.
    Text(String),
    /// Items: messages, function calls and their outputs.
    Items(Vec<InputItem>),
}

/// One input item. Read as one struct with the fields of every item type, since a message
/// may come without `type` (`{"role": "user", "content": "..."}`); the handler tells them
/// apart and rejects fields that do not belong.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[allow(missing_docs)]
pub struct InputItem {
    /// `message` (also when absent), `function_call`, `function_call_output`, `reasoning`.
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    /// Messages: `user`, `system`, `developer`, `assistant`.
    #[serde(default)]
    pub role: Option<String>,
    /// Messages: a string or a list of parts (`input_text`, `output_text`).
    #[serde(default)]
    pub content: Option<MessageContent>,
    /// Function calls and outputs: the call's id.
    #[serde(default)]
    pub call_id: Option<String>,
    /// Function calls: the function.
    #[serde(default)]
    pub name: Option<String>,
    /// Function calls: the arguments as JSON text.
    #[serde(default)]
    pub arguments: Option<String>,
    /// Function call outputs: a string or a list of `input_text` parts.
    #[serde(default)]
    pub output: Option<MessageContent>,
}

/// A message's content, or a function call's output.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum MessageContent {
    /// Text.
    Text(String),
    /// Parts.
    Parts(Vec<ContentPart>),
}

/// One content part: `input_text` / `output_text` (others, such as `input_image`, are
/// refused).
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct ContentPart {
    /// The part's type.
    #[serde(rename = "type")]
    pub kind: String,
    /// Its text.
    #[serde(default)]
    pub text: Option<String>,
}

/// `text`: the output's format.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TextConfig {
    /// `{"type": "text" | "json_object" | "json_schema", ...}`; absent: text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<TextFormat>,
}

/// `text.format`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TextFormat {
    /// Free text.
    Text,
    /// Any JSON object.
    JsonObject,
    /// Output matching `schema`.
    JsonSchema {
        /// The format's name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// Description (shown to nobody; echoed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        /// The schema (absent: any JSON).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        schema: Option<Value>,
        /// Strict mode.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        strict: Option<bool>,
    },
}

/// A tool: `{"type": "function", "name", "description", "parameters", "strict"}`. Hosted
/// tools (`web_search`, `file_search`, ...) are refused.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct Tool {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub parameters: Option<Value>,
    #[serde(default)]
    pub strict: Option<bool>,
}

/// `tool_choice`: `"auto" | "none" | "required"` or `{"type": "function", "name"}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ToolChoice {
    /// A mode.
    Mode(String),
    /// A named tool (only `function` is supported).
    Named {
        /// `function`.
        #[serde(rename = "type")]
        kind: String,
        /// The function.
        #[serde(default)]
        name: Option<String>,
    },
}

/// `reasoning`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Reasoning {
    /// `none`, `minimal`, `low`, `medium`, `high`.
    #[serde(default)]
    pub effort: Option<String>,
}

/// A `response` object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct Response {
    pub id: String,
    pub object: String,
    pub created_at: u64,
    /// `in_progress`, `completed`, `incomplete`, `failed`.
    pub status: String,
    pub error: Option<ResponseError>,
    pub incomplete_details: Option<IncompleteDetails>,
    pub instructions: Option<String>,
    pub max_output_tokens: Option<u32>,
    pub model: String,
    pub output: Vec<OutputItem>,
    pub parallel_tool_calls: bool,
    pub previous_response_id: Option<String>,
    pub reasoning: Option<Reasoning>,
    pub store: bool,
    pub temperature: Option<f32>,
    pub text: TextConfig,
    pub tool_choice: ToolChoice,
    pub tools: Vec<Tool>,
    pub top_p: Option<f32>,
    pub truncation: String,
    /// Absent until the response is finished.
    pub usage: Option<Usage>,
    pub user: Option<String>,
    pub metadata: Value,
}

/// `error` of a failed response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct ResponseError {
    /// `server_error`.
    pub code: String,
    pub message: String,
}

/// `incomplete_details`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IncompleteDetails {
    /// `max_output_tokens`.
    pub reason: String,
}

/// `usage`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct Usage {
    pub input_tokens: u32,
    pub input_tokens_details: InputTokensDetails,
    pub output_tokens: u32,
    pub output_tokens_details: OutputTokensDetails,
    pub total_tokens: u32,
}

/// `usage.input_tokens_details`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct InputTokensDetails {
    pub cached_tokens: u32,
}

/// `usage.output_tokens_details`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct OutputTokensDetails {
    pub reasoning_tokens: u32,
}

/// One output item.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OutputItem {
    /// The answer's text.
    Message {
        /// `msg_…`.
        id: String,
        /// `assistant`.
        role: String,
        /// `in_progress`, `completed`, `incomplete`.
        status: String,
        /// One `output_text` part (none while in progress).
        content: Vec<OutputText>,
    },
    /// A call of one of the offered functions.
    FunctionCall {
        /// `fc_…`.
        id: String,
        /// `call_…`: what a `function_call_output` answers.
        call_id: String,
        /// The function.
        name: String,
        /// The arguments, JSON text.
        arguments: String,
        /// `in_progress`, `completed`.
        status: String,
    },
    /// The reasoning of a reasoning model.
    Reasoning {
        /// `rs_…`.
        id: String,
        /// Always empty (formwork does not summarize).
        summary: Vec<Value>,
        /// One `reasoning_text` part.
        content: Vec<ReasoningText>,
        /// `completed`.
        status: String,
    },
}

/// An `output_text` content part.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct OutputText {
    /// `output_text`.
    #[serde(rename = "type")]
    pub kind: String,
    pub text: String,
    /// Always empty.
    pub annotations: Vec<Value>,
    /// Each token's `{token, logprob, bytes, top_logprobs}` when the request asked for them
    /// (`include: ["message.output_text.logprobs"]` or `top_logprobs`), else empty.
    pub logprobs: Vec<Value>,
}

/// A `reasoning_text` content part.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct ReasoningText {
    /// `reasoning_text`.
    #[serde(rename = "type")]
    pub kind: String,
    pub text: String,
}

/// One server-sent event of a streamed response, numbered by `sequence_number` (from 0).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Sequenced {
    /// The event's position in the stream.
    pub sequence_number: u64,
    /// The event.
    #[serde(flatten)]
    pub event: StreamEvent,
}

/// The events of a streamed response, in the order they are sent: `created`, `in_progress`,
/// then for each output item `output_item.added`, its content events and
/// `output_item.done`, then `completed` (or `incomplete` / `failed`).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type")]
#[allow(missing_docs)]
pub enum StreamEvent {
    #[serde(rename = "response.created")]
    Created { response: Response },
    #[serde(rename = "response.in_progress")]
    InProgress { response: Response },
    #[serde(rename = "response.output_item.added")]
    OutputItemAdded { output_index: usize, item: OutputItem },
    #[serde(rename = "response.content_part.added")]
    ContentPartAdded { item_id: String, output_index: usize, content_index: usize, part: OutputText },
    #[serde(rename = "response.output_text.delta")]
    OutputTextDelta { item_id: String, output_index: usize, content_index: usize, delta: String, logprobs: Vec<Value> },
    #[serde(rename = "response.output_text.done")]
    OutputTextDone { item_id: String, output_index: usize, content_index: usize, text: String, logprobs: Vec<Value> },
    #[serde(rename = "response.content_part.done")]
    ContentPartDone { item_id: String, output_index: usize, content_index: usize, part: OutputText },
    #[serde(rename = "response.function_call_arguments.delta")]
    FunctionCallArgumentsDelta { item_id: String, output_index: usize, delta: String },
    #[serde(rename = "response.function_call_arguments.done")]
    FunctionCallArgumentsDone { item_id: String, output_index: usize, name: String, arguments: String },
    #[serde(rename = "response.reasoning_text.delta")]
    ReasoningTextDelta { item_id: String, output_index: usize, content_index: usize, delta: String },
    #[serde(rename = "response.reasoning_text.done")]
    ReasoningTextDone { item_id: String, output_index: usize, content_index: usize, text: String },
    #[serde(rename = "response.output_item.done")]
    OutputItemDone { output_index: usize, item: OutputItem },
    #[serde(rename = "response.completed")]
    Completed { response: Response },
    #[serde(rename = "response.incomplete")]
    Incomplete { response: Response },
    #[serde(rename = "response.failed")]
    Failed { response: Response },
    /// A failure after the stream started (then `response.failed`).
    #[serde(rename = "error")]
    Error { code: Option<String>, message: String, param: Option<String> },
}

impl StreamEvent {
    /// The SSE event name (the `type`).
    pub fn name(&self) -> &'static str {
        match self {
            StreamEvent::Created { .. } => "response.created",
            StreamEvent::InProgress { .. } => "response.in_progress",
            StreamEvent::OutputItemAdded { .. } => "response.output_item.added",
            StreamEvent::ContentPartAdded { .. } => "response.content_part.added",
            StreamEvent::OutputTextDelta { .. } => "response.output_text.delta",
            StreamEvent::OutputTextDone { .. } => "response.output_text.done",
            StreamEvent::ContentPartDone { .. } => "response.content_part.done",
            StreamEvent::FunctionCallArgumentsDelta { .. } => "response.function_call_arguments.delta",
            StreamEvent::FunctionCallArgumentsDone { .. } => "response.function_call_arguments.done",
            StreamEvent::ReasoningTextDelta { .. } => "response.reasoning_text.delta",
            StreamEvent::ReasoningTextDone { .. } => "response.reasoning_text.done",
            StreamEvent::OutputItemDone { .. } => "response.output_item.done",
            StreamEvent::Completed { .. } => "response.completed",
            StreamEvent::Incomplete { .. } => "response.incomplete",
            StreamEvent::Failed { .. } => "response.failed",
            StreamEvent::Error { .. } => "error",
        }
    }
}

/// `DELETE /v1/responses/{id}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct Deleted {
    pub id: String,
    /// `response`.
    pub object: String,
    pub deleted: bool,
}
