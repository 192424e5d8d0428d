//! `formwork run`: generate an answer with a model, streamed to stdout.
//!
//! Two stages: [`Args`] are the raw flags; [`Settings::resolve`] reads the prompt, checks
//! the flags against each other and builds the engine's options; [`main`] resolves and
//! loads the model, compiles the constraint against its vocabulary and runs the loop.
//! Without a prompt, on a terminal, it opens a chat instead (`chat`).

use anyhow::{bail, Context, Result};
use formwork_engine::request::{Event, Format, Request};
use formwork_engine::{ChatMessage, GenerateOptions, Generation, Prompt, SamplerOptions, SchemaPlacement};
use formwork_grammar::Limits;
use std::io::{IsTerminal, Read, Write};
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::{Duration, Instant};

mod chat;
mod defaults;
mod retry;
mod think;

/// Flags of `formwork run`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Model: a known name (`smollm2`, fetched on first use), a model on this machine
    /// (`formwork list`: an alias, an Ollama or Hugging Face cache model) or a path to a GGUF
    /// file. An alias's system prompt and parameters are defaults; flags given win.
    #[arg(long, short, env = "FORMWORK_MODEL", default_value = formwork_models::DEFAULT_MODEL)]
    pub model: String,
    /// System prompt.
    #[arg(long)]
    pub system: Option<String>,
    /// Send PROMPT to the model as is, without the chat template.
    #[arg(long)]
    pub raw: bool,
    /// Sampling temperature (0 = greedy). Default 0.8.
    #[arg(long)]
    pub temperature: Option<f32>,
    /// Keep only the K most likely tokens (0 = no limit). Default 40.
    #[arg(long)]
    pub top_k: Option<usize>,
    /// Nucleus sampling threshold (1 = off). Default 0.9.
    #[arg(long)]
    pub top_p: Option<f32>,
    /// Drop tokens less likely than P × the most likely one (0 = off). Default 0.
    #[arg(long)]
    pub min_p: Option<f32>,
    /// Penalty for recently generated tokens (1 = off). Default 1.1.
    #[arg(long)]
    pub repeat_penalty: Option<f32>,
    /// How many recent tokens the repeat penalty looks at (0 = off). Default 64.
    #[arg(long)]
    pub repeat_last_n: Option<usize>,
    /// Random seed (a random one by default; `--verbose` prints it).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Most tokens to generate (default: until the model stops or the context is full).
    #[arg(long, short = 'n')]
    pub num_predict: Option<usize>,
    /// Stop when this text appears (not printed); repeatable.
    #[arg(long)]
    pub stop: Vec<String>,
    /// Evaluation threads (default: up to the physical cores, at most 8, fewer while other
    /// processes keep cores busy; a number given here is used as is).
    #[arg(long, short = 't')]
    pub threads: Option<usize>,
    /// Context length in tokens (default: the model's, at most 8192).
    #[arg(long, short = 'c')]
    pub ctx_size: Option<usize>,
    /// Constrain the answer: `json` (any JSON object) or a JSON Schema file.
    #[arg(long, conflicts_with = "grammar")]
    pub format: Option<String>,
    /// Constrain the answer with a GBNF grammar file (llama.cpp syntax).
    #[arg(long)]
    pub grammar: Option<PathBuf>,
    /// With `--format`: put the schema (and a short instruction) in the prompt, at the end
    /// of the `user` message (default) or in the `system` message; `off` shows the model only
    /// your prompt (the grammar constrains the answer either way).
    #[arg(long, value_name = "WHERE", default_value = "user", value_parser = ["user", "system", "off"])]
    pub schema_in_prompt: String,
    /// With a `--format` schema: the root object must start with this key (e.g. a
    /// `reasoning` field before the answer). Schemas can also say it themselves with
    /// `"x-formwork-first": KEY` or `"propertyOrdering": [KEYS]`.
    #[arg(long, value_name = "KEY")]
    pub first_key: Option<String>,
    /// With `--format`: how the JSON answer is laid out: `pretty` (two-space indentation,
    /// every whitespace token forced; the default, measured best on `bench extract`),
    /// `flexible` (whitespace as the model likes, in bounded runs) or `compact` (none).
    #[arg(long, value_name = "STYLE", default_value = "pretty", value_parser = ["flexible", "compact", "pretty"])]
    pub whitespace: String,
    /// Validation and retry: --retries, --rules, --check, --repair.
    #[command(flatten)]
    pub retry: retry::RetryArgs,
    /// Reasoning models: --think, --no-think, --think-budget, --think-markers.
    #[command(flatten)]
    pub think: think::ThinkArgs,
    /// Print timings, token counts and rates, and the stop reason to stderr.
    #[arg(long, short)]
    pub verbose: bool,
    /// The prompt; `-` reads it from stdin, as does no prompt when stdin is not a terminal.
    /// With no prompt on a terminal: a chat (type `/?` in it for its commands).
    pub prompt: Option<String>,
}

