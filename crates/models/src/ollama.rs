//! Ollama's model store, read in place: `$OLLAMA_MODELS`, else `~/.ollama/models`.
//!
//! ## Layout
//! ```text
//! manifests/<registry>/<namespace>/<model>/<tag>   a Docker-style JSON manifest
//! blobs/sha256-<hex>                               each layer, named by its digest
//! ```
//! The manifest's layer of media type `application/vnd.ollama.image.model` is the GGUF file;
//! the `system`, `template` and `params` layers (small text and JSON) become the model's
//! [`Defaults`]. Names are Ollama's: `llama3.2` is
//! `registry.ollama.ai/library/llama3.2:latest`, `user/model:tag` is in namespace `user`,
//! `host/ns/model:tag` names the registry too.
//!
//! Nothing here writes: a model is deleted with `ollama rm`, never by formwork.

use crate::local::{Defaults, LocalModel, Parameters, Source};
use crate::ModelsError;
use serde::Deserialize;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The registry of names without a host.
pub const DEFAULT_REGISTRY: &str = "registry.ollama.ai";
/// The namespace of names without one.
pub const DEFAULT_NAMESPACE: &str = "library";
/// The tag of names without one.
pub const DEFAULT_TAG: &str = "latest";

const MODEL_LAYER: &str = "application/vnd.ollama.image.model";
const SYSTEM_LAYER: &str = "application/vnd.ollama.image.system";
const TEMPLATE_LAYER: &str = "application/vnd.ollama.image.template";
const PARAMS_LAYER: &str = "application/vnd.ollama.image.params";
/// Manifests and text layers larger than this are not read (they are a few KB).
const MAX_SMALL_FILE: u64 = 1 << 20;
/// Longest name part (a registry, namespace, model or tag).
const MAX_PART: usize = 128;

/// An Ollama model name, split: `registry/namespace/model:tag`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OllamaName {
    /// `registry.ollama.ai`, `hf.co`...
    pub registry: String,
    /// `library` for official models, else the user or organization.
    pub namespace: String,
    /// The model.
    pub model: String,
    /// The tag (`latest` when none is given).
    pub tag: String,
}

impl OllamaName {
    /// Splits `name` as Ollama does: `model`, `ns/model`, `host/ns/model`, each with an
    /// optional `:tag`. `None` when it is not a name of that shape, or a part has a character
    /// other than ASCII letters, digits, `.`, `_`, `-` (so a name never walks out of the
    /// store: no `..`, no separators).
    pub fn parse(name: &str) -> Option<OllamaName> {
        let (path, tag) = match name.rsplit_once(':') {
            Some((p, t)) if !t.contains('/') => (p, t),
            _ => (name, DEFAULT_TAG),
        };
        let parts: Vec<&str> = path.split('/').collect();
        let (registry, namespace, model) = match parts.as_slice() {
            [m] => (DEFAULT_REGISTRY, DEFAULT_NAMESPACE, *m),
            [ns, m] => (DEFAULT_REGISTRY, *ns, *m),
            [host, ns, m] => (*host, *ns, *m),
            _ => return None,
        };
        if !valid_registry(registry) || ![namespace, model, tag].iter().all(|p| valid_part(p)) {
            return None;
        }
        Some(OllamaName { registry: registry.into(), namespace: namespace.into(), model: model.into(), tag: tag.into() })
    }

    /// The short form Ollama prints: `model:tag` in the default registry's `library`,
    /// `ns/model:tag` in the default registry, else `host/ns/model:tag`.
    pub fn display(&self) -> String {
        if self.registry == DEFAULT_REGISTRY && self.namespace == DEFAULT_NAMESPACE {
            format!("{}:{}", self.model, self.tag)
        } else if self.registry == DEFAULT_REGISTRY {
            format!("{}/{}:{}", self.namespace, self.model, self.tag)
        } else {
            format!("{}/{}/{}:{}", self.registry, self.namespace, self.model, self.tag)
        }
    }
}

/// A registry: a host name part, optionally with `:port`.
fn valid_registry(p: &str) -> bool {
    match p.split_once(':') {
        Some((host, port)) => valid_part(host) && !port.is_empty() && port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit()),
        None => valid_part(p),
    }
}

