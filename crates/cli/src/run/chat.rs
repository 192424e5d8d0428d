//! `formwork run` without a prompt, on a terminal: a multi-turn chat, as `ollama run` has.
//!
//! The model is loaded once (by [`super::main`]); each turn is one [`Request`] on it, whose
//! prompt is the whole conversation so far (system message, then every user and assistant
//! message) rendered by the chat template. The answer streams to stdout (reasoning, dimmed,
//! to stderr) and is kept in the conversation. The flags of `formwork run` (`--format`,
//! `--system`, `--temperature`, ...) are the starting settings; slash commands change them
//! (see [`input::HELP`]).
//!
//! Interrupts: the line editor reads keys in raw mode, so Ctrl-C at the prompt is a key
//! ([`ClearOrLeave`]: it clears a typed line, ends the session on an empty one) and Ctrl-D
//! ends it. While an
//! answer streams the terminal is back in its normal mode and Ctrl-C is a signal: a handler
//! sets [`STOP`], and the next piece of the answer cancels the generation. The answer so far
//! is kept.

use super::think::ThinkingPrinter;
use super::retry::{report_attempt, Plan};
use super::{print_stats, ConstraintSource, Settings};
use anyhow::{Context, Result};
use formwork_engine::reasoning::{Reasoning, ReasoningFormat, Think};
use formwork_engine::request::{Event, Format, Request};
use formwork_engine::{ChatMessage, GenerateOptions, Model, Prompt, SchemaPlacement, StopReason};
use formwork_grammar::Limits;
use input::{Command, Input, MultiLine, Parameter};
use rustyline::error::ReadlineError;
use rustyline::{Cmd, ConditionalEventHandler, EventContext, EventHandler, KeyEvent, Movement, RepeatCount};
use std::io::Write;
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

mod input;

/// Set by Ctrl-C (SIGINT) while an answer streams; the answer's next piece stops it.
static STOP: AtomicBool = AtomicBool::new(false);

/// Runs the chat until `/bye`, Ctrl-D or Ctrl-C at an empty prompt.
pub(super) fn run(
    s: Settings,
    model_path: &Path,
    model: &mut formwork_llama::LlamaModel,
    load_duration: Duration,
    reasoning: Option<Reasoning>,
) -> Result<()> {
    let mut session = Session::new(s, model_path, model, reasoning, load_duration)?;
    if let Err(e) = ctrlc::set_handler(|| STOP.store(true, Ordering::SeqCst)) {
        eprintln!("warning: Ctrl-C cannot stop an answer ({e}); it will end formwork");
    }
    let mut editor = rustyline::DefaultEditor::new().context("opening the line editor")?;
    let _ = editor.bind_sequence(KeyEvent::ctrl('C'), EventHandler::Conditional(Box::new(ClearOrLeave)));
    let history = formwork_models::default_home().ok().map(|h| h.join("history"));
    if let Some(h) = &history {
        let _ = editor.load_history(h);
    }
    eprintln!("Chatting with {}. Type /? for help, /bye or Ctrl-D to leave.", session.model_name);
    let mut multi = MultiLine::new();
    loop {
        let prompt = if multi.is_open() { "... " } else { ">>> " };
        let line = match editor.readline(prompt) {
            Ok(line) => line,
            Err(ReadlineError::Interrupted) => {
                // Ctrl-C on an empty line: drop an open block, else leave.
                if multi.is_open() {
                    multi.cancel();
                    continue;
                }
                break;
            }
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(e).context("reading a line"),
        };
        if !line.trim().is_empty() {
            let _ = editor.add_history_entry(line.as_str());
        }
        let Some(text) = multi.feed(&line) else { continue };
        match input::parse_input(&text) {
            None => {}
            Some(Err(e)) => eprintln!("error: {e}"),
            Some(Ok(Input::Command(Command::Bye))) => break,
            Some(Ok(Input::Command(c))) => {
                if let Err(e) = session.command(c, model) {
                    eprintln!("error: {e:#}");
                }
            }
            Some(Ok(Input::Message(m))) => {
                if let Err(e) = session.turn(model, m) {
                    eprintln!("error: {e:#}");
                }
            }
        }
    }
    if let Some(h) = &history {
        let _ = editor.append_history(h).or_else(|_| editor.save_history(h));
    }
    Ok(())
}