/// Where the constraint comes from.
#[derive(Debug)]
enum ConstraintSource {
    /// `--format json`.
    Json,
    /// `--format FILE`: a JSON Schema.
    Schema(PathBuf),
    /// `--grammar FILE`.
    Gbnf(PathBuf),
}

/// Resolved settings of one run.
#[derive(Debug)]
struct Settings {
    model: String,
    /// The model's file when it was found while resolving (with its defaults).
    model_path: Option<PathBuf>,
    prompt: Prompt,
    options: GenerateOptions,
    threads: Option<usize>,
    ctx_size: Option<usize>,
    constraint: Option<ConstraintSource>,
    /// Validation and retry (`None`: the answer is streamed, not checked).
    retry: Option<retry::Plan>,
    /// Where the schema instruction goes (`None`: not in the prompt).
    schema_in_prompt: Option<SchemaPlacement>,
    first_key: Option<String>,
    whitespace: formwork_engine::request::Whitespace,
    /// Reasoning flags (resolved against the model once it is loaded).
    think: think::ThinkArgs,
    verbose: bool,
    /// An interactive chat: `prompt` holds only the `--system` message.
    chat: bool,
}

impl Settings {
    fn resolve(mut args: Args) -> Result<Settings> {
        let found = defaults::find(&args.model)?;
        if let Some(m) = &found {
            defaults::apply(&mut args, &m.defaults);
        }
        let chat = args.prompt.is_none() && std::io::stdin().is_terminal();
        let text = match args.prompt.take() {
            _ if chat => String::new(),
            Some(p) if p != "-" => p,
            _ => {
                let mut s = String::new();
                std::io::stdin().read_to_string(&mut s).context("reading the prompt from stdin")?;
                s
            }
        };
        if !chat && text.trim().is_empty() {
            bail!("the prompt is empty; give it as an argument, or `-` (or nothing) to read it from stdin");
        }
        if chat && args.raw {
            bail!("--raw needs a prompt (the chat uses the chat template)");
        }
        let prompt = if args.raw {
            if args.system.is_some() {
                bail!("--system has no effect with --raw (the prompt is sent as is); drop one of them");
            }
            Prompt::Raw(text)
        } else {
            let mut messages = Vec::new();
            if let Some(s) = args.system {
                messages.push(ChatMessage::new("system", s));
            }
            if !chat {
                messages.push(ChatMessage::new("user", text));
            }
            Prompt::Chat { messages, tools: None }
        };
        let d = SamplerOptions::default();
        let sampler = SamplerOptions {
            temperature: args.temperature.unwrap_or(d.temperature),
            top_k: args.top_k.unwrap_or(d.top_k),
            top_p: args.top_p.unwrap_or(d.top_p),
            min_p: args.min_p.unwrap_or(d.min_p),
            repeat_penalty: args.repeat_penalty.unwrap_or(d.repeat_penalty),
            repeat_last_n: args.repeat_last_n.unwrap_or(d.repeat_last_n),
            seed: args.seed,
            ..d
        };
        sampler.validate().map_err(|e| anyhow::anyhow!("{e}"))?;
        if args.threads == Some(0) {
            bail!("--threads must be at least 1");
        }
        if args.ctx_size == Some(0) {
            bail!("--ctx-size must be at least 1");
        }
        let constraint = match (args.format, args.grammar) {
            (Some(f), _) if f == "json" => Some(ConstraintSource::Json),
            (Some(f), _) => {
                let p = PathBuf::from(&f);
                if !p.is_file() {
                    bail!("--format takes `json` or a JSON Schema file; `{f}` is neither (no such file)");
                }
                Some(ConstraintSource::Schema(p))
            }
            (None, Some(g)) => Some(ConstraintSource::Gbnf(g)),
            (None, None) => None,
        };
        if args.first_key.is_some() && !matches!(constraint, Some(ConstraintSource::Schema(_))) {
            bail!("--first-key needs a JSON Schema: give one with --format schema.json");
        }
        let schema_in_prompt = match args.schema_in_prompt.as_str() {
            "off" => None,
            w => Some(w.parse::<SchemaPlacement>().map_err(anyhow::Error::msg)?),
        };
        let retry = args.retry.resolve(matches!(constraint, Some(ConstraintSource::Json | ConstraintSource::Schema(_))))?;
        Ok(Settings {
            model: args.model,
            model_path: found.map(|m| m.path),
            prompt,
            options: GenerateOptions {
                sampler,
                num_predict: args.num_predict,
                stop: args.stop,
                num_ctx: args.ctx_size,
                force_tokens: true,
                logprobs: None,
            },
            threads: args.threads,
            ctx_size: args.ctx_size,
            constraint,
            retry,
            schema_in_prompt,
            first_key: args.first_key,
            whitespace: formwork_engine::request::Whitespace::from_name(&args.whitespace).unwrap_or_default(),
            think: args.think,
            verbose: args.verbose,
            chat,
        })
    }
}

