//! `POST /api/sql` over a real SQLite file and the engine backend driven by the scripted
//! model: the query is constrained by the database, runs read-only, and a client can name
//! only a configured database.
#![cfg(feature = "engine")]

mod common;
use axum::http::StatusCode;
use common::post;
use formwork_engine::testing::ScriptedModel;
use formwork_server::engine_backend::{EngineBackend, ConstraintCache};
use formwork_server::testing::fake_meta;
use formwork_server::{app, AppState, ModelWorker, ServerConfig};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

fn router(dir: &std::path::Path, script: &str) -> axum::Router {
    let path = dir.join("shop.sqlite");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT);
         CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customers(id), total REAL);
         INSERT INTO customers VALUES (1, 'Ann'), (2, 'Bob');
         INSERT INTO orders VALUES (1, 1, 3.5), (2, 2, 4.0), (3, 2, 1.0);",
    )
    .unwrap();
    let db = formwork_sql::SqlDatabase::open(path.to_str().unwrap(), None, &Default::default(), Default::default()).unwrap();
    let tokens: Vec<String> = (0x20u8..0x7f).map(|b| (b as char).to_string()).chain(["\n".to_string()]).collect();
    let mut m = ScriptedModel::new(&tokens, &["<|im_end|>", "<|im_start|>"]);
    m.script_text(script);
    let backend = EngineBackend::new(Box::new(m), Arc::new(ConstraintCache::new(8)), formwork_grammar::Limits::default());
    let w = ModelWorker::spawn(fake_meta("smollm2"), Box::new(backend), Duration::ZERO).unwrap();
    let cfg = ServerConfig { databases: vec![("shop".into(), Arc::new(db))], ..ServerConfig::default() };
    app(AppState::new(cfg, vec![w]))
}

#[tokio::test]
async fn a_question_becomes_a_query_and_its_rows() {
    let dir = tempfile::tempdir().unwrap();
    let app = router(dir.path(), "SELECT customers.name, SUM(orders.total) FROM orders JOIN customers ON orders.customer_id = customers.id GROUP BY customers.name");
    let (s, v) = post(&app, "/api/sql", json!({"model": "smollm2", "database": "shop", "question": "Who spent what?", "execute": true})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let sql = v["sql"].as_str().unwrap();
    assert_eq!(sql, "SELECT customers.name, SUM(orders.total) FROM orders JOIN customers ON orders.customer_id = customers.id GROUP BY customers.name");
    assert_eq!(v["columns"], json!(["name", "SUM(orders.total)"]));
    assert_eq!(v["rows"], json!([["Ann", 3.5], ["Bob", 5.0]]));
    assert_eq!(v["attempts"], 1);
    assert_eq!(v["error"], json!(null));

    // Without execute: the query only.
    let (s, v) = post(&app, "/api/sql", json!({"model": "smollm2", "database": "shop", "question": "Who spent what?"})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["rows"], json!(null));
    assert!(v["sql"].as_str().unwrap().starts_with("SELECT "));
}

#[tokio::test]
async fn the_model_cannot_name_what_does_not_exist() {
    let dir = tempfile::tempdir().unwrap();
    // The script wants a table that does not exist; the constraint does not let it.
    let app = router(dir.path(), "SELECT users.email FROM users");
    let (s, v) = post(&app, "/api/sql", json!({"model": "smollm2", "database": "shop", "question": "emails?", "execute": true})).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let sql = v["sql"].as_str().unwrap();
    assert!(!sql.contains("users"), "{sql}");
    assert!(v["rows"].is_array(), "the constrained query runs: {v}");
}

#[tokio::test]
async fn only_configured_databases_and_bounded_requests() {
    let dir = tempfile::tempdir().unwrap();
    let app = router(dir.path(), "SELECT customers.name FROM customers");
    for name in ["other", "/etc/passwd", "postgres://evil:5432/x", "shop.sqlite"] {
        let (s, v) = post(&app, "/api/sql", json!({"model": "smollm2", "database": name, "question": "q"})).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
        assert!(v["error"].as_str().unwrap().contains("this server has: shop"), "{v}");
    }
    let (s, v) = post(&app, "/api/sql", json!({"model": "smollm2", "database": "shop", "question": "q", "max_rows": 5000})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    let (s, _) = post(&app, "/api/sql", json!({"model": "smollm2", "database": "shop", "question": "  "})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let (s, _) = post(&app, "/api/sql", json!({"model": "smollm2", "database": "shop", "question": "q", "sql": "DROP TABLE x"})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "unknown fields are refused");
}

#[tokio::test]
async fn openai_response_format_sql() {
    let dir = tempfile::tempdir().unwrap();
    let app = router(dir.path(), "SELECT customers.name FROM customers");
    let req = json!({"model": "smollm2", "messages": [{"role": "user", "content": "Names of customers?"}],
                     "response_format": {"type": "sql", "database": "shop"}, "temperature": 0});
    let (s, v) = post(&app, "/v1/chat/completions", req).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["choices"][0]["message"]["content"], "SELECT customers.name FROM customers");
    let req = json!({"model": "smollm2", "messages": [{"role": "user", "content": "q"}],
                     "response_format": {"type": "sql", "database": "/tmp/x.sqlite"}});
    let (s, v) = post(&app, "/v1/chat/completions", req).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(v["error"]["param"], "response_format", "{v}");
}
