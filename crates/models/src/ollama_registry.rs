//! Pulling models from an Ollama registry (`formwork pull llama3.2`, `/api/pull`) into
//! formwork's own store. That store has Ollama's layout ([`crate::ollama`]) and is read by
//! the same reader: `$FORMWORK_HOME/ollama/{manifests,blobs}`. Ollama's own store is never
//! written.
//!
//! ## Protocol
//! The registry API Ollama's client speaks (a subset of Docker's distribution API):
//! 1. `GET {scheme}://{registry}/v2/{namespace}/{model}/manifests/{tag}` with
//!    `Accept: application/vnd.docker.distribution.manifest.v2+json` answers a JSON manifest:
//!    a `config` blob and `layers`, each with a `mediaType`, a `digest` (`sha256:<hex>`) and
//!    a `size`.
//! 2. Each blob not yet in the store: `GET .../v2/{namespace}/{model}/blobs/{digest}` (the
//!    registry redirects to its storage; redirects are followed), streamed into
//!    `blobs/sha256-<hex>-partial` while hashing. A partial file left by an interrupted pull
//!    is resumed with a `Range` request (a server that ignores it sends the whole blob, and
//!    the file starts over). At the declared size the sha256 must equal the digest; then the
//!    file is renamed into place. A mismatch deletes it.
//! 3. The manifest is written last, atomically, so a model is found only once every blob is
//!    there.
//!
//! ## Bounds
//! The manifest is read up to 1 MiB, with at most 64 blobs. Names ([`OllamaName::parse`])
//! and digests are checked before any path is made from them, so a manifest cannot name a
//! file outside the store. No blob is read past its declared size. Connecting, waiting for
//! an answer and each read have time limits. `https` is used unless `insecure` (plain HTTP,
//! for a registry on a private network or a test); a server lets clients pull only from
//! the registries its operator allowed (see `formwork serve --pull-registry`).
//!
//! Public models of `registry.ollama.ai` need no credentials; a registry that asks for them
//! (401) is reported as such, since formwork does not hold Ollama's signing key.

use crate::ollama::OllamaName;
use crate::ModelsError;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The media type of the manifests asked for.
const MANIFEST_TYPE: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// Largest manifest read.
const MAX_MANIFEST: u64 = 1 << 20;
/// Most blobs (config and layers) a manifest may list.
const MAX_BLOBS: usize = 64;
/// Bytes between two progress reports of a blob.
const REPORT_EVERY: u64 = 1 << 20;

/// What a pull reports as it goes (in the order of Ollama's `/api/pull` stream).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegistryEvent {
    /// Another process is pulling into the same store; this pull waits for it.
    Waiting,
    /// Fetching the manifest.
    Manifest,
    /// Bytes of one blob present so far (`completed == total` when it is done, or was there).
    Blob {
        /// `sha256:<hex>`.
        digest: String,
        /// Its size.
        total: u64,
        /// Bytes present.
        completed: u64,
    },
    /// Every blob is there and verified.
    Verified,
    /// The manifest is being written.
    WritingManifest,
}

/// The 12 hex digits Ollama shows for a digest (`pulling 6a0746a1ec1a`).
pub fn short_digest(digest: &str) -> &str {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    hex.get(..12).unwrap_or(hex)
}

/// What [`pull`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegistryPulled {
    /// The manifest written (the model is found through it).
    pub manifest: PathBuf,
    /// Bytes downloaded (0 when every blob was there already).
    pub downloaded: u64,
}

#[derive(Deserialize)]
struct Manifest {
    config: Option<Blob>,
    #[serde(default)]
    layers: Vec<Blob>,
}

#[derive(Deserialize)]
struct Blob {
    #[serde(rename = "mediaType", default)]
    media_type: String,
    digest: String,
    size: u64,
}

/// The media type of a model's GGUF layer.
const MODEL_LAYER: &str = "application/vnd.ollama.image.model";

