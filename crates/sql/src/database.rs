//! [`Database`]: a live SQLite file or PostgreSQL server — its [`Catalog`] read from the
//! database itself, and queries run read-only with a row cap and a time limit.
//!
//! - **SQLite** (through `rusqlite`, SQLite bundled): opened with `SQLITE_OPEN_READ_ONLY`
//!   (a missing file is an error, never created) and `PRAGMA query_only`; a progress handler
//!   stops a query past its time limit.
//! - **PostgreSQL** (through the `postgres` client): each query runs in a
//!   `READ ONLY` transaction with `statement_timeout`, read through a cursor (the query's own
//!   order, only the rows wanted), and rolled back.
//!
//! Either way one statement only: the SQL constraint only ever produces one `SELECT`, and
//! the drivers refuse several statements (`rusqlite` reports a second one; PostgreSQL's
//! extended protocol takes exactly one).

use crate::catalog::{Catalog, Column, ColumnType, Dialect, Relationship, Table};
use crate::error::SqlError;
use serde::Serialize;
use serde_json::Value;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How much of the data the catalog reads.
#[derive(Clone, Debug)]
pub struct ReadOptions {
    /// Read the values of text columns with few distinct values (so a literal can be one
    /// of them).
    pub values: bool,
    /// At most this many distinct values make a column "few-valued".
    pub max_values: usize,
    /// Values longer than this (in characters) make a column free text.
    pub max_value_len: usize,
    /// Time limit for reading one column's values.
    pub timeout: Duration,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions { values: true, max_values: 12, max_value_len: 40, timeout: Duration::from_secs(2) }
    }
}

/// The result of a query.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Rows {
    /// The column names, in order.
    pub columns: Vec<String>,
    /// The rows (at most the cap), each value as JSON (numbers, strings, booleans, null;
    /// blobs as `"<blob N bytes>"`).
    pub rows: Vec<Vec<Value>>,
    /// More rows existed than the cap allowed.
    pub truncated: bool,
}

/// A database formwork reads from: where it is, never credentials in messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Database {
    /// A SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL connection URL (`postgres://user:pass@host:port/db`).
    Postgres(String),
}

impl Database {
    /// `postgres://…` / `postgresql://…` is a server, anything else a SQLite file's path.
    pub fn parse(spec: &str) -> Database {
        if spec.starts_with("postgres://") || spec.starts_with("postgresql://") {
            Database::Postgres(spec.to_string())
        } else {
            Database::Sqlite(PathBuf::from(spec))
        }
    }

    /// Its dialect.
    pub fn dialect(&self) -> Dialect {
        match self {
            Database::Sqlite(_) => Dialect::Sqlite,
            Database::Postgres(_) => Dialect::Postgres,
        }
    }

    /// Where it is, for messages: the path, or the URL without its password.
    pub fn describe(&self) -> String {
        match self {
            Database::Sqlite(p) => p.display().to_string(),
            Database::Postgres(url) => redact(url),
        }
    }

    fn open_error(&self, why: impl std::fmt::Display) -> SqlError {
        SqlError::Open { what: self.describe(), why: why.to_string() }
    }

    /// Reads the tables, columns, keys and relationships.
    pub fn catalog(&self, opts: &ReadOptions) -> Result<Catalog, SqlError> {
        match self {
            Database::Sqlite(path) => {
                let conn = sqlite_open(path).map_err(|e| self.open_error(e))?;
                sqlite_catalog(&conn, opts).map_err(|e| self.open_error(e))
            }
            Database::Postgres(url) => {
                let mut client = pg_connect(url).map_err(|e| self.open_error(e))?;
                pg_catalog(&mut client, opts).map_err(|e| self.open_error(e))
            }
        }
    }

    /// Runs `sql` read-only: at most `max_rows` rows, at most `timeout`.
    pub fn execute(&self, sql: &str, max_rows: usize, timeout: Duration) -> Result<Rows, SqlError> {
        match self {
            Database::Sqlite(path) => {
                let conn = sqlite_open(path).map_err(|e| self.open_error(e))?;
                sqlite_execute(&conn, sql, max_rows, timeout)
            }
            Database::Postgres(url) => {
                let mut client = pg_connect(url).map_err(|e| self.open_error(e))?;
                pg_execute(&mut client, sql, max_rows, timeout)
            }
        }
    }