/// Ctrl-C at the prompt: clears the line when something is typed; on an empty line, the
/// default (the editor returns [`ReadlineError::Interrupted`]).
struct ClearOrLeave;

impl ConditionalEventHandler for ClearOrLeave {
    fn handle(&self, _: &rustyline::Event, _: RepeatCount, _: bool, ctx: &EventContext) -> Option<Cmd> {
        (!ctx.line().is_empty()).then_some(Cmd::Kill(Movement::WholeBuffer))
    }
}

/// The answer's format and how `/show` names it.
#[derive(Clone, Debug)]
struct FormatSetting {
    format: Format,
    label: String,
}

impl FormatSetting {
    fn text() -> Self {
        FormatSetting { format: Format::Text, label: "none (free text)".into() }
    }
}

/// A chat's state: its settings and the conversation.
struct Session {
    model_name: String,
    context_length: usize,
    system: Option<String>,
    /// The user and assistant messages so far, in order.
    conversation: Vec<ChatMessage>,
    options: GenerateOptions,
    format: FormatSetting,
    /// Where the schema instruction goes (`None`: not in the prompt).
    schema_in_prompt: Option<SchemaPlacement>,
    /// How JSON answers are laid out (`--whitespace`).
    whitespace: formwork_engine::request::Whitespace,
    /// The model's reasoning section (`None`: it has none; `/set think` is refused).
    reasoning_format: Option<ReasoningFormat>,
    reasoning: Option<Reasoning>,
    think_budget: Option<usize>,
    verbose: bool,
    /// How long the model took to load, reported (with `--verbose`) after the first answer.
    load_duration: Option<Duration>,
    /// Validation and retry of every answer (`--retries`, `--rules`, `--check`, `--repair`):
    /// the answer is then printed once it is final, with each attempt's verdict on stderr.
    validation: Option<Plan>,
}

impl Session {
    fn new(
        s: Settings,
        model_path: &Path,
        model: &dyn Model,
        reasoning: Option<Reasoning>,
        load_duration: Duration,
    ) -> Result<Self> {
        let system = match &s.prompt {
            Prompt::Chat { messages, .. } => messages.iter().find(|m| m.role == "system").map(|m| m.content.clone()),
            Prompt::Raw(_) => None,
        };
        let format = match &s.constraint {
            None => FormatSetting::text(),
            Some(c) => {
                let format = super::read_format(Some(c), s.first_key.as_deref())?;
                let label = match c {
                    ConstraintSource::Json => "json".to_string(),
                    ConstraintSource::Schema(p) => format!("JSON Schema {}", p.display()),
                    ConstraintSource::Gbnf(p) => format!("GBNF grammar {}", p.display()),
                };
                FormatSetting { format, label }
            }
        };
        // A name as given (`smollm2`); a path by its file name.
        let model_name = if Path::new(&s.model).is_file() {
            model_path.file_stem().map_or_else(|| s.model.clone(), |n| n.to_string_lossy().into_owned())
        } else {
            s.model.clone()
        };
        Ok(Session {
            model_name,
            context_length: model.info().context_length,
            system,
            conversation: Vec::new(),
            options: s.options,
            format,
            schema_in_prompt: s.schema_in_prompt,
            whitespace: s.whitespace,
            reasoning_format: ReasoningFormat::for_model(model, s.think.think_markers.clone()),
            reasoning,
            think_budget: s.think.think_budget,
            verbose: s.verbose,
            load_duration: Some(load_duration),
            validation: s.retry,
        })
    }

