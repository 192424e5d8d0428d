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

use crate::decode;
use crate::{TokenId, TokenKind, VocabError};

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

impl crate::Vocabulary {
    /// Reads the vocabulary from a GGUF file's tokenizer metadata (`tokenizer.ggml.*`).
    ///
    /// - `tokenizer.ggml.model` `gpt2`: byte-level BPE; token strings are mapped back to bytes
    ///   through the GPT-2 byte/character table. `llama`: SentencePiece; `▁` is a space and
    ///   `<0xXX>` tokens are [`TokenKind::Byte`]. Other models are
    ///   [`VocabError::Unsupported`].
    /// - `tokenizer.ggml.token_type`: 1 normal, 2 unknown and 5 unused ([`TokenKind::Unused`]),
    ///   3 control ([`TokenKind::Special`]), 4 user-defined (its text as is), 6 byte.
    /// - EOS: `tokenizer.ggml.eos_token_id`, then `eot_token_id` / `eom_token_id`, then control
    ///   tokens with well-known end-of-turn names (`<|im_end|>`, `<|eot_id|>`, `<|end|>`,
    ///   `<end_of_turn>`, `<|endoftext|>`, ...). BOS and `add_bos_token` are kept too.
    pub fn from_gguf(f: &GgufFile) -> Result<crate::Vocabulary, VocabError> {
        let model = f.tokenizer_model().ok_or_else(|| {
            VocabError::Invalid(format!("{}: no tokenizer.ggml.model in the GGUF metadata", f.path().display()))
        })?;
        let byte_level = match model {
            "gpt2" => true,
            "llama" => false,
            other => {
                return Err(VocabError::Unsupported(format!(
                    "{}: tokenizer.ggml.model is \"{other}\"; formwork reads \"gpt2\" (byte-level BPE) and \"llama\" (SentencePiece) vocabularies",
                    f.path().display()
                )))
            }
        };
        let tokens = f.get_bytes_array("tokenizer.ggml.tokens").ok_or_else(|| {
            VocabError::Invalid(format!("{}: no string array tokenizer.ggml.tokens in the GGUF metadata", f.path().display()))
        })?;
        let types = match f.get("tokenizer.ggml.token_type") {
            None => None,
            Some(_) => {
                let t = f.get_i32_array("tokenizer.ggml.token_type").ok_or_else(|| {
                    VocabError::Invalid(format!("{}: tokenizer.ggml.token_type is not an integer array", f.path().display()))
                })?;
                if t.len() != tokens.len() {
                    return Err(VocabError::Invalid(format!(
                        "{}: {} tokens but {} token types",
                        f.path().display(),
                        tokens.len(),
                        t.len()
                    )));
                }
                Some(t)
            }
        };
        let mut bytes = Vec::with_capacity(tokens.len());
        let mut kinds = Vec::with_capacity(tokens.len());
        for (i, raw) in tokens.iter().enumerate() {
            let text = String::from_utf8_lossy(raw);
            let ty = types.as_ref().map_or(1, |t| t[i]);
            let ty = if types.is_none() && !byte_level && decode::parse_byte_token(&text).is_some() { 6 } else { ty };
            let (b, k) = match ty {
                2 | 5 => (raw.clone(), TokenKind::Unused),
                3 => (raw.clone(), TokenKind::Special),
                4 => (raw.clone(), TokenKind::UserDefined),
                6 => match decode::parse_byte_token(&text) {
                    Some(b) => (vec![b], TokenKind::Byte),
                    None if byte_level => (decode::byte_level_to_bytes(&text), TokenKind::Normal),
                    None => {
                        return Err(VocabError::Invalid(format!(
                            "{}: token {i} {text:?} has type byte but is not spelled <0xXX>",
                            f.path().display()
                        )))
                    }
                },
                _ if byte_level => (decode::byte_level_to_bytes(&text), TokenKind::Normal),
                _ => (decode::sentencepiece_to_bytes(&text), TokenKind::Normal),
            };
            bytes.push(b);
            kinds.push(k);
        }
        let n = bytes.len();
        let mut eos: Vec<TokenId> = Vec::new();
        let push = |t: TokenId, eos: &mut Vec<TokenId>| {
            if t.index() < n && !eos.contains(&t) {
                eos.push(t);
            }
        };
        for key in ["tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"] {
            if let Some(id) = f.get_u32(key) {
                push(TokenId(id), &mut eos);
            }
        }
        for name in decode::END_OF_TURN_NAMES {
            if let Some(i) = (0..n).find(|&i| kinds[i] == TokenKind::Special && bytes[i] == name.as_bytes()) {
                push(TokenId(i as u32), &mut eos);
            }
        }
        let mut v = crate::Vocabulary::new(bytes, kinds, eos)?;
        v.set_bos_token(f.bos_token_id().map(TokenId).filter(|b| b.index() < n))?;
        v.set_add_bos(f.add_bos_token().unwrap_or(!byte_level));
        Ok(v)
    }

