//! [`LlamaModel`]: one loaded GGUF model with one sequence (a llama.cpp context); the loading
//! and tokenizer it shares with [`crate::LlamaBatchModel`].

use crate::backend::backend;
use crate::embed::{LlamaEmbedder, Pooling};
use crate::engine::{Engine, LlamaTokenizer};
use formwork_model::embed::Embed;
use crate::options::{default_threads, LoadOptions, DEFAULT_MAX_CONTEXT};
use formwork_model::{Model, ModelError, ModelInfo};
use formwork_vocab::gguf::GgufFile;
use formwork_vocab::{TokenId, Vocabulary};
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::token::LlamaToken;
use std::num::NonZeroU32;
use std::path::Path;
use std::sync::Arc;

/// The default most tokens per llama.cpp batch.
pub(crate) const DEFAULT_BATCH: usize = 512;
/// Most sequences one context holds.
pub const MAX_SEQUENCES: usize = 256;
/// The sequence id of our one sequence.
const SEQ: i32 = 0;

/// What loading gives both the one-sequence and the batched model.
pub(crate) struct Loaded {
    pub(crate) engine: Engine,
    pub(crate) info: ModelInfo,
    pub(crate) vocab: Arc<Vocabulary>,
    /// Context of one sequence.
    pub(crate) n_ctx: usize,
    pub(crate) n_batch: usize,
    pub(crate) n_threads: usize,
    /// Embeddings over the same weights.
    pub(crate) embedder: Arc<LlamaEmbedder>,
}

/// Loads a GGUF model with a context of `n_seq` sequences of `options.n_ctx` (or the
/// default) positions each.
pub(crate) fn load(path: &Path, options: LoadOptions, n_seq: usize) -> Result<Loaded, ModelError> {
    let shown = path.display();
    if !path.is_file() {
        return Err(ModelError::Load(format!("model file {shown} does not exist (or is not a file); check the path, or use a model name such as `smollm2`")));
    }
    let started = std::time::Instant::now();
    let gguf = GgufFile::open(path).map_err(|e| ModelError::Load(format!("{shown}: {e}")))?;
    let vocab = Vocabulary::from_gguf(&gguf).map_err(|e| ModelError::Load(format!("{shown}: cannot read the vocabulary: {e}")))?;
    let trained = gguf.context_length().map(|n| usize::try_from(n).unwrap_or(usize::MAX)).unwrap_or(DEFAULT_MAX_CONTEXT);
    let chat_template = gguf.chat_template().map(str::to_string);
    let arch = gguf.get_str("general.architecture").unwrap_or("llama").to_string();
    let pooling = Pooling::from_metadata(gguf.get(&format!("{arch}.pooling_type")).and_then(|v| v.as_i128()));
    drop(gguf);

    let n_seq = n_seq.clamp(1, MAX_SEQUENCES);
    let n_ctx = options.n_ctx.unwrap_or_else(|| trained.min(DEFAULT_MAX_CONTEXT));
    if n_ctx == 0 || n_ctx.saturating_mul(n_seq) > i32::MAX as usize / 2 {
        return Err(ModelError::Load(format!("context length {n_ctx} × {n_seq} sequences is out of range (1 to {} in all)", i32::MAX / 2)));
    }
    if n_ctx > trained {
        tracing::warn!(n_ctx, trained, "context length is beyond what the model was trained for; quality may degrade");
    }
    let adapt = options.n_threads.is_none();
    let n_threads = options.n_threads.unwrap_or_else(default_threads).clamp(1, 512);
    let n_batch = options.n_batch.unwrap_or(DEFAULT_BATCH).clamp(1, n_ctx * n_seq);

    let backend = backend()?;
    let model = llama_cpp_2::model::LlamaModel::load_from_file(backend, path, &LlamaModelParams::default())
        .map_err(|e| ModelError::Load(format!("llama.cpp could not load {shown} ({e}); is it a complete GGUF model file of an architecture this llama.cpp supports? Set FORMWORK_LOG=llama-cpp-2=info for llama.cpp's own messages")))?;
    let n_vocab = usize::try_from(model.n_vocab()).unwrap_or(0);
    if n_vocab != vocab.len() {
        return Err(ModelError::Load(format!(
            "{shown}: llama.cpp reports {n_vocab} tokens but the GGUF vocabulary has {}; the file is inconsistent",
            vocab.len()
        )));
    }
    let to_u32 = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    let to_i32 = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    // A KV-cache stream per sequence (not unified), each of n_ctx positions: one long
    // conversation cannot take the others' room, and a sequence's attention runs over the
    // same cells whether it is alone or batched, so greedy output does not depend on what
    // else runs (with a unified cache it did: a test's haiku changed from its first token).
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(to_u32(n_ctx * n_seq)))
        .with_n_batch(to_u32(n_batch))
        .with_n_ubatch(to_u32(n_batch))
        .with_n_seq_max(to_u32(n_seq))
        .with_kv_unified(false)
        .with_n_threads(to_i32(n_threads))
        .with_n_threads_batch(to_i32(n_threads));
    let mut engine = Engine::new(Arc::new(model), params)?;
    if adapt {
        engine.adapt_threads(n_threads);
    }
    let actual_ctx = engine.ctx.n_ctx() as usize / n_seq;
    let n_ctx = n_ctx.min(actual_ctx);

    let token_text = |t: Option<TokenId>| t.map(|t| String::from_utf8_lossy(vocab.token_bytes(t)).into_owned());
    let info = ModelInfo {
        name: options.name.unwrap_or_else(|| path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()),
        chat_template,
        bos_token: token_text(vocab.bos_token()),
        eos_token: token_text(vocab.eos_token()),
        add_bos: vocab.add_bos(),
        context_length: n_ctx,
        trained_context_length: trained,
    };
    tracing::info!(
        model = %info.name, n_ctx, n_seq, n_threads, n_batch, vocab = vocab.len(),
        ms = started.elapsed().as_millis() as u64, "model loaded"
    );
    let embedder = engine.embedder(pooling, n_ctx, n_threads);
    Ok(Loaded { engine, info, vocab: Arc::new(vocab), n_ctx, n_batch, n_threads, embedder })
}

