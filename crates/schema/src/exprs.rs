//! Errors and the small expression helpers every type module uses: the empty language
//! ([`nothing`]) and alternations and sequences that keep it absorbing.

use crate::{SchemaError, SchemaErrorKind};
use formwork_grammar::Expr;

pub(crate) fn err(kind: SchemaErrorKind, pointer: impl Into<String>) -> SchemaError {
    SchemaError { kind, pointer: pointer.into() }
}

pub(crate) fn unsupported(keyword: &str, why: impl Into<String>, pointer: impl Into<String>) -> SchemaError {
    err(SchemaErrorKind::Unsupported { keyword: keyword.into(), why: why.into() }, pointer)
}

pub(crate) fn invalid(keyword: &str, why: impl Into<String>, pointer: impl Into<String>) -> SchemaError {
    err(SchemaErrorKind::Invalid { keyword: keyword.into(), why: why.into() }, pointer)
}

/// Matches nothing.
pub(crate) fn nothing() -> Expr {
    Expr::Class(vec![])
}

pub(crate) fn is_nothing(e: &Expr) -> bool {
    matches!(e, Expr::Class(v) if v.is_empty())
}

/// An alternation that drops branches matching nothing.
pub(crate) fn alt_of(items: Vec<Expr>) -> Expr {
    let v: Vec<Expr> = items.into_iter().filter(|e| !is_nothing(e)).collect();
    if v.is_empty() {
        nothing()
    } else {
        Expr::alt(v)
    }
}

/// A sequence that is nothing if any item is.
pub(crate) fn seq_of(items: Vec<Expr>) -> Expr {
    if items.iter().any(is_nothing) {
        return nothing();
    }
    Expr::seq(items)
}

/// `(\.0+)?`
pub(crate) fn zero_fraction() -> Expr {
    Expr::opt(Expr::seq([Expr::lit("."), Expr::plus(Expr::lit("0"))]))
}
