//! On a real SQLite file built here: the catalog, the rules, execution limits, and random
//! queries from the constraint checked by SQLite's own parser and by the structural rules.

mod common;

use common::*;
use formwork_grammar::Limits;
use formwork_sql::{ColumnType, Database, ReadOptions, SqlDatabase, SqlError, SqlGrammarOptions, SqlGrammars};
use std::time::Duration;

fn open(dir: &std::path::Path) -> SqlDatabase {
    let db = sqlite_shop(dir);
    let rules = rules_file(dir);
    SqlDatabase::open(db.to_str().unwrap(), Some(&rules), &ReadOptions::default(), SqlGrammarOptions::default()).unwrap()
}

#[test]
fn the_catalog_is_read_from_the_file_and_narrowed_by_the_rules() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let cat = &db.catalog;
    let names: Vec<&str> = cat.tables().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["Order Notes", "customers", "order_items", "orders", "products", "warehouses"], "audit_log is hidden");
    let customers = cat.table(cat.find("customers").unwrap());
    assert!(customers.column("password_hash").is_none(), "hidden column");
    assert_eq!(customers.required_filter.as_deref(), Some("customers.deleted_at IS NULL AND customers.is_test_account = 0"));
    let country = &customers.columns[customers.column("country").unwrap()];
    assert_eq!(country.values.as_deref(), Some(&["DE".to_string(), "FR".into(), "US".into()][..]));
    assert_eq!(customers.columns[customers.column("deleted_at").unwrap()].ty, ColumnType::Date);
    let items = cat.table(cat.find("order_items").unwrap());
    assert_eq!(items.primary_key, vec![0, 1], "composite key");
    // Relationships: orders → customers, order_items → orders and products, notes → orders.
    assert_eq!(cat.relationships().len(), 4, "{:?}", cat.relationships());
    assert_eq!(cat.components().len(), 2, "warehouses stands alone");
}

#[test]
fn random_queries_parse_and_keep_every_rule() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let vocab = vocab();
    let grammars = SqlGrammars::new(db.catalog.clone(), SqlGrammarOptions::default(), &vocab, &Limits::default()).unwrap();
    let mut rng = Rng(0x5eed);
    let mut joined = 0;
    let mut filtered = 0;
    for i in 0..300 {
        let mut c = grammars.constraint().unwrap();
        let sql = random_query(&mut c, &vocab, &mut rng, 60);
        let scope = check_structure(&sql, &db.catalog, &["audit_log", "password_hash"]).unwrap_or_else(|e| panic!("query {i}: {e}\n{sql}"));
        db.db.check(&sql).unwrap_or_else(|e| panic!("query {i}: SQLite refuses it: {e}\n{sql}"));
        // Runs, too (read-only; a division by zero is NULL in SQLite).
        db.db.execute(&sql, 10, Duration::from_secs(5)).unwrap_or_else(|e| panic!("query {i}: {e}\n{sql}"));
        joined += (scope.len() > 1) as usize;
        filtered += scope.iter().any(|t| t == "customers") as usize;
    }
    assert!(joined > 10 && filtered > 10, "the walk should reach joins ({joined}) and filtered tables ({filtered})");
}

#[test]
fn execution_is_read_only_capped_and_timed() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::Sqlite(sqlite_shop(dir.path()));
    let rows = db.execute("SELECT customers.name, customers.id FROM customers ORDER BY customers.id", 2, Duration::from_secs(5)).unwrap();
    assert_eq!(rows.columns, ["name", "id"]);
    assert_eq!(rows.rows, vec![vec![serde_json::json!("Ann"), serde_json::json!(1)], vec![serde_json::json!("Bob"), serde_json::json!(2)]]);
    assert!(rows.truncated);
    let e = db.execute("DELETE FROM customers", 10, Duration::from_secs(5)).unwrap_err();
    assert!(matches!(e, SqlError::Query(_)), "{e}");
    let e = db.execute("SELECT 1; DELETE FROM customers", 10, Duration::from_secs(5)).unwrap_err();
    assert!(matches!(e, SqlError::Query(_)), "{e}");
    let forever = "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r";
    let e = db.execute(forever, 10, Duration::from_millis(200)).unwrap_err();
    assert!(matches!(e, SqlError::Timeout(_)), "{e}");
    assert_eq!(db.execute("SELECT count(*) FROM customers", 10, Duration::from_secs(5)).unwrap().rows[0][0], 4);
}

#[test]
fn a_rules_file_that_does_not_fit_the_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = sqlite_shop(dir.path());
    let rules = dir.path().join("bad.toml");
    std::fs::write(&rules, "[required_filters]\norders = \"orders.nope = 1\"\n").unwrap();
    let e = SqlDatabase::open(path.to_str().unwrap(), Some(&rules), &ReadOptions::default(), SqlGrammarOptions::default()).unwrap_err();
    assert!(e.to_string().contains("bad.toml") && e.to_string().contains("nope"), "{e}");
}

