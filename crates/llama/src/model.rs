//! [`LlamaModel`]: one loaded GGUF model with one sequence (a llama.cpp context); the loading
//! and tokenizer it shares with [`crate::LlamaBatchModel`].

use crate::backend::backend;
use crate::embed::{LlamaEmbedder, Pooling};
use formwork_model::embed::Embed;
use crate::options::{default_threads, LoadOptions, DEFAULT_MAX_CONTEXT};
use formwork_model::{Model, ModelError, ModelInfo};
use formwork_vocab::gguf::GgufFile;
use formwork_vocab::{TokenId, Vocabulary};
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::token::LlamaToken;
use std::mem::ManuallyDrop;
use std::num::NonZeroU32;
use std::path::Path;
use std::sync::Arc;

/// The default most tokens per llama.cpp batch.
pub(crate) const DEFAULT_BATCH: usize = 512;
/// Most sequences one context holds.
pub const MAX_SEQUENCES: usize = 256;
/// The sequence id of our one sequence.
const SEQ: i32 = 0;
/// The longest text [`LlamaModel::tokenize`] accepts (llama.cpp counts bytes in an `i32`).
pub(crate) const MAX_TOKENIZE_BYTES: usize = (i32::MAX / 2) as usize;

/// A llama.cpp model and its context, owned together.
///
/// The context borrows the model (`LlamaContext<'a>` holds `&'a LlamaModel` in spirit);
/// owning both in one struct needs the model at a stable heap address that outlives the
/// context: the model lives in an `Arc` (also lent to [`LlamaTokenizer`]s), and `Drop`
/// destroys the context before this struct's `Arc` is released.
pub(crate) struct Engine {
    /// Dropped first, in `Drop`, while `model` is still alive.
    pub(crate) ctx: ManuallyDrop<LlamaContext<'static>>,
    /// The weights; never moved (the `Arc`'s heap block), alive while any clone is.
    model: Arc<llama_cpp_2::model::LlamaModel>,
    /// With the default thread count: the raw context, the count that follows the
    /// machine's load (see `threads`) and the count set on the context; `None` with
    /// `--threads` given, or when the context pointer cannot be read.
    governor: Option<(*mut llama_cpp_sys_2::llama_context, crate::threads::Governor, usize)>,
    /// Other processes' CPU use, asked when the governor considers a trial.
    probe: crate::threads::LoadProbe,
    /// The context's own workers (see `threads::Pool`), when the context pointer was found;
    /// dropped after the context, in `Drop`.
    pub(crate) pool: Option<crate::threads::Pool>,
}

// SAFETY: `llama_cpp_2::model::LlamaModel` is `Send + Sync` and `LlamaContext` is `Send`
// (llama-cpp-2 declares both); `Engine` only adds the shared ownership of the model, which
// is only ever used through shared references. Moving the pair to another thread is
// therefore as sound as moving each part. The raw context pointer and the thread pool are
// the context's own (llama.cpp's threadpool runs from whichever thread evaluates).
// `Engine` is not `Sync` (the context is not).
unsafe impl Send for Engine {}

impl Engine {
    pub(crate) fn new(model: Arc<llama_cpp_2::model::LlamaModel>, params: LlamaContextParams) -> Result<Self, ModelError> {
        let backend = backend()?;
        // SAFETY: the pointer comes from a live `Arc`, so it is valid and aligned; the
        // `Arc` is stored in `Engine::model`, which is released only after `Drop` has
        // destroyed the context that holds this `'static` reference (and the `Arc`'s
        // heap block never moves).
        let model_ref: &'static llama_cpp_2::model::LlamaModel = unsafe { &*Arc::as_ptr(&model) };
        debug_assert!(Arc::strong_count(&model) >= 1);
        let n_threads = usize::try_from(params.n_threads()).unwrap_or(1);
        match model_ref.new_context(backend, params) {
            Ok(ctx) => {
                let pool = crate::threads::Pool::attach(&ctx, n_threads);
                if pool.is_none() {
                    tracing::warn!("cannot give llama.cpp a lasting thread pool; it makes its threads per evaluation");
                }
                Ok(Engine { ctx: ManuallyDrop::new(ctx), model, governor: None, probe: Default::default(), pool })
            }
            Err(e) => Err(ModelError::Load(format!(
                "llama.cpp could not create a context ({e}); the context length may be too large for the memory available — try a smaller --ctx-size (or fewer --parallel slots)"
            ))),
        }
    }