/// The answer's format from the flags: the schema or grammar file read (not yet compiled).
fn read_format(src: Option<&ConstraintSource>, first_key: Option<&str>) -> Result<Format> {
    Ok(match src {
        None => Format::Text,
        Some(ConstraintSource::Json) => Format::Json,
        Some(ConstraintSource::Gbnf(path)) => {
            Format::Gbnf(std::fs::read_to_string(path).with_context(|| format!("reading the grammar {}", path.display()))?)
        }
        Some(ConstraintSource::Schema(path)) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("reading the schema {}", path.display()))?;
            let schema: serde_json::Value =
                serde_json::from_str(&text).with_context(|| format!("{} is not valid JSON", path.display()))?;
            Format::JsonSchema { schema, strict: false, first_key: first_key.map(str::to_string) }
        }
    })
}

/// Runs `formwork run`: one [`Request`] (format, reasoning, validation composed), on the
/// loaded model.
pub fn main(args: Args) -> Result<()> {
    let s = Settings::resolve(args)?;
    let format = read_format(s.constraint.as_ref(), s.first_key.as_deref())?;
    let mut request =
        Request::new(s.prompt.clone()).options(s.options.clone()).format(format).whitespace(s.whitespace).limits(Limits::default());
    if let Some(placement) = s.schema_in_prompt {
        request = request.schema_in_prompt(placement);
    }
    if let Some(plan) = &s.retry {
        request = request.validation(plan.validation());
    }
    // The schema or grammar is checked before the model loads, so that a bad one fails fast.
    let source = match &s.constraint {
        Some(ConstraintSource::Schema(p) | ConstraintSource::Gbnf(p)) => format!("{}: ", p.display()),
        _ => String::new(),
    };
    let request = request.prepare().map_err(|e| anyhow::anyhow!("{source}{e}"))?;

    let path = match &s.model_path {
        Some(p) => p.clone(),
        None => formwork_models::resolve(&s.model)?,
    };
    let t_load = Instant::now();
    let load = formwork_llama::LoadOptions { n_ctx: s.ctx_size, n_threads: s.threads, ..Default::default() };
    let mut model = formwork_llama::LlamaModel::load(&path, load)
        .with_context(|| format!("loading the model {}", path.display()))?;
    let load_duration = t_load.elapsed();
    let reasoning = s.think.reasoning(&model, matches!(s.prompt, Prompt::Raw(_)))?;
    if s.chat {
        return chat::run(s, &path, &mut model, load_duration, reasoning);
    }
    let request = request.reasoning(reasoning);

    if let Some(plan) = &s.retry {
        return retry::run(&s, plan, request, &mut model, load_duration);
    }

    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut write_failed: Option<std::io::Error> = None;
    let mut ends_with_newline = true;
    let mut thinking = think::ThinkingPrinter::new();
    let answer = request
        .run(&mut model, &mut |e| match e {
            Event::Thinking { text, .. } => {
                thinking.piece(text);
                ControlFlow::Continue(())
            }
            Event::Answer { text, .. } => {
                thinking.end();
                ends_with_newline = text.ends_with('\n');
                match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
                    Ok(()) => ControlFlow::Continue(()),
                    Err(e) => {
                        write_failed = Some(e);
                        ControlFlow::Break(())
                    }
                }
            }
            Event::Checked(_) => ControlFlow::Continue(()),
        })
        .map_err(|e| anyhow::anyhow!("{source}{e}"))?;
    thinking.end();
    let mut g = answer.generation;
    g.load_duration = load_duration;
    match write_failed {
        // A closed pipe (`formwork run ... | head`) is a normal way to stop reading.
        Some(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
        Some(e) => return Err(e).context("writing the answer to stdout"),
        None => {}
    }
    if !ends_with_newline {
        let _ = writeln!(out);
    }
    drop(out);
    if s.verbose {
        print_stats(&g, answer.matcher.as_ref());
    }
    Ok(())
}

