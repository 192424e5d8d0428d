//! `formwork embed [--model M] [--json] [TEXT]...`: sentence embeddings from the command line.
//!
//! Each TEXT (or, with none, each non-blank line of stdin) is one input. The model evaluates
//! it alone in llama.cpp's embedding mode (a context of its own over the weights: see
//! `formwork_llama`'s `embed` module) and pools its hidden states as its metadata says (mean
//! for a decoder such as SmolLM2); vectors have unit L2 norm, as `/api/embed` and
//! `/v1/embeddings` return them.
//!
//! Output, on stdout:
//! - default: one JSON array of numbers per input, one per line, in input order;
//! - `--json`: one JSON object, `{"model": M, "embeddings": [[...], ...]}` (Ollama's
//!   `/api/embed` shape).
//!
//! An input longer than the model embeds at once (its context, at most 2048 tokens) is an
//! error unless `--truncate` cuts it to fit; an input with no tokens is an error.

use anyhow::{bail, Context, Result};
use formwork_engine::Model;
use std::io::{BufRead, Write};

/// Flags of `formwork embed`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Model: a known name (`smollm2`, fetched on first use) or a path to a GGUF file.
    #[arg(long, short, env = "FORMWORK_MODEL", default_value = formwork_models::DEFAULT_MODEL)]
    pub model: String,
    /// Print one JSON object `{"model", "embeddings"}` instead of one array per line.
    #[arg(long)]
    pub json: bool,
    /// Cut inputs longer than the model embeds at once (default: refuse them).
    #[arg(long)]
    pub truncate: bool,
    /// Evaluation threads (default: physical cores, at most 8).
    #[arg(long, short)]
    pub threads: Option<usize>,
    /// The texts to embed, one input each (default: each non-blank line of stdin).
    #[arg(value_name = "TEXT")]
    pub texts: Vec<String>,
}

/// Resolved settings: the inputs read, the flags checked.
struct Settings {
    model: String,
    json: bool,
    truncate: bool,
    threads: Option<usize>,
    inputs: Vec<String>,
}

impl Settings {
    fn resolve(args: Args) -> Result<Settings> {
        if args.threads == Some(0) {
            bail!("--threads must be at least 1");
        }
        let inputs = if args.texts.is_empty() {
            let mut lines = Vec::new();
            for line in std::io::stdin().lock().lines() {
                let line = line.context("reading stdin")?;
                if !line.trim().is_empty() {
                    lines.push(line);
                }
            }
            lines
        } else {
            args.texts
        };
        if inputs.is_empty() {
            bail!("nothing to embed: give TEXT arguments or lines on stdin");
        }
        Ok(Settings { model: args.model, json: args.json, truncate: args.truncate, threads: args.threads, inputs })
    }
}

/// Runs `formwork embed`.
pub fn main(args: Args) -> Result<()> {
    let s = Settings::resolve(args)?;
    let path = formwork_models::resolve(&s.model)?;
    let load = formwork_llama::LoadOptions { n_threads: s.threads, ..Default::default() };
    let model =
        formwork_llama::LlamaModel::load(&path, load).with_context(|| format!("loading the model {}", path.display()))?;
    let Some(embedder) = model.embedder() else { bail!("the model {} does not compute embeddings", s.model) };
    let max = embedder.max_tokens();
    let mut vectors = Vec::with_capacity(s.inputs.len());
    for (i, text) in s.inputs.iter().enumerate() {
        let mut tokens = embedder.tokenize(text).with_context(|| format!("tokenizing input {}", i + 1))?;
        if tokens.is_empty() {
            bail!("input {} has no tokens", i + 1);
        }
        if tokens.len() > max {
            if !s.truncate {
                bail!("input {} is {} tokens, more than the {max} this model embeds at once; shorten it or pass --truncate", i + 1, tokens.len());
            }
            tokens.truncate(max);
        }
        vectors.push(embedder.embed(&tokens).with_context(|| format!("embedding input {}", i + 1))?);
    }
    let mut out = std::io::stdout().lock();
    if s.json {
        serde_json::to_writer(&mut out, &serde_json::json!({"model": s.model, "embeddings": vectors}))?;
        writeln!(out)?;
    } else {
        for v in &vectors {
            serde_json::to_writer(&mut out, v)?;
            writeln!(out)?;
        }
    }
    out.flush()?;
    Ok(())
}
