//! [`ApiError`]: every failure at the HTTP edge, rendered in the caller's API dialect, and
//! [`ApiJson`], the JSON extractor whose rejections are [`ApiError`]s.
//!
//! The Ollama API answers `{"error": "message"}`; the OpenAI API answers
//! `{"error": {"message", "type", "param", "code"}}`. Handlers pick the dialect through the
//! [`Dialect`] marker of their extractor, so a route never mixes the two.

use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::json;
use std::marker::PhantomData;

/// Which API an error is rendered for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// `{"error": "..."}` (routes under `/api`).
    Ollama,
    /// `{"error": {"message", "type", "param", "code"}}` (routes under `/v1`).
    OpenAi,
}

/// What went wrong, which fixes the HTTP status and the OpenAI `type` / `code`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// 400: the request is malformed or asks for something unsupported.
    BadRequest,
    /// 404: the model (or route object) does not exist.
    NotFound,
    /// 413: the request body is over the size limit.
    TooLarge,
    /// 500: a fault inside the server (a bug, a backend failure, output that failed validation).
    Internal,
    /// 503: the model's worker is gone.
    Unavailable,
    /// 504: the request ran past the wall-time limit.
    Timeout,
}

impl ErrorKind {
    /// The HTTP status.
    pub fn status(self) -> StatusCode {
        match self {
            ErrorKind::BadRequest => StatusCode::BAD_REQUEST,
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ErrorKind::Timeout => StatusCode::GATEWAY_TIMEOUT,
        }
    }

    fn openai_type(self) -> &'static str {
        match self {
            ErrorKind::BadRequest | ErrorKind::NotFound | ErrorKind::TooLarge => "invalid_request_error",
            ErrorKind::Internal | ErrorKind::Unavailable | ErrorKind::Timeout => "server_error",
        }
    }
}

/// An error answered to an API client. Build with the constructors, then set the dialect
/// with [`ApiError::flavor`] (handlers do this once, at the edge).
#[derive(Clone, Debug)]
pub struct ApiError {
    /// The dialect of the body.
    pub flavor: Flavor,
    /// What went wrong.
    pub kind: ErrorKind,
    /// A message that names the problem and, where it can, the fix.
    pub message: String,
    /// The request field at fault (OpenAI `param`).
    pub param: Option<String>,
    /// A machine-readable code (OpenAI `code`), e.g. `model_not_found`.
    pub code: Option<&'static str>,
    /// Seconds after which a retry may succeed (the `Retry-After` header of a 503).
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// An error of `kind` with `message`, in the Ollama dialect until [`ApiError::flavor`].
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ApiError { flavor: Flavor::Ollama, kind, message: message.into(), param: None, code: None, retry_after: None }
    }
    /// Sets the `Retry-After` header (seconds).
    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        self
    }
    /// 400.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::BadRequest, message)
    }
    /// 500.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, message)
    }
    /// 404 for a model name that is not served.
    pub fn model_not_found(name: &str, served: &[String]) -> Self {
        let mut e = Self::new(
            ErrorKind::NotFound,
            format!(
                "model '{name}' not found; this server has: {} (start `formwork serve --model {name}` to add it)",
                served.join(", ")
            ),
        );
        e.param = Some("model".into());
        e.code = Some("model_not_found");
        e
    }
    /// Sets the request field at fault.
    pub fn param(mut self, param: impl Into<String>) -> Self {
        self.param = Some(param.into());
        self
    }
    /// Sets the dialect.
    pub fn flavor(mut self, flavor: Flavor) -> Self {
        self.flavor = flavor;
        self
    }
    /// The JSON body for this error in its dialect.
    pub fn body(&self) -> serde_json::Value {
        match self.flavor {
            Flavor::Ollama => json!({ "error": self.message }),
            Flavor::OpenAi => json!({
                "error": {
                    "message": self.message,
                    "type": self.kind.openai_type(),
                    "param": self.param,
                    "code": self.code,
                }
            }),
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.kind.status())
    }
}

impl std::error::Error for ApiError {}

/// The message of the [`ApiError`] a response was made from, kept in the response's
/// extensions so that the access log can say why a request failed.
#[derive(Clone, Debug)]
pub(crate) struct ErrorReason(pub String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = (self.kind.status(), axum::Json(self.body())).into_response();
        r.extensions_mut().insert(ErrorReason(self.message.clone()));
        if let Some(secs) = self.retry_after {
            r.headers_mut().insert(axum::http::header::RETRY_AFTER, axum::http::HeaderValue::from(secs));
        }
        r
    }
}

/// A type-level API dialect for [`ApiJson`].
pub trait Dialect: Send + Sync + 'static {
    /// The dialect.
    const FLAVOR: Flavor;
}

/// The Ollama dialect marker.
#[derive(Debug)]
pub struct OllamaApi;
impl Dialect for OllamaApi {
    const FLAVOR: Flavor = Flavor::Ollama;
}

/// The OpenAI dialect marker.
#[derive(Debug)]
pub struct OpenAiApi;
impl Dialect for OpenAiApi {
    const FLAVOR: Flavor = Flavor::OpenAi;
}

/// A JSON body extractor. Any `Content-Type` is accepted (Ollama clients and `curl -d` send
/// various ones); rejections are [`ApiError`]s in dialect `D`: 413 over the body limit,
/// 400 for malformed JSON or a body that does not fit the request type (the message says
/// where and why).
#[derive(Debug)]
pub struct ApiJson<T, D>(pub T, pub PhantomData<D>);

impl<S, T, D> FromRequest<S> for ApiJson<T, D>
where
    S: Send + Sync,
    T: DeserializeOwned,
    D: Dialect,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = match bytes::Bytes::from_request(req, state).await {
            Ok(b) => b,
            Err(rejection) => {
                let e = if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::new(
                        ErrorKind::TooLarge,
                        "request body is larger than this server's limit (ServerConfig::max_body_bytes); send a smaller request",
                    )
                } else {
                    ApiError::bad_request(format!("could not read the request body: {rejection}"))
                };
                return Err(e.flavor(D::FLAVOR));
            }
        };
        parse_json(&bytes).map(|v| ApiJson(v, PhantomData)).map_err(|e| e.flavor(D::FLAVOR))
    }
}

/// Parses a request body, with a message that says what is wrong and where.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request("request body is empty; send a JSON object"));
    }
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error(de)
}

fn serde_path_to_error<'de, T: DeserializeOwned>(
    de: &mut serde_json::Deserializer<serde_json::de::SliceRead<'de>>,
) -> Result<T, ApiError> {
    match T::deserialize(&mut *de).and_then(|v| de.end().map(|()| v)) {
        Ok(v) => Ok(v),
        Err(e) => {
            let what = match e.classify() {
                serde_json::error::Category::Data => "request JSON does not fit the API",
                serde_json::error::Category::Eof => "request body ends early (truncated JSON)",
                _ => "request body is not valid JSON",
            };
            Err(ApiError::bad_request(format!("{what}: {e}")))
        }
    }
}
