//! On a real PostgreSQL (a throwaway cluster from Debian's `postgresql` package, see
//! `common/pg.rs`): the catalog, the rules checked by the server, read-only execution
//! with a statement timeout, and random queries from the constraint prepared by the
//! server's own parser.

mod common;

use common::pg::TempPostgres;
use common::*;
use formwork_grammar::Limits;
use formwork_sql::{Dialect, ReadOptions, SqlDatabase, SqlError, SqlGrammarOptions, SqlGrammars};
use std::time::Duration;

#[test]
fn postgres_end_to_end() {
    let pg = TempPostgres::start();
    pg.create("shop", SHOP_SQL);
    let rules = rules_file(pg.dir());
    let db = SqlDatabase::open(&pg.url("shop"), Some(&rules), &ReadOptions::default(), SqlGrammarOptions::default()).unwrap();
    assert_eq!(db.catalog.dialect, Dialect::Postgres);

    // The catalog: same tables and relationships as the SQLite reading.
    let names: Vec<&str> = db.catalog.tables().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["Order Notes", "customers", "order_items", "orders", "products", "warehouses"]);
    assert_eq!(db.catalog.relationships().len(), 4);
    let items = db.catalog.table(db.catalog.find("order_items").unwrap());
    assert_eq!(items.primary_key, vec![0, 1]);
    let orders = db.catalog.table(db.catalog.find("orders").unwrap());
    assert_eq!(orders.columns[orders.column("status").unwrap()].values.as_deref(), Some(&["open".to_string(), "paid".into()][..]));

    // A rule the server cannot parse is refused with its message.
    let bad = pg.dir().join("bad.toml");
    std::fs::write(&bad, "[required_filters]\norders = \"orders.total >\"\n").unwrap();
    let e = SqlDatabase::open(&pg.url("shop"), Some(&bad), &ReadOptions::default(), SqlGrammarOptions::default()).unwrap_err();
    assert!(e.to_string().contains("bad.toml") && e.to_string().contains("syntax"), "{e}");

    // Execution: read-only, capped, timed out; the password never shows in messages.
    let rows = db.db.execute("SELECT customers.name, orders.total FROM orders JOIN customers ON orders.customer_id = customers.id ORDER BY orders.id", 2, Duration::from_secs(5)).unwrap();
    assert_eq!(rows.columns, ["name", "total"]);
    assert_eq!(rows.rows[0], vec![serde_json::json!("Ann"), serde_json::json!(10.5)]);
    assert!(rows.truncated);
    let rows = db.db.execute("SELECT orders.id, orders.placed_at, customers.deleted_at IS NULL AS live FROM orders JOIN customers ON orders.customer_id = customers.id ORDER BY orders.id DESC", 10, Duration::from_secs(5)).unwrap();
    assert_eq!(rows.rows[0], vec![serde_json::json!(4), serde_json::json!("2024-03-05"), serde_json::json!(true)], "the query's order, typed values");
    assert_eq!(rows.rows.len(), 4);
    assert!(!rows.truncated);
    assert!(db.db.execute("DELETE FROM customers", 5, Duration::from_secs(5)).is_err());
    assert!(db.db.execute("SELECT 1; DELETE FROM customers", 5, Duration::from_secs(5)).is_err());
    let count = db.db.execute("SELECT count(*) FROM customers", 5, Duration::from_secs(5)).unwrap();
    assert_eq!(count.rows[0][0], 4, "nothing was deleted");
    let e = db.db.execute("SELECT pg_sleep(5)", 5, Duration::from_millis(300)).unwrap_err();
    assert!(matches!(e, SqlError::Timeout(_)), "{e}");
    let e = SqlDatabase::open(&format!("postgres://postgres:secret@127.0.0.1:{}/nope", pg.port), None, &ReadOptions::default(), SqlGrammarOptions::default()).unwrap_err();
    assert!(!e.to_string().contains("secret") && e.to_string().contains("***"), "{e}");

    // Random queries: the server prepares every one (names, scope, types, and the
    // grouping rule SQLite does not have), and each keeps the rules.
    let vocab = vocab();
    let grammars = SqlGrammars::new(db.catalog.clone(), SqlGrammarOptions::default(), &vocab, &Limits::default()).unwrap();
    let mut rng = Rng(0xfeed);
    for i in 0..300 {
        let sql = random_query(&mut grammars.constraint().unwrap(), &vocab, &mut rng, 60);
        check_structure(&sql, &db.catalog, &["audit_log", "password_hash"]).unwrap_or_else(|e| panic!("query {i}: {e}\n{sql}"));
        db.db.check(&sql).unwrap_or_else(|e| panic!("query {i}: PostgreSQL refuses it: {e}\n{sql}"));
    }
}