/// Pulls `name` from its registry into the Ollama-layout store at `store` (created if
/// missing), reporting progress to `on`. See the module docs.
pub fn pull(store: &Path, name: &OllamaName, insecure: bool, on: &mut dyn FnMut(RegistryEvent)) -> Result<RegistryPulled, ModelsError> {
    let scheme = if insecure { "http" } else { "https" };
    let base = format!("{scheme}://{}/v2/{}/{}", name.registry, name.namespace, name.model);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_connect(Some(Duration::from_secs(20)))
        .timeout_recv_response(Some(Duration::from_secs(60)))
        .timeout_per_read(Some(Duration::from_secs(60)))
        .http_status_as_error(false)
        .user_agent(concat!("formwork/", env!("CARGO_PKG_VERSION")))
        .build()
        .into();
    let shown = name.display();

    on(RegistryEvent::Manifest);
    let url = format!("{base}/manifests/{}", name.tag);
    let resp = agent.get(&url).header("Accept", MANIFEST_TYPE).call().map_err(|e| not_reached(&shown, &url, &e))?;
    check_status(&shown, &url, resp.status().as_u16())?;
    let raw = resp
        .into_body()
        .into_with_config()
        .limit(MAX_MANIFEST)
        .read_to_vec()
        .map_err(|e| registry(&shown, &url, format!("reading the manifest failed ({e}); it must be JSON of at most {MAX_MANIFEST} bytes")))?;
    let manifest: Manifest =
        serde_json::from_slice(&raw).map_err(|e| registry(&shown, &url, format!("the manifest is not a model manifest: {e}")))?;
    let blobs: Vec<&Blob> = manifest.config.iter().chain(manifest.layers.iter()).collect();
    if blobs.len() > MAX_BLOBS {
        return Err(registry(&shown, &url, format!("the manifest lists {} blobs; at most {MAX_BLOBS} are pulled", blobs.len())));
    }
    if !manifest.layers.iter().any(|l| l.media_type == MODEL_LAYER) {
        return Err(registry(&shown, &url, format!("the manifest has no `{MODEL_LAYER}` layer (a cloud model, or an adapter?); formwork runs GGUF models only")));
    }
    for b in &blobs {
        if hex_of(&b.digest).is_none() {
            return Err(registry(&shown, &url, format!("the manifest names a blob {:?}, not `sha256:` and 64 hex digits", b.digest)));
        }
    }

    let blob_dir = store.join("blobs");
    fs::create_dir_all(&blob_dir).map_err(ModelsError::io("cannot create the directory", &blob_dir))?;
    let _lock = lock_store(store, on)?;
    check_space(&blob_dir, &blobs, &shown)?;
    let mut downloaded = 0;
    for b in &blobs {
        downloaded += fetch_blob(&agent, &base, &blob_dir, b, &shown, on)?;
    }
    on(RegistryEvent::Verified);

    on(RegistryEvent::WritingManifest);
    let dir = store.join("manifests").join(&name.registry).join(&name.namespace).join(&name.model);
    fs::create_dir_all(&dir).map_err(ModelsError::io("cannot create the directory", &dir))?;
    let path = dir.join(&name.tag);
    let mut tmp = tempfile::NamedTempFile::new_in(&dir).map_err(ModelsError::io("cannot create a file in", &dir))?;
    tmp.write_all(&raw).map_err(ModelsError::io("cannot write", tmp.path()))?;
    tmp.persist(&path).map_err(|e| ModelsError::io("cannot write", &path)(e.error))?;
    Ok(RegistryPulled { manifest: path, downloaded })
}