    /// One turn: the conversation plus `text` to the model, the answer streamed and kept.
    /// On an error the conversation is as it was.
    fn turn(&mut self, model: &mut formwork_llama::LlamaModel, text: String) -> Result<()> {
        let mut messages = Vec::with_capacity(self.conversation.len() + 2);
        if let Some(s) = &self.system {
            messages.push(ChatMessage::new("system", s.clone()));
        }
        messages.extend(self.conversation.iter().cloned());
        messages.push(ChatMessage::new("user", text.clone()));
        let mut request = Request::new(Prompt::Chat { messages, tools: None })
            .options(self.options.clone())
            .format(self.format.format.clone())
            .whitespace(self.whitespace)
            .limits(Limits::default())
            .reasoning(self.reasoning.clone());
        if let Some(placement) = self.schema_in_prompt {
            request = request.schema_in_prompt(placement);
        }
        // With validation an attempt may be replaced by the next, so nothing is streamed:
        // each attempt's verdict goes to stderr and the final answer to stdout.
        let validating = self.validation.as_ref().map(Plan::attempts);
        if let Some(plan) = &self.validation {
            request = request.validation(plan.validation());
        }
        let verbose = self.verbose;

        let mut out = std::io::stdout().lock();
        let mut thinking = ThinkingPrinter::new();
        let mut ends_with_newline = true;
        STOP.store(false, Ordering::SeqCst);
        let result = request.run(model, &mut |e| {
            if STOP.swap(false, Ordering::SeqCst) {
                return ControlFlow::Break(());
            }
            match e {
                Event::Thinking { text, .. } => thinking.piece(text),
                Event::Answer { .. } if validating.is_some() => thinking.end(),
                Event::Answer { text, .. } => {
                    thinking.end();
                    ends_with_newline = text.ends_with('\n');
                    if out.write_all(text.as_bytes()).and_then(|_| out.flush()).is_err() {
                        return ControlFlow::Break(());
                    }
                }
                Event::Checked(a) => {
                    thinking.end();
                    report_attempt(a, validating.unwrap_or(1), verbose);
                }
            }
            ControlFlow::Continue(())
        });
        thinking.end();
        if validating.is_none() {
            if !ends_with_newline {
                let _ = writeln!(out);
            }
            let _ = writeln!(out);
        }
        drop(out);
        let mut answer = match result {
            Ok(a) => a,
            Err(e) => {
                let hint = if e.to_string().contains("context") { " (/clear forgets the conversation)" } else { "" };
                return Err(anyhow::anyhow!("{e}{hint}"));
            }
        };
        if validating.is_some() {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{}\n", answer.text.trim_end_matches('\n'));
            let _ = out.flush();
            if answer.valid != Some(true) {
                eprintln!("error: the answer failed validation after {} attempt(s) (it is kept in the conversation)", answer.attempts.len());
            }
        }
        let cancelled = answer.generation.done_reason == StopReason::Cancelled;
        if cancelled {
            eprintln!("(stopped)");
        }
        if self.verbose {
            answer.generation.load_duration = self.load_duration.take().unwrap_or_default();
            print_stats(&answer.generation, answer.matcher.as_ref());
        }
        if cancelled && answer.text.is_empty() {
            return Ok(()); // stopped before it began: nothing to keep
        }
        self.conversation.push(ChatMessage::new("user", text));
        self.conversation.push(ChatMessage::new("assistant", answer.text));
        Ok(())
    }

    /// Runs a command other than `/bye`; an error leaves the settings as they were.
    fn command(&mut self, c: Command, model: &dyn Model) -> Result<()> {
        match c {
            Command::FormatJson => {
                self.format = FormatSetting { format: Format::Json, label: "json".into() };
                println!("Set format to json.");
            }
            Command::FormatSchema(path) => {
                self.format = schema_format(&path)?;
                println!("Set format to the JSON Schema {}.", path.display());
            }
            Command::NoFormat => {
                self.format = FormatSetting::text();
                println!("Set format to free text.");
            }
            Command::System(text) => {
                println!("{}", if text.is_some() { "Set system message." } else { "Removed the system message." });
                self.system = text;
            }
            Command::Parameter(p) => self.set_parameter(p)?,
            Command::Think(on) => {
                let Some(format) = &self.reasoning_format else {
                    anyhow::bail!(
                        "this model's chat template shows no reasoning section; if it has one, start with \
                         --think-markers OPEN,CLOSE"
                    );
                };
                let think = if on { Think::On { effort: None } } else { Think::Off };
                self.reasoning = Some(Reasoning { format: format.clone(), think, budget: self.think_budget });
                println!("{}", if on { "Set thinking on." } else { "Set thinking off." });
            }
            Command::Show => self.show(model),
            Command::Clear => {
                self.conversation.clear();
                println!("Cleared the conversation.");
            }
            Command::Help => println!("{}", input::HELP),
            Command::Bye => {}
        }
        Ok(())
    }

