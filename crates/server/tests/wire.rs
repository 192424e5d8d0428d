//! Wire types against payloads as the official clients send them.

use formwork_server::wire::{ollama, openai};
use serde_json::json;

#[test]
fn ollama_python_chat_request() {
    // what `ollama.chat(model, messages, format=Model.model_json_schema(), options=...)` sends
    let body = r#"{"model":"smollm2","messages":[{"role":"user","content":"Tell me about Canada."}],
        "tools":[],"stream":false,"format":{"properties":{"name":{"title":"Name","type":"string"},
        "capital":{"title":"Capital","type":"string"}},"required":["name","capital"],"title":"Country","type":"object"},
        "options":{"temperature":0},"keep_alive":null}"#;
    let r: ollama::ChatRequest = serde_json::from_str(body).unwrap();
    assert_eq!(r.stream, Some(false));
    assert!(matches!(r.format, Some(ollama::Format::Schema(ref s)) if s["title"] == "Country"));
    assert_eq!(r.options.unwrap().temperature, Some(0.0));
    let r: ollama::ChatRequest = serde_json::from_str(r#"{"model":"m","messages":[],"format":"json","think":"high"}"#).unwrap();
    assert_eq!(r.format, Some(ollama::Format::Named("json".into())));
}

#[test]
fn ollama_response_serializes_like_ollama() {
    let r = ollama::ChatResponse {
        model: "smollm2".into(),
        created_at: "2023-12-12T14:13:43.416799Z".into(),
        message: ollama::Message { role: "assistant".into(), content: "Hi".into(), ..Default::default() },
        done: true,
        done_reason: Some("stop".into()),
        stats: Some(ollama::Stats { total_duration: 5, load_duration: 1, prompt_eval_count: 2, prompt_eval_duration: 3, eval_count: 4, eval_duration: 5 }),
        logprobs: None,
    };
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(
        v,
        json!({"model":"smollm2","created_at":"2023-12-12T14:13:43.416799Z","message":{"role":"assistant","content":"Hi"},
               "done":true,"done_reason":"stop","total_duration":5,"load_duration":1,"prompt_eval_count":2,
               "prompt_eval_duration":3,"eval_count":4,"eval_duration":5})
    );
    let chunk = ollama::ChatResponse { done: false, done_reason: None, stats: None, ..r };
    let v = serde_json::to_value(&chunk).unwrap();
    assert!(v.get("done_reason").is_none() && v.get("eval_count").is_none());
    // and the client's own parse of it round-trips
    let back: ollama::ChatResponse = serde_json::from_value(v).unwrap();
    assert!(!back.done);
}

#[test]
fn openai_parse_request() {
    // what `client.beta.chat.completions.parse(..., response_format=CalendarEvents)` sends
    let body = r##"{"messages":[{"role":"system","content":"Extract the event."},{"role":"user","content":"Alice and Bob meet Friday."}],
      "model":"smollm2","response_format":{"type":"json_schema","json_schema":{"schema":{"$defs":{"Event":{"properties":{"name":{"title":"Name","type":"string"}},
      "required":["name"],"title":"Event","type":"object","additionalProperties":false}},"properties":{"events":{"items":{"$ref":"#/$defs/Event"},
      "title":"Events","type":"array"}},"required":["events"],"title":"CalendarEvents","type":"object","additionalProperties":false},
      "name":"CalendarEvents","strict":true}},"stream":false}"##;
    let r: openai::ChatCompletionRequest = serde_json::from_str(body).unwrap();
    match r.response_format.unwrap() {
        openai::ResponseFormat::JsonSchema { json_schema } => {
            assert_eq!(json_schema.name.as_deref(), Some("CalendarEvents"));
            assert_eq!(json_schema.strict, Some(true));
            assert!(json_schema.schema.unwrap()["$defs"]["Event"].is_object());
        }
        f => panic!("{f:?}"),
    }
}

#[test]
fn openai_tools_and_choices() {
    let body = r#"{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
       "function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"call_1","content":"42"}],
       "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"},"strict":true}}],
       "tool_choice":{"type":"function","function":{"name":"f"}},"stream":true,"stream_options":{"include_usage":true},"n":1}"#;
    let r: openai::ChatCompletionRequest = serde_json::from_str(body).unwrap();
    assert!(matches!(r.tool_choice, Some(openai::ToolChoice::Named { ref function, .. }) if function.name == "f"));
    assert!(r.stream_options.unwrap().include_usage);
    let r: openai::ChatCompletionRequest = serde_json::from_str(r#"{"model":"m","messages":[],"tool_choice":"required","stop":"x"}"#).unwrap();
    assert_eq!(r.tool_choice, Some(openai::ToolChoice::Mode("required".into())));
}

#[test]
fn openai_chunk_usage_field() {
    let mk = |usage| openai::ChatCompletionChunk {
        id: "c".into(),
        object: "chat.completion.chunk".into(),
        created: 1,
        model: "m".into(),
        system_fingerprint: "fp".into(),
        choices: vec![],
        usage,
    };
    assert!(serde_json::to_value(mk(None)).unwrap().get("usage").is_none());
    assert_eq!(serde_json::to_value(mk(Some(None))).unwrap()["usage"], serde_json::Value::Null);
}
