//! [`Engine`]: a llama.cpp model and its context, owned together, with the thread governor
//! and pool; and [`LlamaTokenizer`], llama.cpp's tokenizer for a loaded model. The single
//! model ([`crate::LlamaModel`]), the batched one and the embedder each run one.

use crate::backend::backend;
use formwork_model::ModelError;
use formwork_vocab::{TokenId, Vocabulary};
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_batch::LlamaBatch;
use std::mem::ManuallyDrop;
use std::sync::Arc;

/// The longest text [`crate::LlamaModel::tokenize`] accepts (llama.cpp counts bytes in an `i32`).
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
    pub(crate) model: Arc<llama_cpp_2::model::LlamaModel>,
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
