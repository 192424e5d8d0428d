//! Raw views of numpy arrays and torch CPU tensors, and the two kernels that use them:
//! writing a [`TokenMask`] into a row of an int32 bitmask, and setting masked logits to
//! `-inf`.
//!
//! A view is read from the object under the GIL (`__array_interface__` for numpy, `data_ptr()`,
//! `shape`, `stride()`, `dtype` and `device` for torch) and checked: the dtype, a CPU device,
//! contiguous rows (the last stride is one element), writable memory. The kernels then run
//! with the GIL released on the raw address, as XGrammar and llguidance do. The caller keeps
//! the array object alive for the call (it is borrowed from Python's arguments); what it must
//! not do is resize or free the array from another thread while a call runs, or have two
//! calls write the same row at once (each matcher writes only its own row).
//!
//! Cost: a row write is `ceil(vocab/32)` stores (1,536 for a 49k vocabulary); the `-inf`
//! kernel is one pass over the masked logits.

use formwork_vocab::TokenMask;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Element types the kernels handle.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum DType {
    /// A bitmask word.
    I32,
    /// A logit.
    F32,
}

impl DType {
    fn numpy_typestr(self) -> &'static str {
        match self {
            DType::I32 => "<i4",
            DType::F32 => "<f4",
        }
    }
    fn torch_name(self) -> &'static str {
        match self {
            DType::I32 => "torch.int32",
            DType::F32 => "torch.float32",
        }
    }
}

/// A checked, writable 2-D view (a 1-D array is one row) of 4-byte elements. Held as an
/// address so it can cross into a GIL-released closure; see the module docs for what keeps
/// the memory valid.
#[derive(Clone, Copy, Debug)]
pub(crate) struct View {
    addr: usize,
    /// Number of rows.
    pub(crate) rows: usize,
    /// Elements per row.
    pub(crate) cols: usize,
    /// Elements from one row's start to the next.
    row_stride: usize,
}

fn bad(what: &str, elem: DType) -> PyErr {
    PyTypeError::new_err(format!(
        "{what} must be a numpy array of dtype {} or a torch CPU tensor of dtype {}, 1-D or 2-D, with contiguous rows",
        elem.numpy_typestr(),
        elem.torch_name()
    ))
}

impl View {
    /// Reads and checks the view of `obj` (named `what` in errors).
    pub(crate) fn from_py(obj: &Bound<'_, PyAny>, elem: DType, what: &str) -> PyResult<View> {
        // torch first: a tensor also has `__array_interface__`-free numpy conversion, not a view.
        let (addr, shape, strides_bytes): (usize, Vec<usize>, Option<Vec<isize>>) = if obj.hasattr("data_ptr")? {
            let device: String = obj.getattr("device")?.getattr("type")?.extract()?;
            if device != "cpu" {
                return Err(PyValueError::new_err(format!("{what} is on {device}: formwork writes and reads CPU tensors (copy it with .cpu(), or allocate the bitmask on the CPU)")));
            }
            let dtype: String = obj.getattr("dtype")?.str()?.extract()?;
            if dtype != elem.torch_name() {
                return Err(bad(what, elem));
            }
            let addr: usize = obj.call_method0("data_ptr")?.extract()?;
            let shape: Vec<usize> = obj.getattr("shape")?.extract()?;
            let strides: Vec<isize> = obj.call_method0("stride")?.extract()?;
            (addr, shape, Some(strides.into_iter().map(|s| s * 4).collect()))
        } else if let Ok(ai) = obj.getattr("__array_interface__") {
            let ai = ai.cast::<PyDict>().map_err(|_| bad(what, elem))?;
            let typestr: String = ai.get_item("typestr")?.ok_or_else(|| bad(what, elem))?.extract()?;
            if typestr != elem.numpy_typestr() {
                return Err(bad(what, elem));
            }
            let (addr, readonly): (usize, bool) = ai.get_item("data")?.ok_or_else(|| bad(what, elem))?.extract()?;
            if readonly {
                return Err(PyValueError::new_err(format!("{what} is read-only")));
            }
            let shape: Vec<usize> = ai.get_item("shape")?.ok_or_else(|| bad(what, elem))?.extract()?;
            let strides: Option<Vec<isize>> = match ai.get_item("strides")? {
                Some(s) if !s.is_none() => Some(s.extract()?),
                _ => None,
            };
            (addr, shape, strides)
        } else {
            return Err(bad(what, elem));
        };
        let (rows, cols) = match shape.as_slice() {
            [c] => (1, *c),
            [r, c] => (*r, *c),
            _ => return Err(bad(what, elem)),
        };
        let row_stride = match (strides_bytes.as_deref(), shape.len()) {
            (None, _) => cols,
            (Some([s]), 1) if *s == 4 || cols <= 1 => cols,
            (Some([r, c]), 2) if (*c == 4 || cols <= 1) && (*r >= 0 && *r % 4 == 0) && (rows <= 1 || *r as usize / 4 >= cols) => *r as usize / 4,
            _ => return Err(bad(what, elem)),
        };
        if addr == 0 && rows * cols > 0 {
            return Err(bad(what, elem));
        }
        if addr % 4 != 0 {
            return Err(PyValueError::new_err(format!("{what} is not 4-byte aligned")));
        }
        Ok(View { addr, rows, cols, row_stride })
    }

