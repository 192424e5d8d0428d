//! [`FormworkError`]: the one Python exception of the package, carrying formwork's message.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    _formwork,
    FormworkError,
    PyException,
    "A grammar, schema, regex or vocabulary formwork refuses, or a matcher operation that \
     fails. `str(e)` is formwork's message; schema refusals also set `keyword` and `pointer` \
     (the JSON pointer of the offending place, `\"\"` for the root)."
);

/// A [`FormworkError`] with `message`.
pub(crate) fn error(message: impl std::fmt::Display) -> PyErr {
    FormworkError::new_err(message.to_string())
}

/// A schema refusal: the message, with `keyword` and `pointer` set on the exception.
pub(crate) fn schema_error(py: Python<'_>, e: &formwork_schema::SchemaError) -> PyErr {
    let err = error(e);
    let v = err.value(py);
    // Setting attributes on a fresh exception instance cannot fail short of memory.
    let _ = v.setattr("keyword", e.keyword());
    let _ = v.setattr("pointer", e.pointer.as_str());
    err
}
