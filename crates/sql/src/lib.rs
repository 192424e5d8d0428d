//! # formwork-sql: queries that can only name what exists, joined the way the data is related
//!
//! A language model asked for SQL misreads the schema: it names tables and columns that do
//! not exist, joins tables that have no relationship, and forgets the filters a business
//! relies on. This crate builds the constraint from the live database instead, so none of
//! that can be generated.
//!
//! ## Map
//! - [`database`]: a [`Database`] (a SQLite file, or a PostgreSQL URL) — its [`Catalog`]
//!   read from the database itself, queries run read-only with a row cap and a time limit.
//! - [`catalog`]: tables, typed columns, primary keys, relationships (foreign keys), the
//!   few values of low-cardinality text columns, required filters.
//! - [`rules`]: a TOML file of hidden tables and columns, declared relationships and
//!   required filters.
//! - [`grammar`]: the grammar of each phase of a query (below), and one GBNF-expressible
//!   approximation for llama.cpp users.
//! - [`constraint`]: [`SqlConstraint`], the phases stitched into one
//!   [`Constraint`](formwork_engine::Constraint), and [`SqlFormat`], its
//!   [`ConstraintFactory`](formwork_engine::ConstraintFactory) for a
//!   [`Request`](formwork_engine::request::Request).
//! - [`select`]: what a select list says that the rest of the query depends on (tables,
//!   aliases, the grouping it needs).
//! - [`prompt`]: the schema, keys, relationships and rules as the model sees them, and
//!   worked examples over the same database.
//!
//! ## The design: a grammar that depends on what was generated
//! `SELECT` comes before `FROM`, so which columns are in scope is not context-free: a
//! select list names tables that only the `FROM` clause brings in. A generic SQL grammar
//! gives up here and checks afterwards. Instead:
//!
//! 1. **Qualified names.** Every column is written `table.column`, and the select-list
//!    grammar offers, after `table.`, only that table's columns. So the select list itself
//!    says which tables the query needs (its *required* tables). The select list's tables
//!    all lie in one connected group of the relationship graph (the grammar is a union
//!    over the groups), so they can always be joined.
//! 2. **The select list forces the `FROM` clause.** When `… FROM` is complete, the next
//!    phase's grammar is built from the text: the first table is one the select list named,
//!    and then each phase is either `JOIN t ON <relationship>` for a table `t` related to one
//!    already in scope — the join condition is the relationship itself, either way round —
//!    or, only once every required table is in scope, the rest of the query.
//! 3. **The rest sees exactly the scope.** `WHERE`, `GROUP BY`, `HAVING` and `ORDER BY`
//!    name only columns of tables in scope (and the select list's aliases), with literals
//!    typed by the column they meet, and the grouping the select list needs (aggregates
//!    beside plain columns force `GROUP BY` those columns, as PostgreSQL requires). A
//!    table with a required filter puts that filter first
//!    in `WHERE`, and the model's own conditions follow joined by `AND` (an `OR` only
//!    inside parentheses, so no row can escape the rule).
//!
//! Each phase is an ordinary grammar, compiled for the vocabulary once per (phase,
//! context) and cached; [`SqlConstraint`] runs them as branches, so a token may continue
//! one phase or start the next (see its module for the token-boundary rule). Only `SELECT`
//! can be generated; hidden tables and columns are not in any grammar.
//!
//! What a single GBNF can hold is [`grammar::relaxed_grammar`]: names that exist, columns
//! of the table that qualifies them, joins along relationships — but not scope (a column of
//! any table may appear anywhere, in scope or not), grouping, nor the rules.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod catalog;
pub mod constraint;
pub mod database;
mod error;
pub mod grammar;
pub mod prompt;
pub mod rules;
pub mod select;

pub use catalog::{Catalog, ColumnType, Dialect, TableId};
pub use constraint::{SqlConstraint, SqlFormat, SqlGrammars};
pub use database::{Database, ReadOptions, Rows};
pub use error::SqlError;
pub use grammar::SqlGrammarOptions;
pub use rules::Rules;

use formwork_engine::request::{Format, Request};
use formwork_engine::retry::Validator;
use formwork_engine::Prompt;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A database ready for questions: where it is, what it holds (after the rules), and the
/// constraint for its queries.
#[derive(Debug, Clone)]
pub struct SqlDatabase {
    /// Where it is.
    pub db: Database,
    /// What a query may name.
    pub catalog: Arc<Catalog>,
    /// The constraint factory (grammars compiled per vocabulary, cached).
    pub format: Arc<SqlFormat>,
}

/// Limits on running a generated query.
#[derive(Clone, Copy, Debug)]
pub struct ExecOptions {
    /// Most rows returned.
    pub max_rows: usize,
    /// Time limit of one query.
    pub timeout: Duration,
}

impl Default for ExecOptions {
    fn default() -> Self {
        ExecOptions { max_rows: 100, timeout: Duration::from_secs(10) }
    }
}

/// The outcome of the last query an executor ran.
pub type LastRun = Arc<Mutex<Option<Rows>>>;

impl SqlDatabase {
    /// Opens `spec` (a SQLite path or a `postgres://` URL), reads its catalog and applies
    /// the rules file, if any.
    pub fn open(spec: &str, rules: Option<&Path>, read: &ReadOptions, grammar: SqlGrammarOptions) -> Result<SqlDatabase, SqlError> {
        let db = Database::parse(spec);
        let mut catalog = db.catalog(read)?;
        if let Some(path) = rules {
            Rules::load(path)?.apply(&mut catalog, Some(&db), &path.display().to_string())?;
        }
        if catalog.tables().is_empty() {
            return Err(SqlError::Open { what: db.describe(), why: "it has no tables (or the rules hide all of them)".into() });
        }
        let catalog = Arc::new(catalog);
        let format = Arc::new(SqlFormat::new(catalog.clone(), grammar, formwork_grammar::Limits::default()));
        Ok(SqlDatabase { db, catalog, format })
    }

    /// The chat for `question`: the schema as the system message, worked examples over
    /// this database as earlier turns ([`prompt::examples`]), the question as the user's.
    pub fn prompt(&self, question: &str) -> Prompt {
        Prompt::Chat { messages: prompt::chat(&self.catalog, question), tools: None }
    }

    /// A request for `question` whose answer is a query over this database.
    pub fn request(&self, question: &str) -> Request {
        Request::new(self.prompt(question)).format(Format::Custom(self.format.clone())).validate_format(false)
    }

    /// A validator that runs each answer on the database: a database error is the
    /// answer's error (fed back to the model on a retry); the rows of the last successful
    /// run are kept in the returned cell.
    pub fn executor(&self, opts: ExecOptions) -> (Validator, LastRun) {
        let last: LastRun = Arc::new(Mutex::new(None));
        let db = self.db.clone();
        let cell = last.clone();
        let check = move |sql: &str| -> Vec<String> {
            match db.execute(sql, opts.max_rows, opts.timeout) {
                Ok(rows) => {
                    *cell.lock().unwrap_or_else(|e| e.into_inner()) = Some(rows);
                    Vec::new()
                }
                Err(e) => vec![e.to_string()],
            }
        };
        (Validator::Custom { name: "database".into(), check: Box::new(check) }, last)
    }
}
