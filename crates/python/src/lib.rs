//! # formwork-python: formwork's constraint engine as the Python package `formwork`
//!
//! PyO3 bindings over the `vocab`, `grammar` and `schema` crates (never llama.cpp), built by
//! maturin into an abi3 wheel (CPython ≥ 3.9) whose extension module is `formwork._formwork`;
//! the pure-Python package around it (`python/formwork`) adds the numpy/torch conveniences
//! and the integrations (`formwork.hf`). The API follows XGrammar and llguidance, so that
//! swapping formwork into their integrations is a few lines.
//!
//! ## Key types (Python names)
//! - [`TokenizerInfo`] (`tokenizer.rs`): a vocabulary as bytes, its stop (EOS) tokens and the
//!   model's logit width (`vocab_size`, which may exceed the tokenizer's). From a HuggingFace
//!   fast tokenizer, a `tokenizer.json` or a GGUF file.
//! - [`Grammar`] (`grammar.rs`): grammar IR from a JSON Schema, GBNF, a regex, or the built-in
//!   JSON grammar. Refusals raise [`FormworkError`] with formwork's message (and, for
//!   schemas, the keyword and JSON pointer as attributes).
//! - [`GrammarCompiler`] and [`CompiledGrammar`] (`grammar.rs`): compiling against one
//!   tokenizer, cached by grammar (`formwork_grammar::GrammarCache`); a compiled grammar is
//!   immutable and shared by every matcher on it (its mask caches warm up for all of them).
//! - [`Matcher`] (`matcher.rs`): per request. `fill_next_token_bitmask` writes the allowed
//!   tokens into one row of an int32 bitmask, `accept_token(s)`, `validate_tokens`,
//!   `rollback`, `forced_tokens`, `reset`, `fork`.
//! - `batch_fill_next_token_bitmask` (rayon, the GIL released) and the float32 kernel behind
//!   `apply_token_bitmask_inplace` (`bitmask.rs`).
//!
//! ## The bitmask layout
//! XGrammar's, which vLLM and SGLang apply for every backend: an int32 array of shape
//! `(batch, ceil(vocab_size / 32))`, token `t` at word `t >> 5`, bit `t & 31`, 1 = allowed.
//! Tokens at or past the tokenizer's size (padding of a wider logit row) are never allowed.
//! On a little-endian machine these are the bytes of `formwork_vocab::TokenMask`'s `u64`
//! words, which `bitmask.rs` copies out as two `u32` halves.
//!
//! ## The loop a user writes (Python)
//! ```text
//! info = formwork.TokenizerInfo.from_huggingface(tokenizer, vocab_size=model.config.vocab_size)
//! compiled = formwork.GrammarCompiler(info).compile_json_schema(schema)
//! m = formwork.Matcher(compiled)
//! bitmask = formwork.allocate_token_bitmask(1, info.vocab_size)
//! while not m.is_terminated():
//!     m.fill_next_token_bitmask(bitmask)
//!     formwork.apply_token_bitmask_inplace(logits, bitmask)
//!     token = sample(logits); m.accept_token(token)
//! ```
//!
//! ## Allocation
//! The extension's Rust allocations use mimalloc through `formwork_alloc` (declared here, set
//! up when the module is imported): freed memory is kept for reuse rather than returned to
//! the OS, so the extension's heap stays at its high-water mark; `MIMALLOC_PURGE_DELAY` (ms)
//! in the environment restores returning it.
//!
//! ## Features
//! `extension-module`: set by maturin (see `pyproject.toml`) so the extension does not link
//! libpython; without it (`cargo build/test --workspace`) the crate links libpython like an
//! embedding and its Rust tests run as usual.
//!
//! Unsafe code: `bitmask.rs`'s raw views of numpy/torch buffers (`View::row_mut`, with its
//! `# Safety` contract) and their three users (the `-inf` kernel there, and the row write in
//! `Matcher::fill`), each with its `SAFETY` argument.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod bitmask;
mod error;
mod grammar;
mod matcher;
mod tokenizer;

pub use error::FormworkError;
pub use grammar::{CompiledGrammar, Grammar, GrammarCompiler};
pub use matcher::Matcher;
pub use tokenizer::TokenizerInfo;

use pyo3::prelude::*;

/// The Rust side's allocations (grammars, matchers, masks) go to mimalloc, kept from handing
/// freed memory back (`formwork_alloc`); Python's objects keep Python's allocator. Against
/// glibc's malloc this cut the Python TTFM and the largest masks; TBM p99 stayed within
/// noise (README, "Through Python").
#[global_allocator]
static GLOBAL: formwork_alloc::MiMalloc = formwork_alloc::MiMalloc;

/// The extension module `formwork._formwork`.
#[pymodule]
fn _formwork(m: &Bound<'_, PyModule>) -> PyResult<()> {
    formwork_alloc::keep_freed_memory();
    m.add("FormworkError", m.py().get_type::<FormworkError>())?;
    m.add_class::<TokenizerInfo>()?;
    m.add_class::<Grammar>()?;
    m.add_class::<GrammarCompiler>()?;
    m.add_class::<CompiledGrammar>()?;
    m.add_class::<Matcher>()?;
    m.add_function(wrap_pyfunction!(matcher::batch_fill_next_token_bitmask, m)?)?;
    m.add_function(wrap_pyfunction!(bitmask::apply_token_bitmask_inplace_f32, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
