//! A small pure-Rust GGUF reader: header and metadata key/values (tensors are skipped).
//! Implemented by the vocab work; see the crate docs.