    fn set_parameter(&mut self, p: Parameter) -> Result<()> {
        let mut o = self.options.clone();
        let s = &mut o.sampler;
        match &p {
            Parameter::Temperature(v) => s.temperature = *v,
            Parameter::TopK(v) => s.top_k = *v,
            Parameter::TopP(v) => s.top_p = *v,
            Parameter::MinP(v) => s.min_p = *v,
            Parameter::RepeatPenalty(v) => s.repeat_penalty = *v,
            Parameter::RepeatLastN(v) => s.repeat_last_n = *v,
            Parameter::Seed(v) => s.seed = Some(*v),
            Parameter::NumPredict(v) => o.num_predict = *v,
            Parameter::NumCtx(v) => o.num_ctx = Some(*v),
            Parameter::Stop(v) => o.stop = v.clone(),
        }
        o.sampler.validate().map_err(|e| anyhow::anyhow!("{e}"))?;
        self.options = o;
        if let Parameter::NumCtx(n) = p {
            if n > self.context_length {
                println!(
                    "Set parameter num_ctx to {n}; the model was loaded with {} tokens, which is the most used \
                     (start with --ctx-size for more).",
                    self.context_length
                );
                return Ok(());
            }
        }
        let (name, value) = parameter_lines(&self.options).into_iter().find(|(n, _)| p.name() == *n).expect("listed");
        println!("Set parameter {name} to {value}.");
        Ok(())
    }

    fn show(&self, model: &dyn Model) {
        let info = model.info();
        println!("Model: {} ({} tokens of context, trained for {})", self.model_name, info.context_length, info.trained_context_length);
        println!("Parameters:");
        for (name, value) in parameter_lines(&self.options) {
            println!("  {name:<16} {value}");
        }
        match &self.system {
            Some(s) => println!("System: {s}"),
            None => println!("System: (none)"),
        }
        println!("Format: {}", self.format.label);
        let thinking = match (&self.reasoning_format, &self.reasoning) {
            (None, _) => "not supported by this model",
            (Some(_), Some(Reasoning { think: Think::On { .. }, .. })) => "on",
            (Some(_), _) => "off",
        };
        println!("Thinking: {thinking}");
        println!("Conversation: {} message(s)", self.conversation.len());
    }
}

impl Parameter {
    /// The name `/set parameter` takes.
    fn name(&self) -> &'static str {
        match self {
            Parameter::Temperature(_) => "temperature",
            Parameter::TopK(_) => "top_k",
            Parameter::TopP(_) => "top_p",
            Parameter::MinP(_) => "min_p",
            Parameter::RepeatPenalty(_) => "repeat_penalty",
            Parameter::RepeatLastN(_) => "repeat_last_n",
            Parameter::Seed(_) => "seed",
            Parameter::NumPredict(_) => "num_predict",
            Parameter::NumCtx(_) => "num_ctx",
            Parameter::Stop(_) => "stop",
        }
    }
}

/// Each parameter's name and value, as `/show` prints them (in [`input::PARAMETER_NAMES`] order).
fn parameter_lines(o: &GenerateOptions) -> Vec<(&'static str, String)> {
    let s = &o.sampler;
    let lines = vec![
        ("temperature", s.temperature.to_string()),
        ("top_k", s.top_k.to_string()),
        ("top_p", s.top_p.to_string()),
        ("min_p", s.min_p.to_string()),
        ("repeat_penalty", s.repeat_penalty.to_string()),
        ("repeat_last_n", s.repeat_last_n.to_string()),
        ("seed", s.seed.map_or_else(|| "random".to_string(), |v| v.to_string())),
        ("num_predict", o.num_predict.map_or_else(|| "no limit".to_string(), |v| v.to_string())),
        ("num_ctx", o.num_ctx.map_or_else(|| "the model's".to_string(), |v| v.to_string())),
        ("stop", if o.stop.is_empty() { "(none)".to_string() } else { format!("{:?}", o.stop) }),
    ];
    debug_assert!(lines.iter().map(|l| l.0).eq(input::PARAMETER_NAMES.iter().copied()));
    lines
}

/// `/set format FILE`: the schema read and checked now, so that a bad one is refused before
/// it is used.
fn schema_format(path: &Path) -> Result<FormatSetting> {
    let format = super::read_format(Some(&ConstraintSource::Schema(path.to_path_buf())), None)?;
    format.grammar(&Limits::default(), Default::default()).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok(FormatSetting { format, label: format!("JSON Schema {}", path.display()) })
}
