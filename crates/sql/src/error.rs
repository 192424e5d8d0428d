//! [`SqlError`]: what can go wrong between a database, its rules and a query.

use crate::catalog::CatalogError;

/// A failure of this crate, each saying what and where.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SqlError {
    /// The database cannot be opened or read.
    #[error("cannot open the database {what}: {why}")]
    Open {
        /// Which database (a path, or a URL without its password).
        what: String,
        /// Why.
        why: String,
    },
    /// The rules file cannot be read or does not fit the database.
    #[error("rules file {path}: {why}")]
    Rules {
        /// The file.
        path: String,
        /// Why.
        why: String,
    },
    /// The catalog breaks an invariant (a duplicate table, a bad relationship).
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// The database refused the query (the message is the database's own).
    #[error("the database refused the query: {0}")]
    Query(String),
    /// The query ran longer than its time limit.
    #[error("the query ran longer than {0:?} and was stopped")]
    Timeout(std::time::Duration),
}
