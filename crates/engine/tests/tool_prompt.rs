//! Tools on a model whose chat template cannot show them (SmolLM2's real template, on the
//! scripted model): the tool definitions reach the prompt through the system message, in
//! the format of `formwork_engine::tool_prompt`, and a call written after them is read back.

use formwork_engine::reasoning::{reasoning_prompt, Reasoning, ReasoningFormat, ReasoningMarkers, Think};
use formwork_engine::testing::ScriptedModel;
use formwork_engine::{generate, render_prompt, tokenize_prompt, ChatMessage, GenerateOptions, Prompt, SamplerOptions, ToolCall};
use serde_json::json;
use std::ops::ControlFlow;

const SMOLLM2: &str = include_str!("fixtures/smollm2.jinja");

/// Printable ASCII and newline, one token each, with SmolLM2's template and specials.
fn smollm2() -> ScriptedModel {
    let mut tokens: Vec<String> = (0x20u8..0x7f).map(|b| (b as char).to_string()).collect();
    tokens.push("\n".into());
    ScriptedModel::new(&tokens, &["<|im_end|>", "<|im_start|>"]).with_chat_template(SMOLLM2, Some("<|im_start|>"))
}

fn tools() -> serde_json::Value {
    json!([{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])
}

fn chat(tools: Option<serde_json::Value>) -> Prompt {
    Prompt::Chat { messages: vec![ChatMessage::new("user", "Weather in Paris?")], tools }
}

#[test]
fn tool_definitions_reach_a_template_that_ignores_them() {
    let m = smollm2();
    let plain = render_prompt(&m, &chat(None)).unwrap();
    let with = render_prompt(&m, &chat(Some(tools()))).unwrap();
    assert!(!plain.contains("get_weather"), "{plain}");
    assert_eq!(
        with,
        "<|im_start|>system\nYou can call these functions:\n\n### get_weather\nGet the current weather in a city.\n\
         Parameters (JSON Schema): {\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}\n\n\
         Reply with one JSON object and nothing else: either {\"tool_calls\": [{\"name\": \"<function name>\", \
         \"arguments\": {<arguments>}}]} to call one or more functions, or {\"response\": \"<your reply>\"} to answer the \
         user directly.<|im_end|>\n\
         <|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n"
    );
    assert!(tokenize_prompt(&m, &chat(Some(tools()))).unwrap().len() > tokenize_prompt(&m, &chat(None)).unwrap().len());
}

#[test]
fn a_system_message_keeps_its_text_and_earlier_calls_are_shown() {
    let m = smollm2();
    let mut call = ChatMessage::new("assistant", "");
    call.tool_calls = vec![ToolCall::new("get_weather", json!({"city": "Oslo"}))];
    let messages = vec![
        ChatMessage::new("system", "Be terse."),
        ChatMessage::new("user", "Weather in Oslo?"),
        call,
        ChatMessage::new("tool", "{\"temp\": 3}"),
    ];
    let text = render_prompt(&m, &Prompt::Chat { messages, tools: Some(tools()) }).unwrap();
    assert!(text.starts_with("<|im_start|>system\nBe terse.\n\nYou can call these functions:\n\n### get_weather\n"), "{text}");
    assert!(
        text.contains("<|im_start|>assistant\n{\"tool_calls\":[{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\"}}]}<|im_end|>\n"),
        "{text}"
    );
    assert!(text.contains("<|im_start|>tool\n{\"temp\": 3}<|im_end|>\n"), "{text}");
}

#[test]
fn the_reasoning_path_renders_tools_the_same_way() {
    let m = smollm2();
    let format = ReasoningFormat::from_markers(ReasoningMarkers::think_tags());
    let r = Reasoning { format, think: Think::Off, budget: None };
    let (text, _) = reasoning_prompt(&m, &chat(Some(tools())), &r).unwrap();
    assert!(text.contains("### get_weather"), "{text}");
}

#[test]
fn a_call_written_after_the_instruction_is_generated() {
    let mut m = smollm2();
    let call = r#"{"name": "get_weather", "arguments": {"city": "Paris"}}"#;
    m.script_text(call);
    let opts = GenerateOptions { sampler: SamplerOptions::greedy(), ..Default::default() };
    let g = generate(&mut m, &chat(Some(tools())), &opts, None, &mut |_| ControlFlow::Continue(())).unwrap();
    assert_eq!(g.text, call);
    let plain = tokenize_prompt(&m, &chat(None)).unwrap().len();
    assert!(g.prompt_tokens > plain, "{} prompt tokens with tools, {plain} without", g.prompt_tokens);
}
