//! `formwork sql` and `formwork grammar sql` end to end: a SQLite file built here, the real
//! default model (SmolLM2-135M-Instruct), the real binary.

mod common;
use common::model_path;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};


/// A shop: customers and their orders, with a foreign key, a hidden column and a rule.
fn shop(dir: &Path) -> (PathBuf, PathBuf) {
    let db = dir.join("shop.sqlite");
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch(
        "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT, deleted INTEGER NOT NULL, secret TEXT);
         CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id), total REAL);
         INSERT INTO customers VALUES (1, 'Ann', 'DE', 0, 's'), (2, 'Bob', 'FR', 0, 't'), (3, 'Old', 'DE', 1, 'u');
         INSERT INTO orders VALUES (1, 1, 10.5), (2, 2, 4.0), (3, 3, 99.0);",
    )
    .unwrap();
    let rules = dir.join("rules.toml");
    std::fs::write(&rules, "hidden = [\"customers.secret\"]\n[required_filters]\ncustomers = \"customers.deleted = 0\"\n").unwrap();
    (db, rules)
}

fn formwork(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_formwork")).args(args).output().expect("the formwork binary runs")
}

#[test]
fn a_question_gets_a_query_over_what_exists_and_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (db, rules) = shop(dir.path());
    let model = model_path();
    let out = formwork(&[
        "sql", "--db", db.to_str().unwrap(), "--rules", rules.to_str().unwrap(), "--model", model.to_str().unwrap(),
        "--threads", "1", "--execute", "--json", "What is the total of the orders of each customer?",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "stderr: {}\nstdout: {stdout}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let sql = v["sql"].as_str().unwrap();
    assert!(sql.starts_with("SELECT "), "{sql}");
    assert!(!sql.contains("secret"), "a hidden column: {sql}");
    if sql.contains(" FROM customers") || sql.contains("JOIN customers") {
        assert!(sql.contains("WHERE customers.deleted = 0"), "the rule: {sql}");
    }
    assert_eq!(v["valid"], true, "{v}");
    assert!(v["rows"].is_array() && v["columns"].is_array(), "{v}");
}

#[test]
fn the_grammar_prints_as_gbnf_that_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let (db, rules) = shop(dir.path());
    let out = formwork(&["grammar", "sql", "--db", db.to_str().unwrap(), "--rules", rules.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let gbnf = dir.path().join("sql.gbnf");
    std::fs::write(&gbnf, &out.stdout).unwrap();
    let check = |text: &str| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_formwork"))
            .args(["grammar", "check", "--grammar", gbnf.to_str().unwrap()])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        child.wait_with_output().unwrap().status.success()
    };
    assert!(check("SELECT orders.total FROM orders JOIN customers ON orders.customer_id = customers.id"));
    assert!(!check("SELECT customers.secret FROM customers"), "hidden");
    assert!(!check("SELECT orders.total FROM orders JOIN customers ON orders.total = customers.id"), "no such relationship");
}

#[test]
fn a_database_that_is_not_there_is_a_clear_error() {
    let out = formwork(&["sql", "--db", "/nonexistent/shop.sqlite", "q"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/shop.sqlite") && err.contains("no such file"), "{err}");
}
