//! [`Catalog`]: what a database holds — tables, typed columns, keys and relationships — as
//! read from the database itself ([`crate::sqlite`], [`crate::postgres`]) and narrowed by a
//! [`Rules`](crate::rules::Rules) file (hidden tables and columns, declared relationships,
//! required filters).
//!
//! Tables and columns are referred to by index ([`TableId`], a column's position in its
//! table) once the catalog is built; names appear only where SQL text is written, always
//! through [`quote_ident`].

use serde::Serialize;

/// A table's index in [`Catalog::tables`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct TableId(pub u32);

impl TableId {
    /// As an index.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Which SQL the database speaks (literals and the few spellings that differ).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Dialect {
    /// SQLite 3.
    Sqlite,
    /// PostgreSQL.
    Postgres,
}

/// What a column holds, as far as literals go: a comparison's literal is typed by the column
/// it meets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum ColumnType {
    /// Whole numbers.
    Integer,
    /// Decimal numbers.
    Real,
    /// Text (a quoted string literal).
    Text,
    /// `TRUE` / `FALSE`.
    Boolean,
    /// A date or timestamp, written as a quoted `YYYY-MM-DD[ HH:MM[:SS]]` literal.
    Date,
    /// Anything else (blobs, JSON, arrays, ...): only `IS [NOT] NULL` tests.
    Other,
}

impl ColumnType {
    /// The type a declared SQL type name maps to, by the affinity rules SQLite uses (which
    /// also cover PostgreSQL's names: `integer`, `character varying`, `timestamp without
    /// time zone`, `double precision`, `numeric`, `boolean`).
    pub fn from_declared(declared: &str) -> ColumnType {
        let d = declared.to_ascii_lowercase();
        let has = |s: &str| d.contains(s);
        if has("bool") {
            ColumnType::Boolean
        } else if has("interval") {
            ColumnType::Other
        } else if has("date") || has("time") {
            ColumnType::Date
        } else if has("int") || d == "serial" || d == "bigserial" || d == "smallserial" {
            ColumnType::Integer
        } else if has("char") || has("clob") || has("text") || d == "name" || d == "citext" || d == "uuid" {
            ColumnType::Text
        } else if has("real") || has("floa") || has("doub") || has("numeric") || has("decimal") || has("money") {
            ColumnType::Real
        } else {
            ColumnType::Other
        }
    }

    /// Can values of the two types be compared with `=` and `<`?
    pub fn comparable(self, other: ColumnType) -> bool {
        use ColumnType::*;
        match (self, other) {
            (Other, _) | (_, Other) => false,
            (Integer | Real, Integer | Real) => true,
            (a, b) => a == b,
        }
    }
}

/// A column of a [`Table`].
#[derive(Clone, Debug, Serialize)]
pub struct Column {
    /// Its name, as the database spells it.
    pub name: String,
    /// The declared type, as the database reports it (shown in the prompt).
    pub declared_type: String,
    /// What its literals look like.
    pub ty: ColumnType,
    /// Declared `NOT NULL` (or part of the primary key).
    pub not_null: bool,
    /// For a text column with few distinct values (read when asked): all of them. A
    /// comparison with `=`, `!=` or `IN` then takes only these literals.
    pub values: Option<Vec<String>>,
}

/// A table (or view) and its columns.
#[derive(Clone, Debug, Serialize)]
pub struct Table {
    /// Its name, as the database spells it (PostgreSQL: without the schema, which must be
    /// on the search path).
    pub name: String,
    /// Its columns, in the database's order.
    pub columns: Vec<Column>,
    /// The primary key's columns (indices into `columns`).
    pub primary_key: Vec<usize>,
    /// A condition every query that reads this table must carry (a rule), as SQL text.
    pub required_filter: Option<String>,
}

impl Table {
    /// The index of column `name` (exact spelling first, then ASCII case-insensitive).
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns
            .iter()
            .position(|c| c.name == name)
            .or_else(|| self.columns.iter().position(|c| c.name.eq_ignore_ascii_case(name)))
    }
}

/// A relationship between two tables: `from.from_columns` refer to `to.to_columns` (a
/// foreign key, or one declared in a rules file). Joins follow these.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Relationship {
    /// The referring table.
    pub from: TableId,
    /// Its columns.
    pub from_columns: Vec<usize>,
    /// The referred table.
    pub to: TableId,
    /// Its columns, one per `from_columns`.
    pub to_columns: Vec<usize>,
}

/// A database's tables and how they relate: what a query may name.
///
/// Invariants (kept by [`Catalog::new`] and the methods that change it): table names are
/// unique, every relationship's tables and columns exist and have as many columns on each
/// side, and no relationship joins a table to itself.
#[derive(Clone, Debug, Serialize)]
pub struct Catalog {
    /// The dialect of the database it was read from.
    pub dialect: Dialect,
    tables: Vec<Table>,
    relationships: Vec<Relationship>,
}

