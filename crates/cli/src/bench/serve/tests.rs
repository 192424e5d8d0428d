//! Tests of the serving benchmark's parsing, figures and report.

use super::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn settings(url: &str) -> Settings {
    let a = ServeArgs {
        url: url.into(),
        clients: vec![1, 2],
        requests: 2,
        max_tokens: 40,
        mode: ModeArg::Both,
        schema: false,
        no_schema: false,
        model: "smollm2".into(),
        temperature: 0.7,
        seed: 1,
        timeout: 10,
        label: None,
        json: false,
    };
    Settings::new(a).unwrap()
}

#[test]
fn percentiles_are_nearest_rank() {
    assert!(percentile(&[], 0.5).is_nan());
    assert_eq!(percentile(&[3.0], 0.5), 3.0);
    assert_eq!(percentile(&[3.0], 0.99), 3.0);
    assert_eq!(percentile(&[1.0, 2.0], 0.5), 1.0);
    assert_eq!(percentile(&[1.0, 2.0], 0.99), 2.0);
    let v: Vec<f64> = (1..=100).map(f64::from).collect();
    assert_eq!(percentile(&v, 0.5), 50.0);
    assert_eq!(percentile(&v, 0.99), 99.0);
    assert_eq!(percentile(&v, 1.0), 100.0);
    let v: Vec<f64> = (1..=48).map(f64::from).collect();
    assert_eq!(percentile(&v, 0.99), 48.0);
}

#[test]
fn endpoints_from_base_urls() {
    let e = |u: &str| endpoint(u).unwrap().to_string();
    assert_eq!(e("http://127.0.0.1:11434"), "http://127.0.0.1:11434/v1/chat/completions");
    assert_eq!(e("http://127.0.0.1:11434/"), "http://127.0.0.1:11434/v1/chat/completions");
    assert_eq!(e("http://h:1/v1/"), "http://h:1/v1/chat/completions");
    assert_eq!(e("http://h:1/v1/chat/completions"), "http://h:1/v1/chat/completions");
    assert!(endpoint("127.0.0.1:11434").is_err());
    assert!(endpoint("http://a b").is_err());
    assert!(endpoint("https://example.com").unwrap_err().to_string().contains("plain HTTP"));
}

#[test]
fn requests_are_the_same_list_for_every_server() {
    let s = settings("http://h:1");
    let a = request_body(&s, Mode::Schema, 5, 40);
    assert_eq!(a, request_body(&s, Mode::Schema, 5, 40));
    assert_eq!(a["seed"], 6);
    assert_eq!(a["stream"], true);
    assert_eq!(a["stream_options"]["include_usage"], true);
    assert_eq!(a["response_format"]["json_schema"]["strict"], true);
    assert_eq!(a["response_format"]["json_schema"]["schema"], person_schema());
    assert!(request_body(&s, Mode::Free, 5, 40).get("response_format").is_none());
    let prompts: std::collections::HashSet<String> = (0..64).map(prompt).collect();
    assert_eq!(prompts.len(), 64);
    assert_eq!(prompt(64), prompt(0));
    formwork_schema::check_schema(&person_schema()).unwrap();
}

#[test]
fn sse_events_are_found_across_chunk_boundaries() {
    let stream = b"data: {\"a\":1}\n\n: a comment\n\nevent: x\ndata: [DO\r\n";
    let mut p = SseParser::default();
    let mut got = Vec::new();
    for b in stream.chunks(3) {
        got.extend(p.push(b));
    }
    got.extend(p.push(b"\r\ndata: one\ndata: two\n\ndata:tail"));
    assert_eq!(got, vec!["{\"a\":1}".to_string(), "[DO".into(), "one\ntwo".into()]);
    assert_eq!(p.finish().as_deref(), Some("tail"));
    assert_eq!(p.finish(), None);
}