/// A GGUF model evaluated by llama.cpp, implementing [`formwork_model::Model`].
///
/// One instance holds one sequence. [`Model::decode`] returns the raw logits (one `f32` per
/// vocabulary entry) after the last token given; sampling is left to the caller.
pub struct LlamaModel {
    pub(crate) engine: Engine,
    tokenizer: LlamaTokenizer,
    batch: LlamaBatch<'static>,
    info: ModelInfo,
    vocab: Arc<Vocabulary>,
    /// The tokens in the KV cache, position by position.
    tokens: Vec<TokenId>,
    /// The logits after `tokens` (valid when `logits_valid`).
    logits: Vec<f32>,
    logits_valid: bool,
    /// Our context limit: what was asked for (llama.cpp may round its own up).
    n_ctx: usize,
    n_batch: usize,
    n_threads: usize,
    embedder: Arc<LlamaEmbedder>,
}

impl std::fmt::Debug for LlamaModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlamaModel")
            .field("name", &self.info.name)
            .field("n_ctx", &self.n_ctx)
            .field("n_threads", &self.n_threads)
            .field("n_past", &self.tokens.len())
            .finish_non_exhaustive()
    }
}

impl LlamaModel {
    /// Loads a GGUF model file.
    ///
    /// The vocabulary, chat template, BOS/EOS and context length are read from the file's
    /// metadata by formwork's own GGUF reader; the weights are loaded (memory-mapped) by
    /// llama.cpp. Errors are [`ModelError::Load`] with a message naming the file.
    pub fn load(path: impl AsRef<Path>, options: LoadOptions) -> Result<Self, ModelError> {
        let Loaded { engine, info, vocab, n_ctx, n_batch, n_threads, embedder } = load(path.as_ref(), options, 1)?;
        let n_vocab = vocab.len();
        Ok(LlamaModel {
            tokenizer: engine.tokenizer(&vocab),
            engine,
            batch: LlamaBatch::new(n_batch, 1),
            info,
            vocab,
            tokens: Vec::with_capacity(n_ctx),
            logits: Vec::with_capacity(n_vocab),
            logits_valid: false,
            n_ctx,
            n_batch,
            n_threads,
            embedder,
        })
    }