/// A catalog that breaks an invariant, or a name that does not resolve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CatalogError(pub String);

impl Catalog {
    /// A catalog of `tables`; relationships are added with [`Catalog::relate`].
    pub fn new(dialect: Dialect, tables: Vec<Table>) -> Result<Catalog, CatalogError> {
        let mut seen = std::collections::HashSet::new();
        for t in &tables {
            if !seen.insert(t.name.as_str()) {
                return Err(CatalogError(format!("table `{}` appears twice", t.name)));
            }
            if t.columns.is_empty() {
                return Err(CatalogError(format!("table `{}` has no columns", t.name)));
            }
        }
        Ok(Catalog { dialect, tables, relationships: Vec::new() })
    }

    /// The tables.
    pub fn tables(&self) -> &[Table] {
        &self.tables
    }

    /// Table `id`.
    pub fn table(&self, id: TableId) -> &Table {
        &self.tables[id.index()]
    }

    /// Every table id.
    pub fn ids(&self) -> impl Iterator<Item = TableId> {
        (0..self.tables.len() as u32).map(TableId)
    }

    /// The relationships.
    pub fn relationships(&self) -> &[Relationship] {
        &self.relationships
    }

    /// The table called `name` (exact spelling first, then ASCII case-insensitive).
    pub fn find(&self, name: &str) -> Option<TableId> {
        let pos = self
            .tables
            .iter()
            .position(|t| t.name == name)
            .or_else(|| self.tables.iter().position(|t| t.name.eq_ignore_ascii_case(name)));
        pos.map(|i| TableId(i as u32))
    }

    /// `table.column` resolved, or an error naming what does not exist.
    pub fn resolve_column(&self, qualified: &str) -> Result<(TableId, usize), CatalogError> {
        let (t, c) = qualified
            .split_once('.')
            .ok_or_else(|| CatalogError(format!("`{qualified}` is not of the form table.column")))?;
        let tid = self.find(t).ok_or_else(|| CatalogError(format!("no table `{t}` (in `{qualified}`)")))?;
        let col = self
            .table(tid)
            .column(c)
            .ok_or_else(|| CatalogError(format!("table `{t}` has no column `{c}` (in `{qualified}`)")))?;
        Ok((tid, col))
    }

    /// Adds a relationship (ignored when the same one is there already).
    pub fn relate(&mut self, r: Relationship) -> Result<(), CatalogError> {
        let n = self.tables.len();
        if r.from.index() >= n || r.to.index() >= n {
            return Err(CatalogError("a relationship names a table that does not exist".into()));
        }
        if r.from == r.to {
            // A self-reference (an employee's manager) needs two aliases of one table; the
            // grammar joins each table at most once, so it cannot follow one.
            return Ok(());
        }
        if r.from_columns.is_empty() || r.from_columns.len() != r.to_columns.len() {
            return Err(CatalogError(format!(
                "a relationship between `{}` and `{}` has unequal column lists",
                self.tables[r.from.index()].name,
                self.tables[r.to.index()].name
            )));
        }
        let ok = |t: TableId, cs: &[usize]| cs.iter().all(|&c| c < self.tables[t.index()].columns.len());
        if !ok(r.from, &r.from_columns) || !ok(r.to, &r.to_columns) {
            return Err(CatalogError("a relationship names a column that does not exist".into()));
        }
        if !self.relationships.contains(&r) {
            self.relationships.push(r);
        }
        Ok(())
    }

    /// Removes table `name` and every relationship through it.
    pub fn hide_table(&mut self, name: &str) -> Result<(), CatalogError> {
        let id = self.find(name).ok_or_else(|| CatalogError(format!("cannot hide table `{name}`: no such table")))?;
        self.tables.remove(id.index());
        let shift = |t: TableId| if t > id { TableId(t.0 - 1) } else { t };
        self.relationships.retain(|r| r.from != id && r.to != id);
        for r in &mut self.relationships {
            r.from = shift(r.from);
            r.to = shift(r.to);
        }
        Ok(())
    }

