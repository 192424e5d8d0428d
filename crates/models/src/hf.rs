//! GGUF files in the Hugging Face cache, read in place: `$HF_HUB_CACHE`, else
//! `$HF_HOME/hub`, else `~/.cache/huggingface/hub`.
//!
//! ## Layout
//! ```text
//! models--<org>--<repo>/refs/main                   the revision `main` points at
//! models--<org>--<repo>/snapshots/<rev>/<file>.gguf  (links into blobs/)
//! ```
//! Names are as Ollama writes them: `hf.co/<org>/<repo>[:<tag>]`, the tag being a
//! quantization (`Q4_K_M`, matched against the end of the file stem, ignoring case) or a
//! file stem. Without a tag, a repository with a single GGUF file (vision projectors
//! `mmproj*` and the later shards of a split file do not count) names that file; with
//! several, the `Q4_K_M` one if there is exactly one, else the name is ambiguous and the
//! error lists the candidates. Nothing here writes.

use crate::local::{LocalModel, Source};
use crate::ollama::valid_part;
use crate::ModelsError;
use std::fs;
use std::path::{Path, PathBuf};

/// The quantization picked when a name has no tag and the repository has several (Ollama's
/// choice too).
const DEFAULT_QUANT: &str = "Q4_K_M";
/// How deep under a snapshot GGUF files are looked for (some repositories keep each
/// quantization in its own folder).
const MAX_DEPTH: usize = 3;

/// The Hugging Face cache at one directory (read-only).
#[derive(Clone, Debug)]
pub struct HfCache {
    root: PathBuf,
}

/// `hf.co/org/repo:tag` split: `(org, repo, tag)`; `None` when not such a name.
fn parse(name: &str) -> Option<(&str, &str, Option<&str>)> {
    let lower = name.get(..name.find('/')?)?.to_ascii_lowercase();
    if !matches!(lower.as_str(), "hf.co" | "huggingface.co") {
        return None;
    }
    let rest = &name[lower.len() + 1..];
    let (path, tag) = match rest.rsplit_once(':') {
        Some((p, t)) => (p, Some(t)),
        None => (rest, None),
    };
    let (org, repo) = path.split_once('/')?;
    if !valid_part(org) || !valid_part(repo) || tag.is_some_and(|t| !valid_part(t)) {
        return None;
    }
    Some((org, repo, tag.filter(|t| !t.eq_ignore_ascii_case("latest"))))
}

/// One GGUF file of a snapshot.
struct Candidate {
    path: PathBuf,
    /// The file stem without a `-00001-of-00003` shard suffix.
    stem: String,
}