/// Makes blob `b` present and verified in `dir`; returns the bytes downloaded.
fn fetch_blob(agent: &ureq::Agent, base: &str, dir: &Path, b: &Blob, shown: &str, on: &mut dyn FnMut(RegistryEvent)) -> Result<u64, ModelsError> {
    let hex = hex_of(&b.digest).expect("checked by the caller");
    let done = dir.join(format!("sha256-{hex}"));
    let report = |completed| RegistryEvent::Blob { digest: b.digest.clone(), total: b.size, completed };
    // A blob is renamed into place only once verified: the right size means it is there.
    if fs::metadata(&done).is_ok_and(|m| m.is_file() && m.len() == b.size) {
        on(report(b.size));
        return Ok(0);
    }
    let partial = dir.join(format!("sha256-{hex}-partial"));
    let mut have = fs::metadata(&partial).map(|m| m.len()).unwrap_or(0);
    if have == b.size && have > 0 {
        // Downloaded whole by a pull stopped before the rename: verify it, ask for nothing.
        let mut hasher = Sha256::new();
        hash_into(&partial, &mut hasher)?;
        if crate::extract::hex(&hasher.finalize()) == hex {
            fs::rename(&partial, &done).map_err(ModelsError::io("cannot move the verified blob into place", &done))?;
            on(report(b.size));
            return Ok(0);
        }
        have = 0;
    }
    if have > b.size {
        have = 0;
    }
    let url = format!("{base}/blobs/{}", b.digest);
    let mut req = agent.get(&url);
    if have > 0 {
        req = req.header("Range", format!("bytes={have}-"));
    }
    let resp = req.call().map_err(|e| not_reached(shown, &url, &e))?;
    let status = resp.status().as_u16();
    check_status(shown, &url, status)?;
    if status != 206 {
        have = 0; // the whole blob comes: start over
    }
    let mut file = fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(have == 0)
        .append(have > 0)
        .open(&partial)
        .map_err(ModelsError::io("cannot write", &partial))?;
    let mut hasher = Sha256::new();
    if have > 0 {
        hash_into(&partial, &mut hasher)?;
    }
    on(report(have));
    let mut body = resp.into_body().into_with_config().limit(b.size - have).reader();
    let mut buf = vec![0u8; 1 << 16];
    let (mut got, mut last) = (have, have);
    loop {
        let n = body.read(&mut buf).map_err(|e| registry(shown, &url, format!("the download broke off after {got} of {} bytes ({e}); run the pull again to resume it", b.size)))?;
        if n == 0 {
            break;
        }
        file.write_all(&buf[..n]).map_err(ModelsError::io("cannot write", &partial))?;
        hasher.update(&buf[..n]);
        got += n as u64;
        if got - last >= REPORT_EVERY {
            on(report(got));
            last = got;
        }
    }
    file.sync_all().map_err(ModelsError::io("cannot write", &partial))?;
    drop(file);
    if got != b.size {
        return Err(registry(shown, &url, format!("the blob ended after {got} of {} bytes; run the pull again to resume it", b.size)));
    }
    let actual = crate::extract::hex(&hasher.finalize());
    if actual != hex {
        let _ = fs::remove_file(&partial);
        return Err(ModelsError::Corrupt { name: shown.to_string(), expected: hex.to_string(), actual });
    }
    fs::rename(&partial, &done).map_err(ModelsError::io("cannot move the verified blob into place", &done))?;
    on(report(b.size));
    Ok(got - have)
}

/// An exclusive lock on `store` (the file `.pull.lock` in it), held until dropped: two
/// processes pulling into one store (two `formwork pull`s, a pull beside a server's) would
/// otherwise write the same partial blob at once. Waits, saying so, while another holds it.
fn lock_store(store: &Path, on: &mut dyn FnMut(RegistryEvent)) -> Result<fs::File, ModelsError> {
    let path = store.join(".pull.lock");
    let f = fs::OpenOptions::new().create(true).truncate(false).write(true).open(&path).map_err(ModelsError::io("cannot open the lock file", &path))?;
    if fs4::FileExt::try_lock(&f).is_err() {
        on(RegistryEvent::Waiting);
        fs4::FileExt::lock(&f).map_err(ModelsError::io("cannot lock", &path))?;
    }
    Ok(f)
}

/// Refuses a pull whose missing blobs would not fit in the free space of `dir`'s file system
/// (with [`SPACE_MARGIN`] to spare), before anything is downloaded: a model of gigabytes
/// would otherwise fill the disk and fail near its end. When the free space cannot be read,
/// the pull goes ahead.
fn check_space(dir: &Path, blobs: &[&Blob], name: &str) -> Result<(), ModelsError> {
    let missing: u64 = blobs
        .iter()
        .map(|b| {
            let hex = hex_of(&b.digest).unwrap_or_default();
            let len = |p: String| fs::metadata(dir.join(p)).map(|m| m.len()).unwrap_or(0);
            let have = if len(format!("sha256-{hex}")) == b.size { b.size } else { len(format!("sha256-{hex}-partial")) };
            b.size.saturating_sub(have)
        })
        .sum();
    let Ok(free) = fs4::available_space(dir) else { return Ok(()) };
    if missing.saturating_add(SPACE_MARGIN) > free {
        return Err(ModelsError::NoSpace { name: name.to_string(), dir: dir.to_path_buf(), needed: missing, free });
    }
    Ok(())
}

