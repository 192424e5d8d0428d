//! [`TokenizerInfo`]: a vocabulary as bytes, its stop tokens, and the model's logit width.

use crate::error::error;
use formwork_vocab::{TokenId, Vocabulary};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::sync::Arc;

/// A tokenizer's vocabulary as formwork sees it: each token's bytes and kind (special tokens
/// are never produced by grammar text), the stop tokens (allowed exactly where the grammar
/// accepts), and `vocab_size`, the width of the model's logit rows (at least the
/// tokenizer's size; tokens past the tokenizer are never allowed).
#[pyclass(module = "formwork._formwork", frozen)]
pub struct TokenizerInfo {
    pub(crate) vocab: Arc<Vocabulary>,
    pub(crate) vocab_size: usize,
}

impl TokenizerInfo {
    fn build(mut vocab: Vocabulary, vocab_size: Option<usize>, stop_token_ids: Option<Vec<u32>>) -> PyResult<Self> {
        if let Some(stops) = stop_token_ids {
            if stops.is_empty() {
                return Err(error("stop_token_ids is empty: give at least one stop (EOS) token"));
            }
            vocab.set_eos_tokens(stops.into_iter().map(TokenId).collect()).map_err(error)?;
        }
        if vocab.eos_tokens().is_empty() {
            return Err(error(
                "the tokenizer names no EOS token: pass stop_token_ids=[...] (the ids that end generation)",
            ));
        }
        let vocab_size = vocab_size.unwrap_or(vocab.len());
        if vocab_size < vocab.len() {
            return Err(error(format!(
                "vocab_size {vocab_size} is smaller than the tokenizer's {} tokens",
                vocab.len()
            )));
        }
        Ok(TokenizerInfo { vocab: Arc::new(vocab), vocab_size })
    }
}

#[pymethods]
impl TokenizerInfo {
    /// From a HuggingFace `tokenizer.json` file. `vocab_size`: the model's logit width (default:
    /// the tokenizer's size); `stop_token_ids`: the tokens that end generation (default: the
    /// EOS found by well-known names such as `<|im_end|>`, `<|eot_id|>`, `</s>`).
    #[staticmethod]
    #[pyo3(signature = (path, *, vocab_size=None, stop_token_ids=None))]
    fn from_tokenizer_json(py: Python<'_>, path: std::path::PathBuf, vocab_size: Option<usize>, stop_token_ids: Option<Vec<u32>>) -> PyResult<Self> {
        let vocab = py.detach(|| Vocabulary::from_tokenizer_json_file(&path, None)).map_err(error)?;
        Self::build(vocab, vocab_size, stop_token_ids)
    }

    /// From the text of a `tokenizer.json` (what `tokenizer.backend_tokenizer.to_str()` gives).
    #[staticmethod]
    #[pyo3(signature = (text, *, vocab_size=None, stop_token_ids=None))]
    fn from_tokenizer_json_str(py: Python<'_>, text: &str, vocab_size: Option<usize>, stop_token_ids: Option<Vec<u32>>) -> PyResult<Self> {
        let text = text.to_owned();
        let vocab = py.detach(|| Vocabulary::from_tokenizer_json(&text)).map_err(error)?;
        Self::build(vocab, vocab_size, stop_token_ids)
    }

    /// From a GGUF model file's metadata (no tensor is read). The EOS (and end-of-turn)
    /// tokens are the file's unless `stop_token_ids` is given.
    #[staticmethod]
    #[pyo3(signature = (path, *, vocab_size=None, stop_token_ids=None))]
    fn from_gguf(py: Python<'_>, path: std::path::PathBuf, vocab_size: Option<usize>, stop_token_ids: Option<Vec<u32>>) -> PyResult<Self> {
        let vocab = py.detach(|| Vocabulary::from_gguf_file(&path)).map_err(error)?;
        Self::build(vocab, vocab_size, stop_token_ids)
    }

    /// From a HuggingFace *fast* tokenizer (`transformers.PreTrainedTokenizerFast`): its
    /// `tokenizer.json` is read from `tokenizer.backend_tokenizer`. `vocab_size` is the
    /// model's logit width (`model.config.vocab_size`, which can exceed `len(tokenizer)`;
    /// default: the larger of `len(tokenizer)` and the vocabulary read). The stop tokens
    /// default to `tokenizer.eos_token_id`.
    #[staticmethod]
    #[pyo3(signature = (tokenizer, vocab_size=None, *, stop_token_ids=None))]
    fn from_huggingface(py: Python<'_>, tokenizer: &Bound<'_, PyAny>, vocab_size: Option<usize>, stop_token_ids: Option<Vec<u32>>) -> PyResult<Self> {
        let backend = tokenizer.getattr("backend_tokenizer").map_err(|_| {
            PyTypeError::new_err("from_huggingface needs a fast tokenizer (one with `backend_tokenizer`, from tokenizer.json); load it with use_fast=True or use TokenizerInfo.from_tokenizer_json")
        })?;
        let text: String = backend.call_method0("to_str")?.extract()?;
        let stops = match stop_token_ids {
            Some(s) => Some(s),
            None => tokenizer.getattr("eos_token_id").ok().and_then(|e| e.extract::<Option<u32>>().ok().flatten()).map(|e| vec![e]),
        };
        let tokenizer_len: Option<usize> = tokenizer.len().ok();
        let vocab = py.detach(|| Vocabulary::from_tokenizer_json(&text)).map_err(error)?;
        let size = vocab_size.or_else(|| tokenizer_len.map(|n| n.max(vocab.len())));
        Self::build(vocab, size, stops)
    }

    /// The width of the model's logit rows: masks cover this many tokens.
    #[getter]
    fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// The number of tokens the tokenizer defines (tokens past it are never allowed).
    #[getter]
    fn tokenizer_vocab_size(&self) -> usize {
        self.vocab.len()
    }

    /// The tokens that end generation: allowed exactly where the grammar accepts.
    #[getter]
    fn stop_token_ids(&self) -> Vec<u32> {
        self.vocab.eos_tokens().iter().map(|t| t.0).collect()
    }

    /// The ids of the special (control) tokens, which grammar text never produces.
    #[getter]
    fn special_token_ids(&self) -> Vec<u32> {
        self.vocab.ids().filter(|&t| self.vocab.kind(t) == formwork_vocab::TokenKind::Special).map(|t| t.0).collect()
    }

    /// The bytes token `token_id` decodes to (a special token's name for special tokens).
    fn token_bytes<'py>(&self, py: Python<'py>, token_id: u32) -> PyResult<Bound<'py, PyBytes>> {
        if token_id as usize >= self.vocab.len() {
            return Err(error(format!("token {token_id} is outside the tokenizer's {} tokens", self.vocab.len())));
        }
        Ok(PyBytes::new(py, self.vocab.token_bytes(TokenId(token_id))))
    }

    fn __repr__(&self) -> String {
        format!(
            "TokenizerInfo(vocab_size={}, tokenizer_vocab_size={}, stop_token_ids={:?})",
            self.vocab_size,
            self.vocab.len(),
            self.stop_token_ids()
        )
    }
}