    /// Has the database's own parser prepare `sql` without running it: `Ok` when it parses,
    /// every name resolves and the types check.
    pub fn check(&self, sql: &str) -> Result<(), SqlError> {
        match self {
            Database::Sqlite(path) => {
                let conn = sqlite_open(path).map_err(|e| self.open_error(e))?;
                conn.prepare(sql).map(|_| ()).map_err(|e| SqlError::Query(e.to_string()))
            }
            Database::Postgres(url) => {
                let mut client = pg_connect(url).map_err(|e| self.open_error(e))?;
                client.prepare(sql).map(|_| ()).map_err(|e| SqlError::Query(e.as_db_error().map(|d| d.message().to_string()).unwrap_or_else(|| e.to_string())))
            }
        }
    }
}

/// `url` with the password replaced by `***`.
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
    match rest.split_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{scheme}://{user}:***@{host}")
        }
        None => url.to_string(),
    }
}

fn sqlite_open(path: &std::path::Path) -> Result<rusqlite::Connection, String> {
    use rusqlite::OpenFlags;
    if !path.is_file() {
        return Err("no such file".into());
    }
    let conn = rusqlite::Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .map_err(|e| e.to_string())?;
    conn.pragma_update(None, "query_only", true).map_err(|e| e.to_string())?;
    // Reading the schema catches a file that is not a database.
    conn.query_row("SELECT count(*) FROM sqlite_schema", [], |_| Ok(())).map_err(|e| e.to_string())?;
    Ok(conn)
}

fn sqlite_catalog(conn: &rusqlite::Connection, opts: &ReadOptions) -> Result<Catalog, String> {
    let e = |e: rusqlite::Error| e.to_string();
    let names: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_schema WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' ORDER BY name")
        .map_err(e)?
        .query_map([], |r| r.get(0))
        .map_err(e)?
        .collect::<Result<_, _>>()
        .map_err(e)?;
    let mut tables = Vec::new();
    for name in &names {
        let mut stmt = conn.prepare("SELECT name, type, \"notnull\", pk FROM pragma_table_info(?1) ORDER BY cid").map_err(e)?;
        let cols: Vec<(String, String, bool, i64)> =
            stmt.query_map([name], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))).map_err(e)?.collect::<Result<_, _>>().map_err(e)?;
        let mut pk: Vec<(i64, usize)> = cols.iter().enumerate().filter(|(_, c)| c.3 > 0).map(|(i, c)| (c.3, i)).collect();
        pk.sort();
        let mut columns = Vec::new();
        for (cname, declared, not_null, pk_pos) in &cols {
            let ty = ColumnType::from_declared(declared);
            let values = if opts.values && ty == ColumnType::Text { sqlite_values(conn, name, cname, opts) } else { None };
            columns.push(Column { name: cname.clone(), declared_type: declared.clone(), ty, not_null: *not_null || *pk_pos > 0, values });
        }
        tables.push(Table { name: name.clone(), columns, primary_key: pk.into_iter().map(|(_, i)| i).collect(), required_filter: None });
    }
    tables.retain(|t| !t.columns.is_empty());
    let mut catalog = Catalog::new(Dialect::Sqlite, tables).map_err(|e| e.0)?;
    for name in &names {
        let Some(from) = catalog.find(name) else { continue };
        let mut stmt = conn.prepare("SELECT id, \"table\", \"from\", \"to\" FROM pragma_foreign_key_list(?1) ORDER BY id, seq").map_err(e)?;
        let rows: Vec<(i64, String, String, Option<String>)> =
            stmt.query_map([name], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))).map_err(e)?.collect::<Result<_, _>>().map_err(e)?;
        let mut i = 0;
        while i < rows.len() {
            let id = rows[i].0;
            let group: Vec<_> = rows[i..].iter().take_while(|r| r.0 == id).collect();
            i += group.len();
            let Some(to) = catalog.find(&group[0].1) else { continue }; // a key to a table that is gone
            let to_table = catalog.table(to);
            let from_cols: Option<Vec<usize>> = group.iter().map(|r| catalog.table(from).column(&r.2)).collect();
            // `to` is NULL when the key refers to the primary key.
            let to_cols: Option<Vec<usize>> = if group.iter().all(|r| r.3.is_none()) {
                Some(to_table.primary_key.clone())
            } else {
                group.iter().map(|r| r.3.as_deref().and_then(|c| to_table.column(c))).collect()
            };
            if let (Some(fc), Some(tc)) = (from_cols, to_cols) {
                if fc.len() == tc.len() && !fc.is_empty() {
                    catalog.relate(Relationship { from, from_columns: fc, to, to_columns: tc }).map_err(|e| e.0)?;
                }
            }
        }
    }
    Ok(catalog)
}

