//! A small pure-Rust GGUF reader: the header and the metadata key/values.
//!
//! GGUF (versions 2 and 3, little-endian) starts with the magic `GGUF`, a `u32` version, a
//! `u64` tensor count and a `u64` metadata count, then the metadata key/values, then the
//! tensor infos and the tensor data. This reader stops after the metadata: tensors are never
//! read, so opening a multi-GB model reads only its first few MB, through a buffered reader.
//!
//! The file is untrusted: every string length, array length and key count is checked against
//! [`GgufLimits`] before anything is allocated, and a file that ends early is a
//! [`GgufError::Truncated`] naming the offset, never a panic.
//!
//! ```no_run
//! use formwork_vocab::gguf::GgufFile;
//! let f = GgufFile::open("model.gguf")?;
//! println!("{:?} context {:?}", f.architecture(), f.context_length());
//! let tokens = f.get_str_array("tokenizer.ggml.tokens");
//! # Ok::<(), formwork_vocab::gguf::GgufError>(())
//! ```

use std::collections::BTreeMap;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

/// Errors reading a GGUF file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GgufError {
    /// The file does not start with the GGUF magic.
    #[error("{path} is not a GGUF file (it starts with {start}); pass the path of a .gguf model file")]
    BadMagic {
        /// The file.
        path: String,
        /// Its first bytes, escaped.
        start: String,
    },
    /// A GGUF version this reader does not handle.
    #[error("{path}: GGUF version {version} is not supported (this reader handles versions 2 and 3); re-convert the model with a recent llama.cpp")]
    UnsupportedVersion {
        /// The file.
        path: String,
        /// The version found.
        version: u32,
    },
    /// The file ended in the middle of the header or metadata.
    #[error("{path}: the file is truncated (it ended at byte {offset} while reading {what}); download it again")]
    Truncated {
        /// The file.
        path: String,
        /// Bytes read before the end.
        offset: u64,
        /// What was being read.
        what: String,
    },
    /// A length, count or type in the file is out of bounds.
    #[error("{path}: corrupt or hostile GGUF metadata at byte {offset}: {what}")]
    OutOfBounds {
        /// The file.
        path: String,
        /// Where.
        offset: u64,
        /// What was wrong.
        what: String,
    },
    /// An I/O error other than an early end of file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
}

/// Bounds on what a GGUF header may ask this reader to allocate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GgufLimits {
    /// Longest string (key or value), in bytes.
    pub max_string_bytes: u64,
    /// Most elements in one array.
    pub max_array_len: u64,
    /// Most metadata key/values.
    pub max_kv_count: u64,
    /// Deepest nesting of arrays of arrays.
    pub max_array_depth: u32,
    /// Most bytes of metadata in total.
    pub max_metadata_bytes: u64,
}

impl Default for GgufLimits {
    fn default() -> Self {
        GgufLimits {
            max_string_bytes: 16 << 20,
            max_array_len: 16 << 20,
            max_kv_count: 1 << 16,
            max_array_depth: 4,
            max_metadata_bytes: 1 << 30,
        }
    }
}

/// A GGUF metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum GgufValue {
    /// Type 0.
    U8(u8),
    /// Type 1.
    I8(i8),
    /// Type 2.
    U16(u16),
    /// Type 3.
    I16(i16),
    /// Type 4.
    U32(u32),
    /// Type 5.
    I32(i32),
    /// Type 6.
    F32(f32),
    /// Type 7.
    Bool(bool),
    /// Type 8. Strings are kept as bytes: GGUF does not promise UTF-8 (see [`GgufValue::as_str`]).
    String(Vec<u8>),
    /// Type 9.
    Array(GgufArray),
    /// Type 10.
    U64(u64),
    /// Type 11.
    I64(i64),
    /// Type 12.
    F64(f64),
}

/// A GGUF array, stored by element type.
#[derive(Clone, Debug, PartialEq)]
pub enum GgufArray {
    /// Elements of type 0.
    U8(Vec<u8>),
    /// Elements of type 1.
    I8(Vec<i8>),
    /// Elements of type 2.
    U16(Vec<u16>),
    /// Elements of type 3.
    I16(Vec<i16>),
    /// Elements of type 4.
    U32(Vec<u32>),
    /// Elements of type 5.
    I32(Vec<i32>),
    /// Elements of type 6.
    F32(Vec<f32>),
    /// Elements of type 7.
    Bool(Vec<bool>),
    /// Elements of type 8, as bytes.
    String(Vec<Vec<u8>>),
    /// Elements of type 9.
    Array(Vec<GgufArray>),
    /// Elements of type 10.
    U64(Vec<u64>),
    /// Elements of type 11.
    I64(Vec<i64>),
    /// Elements of type 12.
    F64(Vec<f64>),
}

