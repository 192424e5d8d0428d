//! A fake Ollama registry for tests (this crate's, and the server's `/api/pull` tests,
//! through the `testing` feature): a loopback HTTP server speaking the part of the registry
//! API [`crate::ollama_registry`] uses.

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

/// A registry on loopback speaking the API Ollama's client uses: manifests by
/// `namespace/model/tag`, blobs by digest behind a redirect (as registry.ollama.ai sends
/// them to its storage), `Range` honoured. Records each request line with its `Range`.
pub struct FakeRegistry {
    /// `127.0.0.1:<port>`: the registry part of the names it serves.
    pub host: String,
    seen: Arc<Mutex<Vec<String>>>,
}

impl FakeRegistry {
    /// Serves `manifests` (by `namespace/model/tag`) and `blobs` (by digest) until the
    /// process ends.
    pub fn start(manifests: HashMap<String, Vec<u8>>, blobs: HashMap<String, Vec<u8>>) -> FakeRegistry {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let host = listener.local_addr().unwrap().to_string();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
                let mut range = None;
                loop {
                    let mut h = String::new();
                    if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                        break;
                    }
                    if let Some((k, v)) = h.split_once(':') {
                        if k.eq_ignore_ascii_case("range") {
                            range = v.trim().strip_prefix("bytes=").and_then(|r| r.strip_suffix('-')).and_then(|r| r.parse::<usize>().ok());
                        }
                    }
                }
                log.lock().unwrap().push(match range {
                    Some(r) => format!("{path} range {r}"),
                    None => path.clone(),
                });
                let reply = |status: &str, extra: &str, body: &[u8]| {
                    let mut out = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n{extra}\r\n", body.len()).into_bytes();
                    out.extend_from_slice(body);
                    out
                };
                let out = if let Some((repo, tag)) = path.strip_prefix("/v2/").and_then(|r| r.split_once("/manifests/")) {
                    match manifests.get(&format!("{repo}/{tag}")) {
                        Some(m) => reply("200 OK", "Content-Type: application/vnd.docker.distribution.manifest.v2+json\r\n", m),
                        None => reply("404 Not Found", "", b"{\"errors\":[{\"code\":\"MANIFEST_UNKNOWN\"}]}"),
                    }
                } else if let Some((_, digest)) = path.strip_prefix("/v2/").and_then(|r| r.split_once("/blobs/")) {
                    reply("307 Temporary Redirect", &format!("Location: /storage/{digest}\r\n"), b"")
                } else if let Some(digest) = path.strip_prefix("/storage/") {
                    match blobs.get(digest) {
                        Some(b) => match range {
                            Some(r) if r <= b.len() => reply("206 Partial Content", &format!("Content-Range: bytes {r}-{}/{}\r\n", b.len() - 1, b.len()), &b[r..]),
                            _ => reply("200 OK", "", b),
                        },
                        None => reply("404 Not Found", "", b""),
                    }
                } else {
                    reply("404 Not Found", "", b"")
                };
                let _ = conn.write_all(&out);
            }
        });
        FakeRegistry { host, seen }
    }

    /// The requests so far: each path, with ` range N` when it asked for a range.
    pub fn requests(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

/// `sha256:<hex>` of `bytes`.
pub fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", crate::extract::hex(&Sha256::digest(bytes)))
}

/// A manifest of `layers` ((media type, bytes)) with a config blob, as Ollama's registry
/// serves them; also adds every blob to `blobs`.
pub fn manifest(layers: &[(&str, &[u8])], blobs: &mut HashMap<String, Vec<u8>>) -> Vec<u8> {
    let config = br#"{"model_format":"gguf","model_family":"llama"}"#;
    let entry = |t: &str, b: &[u8]| serde_json::json!({"mediaType": t, "digest": digest(b), "size": b.len()});
    blobs.insert(digest(config), config.to_vec());
    for (_, b) in layers {
        blobs.insert(digest(b), b.to_vec());
    }
    serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": entry("application/vnd.docker.container.image.v1+json", config),
        "layers": layers.iter().map(|(t, b)| entry(t, b)).collect::<Vec<_>>(),
    }))
    .unwrap()
}