/// The distinct values of a text column when there are few and they are short.
fn sqlite_values(conn: &rusqlite::Connection, table: &str, column: &str, opts: &ReadOptions) -> Option<Vec<String>> {
    let q = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    let sql = format!("SELECT DISTINCT {c} FROM {t} WHERE {c} IS NOT NULL LIMIT {n}", c = q(column), t = q(table), n = opts.max_values + 1);
    let deadline = Instant::now() + opts.timeout;
    conn.progress_handler(10_000, Some(move || Instant::now() > deadline));
    let out = (|| {
        let mut stmt = conn.prepare(&sql).ok()?;
        let values: Vec<String> = stmt.query_map([], |r| r.get::<_, String>(0)).ok()?.collect::<Result<_, _>>().ok()?;
        let few = !values.is_empty() && values.len() <= opts.max_values && values.iter().all(|v| v.chars().count() <= opts.max_value_len && !v.chars().any(char::is_control));
        few.then_some(values)
    })();
    conn.progress_handler(0, None::<fn() -> bool>);
    out.map(|mut v| {
        v.sort();
        v
    })
}

fn sqlite_execute(conn: &rusqlite::Connection, sql: &str, max_rows: usize, timeout: Duration) -> Result<Rows, SqlError> {
    let deadline = Instant::now() + timeout;
    conn.progress_handler(10_000, Some(move || Instant::now() > deadline));
    let result = (|| {
        let mut stmt = conn.prepare(sql)?;
        let columns: Vec<String> = stmt.column_names().iter().map(|s| s.to_string()).collect();
        let n = columns.len();
        let mut rows = Vec::new();
        let mut truncated = false;
        let mut it = stmt.query([])?;
        while let Some(r) = it.next()? {
            if rows.len() == max_rows {
                truncated = true;
                break;
            }
            let mut row = Vec::with_capacity(n);
            for i in 0..n {
                use rusqlite::types::ValueRef;
                row.push(match r.get_ref(i)? {
                    ValueRef::Null => Value::Null,
                    ValueRef::Integer(v) => Value::from(v),
                    ValueRef::Real(v) => serde_json::Number::from_f64(v).map(Value::Number).unwrap_or(Value::Null),
                    ValueRef::Text(t) => Value::String(String::from_utf8_lossy(t).into_owned()),
                    ValueRef::Blob(b) => Value::String(format!("<blob {} bytes>", b.len())),
                });
            }
            rows.push(row);
        }
        Ok::<_, rusqlite::Error>(Rows { columns, rows, truncated })
    })();
    conn.progress_handler(0, None::<fn() -> bool>);
    result.map_err(|e| match e {
        rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::OperationInterrupted => SqlError::Timeout(timeout),
        e => SqlError::Query(e.to_string()),
    })
}

fn pg_connect(url: &str) -> Result<postgres::Client, String> {
    let mut config: postgres::Config = url.parse().map_err(|e: postgres::Error| e.to_string())?;
    config.connect_timeout(Duration::from_secs(10));
    config.application_name("formwork");
    config.connect(postgres::NoTls).map_err(|e| e.to_string())
}

