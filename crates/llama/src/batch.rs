//! [`LlamaBatchModel`]: one loaded GGUF model with several sequences in one llama.cpp
//! context, evaluated together ([`formwork_model::batch::BatchModel`]).
//!
//! Each sequence is a llama.cpp sequence id with a KV-cache stream of its own (`n_ctx`
//! positions each, `kv_unified` off, so its output does not depend on the others'); one [`BatchModel::decode_batch`] call fills one
//! `llama_batch` with every entry's tokens (the entry's sequence id, positions from its
//! `pos`), asks for logits only after the entries that want them, and runs one
//! `llama_decode`. Drive it through a `formwork_engine::batch::Batcher`.
//!
//! llama.cpp cuts such a batch into micro-batches of one run of consecutive sequence ids
//! each (`split_equal` with a stream per sequence), so a step over ids `0, 2, 5` is three
//! evaluations ([`BatchModel::contiguous_seqs`]); the batcher moves sequences down with
//! [`BatchModel::seq_swap`], which exchanges two sequences' cells through llama.cpp's
//! per-sequence state (only the positions they hold are copied).

use crate::embed::LlamaEmbedder;
use crate::engine::{Engine, LlamaTokenizer};
use crate::model::{load, Loaded};
use formwork_model::embed::Embed;
use crate::options::LoadOptions;
use formwork_model::batch::{BatchEntry, BatchModel, SeqId, Tokenize};
use formwork_model::{ModelError, ModelInfo};
use formwork_vocab::Vocabulary;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::token::LlamaToken;
use std::path::Path;
use std::sync::Arc;

/// A GGUF model holding `n_seq` sequences, implementing [`BatchModel`].
pub struct LlamaBatchModel {
    engine: Engine,
    tokenizer: LlamaTokenizer,
    batch: LlamaBatch<'static>,
    info: ModelInfo,
    vocab: Arc<Vocabulary>,
    n_seq: usize,
    n_batch: usize,
    n_threads: usize,
    /// Batch indices whose logits were asked for, in entry order (valid after a decode).
    logit_rows: Vec<i32>,
    embedder: Arc<LlamaEmbedder>,
}

impl std::fmt::Debug for LlamaBatchModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlamaBatchModel")
            .field("name", &self.info.name)
            .field("n_seq", &self.n_seq)
            .field("n_ctx_per_seq", &self.info.context_length)
            .field("n_threads", &self.n_threads)
            .finish_non_exhaustive()
    }
}

impl LlamaBatchModel {
    /// Loads a GGUF model with `n_seq` sequences of `options.n_ctx` positions each (the
    /// memory of the KV cache grows with both).
    pub fn load(path: impl AsRef<Path>, options: LoadOptions, n_seq: usize) -> Result<Self, ModelError> {
        let Loaded { engine, info, vocab, n_batch, n_threads, embedder, .. } = load(path.as_ref(), options, n_seq)?;
        let n_seq = n_seq.clamp(1, crate::model::MAX_SEQUENCES);
        Ok(LlamaBatchModel {
            tokenizer: engine.tokenizer(&vocab),
            engine,
            batch: LlamaBatch::new(n_batch, 1),
            info,
            vocab,
            n_seq,
            n_batch,
            n_threads,
            logit_rows: Vec::new(),
            embedder,
        })
    }

    /// The number of threads evaluation uses: the configured count, or with the default
    /// count (no `LoadOptions::n_threads`) the one it follows the machine's load to, at
    /// most the default (see the crate docs).
    pub fn n_threads(&self) -> usize {
        self.engine.threads_now().unwrap_or(self.n_threads)
    }
}

