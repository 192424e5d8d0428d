//! Test fixtures: a shop database built as a real SQLite file or loaded into a throwaway
//! PostgreSQL cluster, a rules file for it, and a random walk through the SQL constraint.
#![allow(dead_code)]

pub mod pg;

use formwork_engine::Constraint;
use formwork_sql::SqlConstraint;
use formwork_vocab::{TokenId, TokenMask, Vocabulary};
use std::path::Path;
use std::sync::Arc;

/// The shop's schema and rows, in SQL both SQLite and PostgreSQL run. Names that need
/// quoting (`"Order Notes"`, `"Order"`), a composite primary key, a hidden table and column,
/// and an unrelated table are in it on purpose.
pub const SHOP_SQL: &str = r#"
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT, deleted_at DATE, is_test_account INTEGER NOT NULL, password_hash TEXT);
CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT NOT NULL, price REAL NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id), total REAL, placed_at DATE, status TEXT);
CREATE TABLE order_items (order_id INTEGER NOT NULL REFERENCES orders(id), product_id INTEGER NOT NULL REFERENCES products(id), quantity INTEGER NOT NULL, PRIMARY KEY (order_id, product_id));
CREATE TABLE audit_log (id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customers(id), action TEXT);
CREATE TABLE "Order Notes" (id INTEGER PRIMARY KEY, "Order" INTEGER REFERENCES orders(id), body TEXT);
CREATE TABLE warehouses (id INTEGER PRIMARY KEY, city TEXT);
INSERT INTO customers VALUES (1, 'Ann', 'DE', NULL, 0, 'x'), (2, 'Bob', 'FR', NULL, 0, 'y'), (3, 'Cy', 'DE', '2024-02-01', 0, 'z'), (4, 'Tess', 'US', NULL, 1, 'w');
INSERT INTO products VALUES (1, 'pen', 1.5), (2, 'ink', 4.0), (3, 'pad', 2.25);
INSERT INTO orders VALUES (1, 1, 10.5, '2024-01-03', 'paid'), (2, 1, 4.0, '2024-02-10', 'open'), (3, 2, 7.0, '2024-03-01', 'paid'), (4, 4, 99.0, '2024-03-05', 'paid');
INSERT INTO order_items VALUES (1, 1, 3), (1, 2, 1), (2, 2, 1), (3, 3, 2), (4, 1, 10);
INSERT INTO audit_log VALUES (1, 1, 'login');
INSERT INTO "Order Notes" VALUES (1, 1, 'gift wrap');
INSERT INTO warehouses VALUES (1, 'Lyon');
"#;

/// The rules for the shop.
pub const SHOP_RULES: &str = r#"
hidden = ["audit_log", "customers.password_hash"]
[required_filters]
customers = "customers.deleted_at IS NULL AND customers.is_test_account = 0"
"#;

/// Builds the shop as a SQLite file in `dir`; returns its path.
pub fn sqlite_shop(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("shop.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(SHOP_SQL).unwrap();
    path
}

/// Writes the rules file into `dir`.
pub fn rules_file(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("rules.toml");
    std::fs::write(&path, SHOP_RULES).unwrap();
    path
}

/// Printable ASCII one character per token, plus some words (so tokens of several bytes,
/// and tokens that would cross a phase boundary, exist).
pub fn vocab() -> Arc<Vocabulary> {
    let mut toks: Vec<String> = (0x20u8..0x7f).map(|b| (b as char).to_string()).collect();
    for w in ["SELECT", " FROM", " customers", " orders", ".name", " JOIN", " ON", " WHERE", " AND", " =", "customers WHERE", " GROUP BY", " ORDER BY", ".id", " IS NULL"] {
        toks.push(w.to_string());
    }
    Arc::new(Vocabulary::from_strings(&toks, &["</s>"]))
}

/// A small deterministic generator (xorshift64*).
pub struct Rng(pub u64);

impl Rng {
    pub fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545F4914F6CDD1D) >> 33) as usize % n.max(1)
    }
}

/// A random query: random allowed tokens (checked against the mask each step), stopping
/// at an accepting point with some chance, and after `max_steps` following the
/// constraint's own completion plan.
pub fn random_query(c: &mut SqlConstraint, vocab: &Vocabulary, rng: &mut Rng, max_steps: usize) -> String {
    let mut mask = TokenMask::new(vocab.len());
    let mut out = String::new();
    for step in 0.. {
        if c.is_accepting() && (rng.below(4) == 0 || step >= max_steps) {
            return out;
        }
        let t: TokenId = if step >= max_steps {
            c.completion_plan().expect("a plan exists from every reachable state")[0]
        } else {
            c.compute_mask(&mut mask);
            let allowed: Vec<TokenId> = mask.iter_ones().filter(|t| !vocab.eos_tokens().contains(t)).collect();
            if allowed.is_empty() && c.is_accepting() {
                return out; // nothing can follow: the query is complete
            }
            assert!(!allowed.is_empty(), "dead end after {out:?}");
            allowed[rng.below(allowed.len())]
        };
        assert!(c.is_allowed(t), "mask and is_allowed disagree after {out:?}");
        c.commit(t).unwrap();
        out.push_str(&vocab.token_text(t));
        assert!(step < max_steps + 4000, "the plan does not finish: {out:?}");
    }
    unreachable!()
}