fn print_stats(g: &Generation, matcher: Option<&formwork_grammar::MatchStats>) {
    let color = std::io::stderr().is_terminal();
    let mut e = std::io::stderr().lock();
    let (dim, reset) = if color { ("\x1b[2m", "\x1b[0m") } else { ("", "") };
    let total = g.total_duration + g.load_duration;
    let lines = [
        ("total duration", fmt_duration(total)),
        ("load duration", fmt_duration(g.load_duration)),
        ("prompt eval count", format!("{} token(s) ({} reused from the cache)", g.prompt_tokens, g.cached_prompt_tokens)),
        ("prompt eval duration", fmt_duration(g.prompt_eval_duration)),
        ("prompt eval rate", format!("{:.2} tokens/s", g.prompt_rate())),
        ("eval count", format!("{} token(s)", g.eval_tokens)),
        ("eval duration", fmt_duration(g.eval_duration)),
        ("eval rate", format!("{:.2} tokens/s", g.eval_rate())),
        ("done reason", describe_reason(g)),
        ("seed", g.seed.to_string()),
    ];
    for (k, v) in lines {
        let _ = writeln!(e, "{dim}{:<21}{reset} {v}", format!("{k}:"));
    }
    if let Some(c) = g.constraint {
        let path = if c.fast_path { "fast path (sample, then check)" } else { "mask first" };
        let _ = writeln!(
            e,
            "{dim}{:<21}{reset} {path}; {} fast accepts, {} masks, {} forced tokens, {} total",
            "constraint:",
            c.fast_accepts,
            c.masks,
            c.forced,
            fmt_duration(c.time)
        );
        if let Some(st) = matcher {
            let _ = writeln!(
                e,
                "{dim}{:<21}{reset} {} masks ({} cached), {} trie nodes walked, {} parser states",
                "matcher:", st.masks, st.mask_cache_hits, st.trie_nodes_walked, st.states
            );
        }
    }
}

fn describe_reason(g: &Generation) -> String {
    format!("{} ({})", g.done_reason, g.stop)
}

fn fmt_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 1.0 {
        format!("{s:.3}s")
    } else if s >= 0.001 {
        format!("{:.3}ms", s * 1e3)
    } else {
        format!("{:.1}µs", s * 1e6)
    }
}