fn pg_catalog(client: &mut postgres::Client, opts: &ReadOptions) -> Result<Catalog, String> {
    let e = |e: postgres::Error| e.to_string();
    // Tables and views visible on the search path, in schema-search order.
    let cols = client
        .query(
            "SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull
             FROM pg_class c
             JOIN pg_namespace n ON n.oid = c.relnamespace
             JOIN pg_attribute a ON a.attrelid = c.oid
             WHERE c.relkind IN ('r', 'v', 'm', 'p') AND a.attnum > 0 AND NOT a.attisdropped
               AND n.nspname = ANY (current_schemas(false)) AND n.nspname NOT IN ('pg_catalog', 'information_schema')
               AND pg_catalog.pg_table_is_visible(c.oid)
             ORDER BY c.relname, a.attnum",
            &[],
        )
        .map_err(e)?;
    let mut tables: Vec<Table> = Vec::new();
    for row in cols {
        let (t, c, ty, nn): (String, String, String, bool) = (row.get(0), row.get(1), row.get(2), row.get(3));
        if tables.last().is_none_or(|x| x.name != t) {
            tables.push(Table { name: t.clone(), columns: Vec::new(), primary_key: Vec::new(), required_filter: None });
        }
        let ct = ColumnType::from_declared(&ty);
        tables.last_mut().unwrap().columns.push(Column { name: c, declared_type: ty, ty: ct, not_null: nn, values: None });
    }
    // Primary and foreign keys.
    let keys = client
        .query(
            "SELECT con.contype::text, src.relname, ARRAY(SELECT a.attname::text FROM unnest(con.conkey) WITH ORDINALITY k(n, i)
                    JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.n ORDER BY k.i),
                    dst.relname, ARRAY(SELECT a.attname::text FROM unnest(con.confkey) WITH ORDINALITY k(n, i)
                    JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.n ORDER BY k.i)
             FROM pg_constraint con
             JOIN pg_class src ON src.oid = con.conrelid
             LEFT JOIN pg_class dst ON dst.oid = con.confrelid
             WHERE con.contype IN ('p', 'f') AND pg_catalog.pg_table_is_visible(src.oid)",
            &[],
        )
        .map_err(e)?;
    for row in &keys {
        let (kind, src, cols): (String, String, Vec<String>) = (row.get(0), row.get(1), row.get(2));
        if kind == "p" {
            if let Some(t) = tables.iter_mut().find(|t| t.name == src) {
                t.primary_key = cols.iter().filter_map(|c| t.columns.iter().position(|x| &x.name == c)).collect();
                for &k in &t.primary_key.clone() {
                    t.columns[k].not_null = true;
                }
            }
        }
    }
    if opts.values {
        for t in &mut tables {
            for c in &mut t.columns {
                if c.ty == ColumnType::Text {
                    c.values = pg_values(client, &t.name, &c.name, opts);
                }
            }
        }
    }
    let mut catalog = Catalog::new(Dialect::Postgres, tables).map_err(|e| e.0)?;
    for row in &keys {
        let kind: String = row.get(0);
        if kind != "f" {
            continue;
        }
        let (src, from_cols, dst, to_cols): (String, Vec<String>, Option<String>, Vec<String>) = (row.get(1), row.get(2), row.get(3), row.get(4));
        let (Some(from), Some(to)) = (catalog.find(&src), dst.as_deref().and_then(|d| catalog.find(d))) else { continue };
        let fc: Option<Vec<usize>> = from_cols.iter().map(|c| catalog.table(from).column(c)).collect();
        let tc: Option<Vec<usize>> = to_cols.iter().map(|c| catalog.table(to).column(c)).collect();
        if let (Some(fc), Some(tc)) = (fc, tc) {
            catalog.relate(Relationship { from, from_columns: fc, to, to_columns: tc }).map_err(|e| e.0)?;
        }
    }
    Ok(catalog)
}