    /// Removes column `table.column` and every relationship through it.
    pub fn hide_column(&mut self, qualified: &str) -> Result<(), CatalogError> {
        let (t, c) = self.resolve_column(qualified).map_err(|e| CatalogError(format!("cannot hide `{qualified}`: {}", e.0)))?;
        let table = &mut self.tables[t.index()];
        if table.columns.len() == 1 {
            return Err(CatalogError(format!("cannot hide `{qualified}`: it is the table's only column; hide the table")));
        }
        table.columns.remove(c);
        table.primary_key.retain(|&k| k != c);
        for k in &mut table.primary_key {
            if *k > c {
                *k -= 1;
            }
        }
        let uses = |r: &Relationship| (r.from == t && r.from_columns.contains(&c)) || (r.to == t && r.to_columns.contains(&c));
        self.relationships.retain(|r| !uses(r));
        for r in &mut self.relationships {
            let fix = |cols: &mut Vec<usize>| cols.iter_mut().for_each(|k| if *k > c { *k -= 1 });
            if r.from == t {
                fix(&mut r.from_columns);
            }
            if r.to == t {
                fix(&mut r.to_columns);
            }
        }
        Ok(())
    }

    /// Sets the filter every query reading `table` must carry.
    pub fn require_filter(&mut self, table: &str, filter: &str) -> Result<(), CatalogError> {
        let id = self.find(table).ok_or_else(|| CatalogError(format!("a required filter names table `{table}`, which does not exist")))?;
        self.tables[id.index()].required_filter = Some(filter.trim().to_string());
        Ok(())
    }

    /// The same catalog without any required filter.
    pub fn without_filters(&self) -> Catalog {
        let mut c = self.clone();
        for t in &mut c.tables {
            t.required_filter = None;
        }
        c
    }

