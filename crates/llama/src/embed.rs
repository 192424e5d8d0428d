//! [`LlamaEmbedder`]: sentence embeddings from a loaded model, in a llama.cpp context of its
//! own ([`formwork_model::embed::Embed`]).
//!
//! ## Design
//! Generation contexts compute logits and keep a KV cache per sequence; an embedding needs
//! llama.cpp's *embeddings* mode (the hidden states, pooled per sequence) instead. So the
//! embedder makes a second context over the **same weights** (the `Arc`'d model: no second
//! copy), created lazily on the first request and kept: a server that never embeds never pays
//! for it. llama.cpp allows several contexts over one model on different threads, so
//! embedding never disturbs the generation context (its sequences, KV streams and batches);
//! the two only compete for the cores.
//!
//! - **Pooling**: what the GGUF metadata says (`{arch}.pooling_type`: mean, CLS or last
//!   token). A model without one (a decoder such as SmolLM2, or one that says "none" or
//!   "rank") is pooled by **mean**: the average of the hidden states of its tokens, as Ollama
//!   returns for such models.
//! - **One input per evaluation**: the context holds one sequence of up to
//!   [`EMBED_MAX_CONTEXT`] tokens, evaluated in one micro-batch (llama.cpp pools per
//!   micro-batch, so an input split over two would get the pooling of its last part). The
//!   KV cache is cleared before each input. Calls are serialized by a mutex.
//! - **Normalization**: the pooled vector is scaled to unit L2 norm.
//!
//! ## Cost
//! One forward pass per input. Memory: the context's KV cache (`n_ctx` positions) and compute
//! buffer, and an output buffer that grows to the longest input seen: in embeddings mode
//! llama.cpp outputs every token, logits included (`n_vocab + n_embd` floats per token).
//! Measured on SmolLM2-135M (49152 tokens) on 2 busy cores: the first short input added
//! ~50 MB to the server; a 2048-token input ~820 MB more and took 37 s (a 2071-token
//! prompt's prefill for generation took 27 s on the same machine). The embedding context
//! uses the model's thread count, so an embedding that runs while generations do competes
//! with them for the cores (they slow down, their output does not change).

use crate::engine::{Engine, MAX_TOKENIZE_BYTES};
use formwork_model::embed::{normalize, Embed};
use formwork_model::ModelError;
use formwork_vocab::TokenId;
use llama_cpp_2::context::params::{LlamaContextParams, LlamaPoolingType};
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::token::LlamaToken;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};

/// The most tokens one input may have: the embedding context's length, at most this (and at
/// most the generation context's per-sequence length). The compute buffer of a micro-batch
/// grows with the square of it.
pub const EMBED_MAX_CONTEXT: usize = 2048;

/// How an input's hidden states become one vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pooling {
    /// The average over the input's tokens.
    Mean,
    /// The first token's state (BERT's CLS).
    Cls,
    /// The last token's state.
    Last,
}

impl Pooling {
    /// The pooling for a GGUF `{arch}.pooling_type` value (llama.cpp's numbering: 0 none,
    /// 1 mean, 2 CLS, 3 last, 4 rank); mean when absent or not a sentence pooling.
    pub fn from_metadata(value: Option<i128>) -> Self {
        match value {
            Some(2) => Pooling::Cls,
            Some(3) => Pooling::Last,
            _ => Pooling::Mean,
        }
    }

    fn llama(self) -> LlamaPoolingType {
        match self {
            Pooling::Mean => LlamaPoolingType::Mean,
            Pooling::Cls => LlamaPoolingType::Cls,
            Pooling::Last => LlamaPoolingType::Last,
        }
    }
}

/// The embedding context, once made.
struct EmbedContext {
    engine: Engine,
    batch: LlamaBatch<'static>,
}

/// Sentence embeddings of one loaded model; see the module docs. Cheap to make: the
/// llama.cpp context is created on the first [`Embed::embed`] call. If creating it fails
/// (memory), that call and every later one fail with the same [`ModelError::Load`] message.
pub struct LlamaEmbedder {
    model: Arc<llama_cpp_2::model::LlamaModel>,
    pooling: Pooling,
    n_ctx: usize,
    n_threads: usize,
    n_vocab: usize,
    dimensions: usize,
    context: Mutex<Option<Result<EmbedContext, String>>>,
}

impl std::fmt::Debug for LlamaEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlamaEmbedder")
            .field("pooling", &self.pooling)
            .field("n_ctx", &self.n_ctx)
            .field("dimensions", &self.dimensions)
            .finish_non_exhaustive()
    }
}