    /// The number of threads evaluation uses: the configured count, or with the default
    /// count (no `LoadOptions::n_threads`) the one it follows the machine's load to, at
    /// most the default (see the crate docs).
    pub fn n_threads(&self) -> usize {
        self.engine.threads_now().unwrap_or(self.n_threads)
    }

    /// Evaluates `tokens` at positions `n_past..`, in batches; on failure the KV cache is
    /// rolled back to where it was.
    fn eval(&mut self, tokens: &[TokenId]) -> Result<(), ModelError> {
        let n_vocab = self.vocab.len();
        if let Some(bad) = tokens.iter().find(|t| t.index() >= n_vocab) {
            return Err(ModelError::Decode(format!("token id {bad} is out of range (the vocabulary has {n_vocab} tokens)")));
        }
        let start = self.tokens.len();
        let needed = start + tokens.len();
        if needed > self.n_ctx {
            return Err(ModelError::ContextOverflow { needed, context: self.n_ctx });
        }
        self.logits_valid = false;
        let chunks = tokens.chunks(self.n_batch);
        let n_chunks = chunks.len();
        for (i, chunk) in chunks.enumerate() {
            let last_chunk = i + 1 == n_chunks;
            self.batch.clear();
            for (j, t) in chunk.iter().enumerate() {
                let pos = (self.tokens.len() + j) as i32;
                let want_logits = last_chunk && j + 1 == chunk.len();
                self.batch
                    .add(LlamaToken(t.0 as i32), pos, &[SEQ], want_logits)
                    .map_err(|e| ModelError::Decode(format!("batch: {e}")))?;
            }
            if let Err(e) = self.engine.decode(&mut self.batch) {
                self.rollback(start);
                return Err(ModelError::Decode(format!("llama.cpp decode failed ({e})")));
            }
            self.tokens.extend_from_slice(chunk);
        }
        let last = self.batch.n_tokens() - 1;
        self.logits.clear();
        self.logits.extend_from_slice(self.engine.ctx.get_logits_ith(last));
        self.logits_valid = true;
        Ok(())
    }

    /// Drops KV entries from position `n` on after a failed evaluation.
    fn rollback(&mut self, n: usize) {
        self.tokens.truncate(n);
        self.logits_valid = false;
        if self.engine.ctx.kv_cache_seq_rm(SEQ, Some(n as u32), None).is_err() {
            self.engine.ctx.clear_kv_cache();
            self.tokens.clear();
        }
    }
}

impl Model for LlamaModel {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn vocab(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    /// Tokenizes with llama.cpp's tokenizer (see [`LlamaTokenizer::tokenize`]).
    fn tokenize(&self, text: &str, add_bos: bool, parse_special: bool) -> Result<Vec<TokenId>, ModelError> {
        self.tokenizer.tokenize(text, add_bos, parse_special)
    }

    fn n_past(&self) -> usize {
        self.tokens.len()
    }

    fn truncate(&mut self, n: usize) -> Result<(), ModelError> {
        if n >= self.tokens.len() {
            return Ok(());
        }
        self.logits_valid = false;
        if n == 0 {
            self.engine.ctx.clear_kv_cache();
            self.tokens.clear();
            return Ok(());
        }
        if self.engine.ctx.kv_cache_seq_rm(SEQ, Some(n as u32), None).is_ok() {
            self.tokens.truncate(n);
            return Ok(());
        }
        // Some architectures (recurrent state) cannot drop a suffix: start over and
        // re-evaluate the prefix that is kept.
        let keep: Vec<TokenId> = self.tokens[..n].to_vec();
        self.engine.ctx.clear_kv_cache();
        self.tokens.clear();
        self.eval(&keep)
    }

    fn decode(&mut self, tokens: &[TokenId]) -> Result<&[f32], ModelError> {
        if tokens.is_empty() {
            return if self.logits_valid {
                Ok(&self.logits)
            } else {
                Err(ModelError::Decode("nothing to decode: no tokens given and none evaluated since the last reset".into()))
            };
        }
        self.eval(tokens)?;
        Ok(&self.logits)
    }

    fn cached_tokens(&self) -> Option<&[TokenId]> {
        Some(&self.tokens)
    }

    /// A [`LlamaEmbedder`] over the same weights (see `crate::embed`).
    fn embedder(&self) -> Option<Arc<dyn Embed>> {
        Some(self.embedder.clone())
    }
}