#[test]
fn a_stream_gives_content_ttft_finish_and_usage() {
    let events = [
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"{\"name\""},"finish_reason":null}],"usage":null}"#,
        r#"{"choices":[{"index":0,"delta":{"content":":1}"},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":20,"completion_tokens":7,"total_tokens":27}}"#,
        "[DONE]",
    ];
    let mut o = Outcome::default();
    for (k, e) in events.iter().enumerate() {
        o.apply(e, Duration::from_millis(10 * k as u64));
    }
    assert_eq!(o.error, None);
    assert!(o.done);
    assert_eq!(o.content, "{\"name\":1}");
    assert_eq!(o.ttft, Some(Duration::from_millis(10)), "the role chunk with empty content is not the first token");
    assert_eq!(o.finish_reason.as_deref(), Some("length"));
    assert_eq!(o.tokens(), (7, true));

    // Without usage, tokens are counted by content chunks.
    let mut o = Outcome::default();
    for e in &events[..4] {
        o.apply(e, Duration::ZERO);
    }
    assert_eq!(o.tokens(), (2, false));

    // An error event, OpenAI- or llama.cpp-shaped.
    let mut o = Outcome::default();
    o.apply(r#"{"error":{"code":500,"message":"boom","type":"server_error"}}"#, Duration::ZERO);
    assert_eq!(o.error.as_deref(), Some("error event in the stream: boom"));
    let mut o = Outcome::default();
    o.apply("not json", Duration::ZERO);
    assert!(o.error.unwrap().contains("not JSON"));
}