    /// The tables related to `t` (either direction), each once.
    pub fn neighbours(&self, t: TableId) -> Vec<TableId> {
        let mut out: Vec<TableId> = self
            .relationships
            .iter()
            .filter_map(|r| if r.from == t { Some(r.to) } else if r.to == t { Some(r.from) } else { None })
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// The number of relationships between `t` and every table (`None`: not connected),
    /// by breadth-first search.
    pub fn distances_from(&self, t: TableId) -> Vec<Option<usize>> {
        let mut dist = vec![None; self.tables.len()];
        dist[t.index()] = Some(0);
        let mut queue = std::collections::VecDeque::from([t]);
        while let Some(x) = queue.pop_front() {
            let d = dist[x.index()].unwrap_or(0);
            for nb in self.neighbours(x) {
                if dist[nb.index()].is_none() {
                    dist[nb.index()] = Some(d + 1);
                    queue.push_back(nb);
                }
            }
        }
        dist
    }

    /// The connected components of the relationship graph, each sorted, in order of their
    /// first table. A query's tables all lie in one (joins follow relationships).
    pub fn components(&self) -> Vec<Vec<TableId>> {
        let n = self.tables.len();
        let mut comp = vec![usize::MAX; n];
        let mut out: Vec<Vec<TableId>> = Vec::new();
        for start in 0..n {
            if comp[start] != usize::MAX {
                continue;
            }
            let k = out.len();
            let mut members = vec![TableId(start as u32)];
            comp[start] = k;
            let mut i = 0;
            while i < members.len() {
                for nb in self.neighbours(members[i]) {
                    if comp[nb.index()] == usize::MAX {
                        comp[nb.index()] = k;
                        members.push(nb);
                    }
                }
                i += 1;
            }
            members.sort();
            out.push(members);
        }
        out
    }

    /// `table.column` as SQL (both parts quoted when needed).
    pub fn column_sql(&self, t: TableId, c: usize) -> String {
        let table = self.table(t);
        format!("{}.{}", quote_ident(&table.name), quote_ident(&table.columns[c].name))
    }
}

/// Words that cannot be an unquoted identifier in SQLite or PostgreSQL (the reserved words
/// of both, lower case), and so are never generated as an alias either.
pub const RESERVED: &[&str] = &[
    "abort", "action", "add", "all", "alter", "analyze", "and", "any", "array", "as", "asc", "asymmetric",
    "attach", "autoincrement", "before", "begin", "between", "both", "by", "cascade", "case", "cast", "check",
    "collate", "column", "commit", "conflict", "constraint", "create", "cross", "current", "current_date",
    "current_role", "current_time", "current_timestamp", "current_user", "database", "default", "deferrable",
    "deferred", "delete", "desc", "detach", "distinct", "do", "drop", "each", "else", "end", "escape", "except",
    "exclude", "exclusive", "exists", "explain", "false", "fetch", "filter", "first", "following", "for",
    "foreign", "from", "full", "glob", "grant", "group", "groups", "having", "if", "ignore", "ilike",
    "immediate", "in", "index", "indexed", "initially", "inner", "insert", "instead", "intersect", "into", "is",
    "isnull", "join", "key", "last", "lateral", "leading", "left", "like", "limit", "localtime",
    "localtimestamp", "match", "materialized", "natural", "no", "not", "nothing", "notnull", "null", "nulls",
    "of", "offset", "on", "only", "or", "order", "others", "outer", "over", "partition", "placing", "plan",
    "pragma", "preceding", "primary", "query", "raise", "range", "recursive", "references", "regexp",
    "reindex", "release", "rename", "replace", "restrict", "returning", "right", "rollback", "row", "rows",
    "savepoint", "select", "session_user", "set", "similar", "some", "symmetric", "table", "temp",
    "temporary", "then", "ties", "to", "trailing", "transaction", "trigger", "true", "unbounded", "union",
    "unique", "update", "user", "using", "vacuum", "values", "variadic", "view", "virtual", "when", "where",
    "window", "with", "without",
];

/// `name` as an SQL identifier both dialects read back as `name`: bare when it is lower
/// case letters, digits and `_` (not starting with a digit) and not a reserved word;
/// otherwise in double quotes, with `"` doubled. (PostgreSQL folds bare names to lower case,
/// so `Album` must be quoted to stay `Album`.)
pub fn quote_ident(name: &str) -> String {
    let bare = !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !name.as_bytes()[0].is_ascii_digit()
        && !RESERVED.contains(&name);
    if bare {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A small shop: customers ← orders ← order_items → products, and an unrelated `notes`.
    pub(crate) fn shop() -> Catalog {
        let col = |name: &str, ty: &str| Column {
            name: name.into(),
            declared_type: ty.into(),
            ty: ColumnType::from_declared(ty),
            not_null: false,
            values: None,
        };
        let table = |name: &str, cols: Vec<Column>| Table { name: name.into(), columns: cols, primary_key: vec![0], required_filter: None };
        let mut c = Catalog::new(
            Dialect::Sqlite,
            vec![
                table("customers", vec![col("id", "INTEGER"), col("name", "TEXT"), col("country", "TEXT"), col("deleted_at", "TIMESTAMP")]),
                table("orders", vec![col("id", "INTEGER"), col("customer_id", "INTEGER"), col("total", "REAL"), col("placed_at", "DATE")]),
                table("order_items", vec![col("order_id", "INTEGER"), col("product_id", "INTEGER"), col("quantity", "INTEGER")]),
                table("products", vec![col("id", "INTEGER"), col("name", "TEXT"), col("price", "REAL")]),
                table("notes", vec![col("id", "INTEGER"), col("body", "TEXT")]),
            ],
        )
        .unwrap();
        for (f, t) in [("orders.customer_id", "customers.id"), ("order_items.order_id", "orders.id"), ("order_items.product_id", "products.id")] {
            let (ft, fc) = c.resolve_column(f).unwrap();
            let (tt, tc) = c.resolve_column(t).unwrap();
            c.relate(Relationship { from: ft, from_columns: vec![fc], to: tt, to_columns: vec![tc] }).unwrap();
        }
        c
    }

    #[test]
    fn types_follow_affinity() {
        assert_eq!(ColumnType::from_declared("INTEGER"), ColumnType::Integer);
        assert_eq!(ColumnType::from_declared("character varying(40)"), ColumnType::Text);
        assert_eq!(ColumnType::from_declared("NVARCHAR(120)"), ColumnType::Text);
        assert_eq!(ColumnType::from_declared("timestamp without time zone"), ColumnType::Date);
        assert_eq!(ColumnType::from_declared("double precision"), ColumnType::Real);
        assert_eq!(ColumnType::from_declared("NUMERIC(10,2)"), ColumnType::Real);
        assert_eq!(ColumnType::from_declared("boolean"), ColumnType::Boolean);
        assert_eq!(ColumnType::from_declared("BLOB"), ColumnType::Other);
        assert_eq!(ColumnType::from_declared("bigint"), ColumnType::Integer);
    }

    #[test]
    fn quoting_keeps_names_in_both_dialects() {
        assert_eq!(quote_ident("customers"), "customers");
        assert_eq!(quote_ident("Album"), "\"Album\"");
        assert_eq!(quote_ident("order"), "\"order\"");
        assert_eq!(quote_ident("2fa"), "\"2fa\"");
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
    }

    #[test]
    fn hiding_removes_relationships_and_renumbers() {
        let mut c = shop();
        assert_eq!(c.components().len(), 2);
        c.hide_table("orders").unwrap();
        // customers is now alone; order_items - products remain related.
        let comps = c.components();
        assert_eq!(comps.len(), 3, "{comps:?}");
        let oi = c.find("order_items").unwrap();
        let p = c.find("products").unwrap();
        assert_eq!(c.neighbours(oi), vec![p]);
        c.hide_column("order_items.product_id").unwrap();
        assert!(c.neighbours(oi).is_empty());
        assert_eq!(c.table(oi).columns.len(), 2);
        assert!(c.hide_table("nope").unwrap_err().0.contains("no such table"));
    }
}