/// Free space a pull leaves at least.
const SPACE_MARGIN: u64 = 64 << 20;

/// The hex of a `sha256:<64 lowercase hex>` digest.
fn hex_of(digest: &str) -> Option<&str> {
    let hex = digest.strip_prefix("sha256:")?;
    (hex.len() == 64 && hex.bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))).then_some(hex)
}

/// Feeds the file at `path` to `hasher` (a partial download being resumed).
fn hash_into(path: &Path, hasher: &mut Sha256) -> Result<(), ModelsError> {
    let mut f = fs::File::open(path).map_err(ModelsError::io("cannot read", path))?;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf).map_err(ModelsError::io("cannot read", path))?;
        if n == 0 {
            return Ok(());
        }
        hasher.update(&buf[..n]);
    }
}

fn check_status(name: &str, url: &str, status: u16) -> Result<(), ModelsError> {
    match status {
        200 | 206 => Ok(()),
        404 => Err(ModelsError::NotInRegistry { name: name.to_string(), url: url.to_string() }),
        401 | 403 => Err(registry(name, url, format!("the registry asks for credentials (HTTP {status}); formwork pulls public models only — use `ollama pull {name}`, whose models formwork finds in place"))),
        s => Err(registry(name, url, format!("the registry answered HTTP {s}"))),
    }
}

fn registry(name: &str, url: &str, detail: String) -> ModelsError {
    ModelsError::Registry { name: name.to_string(), url: url.to_string(), detail }
}