fn pg_values(client: &mut postgres::Client, table: &str, column: &str, opts: &ReadOptions) -> Option<Vec<String>> {
    let q = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    let sql = format!("SELECT DISTINCT {c}::text FROM {t} WHERE {c} IS NOT NULL LIMIT {n}", c = q(column), t = q(table), n = opts.max_values + 1);
    let mut tx = client.build_transaction().read_only(true).start().ok()?;
    tx.batch_execute(&format!("SET LOCAL statement_timeout = {}", opts.timeout.as_millis().max(1))).ok()?;
    let rows = tx.query(sql.as_str(), &[]).ok()?;
    let mut values: Vec<String> = rows.iter().map(|r| r.get::<_, String>(0)).collect();
    let few = !values.is_empty() && values.len() <= opts.max_values && values.iter().all(|v| v.chars().count() <= opts.max_value_len && !v.chars().any(char::is_control));
    values.sort();
    few.then_some(values)
}

fn pg_execute(client: &mut postgres::Client, sql: &str, max_rows: usize, timeout: Duration) -> Result<Rows, SqlError> {
    use postgres::types::Type;
    use postgres::SimpleQueryMessage;
    let err = |e: postgres::Error| match e.code() {
        Some(c) if *c == postgres::error::SqlState::QUERY_CANCELED => SqlError::Timeout(timeout),
        _ => SqlError::Query(e.as_db_error().map(|d| d.message().to_string()).unwrap_or_else(|| e.to_string())),
    };
    let mut tx = client.build_transaction().read_only(true).start().map_err(err)?;
    tx.batch_execute(&format!("SET LOCAL statement_timeout = {}", timeout.as_millis().max(1))).map_err(err)?;
    // Preparing takes exactly one statement (the extended protocol), and gives the types.
    let stmt = tx.prepare(sql).map_err(err)?;
    let columns: Vec<String> = stmt.columns().iter().map(|c| c.name().to_string()).collect();
    let types: Vec<Type> = stmt.columns().iter().map(|c| c.type_().clone()).collect();
    // A cursor keeps the query's own order and fetches only the rows wanted, as text (every
    // type has a text form), converted back by the column's type.
    tx.batch_execute(&format!("DECLARE formwork_rows NO SCROLL CURSOR FOR {sql}")).map_err(err)?;
    let messages = tx.simple_query(&format!("FETCH {} FROM formwork_rows", max_rows + 1)).map_err(err)?;
    let mut rows = Vec::new();
    for m in messages {
        if let SimpleQueryMessage::Row(r) = m {
            rows.push((0..columns.len()).map(|i| pg_value(r.get(i), &types[i])).collect::<Vec<Value>>());
        }
    }
    let truncated = rows.len() > max_rows;
    rows.truncate(max_rows);
    tx.rollback().map_err(err)?;
    Ok(Rows { columns, rows, truncated })
}

/// A value in PostgreSQL's text form as JSON, by its column's type.
fn pg_value(text: Option<&str>, ty: &postgres::types::Type) -> Value {
    use postgres::types::Type;
    let Some(t) = text else { return Value::Null };
    let number = |t: &str| t.parse::<f64>().ok().and_then(serde_json::Number::from_f64).map(Value::Number);
    let parsed = match *ty {
        Type::BOOL => Some(Value::Bool(t == "t")),
        Type::INT2 | Type::INT4 | Type::INT8 | Type::OID => t.parse::<i64>().ok().map(Value::from),
        Type::FLOAT4 | Type::FLOAT8 | Type::NUMERIC => number(t),
        Type::JSON | Type::JSONB => serde_json::from_str(t).ok(),
        _ => None,
    };
    parsed.unwrap_or_else(|| Value::String(t.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_redacted_and_paths_are_sqlite() {
        assert_eq!(redact("postgres://me:secret@db:5432/x"), "postgres://me:***@db:5432/x");
        assert_eq!(Database::parse("postgresql://h/db").dialect(), Dialect::Postgres);
        assert_eq!(Database::parse("./shop.sqlite").dialect(), Dialect::Sqlite);
    }

    #[test]
    fn a_missing_file_is_never_created() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nope.sqlite");
        let err = Database::Sqlite(path.clone()).catalog(&ReadOptions::default()).unwrap_err();
        assert!(err.to_string().contains("no such file"), "{err}");
        assert!(!path.exists());
    }
}