impl HfCache {
    /// The cache at `root` (the `hub` directory holding `models--*`).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        HfCache { root: root.into() }
    }

    /// `$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `$HOME/.cache/huggingface/hub`.
    pub fn default_root() -> Option<PathBuf> {
        let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        var("HF_HUB_CACHE")
            .or_else(|| var("HF_HOME").map(|h| h.join("hub")))
            .or_else(|| var("HOME").map(|h| h.join(".cache").join("huggingface").join("hub")))
    }

    /// The cache's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The GGUF file `name` (`hf.co/org/repo[:tag]`) names, if it is in the cache.
    /// [`ModelsError::Ambiguous`] when several files fit, listing them as names to use.
    pub fn find(&self, name: &str) -> Result<Option<LocalModel>, ModelsError> {
        let Some((org, repo, tag)) = parse(name) else { return Ok(None) };
        let Some(snapshot) = self.snapshot(org, repo) else { return Ok(None) };
        let files = candidates(&snapshot);
        let pick: Vec<&Candidate> = match tag {
            Some(t) => {
                let exact: Vec<&Candidate> = files.iter().filter(|c| c.stem.eq_ignore_ascii_case(t)).collect();
                if exact.is_empty() {
                    files.iter().filter(|c| quant_matches(&c.stem, t)).collect()
                } else {
                    exact
                }
            }
            None if files.len() <= 1 => files.iter().collect(),
            None => files.iter().filter(|c| quant_matches(&c.stem, DEFAULT_QUANT)).collect(),
        };
        match pick.as_slice() {
            [one] => Ok(Some(LocalModel::file(format!("hf.co/{org}/{repo}:{}", tag_of(one, &files)), Source::HuggingFace, one.path.clone()))),
            [] if tag.is_some() || files.is_empty() => Ok(None),
            _ => {
                let shown: Vec<&Candidate> = if pick.is_empty() { files.iter().collect() } else { pick };
                Err(ModelsError::Ambiguous {
                    name: name.to_string(),
                    candidates: shown.iter().map(|c| format!("hf.co/{org}/{repo}:{}", tag_of(c, &files))).collect::<Vec<_>>().join(", "),
                })
            }
        }
    }

    /// Every GGUF file in the cache's snapshots, one entry per file.
    pub fn list(&self) -> Vec<LocalModel> {
        let mut out = Vec::new();
        let Ok(entries) = fs::read_dir(&self.root) else { return out };
        for e in entries.flatten() {
            let dir = e.file_name().to_string_lossy().into_owned();
            let Some((org, repo)) = dir.strip_prefix("models--").and_then(|r| r.split_once("--")) else { continue };
            let Some(snapshot) = self.snapshot(org, repo) else { continue };
            let files = candidates(&snapshot);
            for c in &files {
                out.push(LocalModel::file(format!("hf.co/{org}/{repo}:{}", tag_of(c, &files)), Source::HuggingFace, c.path.clone()));
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// The snapshot `refs/main` points at; else the only snapshot, or the newest.
    fn snapshot(&self, org: &str, repo: &str) -> Option<PathBuf> {
        let dir = self.root.join(format!("models--{org}--{repo}"));
        let snapshots = dir.join("snapshots");
        if let Ok(rev) = fs::read_to_string(dir.join("refs").join("main")) {
            let rev = rev.trim();
            if valid_part(rev) {
                let p = snapshots.join(rev);
                if p.is_dir() {
                    return Some(p);
                }
            }
        }
        fs::read_dir(&snapshots)
            .ok()?
            .flatten()
            .filter(|e| e.path().is_dir())
            .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
            .map(|e| e.path())
    }
}

/// The GGUF files of a snapshot that are models to load: not `mmproj*` projectors, and of a
/// split file only its first shard. Sorted by path.
fn candidates(snapshot: &Path) -> Vec<Candidate> {
    let mut out = Vec::new();
    let mut stack = vec![(snapshot.to_path_buf(), 0usize)];
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                if depth + 1 < MAX_DEPTH {
                    stack.push((p, depth + 1));
                }
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(stem) = name.strip_suffix(".gguf").or_else(|| name.strip_suffix(".GGUF")) else { continue };
            if stem.to_ascii_lowercase().contains("mmproj") {
                continue;
            }
            let stem = match split_shard(stem) {
                Some((base, 1)) => base,
                Some(_) => continue,
                None => stem,
            };
            out.push(Candidate { path: p, stem: stem.to_string() });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// `name-00002-of-00003` → `("name", 2)`.
fn split_shard(stem: &str) -> Option<(&str, u32)> {
    let (rest, total) = stem.rsplit_once("-of-")?;
    let (base, index) = rest.rsplit_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(total) && digits(index)).then(|| (base, index.parse().unwrap_or(0)))
}

/// Whether the stem ends with the quantization `quant` (after `-`, `.` or `_`), ignoring case.
fn quant_matches(stem: &str, quant: &str) -> bool {
    let (s, q) = (stem.to_ascii_lowercase(), quant.to_ascii_lowercase());
    s.strip_suffix(&q).is_some_and(|head| head.ends_with(['-', '.', '_']))
}

/// The tag a file is listed under: its quantization (the stem's last `-`/`.` part) when that
/// names only this file, else its stem.
fn tag_of(c: &Candidate, all: &[Candidate]) -> String {
    let last = c.stem.rsplit(['-', '.']).next().unwrap_or(&c.stem);
    let looks_like_quant = last.len() < c.stem.len() && last.bytes().any(|b| b.is_ascii_digit()) && valid_part(last);
    if looks_like_quant && all.iter().filter(|o| quant_matches(&o.stem, last)).count() == 1 {
        last.to_string()
    } else {
        c.stem.clone()
    }
}

/// Builds fake Hugging Face caches for tests, with the real layout (snapshot files are links
/// into `blobs/`).
#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Adds repository `org/repo` at revision `rev` (what `refs/main` names) with `files`
    /// (paths inside the snapshot), each a small GGUF blob.
    pub(crate) fn add_repo(root: &Path, org: &str, repo: &str, rev: &str, files: &[&str]) {
        let dir = root.join(format!("models--{org}--{repo}"));
        fs::create_dir_all(dir.join("refs")).unwrap();
        fs::create_dir_all(dir.join("blobs")).unwrap();
        fs::write(dir.join("refs/main"), rev).unwrap();
        for f in files {
            let bytes = format!("GGUF {f}");
            let hex = crate::extract::tests::sha256_hex(bytes.as_bytes());
            fs::write(dir.join("blobs").join(&hex), &bytes).unwrap();
            let link = dir.join("snapshots").join(rev).join(f);
            fs::create_dir_all(link.parent().unwrap()).unwrap();
            #[cfg(unix)]
            std::os::unix::fs::symlink(dir.join("blobs").join(&hex), &link).unwrap();
            #[cfg(not(unix))]
            fs::write(&link, &bytes).unwrap();
        }
    }

    #[test]
    fn names() {
        assert_eq!(parse("hf.co/org/repo"), Some(("org", "repo", None)));
        assert_eq!(parse("HF.co/org/repo:Q8_0"), Some(("org", "repo", Some("Q8_0"))));
        assert_eq!(parse("huggingface.co/org/repo:latest"), Some(("org", "repo", None)));
        for bad in ["org/repo", "hf.co/org", "hf.co/../x", "hf.co/org/repo/extra", "hf.co/org/..:x", "hf.co/o/r:a/b"] {
            assert_eq!(parse(bad), None, "{bad}");
        }
        assert_eq!(split_shard("m-Q4_K_M-00001-of-00002"), Some(("m-Q4_K_M", 1)));
        assert_eq!(split_shard("m-Q4_K_M"), None);
        assert!(quant_matches("Llama-3.2-1B-Instruct-Q4_K_M", "q4_k_m"));
        assert!(!quant_matches("Llama-3.2-1B-Instruct-IQ4_K_M", "Q4_K_M"));
    }

    #[test]
    fn finds_files_by_quant_stem_or_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        add_repo(root, "org", "one", "aaa", &["model-Q8_0.gguf", "README.md"]);
        add_repo(root, "org", "many", "bbb", &["m-Q4_K_M.gguf", "m-Q8_0.gguf", "mmproj-m-f16.gguf", "big/m-F16-00001-of-00002.gguf", "big/m-F16-00002-of-00002.gguf"]);
        add_repo(root, "org", "nodefault", "ccc", &["x-Q5_K_S.gguf", "x-Q6_K.gguf"]);
        // An old snapshot that refs/main no longer names is ignored.
        fs::create_dir_all(root.join("models--org--one/snapshots/old")).unwrap();
        fs::write(root.join("models--org--one/snapshots/old/stale-Q2_K.gguf"), "GGUF").unwrap();
        let hf = HfCache::new(root);

        let one = hf.find("hf.co/org/one").unwrap().unwrap();
        assert_eq!((one.name.as_str(), one.source), ("hf.co/org/one:Q8_0", Source::HuggingFace));
        assert_eq!(fs::read(&one.path).unwrap(), b"GGUF model-Q8_0.gguf");
        assert!(one.path.starts_with(root.join("models--org--one/snapshots/aaa")), "read in place: {}", one.path.display());
        assert_eq!(hf.find("hf.co/org/one:q8_0").unwrap().unwrap().path, one.path);
        assert_eq!(hf.find("hf.co/org/one:model-Q8_0").unwrap().unwrap().path, one.path);
        assert!(hf.find("hf.co/org/one:Q2_K").unwrap().is_none());

        assert!(hf.find("hf.co/org/many").unwrap().unwrap().path.ends_with("m-Q4_K_M.gguf"), "Q4_K_M by default");
        assert!(hf.find("hf.co/org/many:F16").unwrap().unwrap().path.ends_with("big/m-F16-00001-of-00002.gguf"), "the first shard");
        let err = hf.find("hf.co/org/nodefault").unwrap_err();
        assert!(matches!(err, ModelsError::Ambiguous { .. }));
        let msg = err.to_string();
        assert!(msg.contains("hf.co/org/nodefault:Q5_K_S") && msg.contains("hf.co/org/nodefault:Q6_K"), "{msg}");
        assert!(hf.find("hf.co/org/absent").unwrap().is_none());
        assert!(hf.find("llama3.2").unwrap().is_none());

        let names: Vec<String> = hf.list().into_iter().map(|m| m.name).collect();
        assert_eq!(
            names,
            ["hf.co/org/many:F16", "hf.co/org/many:Q4_K_M", "hf.co/org/many:Q8_0", "hf.co/org/nodefault:Q5_K_S", "hf.co/org/nodefault:Q6_K", "hf.co/org/one:Q8_0"]
        );
    }
}
