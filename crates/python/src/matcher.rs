//! [`Matcher`]: one request's position in a compiled grammar, and
//! [`batch_fill_next_token_bitmask`].
//!
//! A matcher is `formwork_grammar::Matcher` (a history of parser-state ids, so `rollback`
//! is a truncation and `fork` a copy of that history) plus a scratch [`TokenMask`].
//! Filling a bitmask computes the mask (a shared-cache hit is a copy; a miss walks the token
//! trie) and writes it into the caller's row with the GIL released.

use crate::bitmask::{write_row, DType, View};
use crate::error::error;
use crate::grammar::CompiledGrammar;
use formwork_vocab::{TokenId, TokenMask};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rayon::prelude::*;

/// Per-request matching state on a [`CompiledGrammar`]. Not shared between threads at once
/// (each method borrows it mutably); make one per sequence, or `fork()` one.
#[pyclass(module = "formwork._formwork")]
pub struct Matcher {
    m: formwork_grammar::Matcher,
    mask: TokenMask,
    compiled: Py<CompiledGrammar>,
    vocab_size: usize,
    terminate_without_stop_token: bool,
}

impl Matcher {
    /// Computes the mask and writes it into row `index` of `view`; whether any token of
    /// the logit row is disallowed.
    fn fill(&mut self, view: &View, index: usize) -> bool {
        self.m.compute_mask(&mut self.mask);
        // SAFETY: `view` was checked by `View::from_py` for int32 on an argument alive for
        // this call, `index < rows` was checked, and no other writer has this row (the batch
        // function checks that indices are distinct).
        let row: &mut [i32] = unsafe { view.row_mut(index) };
        write_row(&self.mask, row);
        self.mask.count_ones() < self.vocab_size
    }

    fn check_row(&self, view: &View, index: usize) -> PyResult<()> {
        if index >= view.rows {
            return Err(PyValueError::new_err(format!("index {index} is outside the bitmask's {} rows", view.rows)));
        }
        let need = self.mask.len().div_ceil(32);
        if view.cols < need {
            return Err(PyValueError::new_err(format!(
                "the bitmask has {} words per row; this vocabulary needs at least {need} (allocate_token_bitmask(batch, vocab_size))",
                view.cols
            )));
        }
        Ok(())
    }

    /// Commits `t`; false (state unchanged) when the grammar rejects it here.
    fn commit(&mut self, t: u32) -> bool {
        self.m.commit(TokenId(t)).is_ok()
    }
}

#[pymethods]
impl Matcher {
    /// A matcher at the start of `compiled_grammar`. With `terminate_without_stop_token`,
    /// `is_terminated()` is true as soon as the grammar is complete and nothing can follow
    /// (no stop token needed).
    #[new]
    #[pyo3(signature = (compiled_grammar, *, terminate_without_stop_token=false))]
    fn new(compiled_grammar: Bound<'_, CompiledGrammar>, terminate_without_stop_token: bool) -> Self {
        let c = compiled_grammar.get();
        let m = c.compiled.matcher();
        let mask = TokenMask::new(c.compiled.vocab().len());
        Matcher { m, mask, vocab_size: c.vocab_size, compiled: compiled_grammar.unbind(), terminate_without_stop_token }
    }

    /// Writes the tokens allowed next into row `index` of `bitmask` (int32, shape
    /// `(batch, ceil(vocab_size / 32))` or 1-D; numpy or torch CPU): token `t` at word
    /// `t >> 5`, bit `t & 31`, 1 = allowed. Stop tokens are allowed exactly when the grammar
    /// accepts. Releases the GIL. Returns whether some token is disallowed (whether the mask
    /// needs applying).
    #[pyo3(signature = (bitmask, index=0))]
    fn fill_next_token_bitmask(&mut self, py: Python<'_>, bitmask: &Bound<'_, PyAny>, index: usize) -> PyResult<bool> {
        let view = View::from_py(bitmask, DType::I32, "bitmask")?;
        self.check_row(&view, index)?;
        Ok(py.detach(|| self.fill(&view, index)))
    }

    /// Is `token_id` allowed now? (One step per byte of the token; no full mask.)
    fn is_token_allowed(&mut self, token_id: u32) -> bool {
        self.m.is_allowed(TokenId(token_id))
    }

    /// Advances past `token_id`. Returns False, leaving the state unchanged, when the grammar
    /// does not allow it here (or the matcher is terminated).
    fn accept_token(&mut self, token_id: u32) -> bool {
        self.commit(token_id)
    }

    /// Advances past raw text (`str` as UTF-8, or `bytes`), one step for `rollback`. Returns
    /// False, leaving the state unchanged, when the grammar does not allow it here.
    fn accept_string(&mut self, text: &Bound<'_, PyAny>) -> PyResult<bool> {
        let bytes: Vec<u8> = match text.extract::<String>() {
            Ok(s) => s.into_bytes(),
            Err(_) => text.extract::<Vec<u8>>()?,
        };
        Ok(self.m.commit_bytes(&bytes).is_ok())
    }