/// `sql` with every string literal's contents removed (`'it''s'` → `''`), so that text
/// inside literals cannot look like a clause.
pub fn without_strings(sql: &str) -> String {
    let mut out = String::new();
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        out.push(c);
        if c == '\'' {
            loop {
                match chars.next() {
                    Some('\'') if chars.peek() == Some(&'\'') => {
                        chars.next();
                    }
                    Some('\'') | None => break,
                    Some(_) => {}
                }
            }
            out.push('\'');
        }
    }
    out
}

/// Reads `a.b` (each part bare or double-quoted) at the start of `s`: the two names and
/// the rest.
pub fn qualified(s: &str) -> Option<(String, String, &str)> {
    let (t, rest) = ident(s)?;
    let rest = rest.strip_prefix('.')?;
    let (c, rest) = ident(rest)?;
    Some((t, c, rest))
}

/// One identifier (bare or double-quoted) at the start of `s`, and the rest.
pub fn ident(s: &str) -> Option<(String, &str)> {
    if let Some(q) = s.strip_prefix('"') {
        let mut name = String::new();
        let mut it = q.char_indices().peekable();
        while let Some((i, c)) = it.next() {
            if c == '"' {
                if it.peek().map(|x| x.1) == Some('"') {
                    it.next();
                    name.push('"');
                } else {
                    return Some((name, &q[i + 1..]));
                }
            } else {
                name.push(c);
            }
        }
        None
    } else {
        let n = s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(s.len());
        (n > 0).then(|| (s[..n].to_string(), &s[n..]))
    }
}

/// The rules a generated query must keep beyond what the database's parser checks: only
/// a SELECT; every JOIN condition is a relationship of the catalog between the joined
/// table and one already in scope; each table in scope with a required filter has it in
/// WHERE; no hidden name appears. Returns the tables in scope.
pub fn check_structure(sql: &str, cat: &formwork_sql::Catalog, hidden: &[&str]) -> Result<Vec<String>, String> {
    let s = without_strings(sql);
    if !s.starts_with("SELECT ") {
        return Err("not a SELECT".into());
    }
    for h in hidden {
        if s.contains(h) {
            return Err(format!("hidden name {h} appears"));
        }
    }
    let from = s.find(" FROM ").ok_or("no FROM")?;
    let (first, mut rest) = ident(&s[from + 6..]).ok_or("no table after FROM")?;
    let mut scope = vec![first];
    loop {
        let r = rest.strip_prefix(" LEFT JOIN ").or_else(|| rest.strip_prefix(" JOIN "));
        let Some(r) = r else { break };
        let (t, r) = ident(r).ok_or("no table after JOIN")?;
        let r = r.strip_prefix(" ON ").ok_or("JOIN without ON")?;
        let (at, ac, r) = qualified(r).ok_or("ON without a column")?;
        let r = r.strip_prefix(" = ").ok_or("ON without =")?;
        let (bt, bc, r) = qualified(r).ok_or("ON without a second column")?;
        let col = |t: &str, c: &str| cat.resolve_column(&format!("{t}.{c}")).map_err(|e| e.0);
        let (a, b) = (col(&at, &ac)?, col(&bt, &bc)?);
        let related = cat.relationships().iter().any(|rel| {
            rel.from_columns.len() == 1
                && ((rel.from, rel.from_columns[0], rel.to, rel.to_columns[0]) == (a.0, a.1, b.0, b.1)
                    || (rel.from, rel.from_columns[0], rel.to, rel.to_columns[0]) == (b.0, b.1, a.0, a.1))
        });
        if !related {
            return Err(format!("JOIN {t} ON {at}.{ac} = {bt}.{bc} follows no relationship"));
        }
        let names = [at.as_str(), bt.as_str()];
        if !names.contains(&t.as_str()) || !names.iter().any(|n| scope.iter().any(|s| s == n)) {
            return Err(format!("JOIN {t}: the condition does not link it to the tables in scope {scope:?}"));
        }
        if scope.contains(&t) {
            return Err(format!("{t} joined twice"));
        }
        scope.push(t);
        rest = r;
    }
    for t in &scope {
        let id = cat.find(t).ok_or_else(|| format!("table {t} is not in the catalog"))?;
        if let Some(f) = &cat.table(id).required_filter {
            let need = format!(" WHERE {f}");
            if !rest.starts_with(&need) {
                return Err(format!("{t} is read without its required filter: {rest:?}"));
            }
        }
    }
    Ok(scope)
}