impl GgufArray {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            GgufArray::U8(v) => v.len(),
            GgufArray::I8(v) => v.len(),
            GgufArray::U16(v) => v.len(),
            GgufArray::I16(v) => v.len(),
            GgufArray::U32(v) => v.len(),
            GgufArray::I32(v) => v.len(),
            GgufArray::F32(v) => v.len(),
            GgufArray::Bool(v) => v.len(),
            GgufArray::String(v) => v.len(),
            GgufArray::Array(v) => v.len(),
            GgufArray::U64(v) => v.len(),
            GgufArray::I64(v) => v.len(),
            GgufArray::F64(v) => v.len(),
        }
    }

    /// True when the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Integer elements as `i64` (any integer element type; `u64` values above `i64::MAX`
    /// make it `None`). `None` for non-integer arrays.
    pub fn to_i64_vec(&self) -> Option<Vec<i64>> {
        fn conv<T: Copy>(v: &[T], f: impl Fn(T) -> Option<i64>) -> Option<Vec<i64>> {
            v.iter().map(|&x| f(x)).collect()
        }
        match self {
            GgufArray::U8(v) => conv(v, |x| Some(x as i64)),
            GgufArray::I8(v) => conv(v, |x| Some(x as i64)),
            GgufArray::U16(v) => conv(v, |x| Some(x as i64)),
            GgufArray::I16(v) => conv(v, |x| Some(x as i64)),
            GgufArray::U32(v) => conv(v, |x| Some(x as i64)),
            GgufArray::I32(v) => conv(v, |x| Some(x as i64)),
            GgufArray::U64(v) => conv(v, |x| i64::try_from(x).ok()),
            GgufArray::I64(v) => Some(v.clone()),
            _ => None,
        }
    }
}

impl GgufValue {
    /// The GGUF type code of this value.
    pub fn type_code(&self) -> u32 {
        match self {
            GgufValue::U8(_) => 0,
            GgufValue::I8(_) => 1,
            GgufValue::U16(_) => 2,
            GgufValue::I16(_) => 3,
            GgufValue::U32(_) => 4,
            GgufValue::I32(_) => 5,
            GgufValue::F32(_) => 6,
            GgufValue::Bool(_) => 7,
            GgufValue::String(_) => 8,
            GgufValue::Array(_) => 9,
            GgufValue::U64(_) => 10,
            GgufValue::I64(_) => 11,
            GgufValue::F64(_) => 12,
        }
    }

    /// Any integer value as `i128` (lossless for every GGUF integer type).
    pub fn as_i128(&self) -> Option<i128> {
        Some(match *self {
            GgufValue::U8(x) => x as i128,
            GgufValue::I8(x) => x as i128,
            GgufValue::U16(x) => x as i128,
            GgufValue::I16(x) => x as i128,
            GgufValue::U32(x) => x as i128,
            GgufValue::I32(x) => x as i128,
            GgufValue::U64(x) => x as i128,
            GgufValue::I64(x) => x as i128,
            _ => return None,
        })
    }

    /// A string value as `&str` when it is valid UTF-8.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            GgufValue::String(b) => std::str::from_utf8(b).ok(),
            _ => None,
        }
    }
}

/// What [`GgufFile::details`] reads: the fields of Ollama's `details` object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModelDetails {
    /// `llama`, `qwen2`, ...
    pub family: String,
    /// `135M`, `8B`, ...
    pub parameter_size: String,
    /// `Q4_K_M`, `F16`, ... (`unknown` for a file type llama.cpp has no name for here).
    pub quantization_level: String,
}

/// llama.cpp's name of a GGUF `general.file_type` (its `llama_ftype`).
pub fn file_type_name(t: i128) -> &'static str {
    match t {
        0 => "F32",
        1 => "F16",
        2 => "Q4_0",
        3 => "Q4_1",
        7 => "Q8_0",
        8 => "Q5_0",
        9 => "Q5_1",
        10 => "Q2_K",
        11 => "Q3_K_S",
        12 => "Q3_K_M",
        13 => "Q3_K_L",
        14 => "Q4_K_S",
        15 => "Q4_K_M",
        16 => "Q5_K_S",
        17 => "Q5_K_M",
        18 => "Q6_K",
        19 => "IQ2_XXS",
        20 => "IQ2_XS",
        21 => "Q2_K_S",
        22 => "IQ3_XS",
        23 => "IQ3_XXS",
        24 => "IQ1_S",
        25 => "IQ4_NL",
        26 => "IQ3_S",
        27 => "IQ3_M",
        28 => "IQ2_S",
        29 => "IQ2_M",
        30 => "IQ4_XS",
        31 => "IQ1_M",
        32 => "BF16",
        36 => "TQ1_0",
        37 => "TQ2_0",
        38 => "MXFP4_MOE",
        _ => "unknown",
    }
}

