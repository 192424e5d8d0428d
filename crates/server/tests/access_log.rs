//! The access log: one line per request, a `warn` naming the reason for a 4xx.
//!
//! Alone in its test binary: it installs a thread-local subscriber, and tracing caches each
//! log site's interest process-wide, so another test logging at the same sites from another
//! thread at the same time could make this one miss a line.

mod common;
use axum::http::Method;
use common::*;
use serde_json::json;
use std::sync::{Arc, Mutex};

/// Events of the access log target: (level, message).
type Captured = Arc<Mutex<Vec<(tracing::Level, String)>>>;

struct Capture(Captured);

impl tracing::Subscriber for Capture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, e: &tracing::Event<'_>) {
        struct Message(String);
        impl tracing::field::Visit for Message {
            fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
                if f.name() == "message" {
                    self.0 = format!("{v:?}");
                }
            }
        }
        if e.metadata().target() == "formwork_server::access" {
            let mut m = Message(String::new());
            e.record(&mut m);
            self.0.lock().unwrap().push((*e.metadata().level(), m.0));
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[tokio::test]
async fn a_4xx_is_logged_with_its_reason() {
    let captured = Captured::default();
    let _guard = tracing::subscriber::set_default(Capture(captured.clone()));
    let (app, _) = router(|_| text("hi"));
    id_of(&app, Method::GET, "/api/version", "", Some("ok-1")).await;
    let bad = json!({"model": "smollm2", "messages": [{"role": "user", "content": "x"}], "tool_choice": "required"}).to_string();
    id_of(&app, Method::POST, "/v1/chat/completions", &bad, Some("bad-1")).await;
    id_of(&app, Method::POST, "/api/chat", &json!({"model": "llama9", "messages": []}).to_string(), Some("bad-2")).await;
    id_of(&app, Method::DELETE, "/api/chat", "", Some("bad-3")).await;
    let lines = captured.lock().unwrap().clone();
    assert_eq!(lines.len(), 4, "one line per request: {lines:?}");
    let line = |id: &str| lines.iter().find(|(_, m)| m.contains(id)).unwrap_or_else(|| panic!("no line for {id}: {lines:?}")).clone();
    assert_eq!(line("ok-1").0, tracing::Level::INFO);
    let (level, msg) = line("bad-1");
    assert_eq!(level, tracing::Level::WARN);
    assert!(msg.contains("400") && msg.contains("no tools were given"), "{msg}");
    let (level, msg) = line("bad-2");
    assert_eq!(level, tracing::Level::WARN);
    assert!(msg.contains("404") && msg.contains("model 'llama9' not found"), "{msg}");
    // A 4xx that axum makes itself (no route for the method) is named by its status.
    let (level, msg) = line("bad-3");
    assert_eq!(level, tracing::Level::WARN);
    assert!(msg.contains("405") && msg.contains("Method Not Allowed"), "{msg}");
}