#[test]
fn a_non_streamed_completion_is_taken_whole() {
    let mut o = Outcome::default();
    o.apply_completion(
        r#"{"choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"completion_tokens":2}}"#,
        Duration::from_millis(5),
    );
    assert_eq!((o.content.as_str(), o.finish_reason.as_deref(), o.tokens(), o.done), ("hi", Some("stop"), (2, true), true));
    assert_eq!(body_message(r#"{"error":{"message":"model \"x\" not found"}}"#), "model \"x\" not found");
    assert_eq!(body_message("plain text\n"), "plain text");
}

fn answered(content: &str, finish: &str, tokens: Option<u64>, secs: u64) -> Outcome {
    Outcome {
        ttft: Some(Duration::from_millis(100 * secs)),
        latency: Duration::from_secs(secs),
        content: content.into(),
        chunks: 3,
        finish_reason: Some(finish.into()),
        completion_tokens: tokens,
        done: true,
        ..Default::default()
    }
}

#[test]
fn levels_count_errors_invalid_and_cut_off_answers() {
    let schema = person_schema();
    let good = r#"{"name":"Ada","age":36,"city":"London","email":"ada@example.com"}"#;
    let outcomes = vec![
        answered(good, "stop", Some(20), 1),
        answered(r#"{"name":"Bo","age":"x","city":"Oslo","email":"b@o.no"}"#, "stop", Some(20), 2),
        answered("{\"name\":\"Cy\",\n  \"age\":4", "length", Some(10), 3),
        answered(good, "stop", None, 4),
        Outcome { error: Some("HTTP 503: busy".into()), ..Default::default() },
        Outcome { error: Some("HTTP 503: busy".into()), ..Default::default() },
        Outcome { error: Some("sending the request: connection refused".into()), ..Default::default() },
    ];
    let r = summarize(4, Mode::Schema, &schema, &outcomes, Duration::from_secs(2));
    assert_eq!((r.requests, r.answered, r.errors), (7, 4, 3));
    assert_eq!(r.error_messages, vec!["HTTP 503: busy".to_string(), "sending the request: connection refused".into()]);
    assert_eq!(r.invalid, 2, "a wrong type and a cut-off document");
    assert_eq!(r.invalid_examples.len(), 2);
    assert!(r.invalid_examples[1].starts_with(r#"{"name":"Cy", "age":4 (not JSON"#), "{:?}", r.invalid_examples);
    assert_eq!(r.cut_off, 1);
    assert_eq!((r.completion_tokens, r.counted_by_chunks), (53, 1));
    assert_eq!(r.tok_per_s(), 26.5);
    assert_eq!(r.req_per_s(), 2.0);
    assert_eq!(r.latency, vec![1.0, 2.0, 3.0, 4.0]);
    assert_eq!(percentile(&r.latency, 0.5), 2.0);

    // The same answers without a schema are never invalid; cut-off answers still count.
    let r = summarize(4, Mode::Free, &schema, &outcomes, Duration::from_secs(2));
    assert_eq!((r.invalid, r.cut_off), (0, 1));
    let j = r.to_json();
    assert_eq!(j["invalid"], Value::Null);
    assert_eq!(j["latency_p50_s"], 2.0);

    let s = settings("http://h:1");
    let table = report_table(&s, &[summarize(4, Mode::Schema, &schema, &outcomes, Duration::from_secs(2))]);
    assert!(table.contains("| http://h:1 | 4 | schema | 7 | 3 | 2 / 4 | 1 | 26.5 | 2.00 | 200 ms | 400 ms | 2.00 s | 4.00 s | 13.2 |"), "{table}");
    assert!(table.contains("HTTP 503: busy"), "{table}");
    assert!(table.contains("no usage for 1 of 4"), "{table}");
}

/// Serves one canned HTTP response per connection, `n` connections, on a free port.
async fn canned_server(response: String, n: usize) -> hyper::Uri {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        for _ in 0..n {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut req = Vec::new();
            let mut buf = [0u8; 4096];
            // Read the head and the body (Content-Length) before answering.
            loop {
                let k = sock.read(&mut buf).await.unwrap();
                req.extend_from_slice(&buf[..k]);
                let text = String::from_utf8_lossy(&req).to_string();
                if let Some(head_end) = text.find("\r\n\r\n") {
                    let len: usize =
                        text.lines().find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap())).unwrap_or(0);
                    if req.len() >= head_end + 4 + len {
                        break;
                    }
                }
                if k == 0 {
                    break;
                }
            }
            sock.write_all(response.as_bytes()).await.unwrap();
            sock.shutdown().await.unwrap();
        }
    });
    format!("http://{addr}/v1/chat/completions").parse().unwrap()
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
}

#[test]
fn one_request_reads_a_real_event_stream() {
    block_on(async {
        let response = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n\
            data: {\"choices\":[{\"delta\":{\"content\":\"{}\"},\"finish_reason\":null}]}\n\n\
            data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n\
            data: {\"choices\":[],\"usage\":{\"completion_tokens\":1}}\n\ndata: [DONE]\n\n";
        let url = canned_server(response.to_string(), 1).await;
        let client = http_client();
        let o = one_request(&client, &url, &json!({"stream": true}), Duration::from_secs(10)).await;
        assert_eq!(o.error, None);
        assert_eq!((o.content.as_str(), o.tokens(), o.done), ("{}", (1, true), true));
        assert!(o.ttft.is_some() && o.latency >= o.ttft.unwrap());

        let body = r#"{"error":{"message":"model not found"}}"#;
        let response =
            format!("HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
        let url = canned_server(response.to_string(), 1).await;
        let o = one_request(&client, &url, &json!({}), Duration::from_secs(10)).await;
        assert_eq!(o.error.as_deref(), Some("HTTP 404: model not found"));

        let response = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n\
            data: {\"choices\":[{\"delta\":{\"content\":\"a\"},\"finish_reason\":null}]}\n\n";
        let url = canned_server(response.to_string(), 1).await;
        let o = one_request(&client, &url, &json!({}), Duration::from_secs(10)).await;
        assert!(o.error.unwrap().contains("ended without a finish_reason"));
    });
}

#[test]
fn an_unreachable_server_is_named_with_a_hint() {
    block_on(async {
        // A port that was free a moment ago: nothing listens there now.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let s = settings(&format!("http://127.0.0.1:{port}"));
        let client = http_client();
        let e = warm_up(&client, &s, Mode::Free).await.unwrap_err().to_string();
        assert!(e.contains(&format!("cannot reach a server at http://127.0.0.1:{port}")), "{e}");
        assert!(e.contains("formwork serve") && e.contains("llama-server"), "{e}");
    });
}