/// A name part: 1 to [`MAX_PART`] of `[A-Za-z0-9._-]`, starting with a letter, digit or `_`.
pub(crate) fn valid_part(p: &str) -> bool {
    !p.is_empty()
        && p.len() <= MAX_PART
        && p.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        && !p.starts_with(['.', '-'])
}

#[derive(Deserialize)]
struct Manifest {
    #[serde(default)]
    config: Option<Layer>,
    #[serde(default)]
    layers: Vec<Layer>,
}

#[derive(Deserialize)]
struct Layer {
    #[serde(rename = "mediaType", default)]
    media_type: String,
    #[serde(default)]
    digest: String,
}

/// Ollama's model store at one directory (read-only), or formwork's own store of models
/// pulled from an Ollama registry, which has the same layout ([`OllamaStore::owned`]).
#[derive(Clone, Debug)]
pub struct OllamaStore {
    root: PathBuf,
    /// formwork's own store: its models are [`Source::Formwork`], and may be removed.
    owned: bool,
}

impl OllamaStore {
    /// The store at `root` (the directory holding `manifests/` and `blobs/`).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        OllamaStore { root: root.into(), owned: false }
    }

    /// formwork's store of models pulled from an Ollama registry, at `root`
    /// (`$FORMWORK_HOME/ollama`; see [`crate::ollama_registry`]).
    pub fn owned(root: impl Into<PathBuf>) -> Self {
        OllamaStore { root: root.into(), owned: true }
    }

    /// The manifest of `name` in this store, if it has one.
    fn manifest_of(&self, n: &OllamaName) -> Option<PathBuf> {
        let dir = self.root.join("manifests");
        // Ollama matches names without regard to case; the directories keep the case pulled.
        [&n.registry, &n.namespace, &n.model, &n.tag].iter().try_fold(dir, |d, part| child_ci(&d, part)).filter(|p| p.is_file())
    }

    /// Removes the model `name` from formwork's own store: its manifest, then every blob
    /// no other manifest uses. `Ok(false)` when the store does not have it. Never for
    /// Ollama's store (`ollama rm` removes those).
    pub(crate) fn remove(&self, name: &str) -> Result<bool, ModelsError> {
        debug_assert!(self.owned, "only formwork's own store is written");
        let Some(path) = OllamaName::parse(name).and_then(|n| self.manifest_of(&n)) else { return Ok(false) };
        let digests = |p: &Path| -> Vec<String> {
            read_small(p)
                .ok()
                .and_then(|t| serde_json::from_slice::<Manifest>(&t).ok())
                .map(|m| m.config.into_iter().chain(m.layers).map(|l| l.digest).collect())
                .unwrap_or_default()
        };
        let mine = digests(&path);
        fs::remove_file(&path).map_err(ModelsError::io("cannot delete", &path))?;
        let mut dir = path.parent();
        while let Some(d) = dir.filter(|d| d.starts_with(self.root.join("manifests")) && *d != self.root.join("manifests")) {
            if fs::remove_dir(d).is_err() {
                break; // not empty
            }
            dir = d.parent();
        }
        let still: std::collections::HashSet<String> = self.manifests().iter().flat_map(|(_, p)| digests(p)).collect();
        for d in mine.iter().filter(|d| !still.contains(*d)) {
            if let Some(b) = self.blob(d) {
                let _ = fs::remove_file(b);
            }
        }
        Ok(true)
    }

    /// Every manifest file in the store, with the name its directories spell.
    fn manifests(&self) -> Vec<(OllamaName, PathBuf)> {
        let mut out = Vec::new();
        for registry in subdirs(&self.root.join("manifests")) {
            for namespace in subdirs(&registry) {
                for model in subdirs(&namespace) {
                    let Ok(tags) = fs::read_dir(&model) else { continue };
                    for tag in tags.flatten().filter(|t| t.path().is_file()) {
                        let name = OllamaName {
                            registry: file_name(&registry),
                            namespace: file_name(&namespace),
                            model: file_name(&model),
                            tag: tag.file_name().to_string_lossy().into_owned(),
                        };
                        out.push((name, tag.path()));
                    }
                }
            }
        }
        out
    }

    /// `$OLLAMA_MODELS`, else `$HOME/.ollama/models`; `None` when neither can be told.
    pub fn default_root() -> Option<PathBuf> {
        if let Some(d) = std::env::var_os("OLLAMA_MODELS").filter(|d| !d.is_empty()) {
            return Some(PathBuf::from(d));
        }
        std::env::var_os("HOME").filter(|h| !h.is_empty()).map(|h| PathBuf::from(h).join(".ollama").join("models"))
    }

    /// The store's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The model called `name`, if this store has it. A name that is not Ollama-shaped is
    /// `Ok(None)`; a manifest that exists but is damaged, or names a missing blob, is an error.
    pub fn find(&self, name: &str) -> Result<Option<LocalModel>, ModelsError> {
        let Some(n) = OllamaName::parse(name) else { return Ok(None) };
        let Some(path) = self.manifest_of(&n) else { return Ok(None) };
        self.read(&n, &path).map(Some)
    }

    /// Every model in the store (unreadable manifests are skipped with a warning).
    pub fn list(&self) -> Vec<LocalModel> {
        let mut out = Vec::new();
        for (name, path) in self.manifests() {
            match self.read(&name, &path) {
                Ok(m) => out.push(m),
                Err(e) => tracing::warn!("skipping Ollama model {}: {e}", name.display()),
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    fn read(&self, name: &OllamaName, manifest_path: &Path) -> Result<LocalModel, ModelsError> {
        let bad = |detail: String| ModelsError::BadManifest { path: manifest_path.to_path_buf(), detail };
        let text = read_small(manifest_path)?;
        let manifest: Manifest = serde_json::from_slice(&text).map_err(|e| bad(format!("not a manifest: {e}")))?;
        let model = manifest
            .layers
            .iter()
            .find(|l| l.media_type == MODEL_LAYER)
            .ok_or_else(|| bad(format!("no `{MODEL_LAYER}` layer (an adapter or a cloud model?); formwork needs a GGUF")))?;
        let blob = self.blob(&model.digest).ok_or_else(|| bad(format!("bad digest {:?}", model.digest)))?;
        if !blob.is_file() {
            let tool = if self.owned { "formwork" } else { "ollama" };
            return Err(bad(format!("its model blob {} is missing; `{tool} pull {}` again", blob.display(), name.display())));
        }
        let mut found = LocalModel::file(name.display(), if self.owned { Source::Formwork } else { Source::Ollama }, blob);
        let mut defaults = Defaults::default();
        for layer in &manifest.layers {
            let text = || -> Option<String> {
                let p = self.blob(&layer.digest)?;
                read_small(&p).ok().map(|b| String::from_utf8_lossy(&b).into_owned())
            };
            match layer.media_type.as_str() {
                SYSTEM_LAYER => defaults.system = text(),
                TEMPLATE_LAYER => defaults.template = text(),
                PARAMS_LAYER => {
                    if let Some(v) = text().and_then(|t| serde_json::from_str(&t).ok()) {
                        defaults.parameters = Parameters::from_ollama_json(&v);
                    }
                }
                _ => {}
            }
        }
        found.defaults = defaults;
        Ok(found)
    }

    /// `blobs/sha256-<hex>` for a digest `sha256:<hex>` (64 hex digits), else `None`.
    fn blob(&self, digest: &str) -> Option<PathBuf> {
        let hex = digest.strip_prefix("sha256:")?;
        (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then(|| self.root.join("blobs").join(format!("sha256-{hex}")))
    }
}

/// `dir/part`, or a child of `dir` whose name equals `part` ignoring ASCII case.
fn child_ci(dir: &Path, part: &str) -> Option<PathBuf> {
    let exact = dir.join(part);
    if exact.exists() {
        return Some(exact);
    }
    fs::read_dir(dir).ok()?.flatten().find(|e| e.file_name().to_string_lossy().eq_ignore_ascii_case(part)).map(|e| e.path())
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir).into_iter().flatten().flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect();
    v.sort();
    v
}

fn file_name(p: &Path) -> String {
    p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// A file's bytes, refusing files over [`MAX_SMALL_FILE`].
pub(crate) fn read_small(path: &Path) -> Result<Vec<u8>, ModelsError> {
    let f = fs::File::open(path).map_err(ModelsError::io("cannot read", path))?;
    let mut buf = Vec::new();
    f.take(MAX_SMALL_FILE + 1).read_to_end(&mut buf).map_err(ModelsError::io("cannot read", path))?;
    if buf.len() as u64 > MAX_SMALL_FILE {
        return Err(ModelsError::BadManifest { path: path.to_path_buf(), detail: format!("larger than {MAX_SMALL_FILE} bytes") });
    }
    Ok(buf)
}

/// Whether `s` reads as a filesystem path rather than a model name: it starts with `/`, `.`
/// or `~`, has a `\`, ends in `.gguf`, or has a `/` without being an Ollama or Hugging Face
/// name. A server refuses such a `from` (a client never names a file on the server).
pub fn looks_like_path(s: &str) -> bool {
    s.starts_with(['/', '.', '~'])
        || s.contains('\\')
        || s.to_ascii_lowercase().ends_with(".gguf")
        || (s.contains('/') && OllamaName::parse(s).is_none())
}

/// Builds fake Ollama stores for tests, with the real layout.
#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_are_told_from_model_names() {
        assert!(looks_like_path("/m.gguf") && looks_like_path("./m") && looks_like_path("m.gguf") && looks_like_path("a/b/c/d"));
        assert!(!looks_like_path("llama3.2:1b") && !looks_like_path("hf.co/org/repo:Q4_K_M") && !looks_like_path("user/model"));
    }

    /// Writes `blobs/sha256-<hex>` holding `bytes` and returns its digest `sha256:<hex>`.
    fn blob(root: &Path, bytes: &[u8]) -> String {
        let hex = crate::extract::tests::sha256_hex(bytes);
        fs::create_dir_all(root.join("blobs")).unwrap();
        fs::write(root.join("blobs").join(format!("sha256-{hex}")), bytes).unwrap();
        format!("sha256:{hex}")
    }

    /// Adds model `registry/ns/model/tag` with a GGUF blob holding `gguf`, and a system
    /// prompt and params layer when given.
    pub(crate) fn add_model(root: &Path, path: &str, gguf: &[u8], system: Option<&str>, params: Option<serde_json::Value>) {
        let mut layers = vec![json!({"mediaType": MODEL_LAYER, "digest": blob(root, gguf), "size": gguf.len()})];
        if let Some(s) = system {
            layers.push(json!({"mediaType": SYSTEM_LAYER, "digest": blob(root, s.as_bytes()), "size": s.len()}));
        }
        if let Some(p) = params {
            let t = p.to_string();
            layers.push(json!({"mediaType": PARAMS_LAYER, "digest": blob(root, t.as_bytes()), "size": t.len()}));
        }
        let manifest = json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "digest": blob(root, b"{}"), "size": 2},
            "layers": layers,
        });
        let p = root.join("manifests").join(path);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, manifest.to_string()).unwrap();
    }

    #[test]
    fn names_split_as_ollama_does() {
        let n = OllamaName::parse("llama3.2").unwrap();
        assert_eq!((n.registry.as_str(), n.namespace.as_str(), n.model.as_str(), n.tag.as_str()), (DEFAULT_REGISTRY, "library", "llama3.2", "latest"));
        assert_eq!(n.display(), "llama3.2:latest");
        assert_eq!(OllamaName::parse("llama3.2:1b").unwrap().tag, "1b");
        let u = OllamaName::parse("user/model:q4").unwrap();
        assert_eq!((u.namespace.as_str(), u.display().as_str()), ("user", "user/model:q4"));
        let h = OllamaName::parse("hf.co/org/repo:Q4_K_M").unwrap();
        assert_eq!((h.registry.as_str(), h.display().as_str()), ("hf.co", "hf.co/org/repo:Q4_K_M"));
        for bad in ["", "../x", "a/../b", "a/b/c/d", "/abs", "x:", "x:../y", ".hidden", "a b", "m:t/x/y/z"] {
            assert!(OllamaName::parse(bad).is_none(), "{bad:?}");
        }
        assert!(OllamaName::parse(&"m".repeat(200)).is_none());
        // A registry may carry a port (a private registry, or a test's).
        let n = OllamaName::parse("127.0.0.1:8080/library/tiny:v1").unwrap();
        assert_eq!((n.registry.as_str(), n.namespace.as_str(), n.model.as_str(), n.tag.as_str()), ("127.0.0.1:8080", "library", "tiny", "v1"));
        assert_eq!(OllamaName::parse("127.0.0.1:8080/library/tiny").unwrap().tag, "latest");
        for bad in ["host:/ns/m", "host:80a/ns/m", "host:123456/ns/m", ":80/ns/m"] {
            assert!(OllamaName::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn finds_models_and_their_layers_in_a_fake_store() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        add_model(root, "registry.ollama.ai/library/llama3.2/latest", b"GGUF latest", Some("You are terse."), Some(json!({"stop": ["<|eot_id|>"], "temperature": 0.5})));
        add_model(root, "registry.ollama.ai/library/llama3.2/1b", b"GGUF 1b", None, None);
        add_model(root, "registry.ollama.ai/someone/Tiny/v1", b"GGUF tiny", None, None);
        add_model(root, "hf.co/org/repo/Q4_K_M", b"GGUF hf", None, None);
        let store = OllamaStore::new(root);

        let m = store.find("llama3.2").unwrap().unwrap();
        assert_eq!((m.name.as_str(), m.source), ("llama3.2:latest", Source::Ollama));
        assert_eq!(fs::read(&m.path).unwrap(), b"GGUF latest");
        assert!(m.path.starts_with(root.join("blobs")));
        assert_eq!(m.size, 11);
        assert_eq!(m.defaults.system.as_deref(), Some("You are terse."));
        assert_eq!((m.defaults.parameters.temperature, m.defaults.parameters.stop.clone()), (Some(0.5), vec!["<|eot_id|>".to_string()]));
        assert_eq!(store.find("llama3.2:latest").unwrap().unwrap().path, m.path);
        assert_eq!(fs::read(store.find("llama3.2:1b").unwrap().unwrap().path).unwrap(), b"GGUF 1b");
        assert_eq!(store.find("someone/tiny:V1").unwrap().unwrap().name, "someone/tiny:V1", "case-insensitive, as Ollama");
        assert_eq!(fs::read(store.find("hf.co/org/repo:Q4_K_M").unwrap().unwrap().path).unwrap(), b"GGUF hf");
        assert!(store.find("llama3.2:3b").unwrap().is_none());
        assert!(store.find("../../etc/passwd").unwrap().is_none());

        let names: Vec<String> = store.list().into_iter().map(|m| m.name).collect();
        assert_eq!(names, ["hf.co/org/repo:Q4_K_M", "llama3.2:1b", "llama3.2:latest", "someone/Tiny:v1"]);
    }

    #[test]
    fn damaged_manifests_say_what_is_wrong() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        add_model(root, "registry.ollama.ai/library/gone/latest", b"GGUF", None, None);
        for e in fs::read_dir(root.join("blobs")).unwrap() {
            fs::remove_file(e.unwrap().path()).unwrap();
        }
        let dir = root.join("manifests/registry.ollama.ai/library");
        fs::create_dir_all(dir.join("junk")).unwrap();
        fs::write(dir.join("junk/latest"), "not json").unwrap();
        fs::create_dir_all(dir.join("adapter")).unwrap();
        fs::write(dir.join("adapter/latest"), r#"{"layers":[{"mediaType":"application/vnd.ollama.image.adapter","digest":"sha256:00"}]}"#).unwrap();
        let store = OllamaStore::new(root);
        let e = store.find("gone").unwrap_err().to_string();
        assert!(e.contains("missing") && e.contains("ollama pull gone:latest"), "{e}");
        assert!(store.find("junk").unwrap_err().to_string().contains("not a manifest"));
        assert!(store.find("adapter").unwrap_err().to_string().contains("no `application/vnd.ollama.image.model` layer"));
        assert!(store.list().is_empty(), "damaged entries are skipped when listing");
        assert!(OllamaStore::new(root.join("nowhere")).list().is_empty());
    }
}
