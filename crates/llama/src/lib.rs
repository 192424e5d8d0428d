//! # formwork-llama: the llama.cpp backend
//!
//! Implements [`formwork_model::Model`] (the engine's model seam) with llama.cpp (through the `llama-cpp-2` crate,
//! pinned to an exact version, which builds llama.cpp from source with cmake). This is the
//! only formwork crate with FFI and `unsafe`.
//!
//! ## What comes from where
//! - **Vocabulary, chat template, BOS/EOS, `add_bos`, trained context length**: the GGUF
//!   metadata, read by formwork's own pure-Rust reader ([`formwork_vocab::gguf`]), so the
//!   token table the constraint engine uses is exactly the file's.
//! - **Tokenization and evaluation**: llama.cpp. [`Model::decode`](formwork_model::Model::decode)
//!   returns the raw logits after the last token; llama.cpp's sampler chain is not used —
//!   formwork samples itself (`formwork-sampler`).
//!
//! ## Key items
//! - [`LlamaModel::load`] with [`LoadOptions`] (context length, threads, batch size): one
//!   sequence, for the CLI.
//! - [`LlamaBatchModel::load`]: the same model with several sequences in one context, each
//!   with its own KV-cache stream, evaluated together in one `llama_decode` per step
//!   ([`formwork_model::batch::BatchModel`]); the server drives it through a
//!   `formwork_engine::batch::Batcher`.
//! - [`LlamaEmbedder`] (from [`Model::embedder`](formwork_model::Model::embedder) or
//!   [`BatchModel::embedder`](formwork_model::batch::BatchModel::embedder)): sentence
//!   embeddings in a llama.cpp context of its own over the same weights, made on first use;
//!   pooling from the GGUF metadata (mean for decoders), vectors L2-normalized.
//! - [`default_threads`]: physical cores, capped — over-subscription is what hurts most on
//!   small machines.
//!
//! ## The loop a user writes
//! ```no_run
//! use formwork_engine::Model;
//! use formwork_llama::{LlamaModel, LoadOptions};
//! let mut m = LlamaModel::load("model.gguf", LoadOptions::default())?;
//! let prompt = m.tokenize("Hello", m.info().add_bos, false)?;
//! let logits = m.decode(&prompt)?; // one f32 per vocabulary entry
//! let next = (0..logits.len()).max_by(|&a, &b| logits[a].total_cmp(&logits[b])).unwrap();
//! let logits = m.decode(&[formwork_vocab::TokenId(next as u32)])?;
//! # let _ = logits;
//! # Ok::<(), formwork_engine::ModelError>(())
//! ```
//!
//! ## Behaviour worth knowing
//! - A prompt that does not fit the context is [`ModelError::ContextOverflow`](formwork_model::ModelError::ContextOverflow),
//!   checked before anything is evaluated; the sequence is left as it was.
//! - [`Model::truncate`](formwork_model::Model::truncate) removes KV-cache entries, so a
//!   shared prefix is kept without re-evaluation.
//! - llama.cpp's log is silent unless `FORMWORK_LOG` is set ([`LOG_ENV`]); then it goes to
//!   `tracing` under the target `llama-cpp-2`.
//! - Builds: llama.cpp's CPU kernels get their instruction sets from the `GGML_*` cmake
//!   options (`GGML_AVX2=ON`, ...), forwarded from the environment by `llama-cpp-sys-2`.
#![deny(missing_docs)]

mod backend;
mod batch;
mod embed;
mod engine;
mod model;
mod options;
mod threads;

pub use backend::LOG_ENV;
pub use batch::LlamaBatchModel;
pub use embed::{LlamaEmbedder, Pooling, EMBED_MAX_CONTEXT};
pub use engine::LlamaTokenizer;
pub use model::{LlamaModel, MAX_SEQUENCES};
pub use options::{default_threads, LoadOptions, DEFAULT_MAX_CONTEXT, MAX_DEFAULT_THREADS};