fn not_reached(name: &str, url: &str, e: &ureq::Error) -> ModelsError {
    registry(name, url, format!("the registry could not be reached ({e}); check the network (and HTTPS_PROXY), or the registry's name"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_registry::{digest, manifest, FakeRegistry};
    use crate::{Cache, Progress, Source};
    use std::collections::HashMap;

    fn gguf(n: usize, seed: u8) -> Vec<u8> {
        let mut g = b"GGUF".to_vec();
        g.extend((0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)));
        g
    }

    fn registry_with_tiny() -> (FakeRegistry, Vec<u8>) {
        let model = gguf(300_000, 7);
        let mut blobs = HashMap::new();
        let m = manifest(
            &[(MODEL_LAYER, &model), ("application/vnd.ollama.image.system", b"You are tiny."), ("application/vnd.ollama.image.params", br#"{"temperature":0.3}"#)],
            &mut blobs,
        );
        let other = manifest(&[(MODEL_LAYER, &model)], &mut blobs);
        let manifests = HashMap::from([("library/tiny/latest".to_string(), m), ("library/tiny/bare".to_string(), other)]);
        (FakeRegistry::start(manifests, blobs), model)
    }

    #[test]
    fn pulls_a_model_finds_it_in_place_and_does_not_download_it_twice() {
        let (reg, model) = registry_with_tiny();
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::new(tmp.path());
        let name = format!("{}/library/tiny", reg.host);
        let pulled = cache.pull_from_registry(&name, true, Progress::Quiet).unwrap();
        assert!(pulled.downloaded);
        assert_eq!(fs::read(&pulled.path).unwrap(), model, "the model blob, verified");
        let m = cache.find(&name).unwrap().expect("found after the pull");
        assert_eq!((m.source, m.path.clone()), (Source::Formwork, pulled.path.clone()));
        assert_eq!(m.defaults.system.as_deref(), Some("You are tiny."));
        assert_eq!(m.defaults.parameters.temperature, Some(0.3));
        assert!(cache.list().iter().any(|l| l.name == format!("{name}:latest")), "listed");
        let blob_gets = |r: &FakeRegistry| r.requests().iter().filter(|p| p.starts_with("/storage/")).count();
        assert_eq!(blob_gets(&reg), 4, "config, model, system, params: {:?}", reg.requests());

        // Again: only the manifest is asked for. A second tag sharing the model blob
        // downloads only its config... which is shared too: nothing.
        let again = cache.pull_from_registry(&name, true, Progress::Quiet).unwrap();
        assert!(!again.downloaded);
        cache.pull_from_registry(&format!("{name}:bare"), true, Progress::Quiet).unwrap();
        assert_eq!(blob_gets(&reg), 4, "{:?}", reg.requests());

        // Deleting one tag keeps the blobs the other uses; deleting both removes them.
        assert_eq!(cache.delete(&name).unwrap(), Source::Formwork);
        assert!(cache.find(&name).unwrap().is_none());
        assert_eq!(fs::read(&pulled.path).unwrap(), model, "still used by :bare");
        let left = || fs::read_dir(tmp.path().join("ollama/blobs")).unwrap().flatten().count();
        assert_eq!(left(), 2, ":bare's config and model stay; the system and params blobs went");
        cache.delete(&format!("{name}:bare")).unwrap();
        assert!(!pulled.path.exists());
        assert_eq!(left(), 0);
        assert!(!tmp.path().join("ollama/manifests").join(&reg.host).exists(), "empty directories removed");
    }

    #[test]
    fn an_interrupted_download_resumes_where_it_stopped() {
        let (reg, model) = registry_with_tiny();
        let tmp = tempfile::tempdir().unwrap();
        let hex = digest(&model).trim_start_matches("sha256:").to_string();
        let blobs = tmp.path().join("ollama/blobs");
        fs::create_dir_all(&blobs).unwrap();
        fs::write(blobs.join(format!("sha256-{hex}-partial")), &model[..120_000]).unwrap();
        let cache = Cache::new(tmp.path());
        let pulled = cache.pull_from_registry(&format!("{}/library/tiny", reg.host), true, Progress::Quiet).unwrap();
        assert_eq!(fs::read(&pulled.path).unwrap(), model);
        assert!(reg.requests().iter().any(|r| r == &format!("/storage/sha256:{hex} range 120000")), "{:?}", reg.requests());
        assert!(!blobs.join(format!("sha256-{hex}-partial")).exists());

        // A partial file that is already whole (a pull stopped before its rename) is
        // verified and kept: nothing is asked for it.
        let tmp = tempfile::tempdir().unwrap();
        let blobs = tmp.path().join("ollama/blobs");
        fs::create_dir_all(&blobs).unwrap();
        fs::write(blobs.join(format!("sha256-{hex}-partial")), &model).unwrap();
        let before = reg.requests().len();
        let pulled = Cache::new(tmp.path()).pull_from_registry(&format!("{}/library/tiny", reg.host), true, Progress::Quiet).unwrap();
        assert_eq!(fs::read(&pulled.path).unwrap(), model);
        assert!(reg.requests()[before..].iter().all(|r| !r.contains(&hex)), "{:?}", reg.requests());
    }

    #[test]
    fn a_pull_waits_while_another_process_holds_the_store() {
        let (reg, model) = registry_with_tiny();
        let tmp = tempfile::tempdir().unwrap();
        let store = tmp.path().join("ollama");
        fs::create_dir_all(&store).unwrap();
        // Another process's pull: a lock on the same file (flock locks of two open files
        // exclude each other within one process too).
        let held = fs::OpenOptions::new().create(true).truncate(false).write(true).open(store.join(".pull.lock")).unwrap();
        fs4::FileExt::lock(&held).unwrap();
        let name = OllamaName::parse(&format!("{}/library/tiny", reg.host)).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let worker = {
            let store = store.clone();
            std::thread::spawn(move || pull(&store, &name, true, &mut |e| tx.send(e).unwrap()))
        };
        std::thread::sleep(Duration::from_millis(300));
        let seen: Vec<RegistryEvent> = rx.try_iter().collect();
        assert_eq!(seen, [RegistryEvent::Manifest, RegistryEvent::Waiting], "waits before writing");
        assert!(reg.requests().iter().all(|r| !r.starts_with("/storage/")), "no blob asked for while waiting: {:?}", reg.requests());
        fs4::FileExt::unlock(&held).unwrap();
        let pulled = worker.join().unwrap().unwrap();
        assert!(pulled.downloaded > 0);
        assert_eq!(rx.try_iter().last(), Some(RegistryEvent::WritingManifest));
        let gguf = Cache::new(tmp.path()).find(&format!("{}/library/tiny", reg.host)).unwrap().unwrap().path;
        assert_eq!(fs::read(gguf).unwrap(), model);
    }

    #[test]
    fn a_blob_that_does_not_match_its_digest_is_refused_and_nothing_is_listed() {
        let model = gguf(50_000, 1);
        let mut blobs = HashMap::new();
        let m = manifest(&[(MODEL_LAYER, &model)], &mut blobs);
        // The registry serves other bytes under the model's digest.
        blobs.insert(digest(&model), gguf(50_000, 2));
        let reg = FakeRegistry::start(HashMap::from([("library/bad/latest".to_string(), m)]), blobs);
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::new(tmp.path());
        let name = format!("{}/library/bad", reg.host);
        let e = cache.pull_from_registry(&name, true, Progress::Quiet).unwrap_err();
        assert!(matches!(e, ModelsError::Corrupt { .. }), "{e}");
        assert!(cache.find(&name).unwrap().is_none(), "no manifest written");
        let partials = fs::read_dir(tmp.path().join("ollama/blobs")).unwrap().flatten().filter(|e| e.file_name().to_string_lossy().ends_with("-partial")).count();
        assert_eq!(partials, 0, "the bad download is deleted");
    }

    #[test]
    fn registry_failures_say_what_is_wrong() {
        let mut blobs = HashMap::new();
        let no_model = manifest(&[("application/vnd.ollama.image.adapter", b"lora")], &mut blobs);
        let evil = serde_json::to_vec(&serde_json::json!({
            "layers": [{"mediaType": MODEL_LAYER, "digest": "sha256:../../../../etc/passwd", "size": 10}]
        }))
        .unwrap();
        // A model larger than any disk: refused before a byte is downloaded.
        let huge = serde_json::to_vec(&serde_json::json!({
            "layers": [{"mediaType": MODEL_LAYER, "digest": digest(b"GGUF"), "size": 1u64 << 60}]
        }))
        .unwrap();
        let manifests = HashMap::from([
            ("library/adapter/latest".to_string(), no_model),
            ("library/evil/latest".to_string(), evil),
            ("library/huge/latest".to_string(), huge),
        ]);
        let reg = FakeRegistry::start(manifests, blobs);
        let tmp = tempfile::tempdir().unwrap();
        let cache = Cache::new(tmp.path());
        let err = |n: &str| cache.pull_from_registry(&format!("{}/library/{n}", reg.host), true, Progress::Quiet).unwrap_err().to_string();
        let e = err("missing");
        assert!(e.contains("is not in its registry") && e.contains("404"), "{e}");
        let e = err("adapter");
        assert!(e.contains("no `application/vnd.ollama.image.model` layer"), "{e}");
        let e = err("evil");
        assert!(e.contains("not `sha256:` and 64 hex digits"), "{e}");
        assert!(!tmp.path().join("ollama/blobs").exists(), "nothing written for a bad manifest");
        let e = err("huge");
        assert!(e.contains("MB are free") && e.contains("FORMWORK_HOME"), "{e}");
        assert!(reg.requests().iter().all(|r| !r.starts_with("/v2/library/huge/blobs") && !r.starts_with("/storage/")), "{:?}", reg.requests());
        // Nothing listens on port 1: the network error says so.
        let e = cache.pull_from_registry("127.0.0.1:1/library/x", true, Progress::Quiet).unwrap_err().to_string();
        assert!(e.contains("could not be reached"), "{e}");
        // A name that cannot be a path part is refused before any request.
        let e = cache.pull_from_registry("../x", true, Progress::Quiet).unwrap_err().to_string();
        assert!(e.contains("not an Ollama model name"), "{e}");
    }
}
