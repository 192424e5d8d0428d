//! Local aliases: a name for a base model plus defaults (system prompt, template,
//! parameters), kept in formwork's own store as a small manifest,
//! `$FORMWORK_HOME/manifests/<model>/<tag>.json`:
//!
//! ```json
//! {"from": "llama3.2:1b", "system": "You are a pirate.", "parameters": {"temperature": 0.3}}
//! ```
//!
//! `from` is a model name (itself possibly an alias, up to [`MAX_ALIAS_DEPTH`] deep) or,
//! for aliases made on this machine with `formwork create`, a GGUF file's absolute path.
//! Creating, copying and deleting aliases writes only under `$FORMWORK_HOME`; the base model
//! is never copied. Alias names are `model` or `model:tag` (`latest` when none), each part
//! 1 to 128 of ASCII letters, digits, `.`, `_`, `-`: no path separators, no `..`.

use crate::cache::Cache;
use crate::local::{Defaults, LocalModel, Source};
use crate::ollama::{read_small, valid_part, DEFAULT_TAG};
use crate::registry::lookup;
use crate::ModelsError;
use serde::{Deserialize, Serialize};
use std::fs;
use std::path::{Path, PathBuf};

/// How many aliases deep a name may go (an alias of an alias of ...).
pub const MAX_ALIAS_DEPTH: usize = 8;

/// A local alias, as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct Alias {
    /// Its name, `model:tag`.
    pub name: String,
    /// The base: a model name or a GGUF path.
    pub from: String,
    /// Its own defaults (not merged with the base's).
    pub defaults: Defaults,
    /// The manifest file.
    pub manifest: PathBuf,
}

#[derive(Serialize, Deserialize)]
struct AliasFile {
    from: String,
    #[serde(flatten)]
    defaults: Defaults,
}

/// Splits and checks an alias name: `(model, tag)`.
pub fn alias_name(name: &str) -> Result<(String, String), ModelsError> {
    let invalid = |reason: &str| ModelsError::InvalidName { name: name.to_string(), reason: reason.to_string() };
    if name.contains(['/', '\\']) {
        return Err(invalid("an alias is a plain name such as `my-model` or `my-model:v2`, without path separators"));
    }
    let (model, tag) = name.split_once(':').unwrap_or((name, DEFAULT_TAG));
    if !valid_part(model) || !valid_part(tag) {
        return Err(invalid("use 1 to 128 ASCII letters, digits, `.`, `_` or `-` (not first: `.`, `-`), and optionally `:tag` of the same"));
    }
    Ok((model.to_string(), tag.to_string()))
}

impl Cache {
    /// Where aliases are kept: `<root>/manifests`.
    pub fn aliases_dir(&self) -> PathBuf {
        self.root().join("manifests")
    }

    fn alias_file(&self, model: &str, tag: &str) -> PathBuf {
        self.aliases_dir().join(model).join(format!("{tag}.json"))
    }

    /// The alias called `name`, if there is one (a name that cannot be an alias is `None`).
    pub fn alias(&self, name: &str) -> Result<Option<Alias>, ModelsError> {
        let Ok((model, tag)) = alias_name(name) else { return Ok(None) };
        let path = self.alias_file(&model, &tag);
        if !path.is_file() {
            return Ok(None);
        }
        read_alias(&format!("{model}:{tag}"), &path).map(Some)
    }