impl BatchModel for LlamaBatchModel {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn vocab(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    fn tokenizer(&self) -> Arc<dyn Tokenize> {
        Arc::new(self.tokenizer.clone())
    }

    fn n_seq(&self) -> usize {
        self.n_seq
    }

    fn max_batch_tokens(&self) -> usize {
        self.n_batch
    }

    /// A [`LlamaEmbedder`] over the same weights, in a context of its own (see
    /// `crate::embed`): embedding runs beside the batch, never inside it.
    fn embedder(&self) -> Option<Arc<dyn Embed>> {
        Some(self.embedder.clone())
    }

    fn seq_keep(&mut self, seq: SeqId, n: usize) -> bool {
        let id = seq.0 as i32;
        if n == 0 {
            // Removing a whole sequence works for every kind of memory.
            let _ = self.engine.ctx.kv_cache_seq_rm(id, None, None);
            return true;
        }
        self.engine.ctx.kv_cache_seq_rm(id, Some(n as u32), None).is_ok()
    }

    fn can_copy_seqs(&self) -> bool {
        true
    }

    /// With a KV stream per sequence llama.cpp splits batches `split_equal`.
    fn equal_micro_batches(&self) -> bool {
        true
    }

    /// llama.cpp copies the source's whole KV stream (its buffer, at the next decode); the
    /// batcher then keeps the prefix it wants.
    fn seq_copy(&mut self, src: SeqId, dst: SeqId) -> bool {
        if src.index() >= self.n_seq || dst.index() >= self.n_seq || src == dst {
            return false;
        }
        self.engine.ctx.copy_kv_cache_seq(src.0 as i32, dst.0 as i32, None, None).is_ok()
    }

    /// A micro-batch of llama.cpp's `split_equal` (a KV stream per sequence) takes only
    /// consecutive increasing sequence ids.
    fn contiguous_seqs(&self) -> bool {
        true
    }

    /// Through llama.cpp's per-sequence state (`llama_state_seq_get_data`/`set_data`): only
    /// the positions each sequence holds are copied (a cross-stream `seq_cp` copies the whole
    /// stream buffer: 45-75 ms for 8,192 positions of SmolLM2, against about 1 ms for 100
    /// positions here). Each state is restored into an emptied stream, so its cells keep
    /// their order from the first cell on and evaluation over them is unchanged.
    fn seq_swap(&mut self, a: SeqId, b: SeqId) -> bool {
        if a.index() >= self.n_seq || b.index() >= self.n_seq || a == b {
            return false;
        }
        let flags = llama_cpp_2::context::session::LlamaStateSeqFlags::empty();
        let (ia, ib) = (a.0 as i32, b.0 as i32);
        let ctx = &mut self.engine.ctx;
        let (Ok(sa), Ok(sb)) = (ctx.state_seq_get(ia, flags), ctx.state_seq_get(ib, flags)) else {
            return false;
        };
        let mut put = |into_a: &llama_cpp_2::context::session::SeqState, into_b: &llama_cpp_2::context::session::SeqState| {
            let _ = ctx.kv_cache_seq_rm(ia, None, None);
            let _ = ctx.kv_cache_seq_rm(ib, None, None);
            ctx.state_seq_set(into_a, ia).is_ok() & ctx.state_seq_set(into_b, ib).is_ok()
        };
        if put(&sb, &sa) {
            return true;
        }
        // Restoring into emptied streams does not fail short of memory; put both back.
        if !put(&sa, &sb) {
            tracing::error!(a = ia, b = ib, "swapping two sequences' caches failed and they could not be restored; their next evaluations will fail");
        }
        false
    }

    fn decode_batch(&mut self, entries: &[BatchEntry<'_>]) -> Result<(), ModelError> {
        let total: usize = entries.iter().map(|e| e.tokens.len()).sum();
        if total > self.n_batch {
            return Err(ModelError::Decode(format!("a batch of {total} tokens is over the batch size {}", self.n_batch)));
        }
        let n_vocab = self.vocab.len();
        self.batch.clear();
        self.logit_rows.clear();
        for e in entries {
            if e.seq.index() >= self.n_seq {
                return Err(ModelError::Decode(format!("sequence {} does not exist (the model holds {})", e.seq.0, self.n_seq)));
            }
            if e.pos + e.tokens.len() > self.info.context_length {
                return Err(ModelError::ContextOverflow { needed: e.pos + e.tokens.len(), context: self.info.context_length });
            }
            if let Some(t) = e.tokens.iter().find(|t| t.index() >= n_vocab) {
                return Err(ModelError::Decode(format!("token id {t} is out of range (the vocabulary has {n_vocab} tokens)")));
            }
        }
        // Entries go into the batch in increasing sequence id. With a KV stream per sequence,
        // llama.cpp cuts a batch into micro-batches of consecutive, increasing sequence ids
        // (`split_equal`, sequential): in any other order a step of 16 one-token sequences
        // became up to 16 separate evaluations (measured: a 16-sequence step took 121 ms
        // in the server against 70 ms in order).
        let mut order: Vec<usize> = (0..entries.len()).collect();
        order.sort_by_key(|&i| entries[i].seq.0);
        // `logit_rows[k]`: the batch row of the k-th entry that wants logits, in entry order.
        let mut rows = vec![-1i32; entries.len()];
        for &i in &order {
            let e = &entries[i];
            for (j, t) in e.tokens.iter().enumerate() {
                let want = e.logits && j + 1 == e.tokens.len();
                if want {
                    rows[i] = self.batch.n_tokens();
                }
                self.batch
                    .add(LlamaToken(t.0 as i32), (e.pos + j) as i32, &[e.seq.0 as i32], want)
                    .map_err(|err| ModelError::Decode(format!("batch: {err}")))?;
            }
        }
        self.logit_rows.extend(entries.iter().zip(&rows).filter(|(e, _)| e.logits && !e.tokens.is_empty()).map(|(_, &r)| r));
        if self.batch.n_tokens() == 0 {
            return Ok(());
        }
        self.engine.decode(&mut self.batch).map_err(|e| ModelError::Decode(format!("llama.cpp decode failed ({e})")))
    }

    fn logits(&self, i: usize) -> &[f32] {
        self.engine.ctx.get_logits_ith(self.logit_rows[i])
    }
}
