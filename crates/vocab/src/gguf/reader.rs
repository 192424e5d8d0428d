//! The byte-level side of the GGUF reader: little-endian values, strings and arrays, each
//! length checked against [`GgufLimits`] (and the metadata byte budget) before anything is
//! allocated, and an early end of file reported with its offset.

use super::{GgufArray, GgufError, GgufLimits, GgufValue};
use std::io::Read;

pub(super) fn escape_start(b: &[u8]) -> String {
    if b.is_empty() {
        return "nothing: the file is empty".into();
    }
    format!("\"{}\"", b.iter().flat_map(|&c| std::ascii::escape_default(c)).map(char::from).collect::<String>())
}

pub(super) struct Reader<'l, R> {
    pub(super) inner: R,
    pub(super) offset: u64,
    pub(super) path: String,
    pub(super) limits: &'l GgufLimits,
    pub(super) budget: u64,
}

impl<R: Read> Reader<'_, R> {
    pub(super) fn read_up_to(&mut self, buf: &mut [u8]) -> Result<usize, GgufError> {
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

    pub(super) fn exact(&mut self, buf: &mut [u8], what: &str) -> Result<(), GgufError> {
        let n = self.read_up_to(buf)?;
        if n < buf.len() {
            return Err(GgufError::Truncated { path: self.path.clone(), offset: self.offset, what: what.to_string() });
        }
        Ok(())
    }

    pub(super) fn bounds(&self, what: String) -> GgufError {
        GgufError::OutOfBounds { path: self.path.clone(), offset: self.offset, what }
    }

    pub(super) fn charge(&mut self, bytes: u64) -> Result<(), GgufError> {
        if bytes > self.budget {
            return Err(self.bounds(format!(
                "the metadata is larger than the limit of {} bytes",
                self.limits.max_metadata_bytes
            )));
        }
        self.budget -= bytes;
        Ok(())
    }

    pub(super) fn u32(&mut self, what: &str) -> Result<u32, GgufError> {
        let mut b = [0; 4];
        self.exact(&mut b, what)?;
        Ok(u32::from_le_bytes(b))
    }

    pub(super) fn u64(&mut self, what: &str) -> Result<u64, GgufError> {
        let mut b = [0; 8];
        self.exact(&mut b, what)?;
        Ok(u64::from_le_bytes(b))
    }

    pub(super) fn string(&mut self, what: &str) -> Result<Vec<u8>, GgufError> {
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

    pub(super) fn value(&mut self, ty: u32, key: &str, depth: u32) -> Result<GgufValue, GgufError> {
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

    pub(super) fn array(&mut self, key: &str, depth: u32) -> Result<GgufArray, GgufError> {
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