impl LlamaEmbedder {
    /// An embedder over `model`, for inputs of up to `n_ctx` tokens (capped at
    /// [`EMBED_MAX_CONTEXT`]).
    pub(crate) fn new(model: Arc<llama_cpp_2::model::LlamaModel>, pooling: Pooling, n_ctx: usize, n_threads: usize) -> Self {
        let n_vocab = usize::try_from(model.n_vocab()).unwrap_or(0);
        let dimensions = usize::try_from(model.n_embd_out()).unwrap_or(0);
        LlamaEmbedder {
            model,
            pooling,
            n_ctx: n_ctx.clamp(1, EMBED_MAX_CONTEXT),
            n_threads,
            n_vocab,
            dimensions,
            context: Mutex::new(None),
        }
    }

    /// The pooling in use.
    pub fn pooling(&self) -> Pooling {
        self.pooling
    }

    fn create(&self) -> Result<EmbedContext, String> {
        let n_ctx = u32::try_from(self.n_ctx).unwrap_or(u32::MAX);
        let threads = i32::try_from(self.n_threads).unwrap_or(i32::MAX);
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(n_ctx))
            .with_n_batch(n_ctx)
            .with_n_ubatch(n_ctx)
            .with_n_seq_max(1)
            .with_embeddings(true)
            .with_pooling_type(self.pooling.llama())
            .with_n_threads(threads)
            .with_n_threads_batch(threads);
        let engine = Engine::new(self.model.clone(), params).map_err(|e| format!("cannot create the embedding context: {e}"))?;
        tracing::info!(n_ctx = self.n_ctx, pooling = ?self.pooling, dimensions = self.dimensions, "embedding context created");
        Ok(EmbedContext { engine, batch: LlamaBatch::new(self.n_ctx, 1) })
    }
}

impl Embed for LlamaEmbedder {
    fn dimensions(&self) -> usize {
        self.dimensions
    }

    fn max_tokens(&self) -> usize {
        self.n_ctx
    }

    fn vocab_size(&self) -> usize {
        self.n_vocab
    }

    /// llama.cpp's tokenizer with the special tokens the model adds to a text (BOS; CLS and
    /// SEP for BERT-style models); special-token names in the text are plain text.
    fn tokenize(&self, text: &str) -> Result<Vec<TokenId>, ModelError> {
        if text.len() > MAX_TOKENIZE_BYTES {
            return Err(ModelError::Tokenize(format!("the text is {} bytes; at most {} can be tokenized", text.len(), MAX_TOKENIZE_BYTES)));
        }
        let raw = self.model.vocab().tokenize(text.as_bytes(), true, false);
        Ok(raw.into_iter().filter_map(|t| u32::try_from(t.0).ok()).map(TokenId).collect())
    }

    fn embed(&self, tokens: &[TokenId]) -> Result<Vec<f32>, ModelError> {
        if tokens.is_empty() {
            return Err(ModelError::Decode("nothing to embed: the input has no tokens".into()));
        }
        if tokens.len() > self.n_ctx {
            return Err(ModelError::ContextOverflow { needed: tokens.len(), context: self.n_ctx });
        }
        if let Some(bad) = tokens.iter().find(|t| t.index() >= self.n_vocab) {
            return Err(ModelError::Decode(format!("token id {bad} is out of range (the vocabulary has {} tokens)", self.n_vocab)));
        }
        let mut guard = self.context.lock().unwrap_or_else(|e| e.into_inner());
        let ctx = match guard.get_or_insert_with(|| self.create()) {
            Ok(ctx) => ctx,
            Err(e) => return Err(ModelError::Load(e.clone())),
        };
        ctx.engine.ctx.clear_kv_cache();
        ctx.batch.clear();
        for (pos, t) in tokens.iter().enumerate() {
            ctx.batch
                .add(LlamaToken(t.0 as i32), pos as i32, &[0], true)
                .map_err(|e| ModelError::Decode(format!("batch: {e}")))?;
        }
        ctx.engine.ctx.decode(&mut ctx.batch).map_err(|e| ModelError::Decode(format!("llama.cpp decode failed ({e})")))?;
        let pooled = ctx
            .engine
            .ctx
            .embeddings_seq_ith(0)
            .map_err(|e| ModelError::Decode(format!("llama.cpp returned no pooled embedding ({e})")))?;
        let mut v = pooled.to_vec();
        ctx.engine.ctx.clear_kv_cache();
        if v.len() != self.dimensions {
            return Err(ModelError::Decode(format!("llama.cpp returned {} values where {} were expected", v.len(), self.dimensions)));
        }
        normalize(&mut v);
        Ok(v)
    }
}

impl Engine {
    /// An embedder over the same weights (its context is made on first use).
    pub(crate) fn embedder(&self, pooling: Pooling, n_ctx: usize, n_threads: usize) -> Arc<LlamaEmbedder> {
        Arc::new(LlamaEmbedder::new(self.model.clone(), pooling, n_ctx, n_threads))
    }
}