    /// Lets the thread count follow the machine's load, at most `max` (see `threads`).
    /// Returns whether it will (the context pointer was found and checked).
    pub(crate) fn adapt_threads(&mut self, max: usize) -> bool {
        match crate::threads::raw_context(&self.ctx, max) {
            Some(p) if max > 1 => {
                self.governor = Some((p, crate::threads::Governor::new(max), max));
                // The first reading: the first scheduled trial compares against it.
                self.probe.quiet();
                true
            }
            Some(_) => false,
            None => {
                tracing::warn!("cannot read llama.cpp's context pointer; the thread count stays fixed");
                false
            }
        }
    }

    /// The thread count settled on, when it follows the machine's load.
    pub(crate) fn threads_now(&self) -> Option<usize> {
        self.governor.as_ref().map(|g| g.1.current())
    }

    /// Evaluates `batch` (timed for the thread governor, when there is one).
    pub(crate) fn decode(&mut self, batch: &mut LlamaBatch<'static>) -> Result<(), llama_cpp_2::DecodeError> {
        let n_tokens = usize::try_from(batch.n_tokens()).unwrap_or(0);
        let Some((p, g, set)) = &mut self.governor else {
            return self.ctx.decode(batch);
        };
        let n = g.threads();
        if n != *set {
            crate::threads::set_threads(*p, n);
            *set = n;
        }
        let started = std::time::Instant::now();
        let r = self.ctx.decode(batch);
        if r.is_ok() {
            let before = g.current();
            let probe = &mut self.probe;
            g.record(n, n_tokens, started.elapsed().as_secs_f64(), || probe.quiet());
            if g.current() != before {
                tracing::info!(from = before, to = g.current(), "evaluation threads changed with the machine's load");
            }
        }
        r
    }

    /// An embedder over the same weights (its context is made on first use).
    pub(crate) fn embedder(&self, pooling: Pooling, n_ctx: usize, n_threads: usize) -> Arc<LlamaEmbedder> {
        Arc::new(LlamaEmbedder::new(self.model.clone(), pooling, n_ctx, n_threads))
    }

    pub(crate) fn tokenizer(&self, vocab: &Arc<Vocabulary>) -> LlamaTokenizer {
        LlamaTokenizer { model: self.model.clone(), vocab: vocab.clone() }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        // SAFETY: the context is dropped exactly once, here, before the model it borrows
        // (the `model` field, dropped after this function returns). Nothing refers to the
        // context afterwards: `Engine` is being dropped.
        unsafe {
            ManuallyDrop::drop(&mut self.ctx);
        }
        // The workers outlive the context that used them.
        drop(self.pool.take());
    }
}

/// llama.cpp's tokenizer for a loaded model, shareable between threads.
#[derive(Clone)]
pub struct LlamaTokenizer {
    model: Arc<llama_cpp_2::model::LlamaModel>,
    vocab: Arc<Vocabulary>,
}

impl LlamaTokenizer {
    /// Tokenizes with llama.cpp's tokenizer. With `add_bos`, the model's BOS token is put in
    /// front (unless the text already starts with it, as a rendered template's
    /// `{{ bos_token }}` does with `parse_special`); a model without BOS gets none.
    pub fn tokenize(&self, text: &str, add_bos: bool, parse_special: bool) -> Result<Vec<TokenId>, ModelError> {
        if text.len() > MAX_TOKENIZE_BYTES {
            return Err(ModelError::Tokenize(format!("the text is {} bytes; at most {MAX_TOKENIZE_BYTES} can be tokenized", text.len())));
        }
        let raw = self.model.vocab().tokenize(text.as_bytes(), false, parse_special);
        let mut out = Vec::with_capacity(raw.len() + 1);
        let bos = self.vocab.bos_token().filter(|_| add_bos);
        if let Some(bos) = bos {
            if raw.first().map(|t| t.0 as u32) != Some(bos.0) {
                out.push(bos);
            }
        }
        for t in raw {
            let id = u32::try_from(t.0).map_err(|_| ModelError::Tokenize(format!("llama.cpp returned the invalid token id {}", t.0)))?;
            out.push(TokenId(id));
        }
        Ok(out)
    }
}

impl formwork_model::batch::Tokenize for LlamaTokenizer {
    fn tokenize(&self, text: &str, add_bos: bool, parse_special: bool) -> Result<Vec<TokenId>, ModelError> {
        LlamaTokenizer::tokenize(self, text, add_bos, parse_special)
    }
}

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

    /// A [`LlamaEmbedder`] over the same weights (see [`crate::embed`]).
    fn embedder(&self) -> Option<Arc<dyn Embed>> {
        Some(self.embedder.clone())
    }
}