#[test]
fn a_hundred_tables_compile() {
    // 100 tables of 8 columns, each referring to the one before: one joinable group.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wide.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    let mut sql = String::new();
    for i in 0..100 {
        let fk = if i == 0 { String::new() } else { format!(", prev_id INTEGER REFERENCES t{}(id)", i - 1) };
        sql.push_str(&format!("CREATE TABLE t{i} (id INTEGER PRIMARY KEY, name TEXT, amount REAL, created DATE, flag BOOLEAN, code TEXT, qty INTEGER{fk});\n"));
    }
    conn.execute_batch(&sql).unwrap();
    drop(conn);
    let db = SqlDatabase::open(path.to_str().unwrap(), None, &ReadOptions::default(), SqlGrammarOptions::default()).unwrap();
    let vocab = vocab();
    let g = SqlGrammars::new(db.catalog.clone(), SqlGrammarOptions::default(), &vocab, &Limits::default()).unwrap();
    let mut rng = Rng(7);
    for _ in 0..5 {
        let sql = random_query(&mut g.constraint().unwrap(), &vocab, &mut rng, 40);
        db.db.check(&sql).unwrap_or_else(|e| panic!("{e}\n{sql}"));
    }
}

#[test]
fn a_database_error_is_fed_back_and_the_query_generated_again() {
    use formwork_engine::retry::{RetryMode, Validation};
    use formwork_engine::testing::{ScriptedAnswers, ScriptedModel};
    use formwork_engine::SamplerOptions;
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    // The catalog was read with `products`; the table is gone now, so a query naming it
    // passes the grammar and fails on the database.
    rusqlite::Connection::open(dir.path().join("shop.sqlite")).unwrap().execute_batch("PRAGMA foreign_keys = OFF; DROP TABLE products").unwrap();
    let tokens: Vec<String> = (0x20u8..0x7f).map(|b| (b as char).to_string()).chain(["\n".to_string()]).collect();
    let inner = ScriptedModel::new(&tokens, &["<|im_end|>", "<|im_start|>"]);
    let mut model = ScriptedAnswers::new(inner, &["SELECT products.name FROM products", "SELECT orders.total FROM orders"]);
    let (validator, last) = db.executor(formwork_sql::ExecOptions::default());
    let request = db
        .request("What do the orders total?")
        .sampler(SamplerOptions::greedy())
        .num_predict(300)
        .validation(Validation { validators: vec![validator], retries: 2, repair: false, mode: RetryMode::Feedback });
    let answer = request.run(&mut model, &mut |_| std::ops::ControlFlow::Continue(())).unwrap();
    let tail: String = model.last_sequence().chars().rev().take(300).collect::<String>().chars().rev().collect();
    assert_eq!(answer.attempts.len(), 2, "{:?}\n{tail}", answer.attempts);
    assert!(answer.attempts[0].errors[0].message.contains("no such table"), "{:?}", answer.attempts[0].errors);
    assert!(model.last_sequence().contains("no such table"), "the error reached the model: {}", model.last_sequence());
    assert_eq!(answer.text, "SELECT orders.total FROM orders");
    assert_eq!(answer.valid, Some(true));
    assert_eq!(last.lock().unwrap().as_ref().unwrap().rows.len(), 4);
}

#[test]
fn the_prompts_worked_examples_are_queries_the_constraint_allows_and_the_database_runs() {
    use formwork_engine::Constraint;
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let vocab = vocab();
    let grammars = SqlGrammars::new(db.catalog.clone(), SqlGrammarOptions::default(), &vocab, &Limits::default()).unwrap();
    let examples = formwork_sql::prompt::examples(&db.catalog);
    assert_eq!(examples.len(), 5, "count, list, maximum, join with a filter, count per group: {examples:#?}");
    let mut joined = false;
    for e in &examples {
        // Character by character through the constraint: every prefix allowed, the whole
        // query complete.
        let mut c = grammars.constraint().unwrap();
        for ch in e.sql.chars() {
            let t = vocab.text_token_by_bytes(ch.to_string().as_bytes()).unwrap();
            assert!(c.is_allowed(t), "{ch:?} refused after {:?} in {}", c.text(), e.sql);
            c.commit(t).unwrap();
        }
        assert!(c.is_accepting(), "{} is incomplete", e.sql);
        check_structure(&e.sql, &db.catalog, &["audit_log", "password_hash"]).unwrap_or_else(|err| panic!("{err}: {}", e.sql));
        db.db.execute(&e.sql, 10, Duration::from_secs(5)).unwrap_or_else(|err| panic!("{err}: {}", e.sql));
        joined |= e.sql.contains(" JOIN ");
        if e.sql.contains("FROM customers") || e.sql.contains("JOIN customers") {
            assert!(e.sql.contains("customers.deleted_at IS NULL AND customers.is_test_account = 0"), "the rule is kept: {}", e.sql);
        }
    }
    assert!(joined);
    // The chat: system, then each example as a user turn and the assistant's query, then
    // the question.
    let chat = formwork_sql::prompt::chat(&db.catalog, "How many products are there?");
    assert_eq!(chat.len(), 2 + 2 * examples.len());
    assert_eq!((chat[1].role.as_str(), chat[2].role.as_str(), chat[2].content.as_str()), ("user", "assistant", examples[0].sql.as_str()));
    assert_eq!(chat.last().unwrap().content, "How many products are there?");
}
