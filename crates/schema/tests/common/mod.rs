//! Shared helpers for the schema conformance tests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// `../shared/data`, failing clearly when it is missing.
pub fn data_dir() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data");
    assert!(p.is_dir(), "shared test data not found at {} (CI keeps it next to the repository)", p.display());
    p
}

/// The suite's remote documents, keyed by their `http://localhost:1234/` URL.
pub fn remotes() -> BTreeMap<String, serde_json::Value> {
    let root = data_dir().join("json-schema-test-suite/remotes");
    let mut out = BTreeMap::new();
    let mut stack = vec![root.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "json") {
                let rel = p.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/");
                if let Ok(v) = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()) {
                    out.insert(format!("http://localhost:1234/{rel}"), v);
                }
            }
        }
    }
    out
}

/// Runs `f` on a thread with a large stack (schema compilation recurses per nesting level).
pub fn big_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new().stack_size(256 << 20).spawn(f).unwrap().join().unwrap()
}