    /// Row `r` as a mutable slice of `T` (4-byte elements).
    ///
    /// # Safety
    /// The view was built by [`View::from_py`] from an object that is still alive and not
    /// resized, `T` is the element type it was checked for, `r < rows`, and no other live
    /// reference (in this or another thread) covers the same row.
    pub(crate) unsafe fn row_mut<'a, T>(&self, r: usize) -> &'a mut [T] {
        debug_assert!(r < self.rows);
        debug_assert_eq!(std::mem::size_of::<T>(), 4);
        // SAFETY: the caller's contract: the memory `[addr + 4*r*row_stride, + 4*cols)` lies
        // inside the live array (shape and strides were checked), is aligned, and is not
        // aliased for the returned lifetime.
        unsafe { std::slice::from_raw_parts_mut((self.addr as *mut T).add(r * self.row_stride), self.cols) }
    }
}

/// Writes `mask` into `row` in XGrammar's layout: token `t` at word `t >> 5`, bit `t & 31`.
/// Words past the mask (a logit row wider than the tokenizer) are zero: never allowed.
pub(crate) fn write_row(mask: &TokenMask, row: &mut [i32]) {
    let words = mask.words();
    for (i, out) in row.iter_mut().enumerate() {
        let w = words.get(i / 2).copied().unwrap_or(0);
        *out = (w >> (32 * (i % 2))) as u32 as i32;
    }
}

/// Sets `logits[r, j] = -inf` where bit `j` of `bitmask[r]` is 0, for `j < vocab_size`, for
/// each row `r` of `indices` (default: every row). Both arrays are float32 / int32 (numpy
/// or torch CPU). The GIL is released while it runs.
#[pyfunction]
#[pyo3(signature = (logits, bitmask, *, vocab_size=None, indices=None))]
pub(crate) fn apply_token_bitmask_inplace_f32(
    py: Python<'_>,
    logits: &Bound<'_, PyAny>,
    bitmask: &Bound<'_, PyAny>,
    vocab_size: Option<usize>,
    indices: Option<Vec<usize>>,
) -> PyResult<()> {
    let lv = View::from_py(logits, DType::F32, "logits")?;
    let bv = View::from_py(bitmask, DType::I32, "bitmask")?;
    let vocab = vocab_size.unwrap_or_else(|| lv.cols.min(bv.cols * 32));
    if vocab > lv.cols || vocab.div_ceil(32) > bv.cols {
        return Err(PyValueError::new_err(format!(
            "vocab_size {vocab} is wider than the logits ({}) or the bitmask ({} tokens)",
            lv.cols,
            bv.cols * 32
        )));
    }
    let rows: Vec<usize> = match indices {
        Some(ix) => ix,
        None => {
            if lv.rows != bv.rows {
                return Err(PyValueError::new_err(format!("logits have {} rows but the bitmask has {}: pass indices=", lv.rows, bv.rows)));
            }
            (0..lv.rows).collect()
        }
    };
    if let Some(&r) = rows.iter().find(|&&r| r >= lv.rows || r >= bv.rows) {
        return Err(PyValueError::new_err(format!("row {r} is outside the logits ({} rows) or the bitmask ({} rows)", lv.rows, bv.rows)));
    }
    let mut seen = vec![false; lv.rows];
    for &r in &rows {
        if std::mem::replace(&mut seen[r], true) {
            return Err(PyValueError::new_err(format!("row {r} is given twice in indices")));
        }
    }
    // Logits and bitmask could overlap only if the caller passed views of one buffer as both,
    // which the dtype checks make a float32 / int32 reinterpretation; reject the same address.
    if lv.addr == bv.addr {
        return Err(PyValueError::new_err("logits and bitmask are the same buffer"));
    }
    py.detach(|| {
        for r in rows {
            // SAFETY: both views come from live arguments of this call (checked shapes and
            // dtypes), `r` is inside both, rows are distinct, and the two buffers differ.
            let l: &mut [f32] = unsafe { lv.row_mut(r) };
            let b: &mut [i32] = unsafe { bv.row_mut(r) };
            for (j, x) in l[..vocab].iter_mut().enumerate() {
                if (b[j >> 5] >> (j & 31)) & 1 == 0 {
                    *x = f32::NEG_INFINITY;
                }
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use formwork_vocab::TokenId;

    #[test]
    fn a_row_is_xgrammars_layout_and_zero_past_the_vocabulary() {
        let mut m = TokenMask::new(70);
        for t in [0, 31, 32, 63, 64, 69] {
            m.insert(TokenId(t));
        }
        let mut row = vec![-1i32; 4]; // 128 tokens of room, 70 in the vocabulary
        write_row(&m, &mut row);
        for t in 0..128usize {
            let bit = (row[t >> 5] >> (t & 31)) & 1 == 1;
            assert_eq!(bit, [0, 31, 32, 63, 64, 69].contains(&t), "token {t}");
        }
        assert_eq!(row[3], 0);
    }
}