/// A GGUF file's header and metadata (tensors are not read).
#[derive(Clone, Debug)]
pub struct GgufFile {
    path: PathBuf,
    version: u32,
    tensor_count: u64,
    metadata: BTreeMap<String, GgufValue>,
}

impl GgufFile {
    /// Opens `path` and reads its header and metadata with the default [`GgufLimits`].
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile, GgufError> {
        Self::open_with_limits(path, &GgufLimits::default())
    }

    /// Opens `path` with explicit limits.
    pub fn open_with_limits(path: impl AsRef<Path>, limits: &GgufLimits) -> Result<GgufFile, GgufError> {
        let path = path.as_ref();
        let file = std::fs::File::open(path)
            .map_err(|source| GgufError::Io { path: path.display().to_string(), source })?;
        let mut f = Self::from_reader(BufReader::with_capacity(1 << 16, file), path, limits)?;
        f.path = path.to_path_buf();
        Ok(f)
    }

    /// Reads a header and metadata from any reader; `name` is used in error messages.
    pub fn from_reader<R: Read>(reader: R, name: impl AsRef<Path>, limits: &GgufLimits) -> Result<GgufFile, GgufError> {
        let name = name.as_ref().display().to_string();
        let mut r = Reader { inner: reader, offset: 0, path: name.clone(), limits, budget: limits.max_metadata_bytes };
        let mut magic = [0u8; 4];
        let got = r.read_up_to(&mut magic)?;
        if got < 4 || &magic != b"GGUF" {
            return Err(GgufError::BadMagic { path: name, start: escape_start(&magic[..got]) });
        }
        let version = r.u32("the version")?;
        if !(2..=3).contains(&version) {
            return Err(GgufError::UnsupportedVersion { path: name, version });
        }
        let tensor_count = r.u64("the tensor count")?;
        let kv_count = r.u64("the metadata count")?;
        if kv_count > limits.max_kv_count {
            return Err(r.bounds(format!("{kv_count} metadata entries (limit {})", limits.max_kv_count)));
        }
        let mut metadata = BTreeMap::new();
        for i in 0..kv_count {
            let key_bytes = r.string(&format!("the key of metadata entry {i}"))?;
            let key = String::from_utf8_lossy(&key_bytes).into_owned();
            let ty = r.u32(&format!("the type of {key}"))?;
            let value = r.value(ty, &key, 0)?;
            metadata.insert(key, value);
        }
        Ok(GgufFile { path: PathBuf::from(name), version, tensor_count, metadata })
    }

    /// The file this was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The GGUF version (2 or 3).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Number of tensors the header announces (they are not read).
    pub fn tensor_count(&self) -> u64 {
        self.tensor_count
    }

    /// All metadata, by key.
    pub fn metadata(&self) -> &BTreeMap<String, GgufValue> {
        &self.metadata
    }

    /// The raw value of `key`.
    pub fn get(&self, key: &str) -> Option<&GgufValue> {
        self.metadata.get(key)
    }