    /// Every alias (damaged manifests are skipped with a warning), sorted by name.
    pub fn aliases(&self) -> Vec<Alias> {
        let mut out = Vec::new();
        let Ok(models) = fs::read_dir(self.aliases_dir()) else { return out };
        for m in models.flatten() {
            let Ok(tags) = fs::read_dir(m.path()) else { continue };
            for t in tags.flatten() {
                let file = t.file_name().to_string_lossy().into_owned();
                let Some(tag) = file.strip_suffix(".json") else { continue };
                let name = format!("{}:{tag}", m.file_name().to_string_lossy());
                match read_alias(&name, &t.path()) {
                    Ok(a) => out.push(a),
                    Err(e) => tracing::warn!("skipping alias {name}: {e}"),
                }
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Creates (or replaces) the alias `name` over `from` with `defaults`. `from` must be a
    /// model found here, a known name, or (unless this cache takes names only) a GGUF file,
    /// stored by its absolute path. An alias cannot lead back to itself.
    pub fn create_alias(&self, name: &str, from: &str, defaults: &Defaults) -> Result<Alias, ModelsError> {
        let (model, tag) = alias_name(name)?;
        let canonical = format!("{model}:{tag}");
        if tag == DEFAULT_TAG && lookup(&model).is_some() {
            return Err(ModelsError::InvalidName { name: name.to_string(), reason: format!("`{model}` is a model formwork knows (and pulls); pick another name") });
        }
        let from = match self.find(from)? {
            Some(m) if m.source == Source::File => fs::canonicalize(&m.path).map_err(ModelsError::io("cannot resolve", &m.path))?.to_string_lossy().into_owned(),
            Some(_) => from.to_string(),
            None if lookup(from.strip_suffix(":latest").unwrap_or(from)).is_some() => from.to_string(),
            None => return Err(self.not_found(from)),
        };
        // Follow the chain of aliases from `from`: it must not come back to this name.
        let mut next = from.clone();
        for _ in 0..MAX_ALIAS_DEPTH {
            match self.alias(&next)? {
                Some(a) if a.name == canonical => {
                    return Err(ModelsError::InvalidName { name: name.to_string(), reason: format!("`{from}` leads back to `{name}`; an alias cannot name itself") })
                }
                Some(a) => next = a.from,
                None => break,
            }
        }
        let path = self.alias_file(&model, &tag);
        let dir = path.parent().expect("an alias file has a directory");
        fs::create_dir_all(dir).map_err(ModelsError::io("cannot create", dir))?;
        let json = serde_json::to_vec_pretty(&AliasFile { from: from.clone(), defaults: defaults.clone() }).expect("an alias serializes");
        // Unique per write, so that two writers of one alias (server requests) never share it.
        static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = dir.join(format!(".{tag}.json.tmp-{}-{n}", std::process::id()));
        fs::write(&tmp, json).map_err(ModelsError::io("cannot write", &tmp))?;
        fs::rename(&tmp, &path).map_err(ModelsError::io("cannot write", &path))?;
        Ok(Alias { name: canonical, from, defaults: defaults.clone(), manifest: path })
    }

    /// Copies `src` to the alias `dst`: an alias's manifest is copied; any other model found
    /// here (or a known name) becomes the base of a new alias without defaults of its own.
    pub fn copy(&self, src: &str, dst: &str) -> Result<Alias, ModelsError> {
        match self.alias(src)? {
            Some(a) => self.create_alias(dst, &a.from, &a.defaults),
            None => self.create_alias(dst, src, &Defaults::default()),
        }
    }

    /// Deletes `name`: an alias (its manifest), or a known model formwork pulled (its file).
    /// What Ollama, the Hugging Face cache or a path holds is refused as
    /// [`ModelsError::ReadOnly`], saying how its owner removes it. Returns what was deleted.
    pub fn delete(&self, name: &str) -> Result<Source, ModelsError> {
        if let Some(a) = self.alias(name)? {
            fs::remove_file(&a.manifest).map_err(ModelsError::io("cannot delete", &a.manifest))?;
            if let Some(dir) = a.manifest.parent() {
                let _ = fs::remove_dir(dir); // only when empty
            }
            return Ok(Source::Alias);
        }
        if self.pulled_store().remove(name)? {
            return Ok(Source::Formwork);
        }
        let Some(m) = self.find(name)? else { return Err(self.not_found(name)) };
        let read_only = |owner, how: String| Err(ModelsError::ReadOnly { name: name.to_string(), owner, how });
        match m.source {
            Source::Formwork => {
                fs::remove_file(&m.path).map_err(ModelsError::io("cannot delete", &m.path))?;
                Ok(Source::Formwork)
            }
            Source::Ollama => read_only("Ollama", format!("`ollama rm {name}`")),
            Source::HuggingFace => read_only("the Hugging Face cache", "`hf cache delete` (huggingface_hub)".into()),
            _ => read_only("you (a file given by its path; formwork deletes only what it pulled)", format!("`rm {name}`")),
        }
    }

    /// The alias `a` as a model: its base found (`pull`: pulled when it is a known name not
    /// yet cached), the alias's defaults over the base's.
    pub(crate) fn alias_model(&self, a: Alias, depth: usize, pull: Option<crate::Progress>) -> Result<LocalModel, ModelsError> {
        if depth >= MAX_ALIAS_DEPTH {
            return Err(ModelsError::BadManifest { path: a.manifest, detail: format!("aliases nest more than {MAX_ALIAS_DEPTH} deep") });
        }
        let base = match pull {
            Some(p) => self.resolve_depth(&a.from, p, depth + 1, true),
            // Not `not_found`, which lists every model, aliases included: that would recurse.
            None => self.find_depth(&a.from, depth + 1, true).and_then(|m| {
                m.ok_or_else(|| ModelsError::UnknownModel {
                    name: a.from.clone(),
                    known: crate::registry::known_names(),
                    found: "it is not on this machine".into(),
                })
            }),
        };
        let base = base.map_err(|e| ModelsError::BadManifest {
            path: a.manifest.clone(),
            detail: format!("alias `{}` is over `{}`, which cannot be used: {e}", a.name, a.from),
        })?;
        Ok(LocalModel {
            name: a.name,
            source: Source::Alias,
            path: base.path,
            size: base.size,
            modified: fs::metadata(&a.manifest).and_then(|m| m.modified()).ok(),
            base: Some(a.from),
            defaults: a.defaults.or(&base.defaults),
        })
    }
}

fn read_alias(name: &str, path: &Path) -> Result<Alias, ModelsError> {
    let bytes = read_small(path)?;
    let f: AliasFile = serde_json::from_slice(&bytes).map_err(|e| ModelsError::BadManifest { path: path.to_path_buf(), detail: format!("not an alias manifest: {e}") })?;
    Ok(Alias { name: name.to_string(), from: f.from, defaults: f.defaults, manifest: path.to_path_buf() })
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::local::Parameters;
    use crate::ollama::tests::add_model;
    use crate::Progress;

    fn cache() -> (tempfile::TempDir, Cache) {
        let tmp = tempfile::tempdir().unwrap();
        let ollama = tmp.path().join("ollama");
        add_model(&ollama, "registry.ollama.ai/library/llama3.2/1b", b"GGUF ollama", Some("From Ollama."), Some(serde_json::json!({"temperature": 0.6, "top_k": 20})));
        let cache = Cache::new(tmp.path().join("home")).with_python("/nonexistent/python").with_ollama_store(&ollama);
        (tmp, cache)
    }

    #[test]
    fn names_are_checked() {
        assert_eq!(alias_name("pirate").unwrap(), ("pirate".into(), "latest".into()));
        assert_eq!(alias_name("pirate:v2").unwrap(), ("pirate".into(), "v2".into()));
        for bad in ["", "a/b", "..", "../x", "x:..", ".x", "a\\b", "x:", ":x", "a b", "a:b:c"] {
            assert!(matches!(alias_name(bad), Err(ModelsError::InvalidName { .. })), "{bad:?}");
        }
        assert!(alias_name(&"x".repeat(129)).is_err());
    }

    #[test]
    fn create_resolve_copy_delete() {
        let (tmp, cache) = cache();
        let defaults = Defaults { system: Some("You are a pirate.".into()), template: None, parameters: Parameters { temperature: Some(0.2), ..Default::default() } };
        let a = cache.create_alias("pirate", "llama3.2:1b", &defaults).unwrap();
        assert_eq!((a.name.as_str(), a.manifest.clone()), ("pirate:latest", tmp.path().join("home/manifests/pirate/latest.json")));

        let m = cache.resolve_model("pirate", Progress::Quiet).unwrap();
        assert_eq!((m.source, m.base.as_deref()), (Source::Alias, Some("llama3.2:1b")));
        assert_eq!(fs::read(&m.path).unwrap(), b"GGUF ollama", "the base's file, in place");
        assert_eq!(m.defaults.system.as_deref(), Some("You are a pirate."), "the alias's system wins");
        assert_eq!((m.defaults.parameters.temperature, m.defaults.parameters.top_k), (Some(0.2), Some(20)), "the base's others stay");

        // A copy of an alias copies its manifest; a copy of another model makes a bare alias.
        cache.copy("pirate:latest", "pirate2:v1").unwrap();
        assert_eq!(cache.find("pirate2:v1").unwrap().unwrap().defaults.system.as_deref(), Some("You are a pirate."));
        cache.copy("llama3.2:1b", "plain").unwrap();
        let plain = cache.find("plain").unwrap().unwrap();
        assert_eq!((plain.source, plain.defaults.system.as_deref()), (Source::Alias, Some("From Ollama.")));
        // An alias of an alias.
        cache.create_alias("deep", "pirate2:v1", &Defaults { system: Some("Deep.".into()), ..Default::default() }).unwrap();
        assert_eq!(cache.find("deep").unwrap().unwrap().defaults.parameters.temperature, Some(0.2));

        let listed: Vec<(String, Source)> = cache.list().into_iter().map(|m| (m.name, m.source)).collect();
        for n in ["deep:latest", "pirate:latest", "pirate2:v1", "plain:latest"] {
            assert!(listed.contains(&(n.to_string(), Source::Alias)), "{n} in {listed:?}");
        }

        // A file path is stored absolute; a missing base is refused with what exists.
        let file = tmp.path().join("local.gguf");
        fs::write(&file, b"GGUF local").unwrap();
        let f = cache.create_alias("local", file.to_str().unwrap(), &Defaults::default()).unwrap();
        assert_eq!(f.from, fs::canonicalize(&file).unwrap().to_string_lossy());
        assert!(matches!(cache.create_alias("x", "nothing-here", &Defaults::default()), Err(ModelsError::UnknownModel { .. })));
        assert!(matches!(cache.copy("nothing-here", "x"), Err(ModelsError::UnknownModel { .. })));
        assert!(matches!(cache.create_alias("../evil", "pirate", &Defaults::default()), Err(ModelsError::InvalidName { .. })));
        assert!(matches!(cache.create_alias("smollm2", "pirate", &Defaults::default()), Err(ModelsError::InvalidName { .. })), "a known name is not shadowed");
        cache.create_alias("over-pirate", "pirate", &Defaults::default()).unwrap();
        for from in ["over-pirate", "pirate", "pirate:latest"] {
            let e = cache.create_alias("pirate", from, &Defaults::default()).unwrap_err();
            assert!(e.to_string().contains("cannot name itself"), "{e}");
        }

        // Delete: aliases yes; Ollama's model and a path no.
        assert_eq!(cache.delete("pirate2:v1").unwrap(), Source::Alias);
        assert!(!tmp.path().join("home/manifests/pirate2").exists(), "the emptied directory goes too");
        assert!(cache.find("pirate2:v1").unwrap().is_none());
        let e = cache.delete("llama3.2:1b").unwrap_err();
        assert!(matches!(e, ModelsError::ReadOnly { .. }) && e.to_string().contains("owned by Ollama, remove it with `ollama rm llama3.2:1b`"), "{e}");
        assert!(matches!(cache.delete(file.to_str().unwrap()), Err(ModelsError::ReadOnly { .. })));
        assert!(file.exists());
        assert!(matches!(cache.delete("never-was"), Err(ModelsError::UnknownModel { .. })));
        // The alias over the deleted one now says what is wrong.
        let e = cache.find("deep").unwrap_err().to_string();
        assert!(e.contains("alias `deep:latest` is over `pirate2:v1`"), "{e}");
    }

    #[test]
    fn an_alias_over_a_known_model_not_yet_pulled_pulls_it() {
        let (_tmp, cache) = cache();
        cache.create_alias("small", "smollm2", &Defaults::default()).unwrap();
        assert!(cache.find("small").is_err(), "find never pulls");
        // resolve pulls the base (here python is missing: the pull's own error, via the alias).
        let e = cache.resolve_model("small", Progress::Quiet).unwrap_err().to_string();
        assert!(e.contains("over `smollm2`") && e.contains("needs Python"), "{e}");
    }

    #[test]
    fn a_names_only_cache_never_looks_at_paths_from_the_caller() {
        let (tmp, cache) = cache();
        let file = tmp.path().join("local.gguf");
        fs::write(&file, b"GGUF local").unwrap();
        // An alias made locally over a path still works through a names-only cache...
        cache.create_alias("local", file.to_str().unwrap(), &Defaults::default()).unwrap();
        let net = cache.clone().names_only();
        assert_eq!(net.find("local").unwrap().unwrap().path, fs::canonicalize(&file).unwrap());
        // ...but a path given to it is not a model.
        assert!(net.find(file.to_str().unwrap()).unwrap().is_none());
        assert!(net.create_alias("x", file.to_str().unwrap(), &Defaults::default()).is_err());
        assert!(net.delete(file.to_str().unwrap()).is_err());
        assert!(file.exists());
    }
}