    /// Opens a GGUF file and reads its vocabulary ([`Vocabulary::from_gguf`](crate::Vocabulary::from_gguf)).
    pub fn from_gguf_file(path: impl AsRef<Path>) -> Result<crate::Vocabulary, VocabError> {
        Self::from_gguf(&GgufFile::open(path)?)
    }
}

fn escape_start(b: &[u8]) -> String {
    if b.is_empty() {
        return "nothing: the file is empty".into();
    }
    format!("\"{}\"", b.iter().flat_map(|&c| std::ascii::escape_default(c)).map(char::from).collect::<String>())
}

struct Reader<'l, R> {
    inner: R,
    offset: u64,
    path: String,
    limits: &'l GgufLimits,
    budget: u64,
}

impl<R: Read> Reader<'_, R> {
    fn read_up_to(&mut self, buf: &mut [u8]) -> Result<usize, GgufError> {
        let mut n = 0;
        while n < buf.len() {
            match self.inner.read(&mut buf[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(source) => return Err(GgufError::Io { path: self.path.clone(), source }),
            }
        }
        self.offset += n as u64;
        Ok(n)
    }

    fn exact(&mut self, buf: &mut [u8], what: &str) -> Result<(), GgufError> {
        let n = self.read_up_to(buf)?;
        if n < buf.len() {
            return Err(GgufError::Truncated { path: self.path.clone(), offset: self.offset, what: what.to_string() });
        }
        Ok(())
    }

    fn bounds(&self, what: String) -> GgufError {
        GgufError::OutOfBounds { path: self.path.clone(), offset: self.offset, what }
    }

    fn charge(&mut self, bytes: u64) -> Result<(), GgufError> {
        if bytes > self.budget {
            return Err(self.bounds(format!(
                "the metadata is larger than the limit of {} bytes",
                self.limits.max_metadata_bytes
            )));
        }
        self.budget -= bytes;
        Ok(())
    }

    fn u32(&mut self, what: &str) -> Result<u32, GgufError> {
        let mut b = [0; 4];
        self.exact(&mut b, what)?;
        Ok(u32::from_le_bytes(b))
    }

    fn u64(&mut self, what: &str) -> Result<u64, GgufError> {
        let mut b = [0; 8];
        self.exact(&mut b, what)?;
        Ok(u64::from_le_bytes(b))
    }

    fn string(&mut self, what: &str) -> Result<Vec<u8>, GgufError> {
        let len = self.u64(what)?;
        if len > self.limits.max_string_bytes {
            return Err(self.bounds(format!(
                "{what}: a string of {len} bytes (limit {})",
                self.limits.max_string_bytes
            )));
        }
        self.charge(len + 8)?;
        let mut s = vec![0u8; len as usize];
        self.exact(&mut s, what)?;
        Ok(s)
    }

    fn value(&mut self, ty: u32, key: &str, depth: u32) -> Result<GgufValue, GgufError> {
        macro_rules! scalar {
            ($t:ty, $n:literal, $v:path) => {{
                let mut b = [0u8; $n];
                self.exact(&mut b, key)?;
                self.charge($n)?;
                $v(<$t>::from_le_bytes(b))
            }};
        }
        Ok(match ty {
            0 => scalar!(u8, 1, GgufValue::U8),
            1 => scalar!(i8, 1, GgufValue::I8),
            2 => scalar!(u16, 2, GgufValue::U16),
            3 => scalar!(i16, 2, GgufValue::I16),
            4 => scalar!(u32, 4, GgufValue::U32),
            5 => scalar!(i32, 4, GgufValue::I32),
            6 => scalar!(f32, 4, GgufValue::F32),
            7 => {
                let mut b = [0u8; 1];
                self.exact(&mut b, key)?;
                self.charge(1)?;
                match b[0] {
                    0 => GgufValue::Bool(false),
                    1 => GgufValue::Bool(true),
                    x => return Err(self.bounds(format!("{key}: boolean byte {x} (must be 0 or 1)"))),
                }
            }
            8 => GgufValue::String(self.string(key)?),
            9 => GgufValue::Array(self.array(key, depth)?),
            10 => scalar!(u64, 8, GgufValue::U64),
            11 => scalar!(i64, 8, GgufValue::I64),
            12 => scalar!(f64, 8, GgufValue::F64),
            t => return Err(self.bounds(format!("{key}: unknown value type {t}"))),
        })
    }

    fn array(&mut self, key: &str, depth: u32) -> Result<GgufArray, GgufError> {
        if depth >= self.limits.max_array_depth {
            return Err(self.bounds(format!(
                "{key}: arrays nested deeper than {}",
                self.limits.max_array_depth
            )));
        }
        let ty = self.u32(key)?;
        let len = self.u64(key)?;
        if len > self.limits.max_array_len {
            return Err(self.bounds(format!(
                "{key}: an array of {len} elements (limit {})",
                self.limits.max_array_len
            )));
        }
        // Never trust `len` for a pre-allocation beyond what a small file could back.
        let cap = len.min(1 << 16) as usize;
        macro_rules! prim {
            ($t:ty, $n:literal, $v:path) => {{
                self.charge(len * $n)?;
                let mut out: Vec<$t> = Vec::with_capacity(cap);
                let mut b = [0u8; $n];
                for _ in 0..len {
                    self.exact(&mut b, key)?;
                    out.push(<$t>::from_le_bytes(b));
                }
                $v(out)
            }};
        }
        Ok(match ty {
            0 => prim!(u8, 1, GgufArray::U8),
            1 => prim!(i8, 1, GgufArray::I8),
            2 => prim!(u16, 2, GgufArray::U16),
            3 => prim!(i16, 2, GgufArray::I16),
            4 => prim!(u32, 4, GgufArray::U32),
            5 => prim!(i32, 4, GgufArray::I32),
            6 => prim!(f32, 4, GgufArray::F32),
            7 => {
                self.charge(len)?;
                let mut out = Vec::with_capacity(cap);
                let mut b = [0u8; 1];
                for _ in 0..len {
                    self.exact(&mut b, key)?;
                    match b[0] {
                        0 => out.push(false),
                        1 => out.push(true),
                        x => return Err(self.bounds(format!("{key}: boolean byte {x} (must be 0 or 1)"))),
                    }
                }
                GgufArray::Bool(out)
            }
            8 => {
                let mut out = Vec::with_capacity(cap);
                for _ in 0..len {
                    out.push(self.string(key)?);
                }
                GgufArray::String(out)
            }
            9 => {
                let mut out = Vec::with_capacity(cap.min(1024));
                for _ in 0..len {
                    out.push(self.array(key, depth + 1)?);
                }
                GgufArray::Array(out)
            }
            10 => prim!(u64, 8, GgufArray::U64),
            11 => prim!(i64, 8, GgufArray::I64),
            12 => prim!(f64, 8, GgufArray::F64),
            t => return Err(self.bounds(format!("{key}: unknown array element type {t}"))),
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Builds a GGUF header in memory.
    pub(crate) struct Builder {
        pub buf: Vec<u8>,
        count: u64,
    }

    impl Builder {
        pub fn new(version: u32) -> Self {
            let mut buf = b"GGUF".to_vec();
            buf.extend(version.to_le_bytes());
            buf.extend(7u64.to_le_bytes()); // tensors
            buf.extend(0u64.to_le_bytes()); // kv count, patched in finish
            Builder { buf, count: 0 }
        }
        fn key(&mut self, k: &str, ty: u32) {
            self.count += 1;
            self.str_raw(k.as_bytes());
            self.buf.extend(ty.to_le_bytes());
        }
        fn str_raw(&mut self, s: &[u8]) {
            self.buf.extend((s.len() as u64).to_le_bytes());
            self.buf.extend(s);
        }
        pub fn string(mut self, k: &str, v: &str) -> Self {
            self.key(k, 8);
            self.str_raw(v.as_bytes());
            self
        }
        pub fn u32(mut self, k: &str, v: u32) -> Self {
            self.key(k, 4);
            self.buf.extend(v.to_le_bytes());
            self
        }
        pub fn bool(mut self, k: &str, v: bool) -> Self {
            self.key(k, 7);
            self.buf.push(v as u8);
            self
        }
        pub fn str_array(mut self, k: &str, v: &[&str]) -> Self {
            self.key(k, 9);
            self.buf.extend(8u32.to_le_bytes());
            self.buf.extend((v.len() as u64).to_le_bytes());
            for s in v {
                self.str_raw(s.as_bytes());
            }
            self
        }
        pub fn i32_array(mut self, k: &str, v: &[i32]) -> Self {
            self.key(k, 9);
            self.buf.extend(5u32.to_le_bytes());
            self.buf.extend((v.len() as u64).to_le_bytes());
            for x in v {
                self.buf.extend(x.to_le_bytes());
            }
            self
        }
        pub fn raw(mut self, k: &str, ty: u32, bytes: &[u8]) -> Self {
            self.key(k, ty);
            self.buf.extend(bytes);
            self
        }
        pub fn finish(mut self) -> Vec<u8> {
            self.buf[16..24].copy_from_slice(&self.count.to_le_bytes());
            self.buf
        }
        pub fn parse(self) -> Result<GgufFile, GgufError> {
            let b = self.finish();
            GgufFile::from_reader(&b[..], "mem.gguf", &GgufLimits::default())
        }
    }

    #[test]
    fn details_name_family_size_and_quantization() {
        let f = Builder::new(3).string("general.architecture", "qwen2").string("general.size_label", "500M").u32("general.file_type", 15).parse().unwrap();
        assert_eq!(f.details(), ModelDetails { family: "qwen2".into(), parameter_size: "500M".into(), quantization_level: "Q4_K_M".into() });
        let f = Builder::new(3).u32("general.file_type", 999).parse().unwrap();
        assert_eq!(f.details(), ModelDetails { quantization_level: "unknown".into(), ..Default::default() });
        assert_eq!(Builder::new(3).parse().unwrap().details(), ModelDetails::default());
    }

    #[test]
    fn every_value_type_and_accessors() {
        let f = Builder::new(3)
            .string("general.architecture", "llama")
            .u32("llama.context_length", 8192)
            .raw("u8", 0, &[200])
            .raw("i8", 1, &[0xff])
            .raw("u16", 2, &500u16.to_le_bytes())
            .raw("i16", 3, &(-3i16).to_le_bytes())
            .raw("i32", 5, &(-7i32).to_le_bytes())
            .raw("f32", 6, &1.5f32.to_le_bytes())
            .bool("flag", true)
            .raw("u64", 10, &(1u64 << 40).to_le_bytes())
            .raw("i64", 11, &(-9i64).to_le_bytes())
            .raw("f64", 12, &2.25f64.to_le_bytes())
            .str_array("strs", &["a", "βγ", ""])
            .i32_array("ints", &[1, -2, 3])
            .string("tokenizer.chat_template", "{{ x }}")
            .parse()
            .unwrap();
        assert_eq!(f.version(), 3);
        assert_eq!(f.tensor_count(), 7);
        assert_eq!(f.architecture(), Some("llama"));
        assert_eq!(f.context_length(), Some(8192));
        assert_eq!(f.chat_template(), Some("{{ x }}"));
        assert_eq!(f.get_u32("u8"), Some(200));
        assert_eq!(f.get_u32("i8"), None, "-1 does not fit in u32");
        assert_eq!(f.get_i64("i8"), Some(-1));
        assert_eq!(f.get_u64("u16"), Some(500));
        assert_eq!(f.get_i64("i16"), Some(-3));
        assert_eq!(f.get_i64("i32"), Some(-7));
        assert_eq!(f.get_f32("f32"), Some(1.5));
        assert_eq!(f.get_f32("f64"), Some(2.25));
        assert_eq!(f.get_bool("flag"), Some(true));
        assert_eq!(f.get_u32("u64"), None);
        assert_eq!(f.get_u64("u64"), Some(1 << 40));
        assert_eq!(f.get_i64("i64"), Some(-9));
        assert_eq!(f.get_str_array("strs"), Some(vec!["a", "βγ", ""]));
        assert_eq!(f.get_i32_array("ints"), Some(vec![1, -2, 3]));
        assert_eq!(f.get_u32_array("ints"), None);
        assert_eq!(f.get_i64_array("ints"), Some(vec![1, -2, 3]));
        assert_eq!(f.get_str("llama.context_length"), None, "wrong type is None");
        assert_eq!(f.get("missing"), None);
    }

    #[test]
    fn nested_arrays_and_version_2() {
        let mut inner = Vec::new();
        inner.extend(9u32.to_le_bytes()); // array of arrays
        inner.extend(2u64.to_le_bytes());
        for n in [1u64, 2] {
            inner.extend(4u32.to_le_bytes());
            inner.extend(n.to_le_bytes());
            for i in 0..n as u32 {
                inner.extend(i.to_le_bytes());
            }
        }
        let f = Builder::new(2).raw("nested", 9, &inner).parse().unwrap();
        assert_eq!(f.version(), 2);
        assert_eq!(
            f.get_array("nested"),
            Some(&GgufArray::Array(vec![GgufArray::U32(vec![0]), GgufArray::U32(vec![0, 1])]))
        );
    }

    #[test]
    fn bad_magic_version_and_truncation() {
        let e = GgufFile::from_reader(&b"{\"model\": 1}"[..], "x.json", &GgufLimits::default()).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, GgufError::BadMagic { .. }));
        assert!(msg.contains("x.json is not a GGUF file (it starts with \"{\\\"mo\")"), "{msg}");
        let e = GgufFile::from_reader(&b""[..], "empty", &GgufLimits::default()).unwrap_err();
        assert!(e.to_string().contains("the file is empty"), "{e}");

        let e = Builder::new(1).parse().unwrap_err();
        assert!(matches!(e, GgufError::UnsupportedVersion { version: 1, .. }), "{e}");

        let full = Builder::new(3).string("general.architecture", "llama").str_array("t", &["a", "b"]).finish();
        for cut in [10, 24, 30, full.len() - 1] {
            let e = GgufFile::from_reader(&full[..cut], "cut.gguf", &GgufLimits::default()).unwrap_err();
            assert!(matches!(e, GgufError::Truncated { .. }), "cut at {cut}: {e}");
            assert!(e.to_string().contains("truncated"));
        }
    }

    #[test]
    fn hostile_lengths_are_refused_without_allocating() {
        // A string claiming 2^60 bytes.
        let mut b = Builder::new(3).finish();
        b[16..24].copy_from_slice(&1u64.to_le_bytes());
        b.extend((1u64 << 60).to_le_bytes());
        let e = GgufFile::from_reader(&b[..], "h.gguf", &GgufLimits::default()).unwrap_err();
        assert!(matches!(e, GgufError::OutOfBounds { .. }), "{e}");

        // An array claiming 2^40 u32 elements.
        let mut arr = 4u32.to_le_bytes().to_vec();
        arr.extend((1u64 << 40).to_le_bytes());
        let e = Builder::new(3).raw("big", 9, &arr).parse().unwrap_err();
        assert!(e.to_string().contains("elements"), "{e}");

        // Arrays nested too deep.
        let mut deep = Vec::new();
        for _ in 0..10 {
            deep.extend(9u32.to_le_bytes());
            deep.extend(1u64.to_le_bytes());
        }
        let e = Builder::new(3).raw("deep", 9, &deep).parse().unwrap_err();
        assert!(e.to_string().contains("nested"), "{e}");

        // Too many key/values.
        let mut b = Builder::new(3).finish();
        b[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(GgufFile::from_reader(&b[..], "h.gguf", &GgufLimits::default()).is_err());

        // Unknown type.
        let e = Builder::new(3).raw("x", 99, &[]).parse().unwrap_err();
        assert!(e.to_string().contains("unknown value type 99"), "{e}");
    }

    #[test]
    fn sentencepiece_and_byte_level_vocabularies() {
        use crate::{TokenId, TokenKind, Vocabulary};
        let f = Builder::new(3)
            .string("tokenizer.ggml.model", "llama")
            .str_array("tokenizer.ggml.tokens", &["<unk>", "<s>", "</s>", "<0x0A>", "\u{2581}the", "x", "<tool>", "<extra>"])
            .i32_array("tokenizer.ggml.token_type", &[2, 3, 3, 6, 1, 1, 4, 5])
            .u32("tokenizer.ggml.bos_token_id", 1)
            .u32("tokenizer.ggml.eos_token_id", 2)
            .parse()
            .unwrap();
        let v = Vocabulary::from_gguf(&f).unwrap();
        let kinds: Vec<_> = v.ids().map(|t| v.kind(t)).collect();
        use TokenKind::*;
        assert_eq!(kinds, [Unused, Special, Special, Byte, Normal, Normal, UserDefined, Unused]);
        assert_eq!(v.token_bytes(TokenId(3)), b"\n");
        assert_eq!(v.token_bytes(TokenId(4)), b" the");
        assert_eq!(v.token_bytes(TokenId(6)), b"<tool>");
        assert_eq!(v.eos_tokens(), &[TokenId(2)]);
        assert_eq!(v.bos_token(), Some(TokenId(1)));
        assert!(v.add_bos(), "llama.cpp adds BOS for SentencePiece models by default");

        let f = Builder::new(3)
            .string("tokenizer.ggml.model", "gpt2")
            .str_array("tokenizer.ggml.tokens", &["<|endoftext|>", "\u{0120}the", "\u{010A}", "<|im_end|>", "<|eot_id|>"])
            .i32_array("tokenizer.ggml.token_type", &[3, 1, 1, 3, 1])
            .u32("tokenizer.ggml.eos_token_id", 3)
            .bool("tokenizer.ggml.add_bos_token", false)
            .parse()
            .unwrap();
        let v = Vocabulary::from_gguf(&f).unwrap();
        assert_eq!(v.token_bytes(TokenId(1)), b" the");
        assert_eq!(v.token_bytes(TokenId(2)), b"\n");
        // EOS first, then other end-of-turn control tokens; a *normal* "<|eot_id|>" is not one.
        assert_eq!(v.eos_tokens(), &[TokenId(3), TokenId(0)]);
        assert!(!v.add_bos());

        let e = Vocabulary::from_gguf(&Builder::new(3).string("tokenizer.ggml.model", "bert").parse().unwrap());
        assert!(e.unwrap_err().to_string().contains("\"bert\""));
        let e = Vocabulary::from_gguf(&Builder::new(3).string("tokenizer.ggml.model", "gpt2").parse().unwrap());
        assert!(e.unwrap_err().to_string().contains("tokenizer.ggml.tokens"));
        let e = Builder::new(3)
            .string("tokenizer.ggml.model", "gpt2")
            .str_array("tokenizer.ggml.tokens", &["a"])
            .i32_array("tokenizer.ggml.token_type", &[1, 1])
            .parse()
            .unwrap();
        assert!(Vocabulary::from_gguf(&e).unwrap_err().to_string().contains("1 tokens but 2 token types"));
    }
}