    /// A string value (valid UTF-8 only).
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key)?.as_str()
    }

    /// An integer value of any integer type that fits in `u32`.
    pub fn get_u32(&self, key: &str) -> Option<u32> {
        u32::try_from(self.get(key)?.as_i128()?).ok()
    }

    /// An integer value of any integer type that fits in `u64`.
    pub fn get_u64(&self, key: &str) -> Option<u64> {
        u64::try_from(self.get(key)?.as_i128()?).ok()
    }

    /// An integer value of any integer type that fits in `i64`.
    pub fn get_i64(&self, key: &str) -> Option<i64> {
        i64::try_from(self.get(key)?.as_i128()?).ok()
    }

    /// A boolean (an integer 0/1 is accepted too).
    pub fn get_bool(&self, key: &str) -> Option<bool> {
        match self.get(key)? {
            GgufValue::Bool(b) => Some(*b),
            v => match v.as_i128()? {
                0 => Some(false),
                1 => Some(true),
                _ => None,
            },
        }
    }

    /// A float (f32, f64 narrowed, or an integer).
    pub fn get_f32(&self, key: &str) -> Option<f32> {
        match self.get(key)? {
            GgufValue::F32(x) => Some(*x),
            GgufValue::F64(x) => Some(*x as f32),
            v => v.as_i128().map(|x| x as f32),
        }
    }

    /// An array value.
    pub fn get_array(&self, key: &str) -> Option<&GgufArray> {
        match self.get(key)? {
            GgufValue::Array(a) => Some(a),
            _ => None,
        }
    }

    /// A string array as bytes (GGUF strings need not be UTF-8).
    pub fn get_bytes_array(&self, key: &str) -> Option<&[Vec<u8>]> {
        match self.get_array(key)? {
            GgufArray::String(v) => Some(v),
            _ => None,
        }
    }

    /// A string array; `None` if absent, not a string array, or any element is not UTF-8.
    pub fn get_str_array(&self, key: &str) -> Option<Vec<&str>> {
        self.get_bytes_array(key)?.iter().map(|b| std::str::from_utf8(b).ok()).collect()
    }

    /// An integer array of any integer element type, as `i32` (`None` if a value does not fit).
    pub fn get_i32_array(&self, key: &str) -> Option<Vec<i32>> {
        match self.get_array(key)? {
            GgufArray::I32(v) => Some(v.clone()),
            a => a.to_i64_vec()?.into_iter().map(|x| i32::try_from(x).ok()).collect(),
        }
    }

    /// An integer array of any integer element type, as `u32` (`None` if a value does not fit).
    pub fn get_u32_array(&self, key: &str) -> Option<Vec<u32>> {
        match self.get_array(key)? {
            GgufArray::U32(v) => Some(v.clone()),
            a => a.to_i64_vec()?.into_iter().map(|x| u32::try_from(x).ok()).collect(),
        }
    }

    /// An integer array of any integer element type, as `i64`.
    pub fn get_i64_array(&self, key: &str) -> Option<Vec<i64>> {
        self.get_array(key)?.to_i64_vec()
    }

    /// A float array (f32, or f64 narrowed).
    pub fn get_f32_array(&self, key: &str) -> Option<Vec<f32>> {
        match self.get_array(key)? {
            GgufArray::F32(v) => Some(v.clone()),
            GgufArray::F64(v) => Some(v.iter().map(|&x| x as f32).collect()),
            _ => None,
        }
    }

    /// `general.architecture` (`llama`, `qwen2`, ...).
    pub fn architecture(&self) -> Option<&str> {
        self.get_str("general.architecture")
    }

    /// The model's family (`general.architecture`), size label (`general.size_label`, such
    /// as `135M`) and quantization (`general.file_type` in llama.cpp's names, such as
    /// `Q4_1`), as Ollama's model details show them; empty where the file does not say.
    pub fn details(&self) -> ModelDetails {
        ModelDetails {
            family: self.architecture().unwrap_or_default().to_string(),
            parameter_size: self.get_str("general.size_label").unwrap_or_default().to_string(),
            quantization_level: self.get("general.file_type").and_then(|v| v.as_i128()).map(file_type_name).unwrap_or_default().to_string(),
        }
    }

    /// `general.name`.
    pub fn name(&self) -> Option<&str> {
        self.get_str("general.name")
    }

    /// `{arch}.context_length`: the context the model was trained with.
    pub fn context_length(&self) -> Option<u64> {
        self.get_u64(&format!("{}.context_length", self.architecture()?))
    }

    /// `tokenizer.chat_template`.
    pub fn chat_template(&self) -> Option<&str> {
        self.get_str("tokenizer.chat_template")
    }

    /// `tokenizer.ggml.model` (`gpt2`, `llama`, ...).
    pub fn tokenizer_model(&self) -> Option<&str> {
        self.get_str("tokenizer.ggml.model")
    }

    /// `tokenizer.ggml.bos_token_id`.
    pub fn bos_token_id(&self) -> Option<u32> {
        self.get_u32("tokenizer.ggml.bos_token_id")
    }

    /// `tokenizer.ggml.eos_token_id`.
    pub fn eos_token_id(&self) -> Option<u32> {
        self.get_u32("tokenizer.ggml.eos_token_id")
    }

    /// `tokenizer.ggml.add_bos_token` (absent: `None`; llama.cpp's default depends on the model).
    pub fn add_bos_token(&self) -> Option<bool> {
        self.get_bool("tokenizer.ggml.add_bos_token")
    }
}

mod reader;
mod vocab;
use reader::{escape_start, Reader};

#[cfg(test)]
pub(crate) mod tests;