    /// Advances past every token of `token_ids`, or (returning False) past none of them.
    fn accept_tokens(&mut self, token_ids: Vec<u32>) -> bool {
        let before = self.m.committed();
        for &t in &token_ids {
            if !self.commit(t) {
                let done = self.m.committed() - before;
                self.m.rollback(done).expect("rolling back this call's own commits");
                return false;
            }
        }
        true
    }

    /// The length of the longest prefix of `token_ids` the grammar accepts from here; the
    /// state is unchanged.
    fn validate_tokens(&mut self, token_ids: Vec<u32>) -> usize {
        let mut n = 0;
        for &t in &token_ids {
            if !self.commit(t) {
                break;
            }
            n += 1;
        }
        self.m.rollback(n).expect("rolling back this call's own commits");
        n
    }

    /// Undoes the last `num_tokens` accepted tokens (for speculative decoding). Every step is
    /// kept, so any number up to `num_accepted` can be rolled back, in O(1).
    #[pyo3(signature = (num_tokens=1))]
    fn rollback(&mut self, num_tokens: usize) -> PyResult<()> {
        self.m.rollback(num_tokens).map_err(error)
    }

    /// Number of tokens accepted since the start (what `rollback` can undo).
    #[getter]
    fn num_accepted(&self) -> usize {
        self.m.committed()
    }

    /// True once a stop token was accepted (or, with `terminate_without_stop_token`, once
    /// the output is complete and nothing can follow).
    fn is_terminated(&self) -> bool {
        self.m.is_ended() || (self.terminate_without_stop_token && self.m.is_finished())
    }

    /// Is the output so far complete (a stop token allowed now)?
    fn is_accepting(&self) -> bool {
        self.m.is_accepting()
    }

    /// Tokens that can be appended without sampling: the grammar leaves one way forward and
    /// these tokens spell its start (conservatively: none whose choice later text could
    /// change). Not accepted yet: accept them as if sampled.
    fn forced_tokens(&self) -> Vec<u32> {
        self.m.forced_tokens().into_iter().map(|t| t.0).collect()
    }

    /// The bytes every continuation starts with (empty when there is a choice).
    fn forced_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.m.forced_bytes())
    }

    /// XGrammar's name for `forced_bytes`, decoded (lossily) as UTF-8.
    fn find_jump_forward_string(&self) -> String {
        String::from_utf8_lossy(&self.m.forced_bytes()).into_owned()
    }

    /// Back to the start of the grammar.
    fn reset(&mut self) {
        self.m.reset();
    }

    /// An independent copy at the same position (sharing the compiled grammar).
    fn fork(&self, py: Python<'_>) -> Matcher {
        Matcher {
            m: self.m.clone(),
            mask: self.mask.clone(),
            compiled: self.compiled.clone_ref(py),
            vocab_size: self.vocab_size,
            terminate_without_stop_token: self.terminate_without_stop_token,
        }
    }

    /// The compiled grammar it runs on.
    #[getter]
    fn compiled_grammar(&self, py: Python<'_>) -> Py<CompiledGrammar> {
        self.compiled.clone_ref(py)
    }

    fn __repr__(&self) -> String {
        format!(
            "Matcher(num_accepted={}, accepting={}, terminated={})",
            self.m.committed(),
            self.m.is_accepting(),
            self.is_terminated()
        )
    }
}

/// Fills row `indices[i]` of `bitmask` for `matchers[i]`, all in parallel (rayon, the GIL
/// released). `indices` defaults to `0..len(matchers)`; they must be distinct rows, and the
/// matchers distinct objects. Returns, per matcher, whether its mask needs applying.
#[pyfunction]
#[pyo3(signature = (matchers, bitmask, indices=None))]
pub(crate) fn batch_fill_next_token_bitmask(
    py: Python<'_>,
    matchers: Vec<Bound<'_, Matcher>>,
    bitmask: &Bound<'_, PyAny>,
    indices: Option<Vec<usize>>,
) -> PyResult<Vec<bool>> {
    let view = View::from_py(bitmask, DType::I32, "bitmask")?;
    let indices = indices.unwrap_or_else(|| (0..matchers.len()).collect());
    if indices.len() != matchers.len() {
        return Err(PyValueError::new_err(format!("{} matchers but {} indices", matchers.len(), indices.len())));
    }
    let mut seen = vec![false; view.rows];
    for &i in &indices {
        if i < view.rows && std::mem::replace(&mut seen[i], true) {
            return Err(PyValueError::new_err(format!("row {i} is given twice: each matcher needs its own row")));
        }
    }
    // Borrowing each matcher mutably fails (an error, not a race) when one appears twice or
    // is in use by another thread.
    let mut guards = Vec::with_capacity(matchers.len());
    for (m, &i) in matchers.iter().zip(&indices) {
        let g = m.try_borrow_mut().map_err(|_| PyValueError::new_err("a matcher appears twice in the batch, or is in use by another thread"))?;
        g.check_row(&view, i)?;
        guards.push(g);
    }
    let mut refs: Vec<&mut Matcher> = guards.iter_mut().map(|g| &mut **g).collect();
    Ok(py.detach(|| refs.par_iter_mut().zip(indices.par_iter()).map(|(m, &i)| m.fill(&view, i)).collect()))
}
