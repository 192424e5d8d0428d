//! `formwork bench e2e`: constrained vs unconstrained generation on a real model, in one run.
//!
//! Loads the model once and alternates the two modes, round after round, on the same prompt
//! with greedy sampling (so the constraint takes the sample-then-check fast path where it
//! can): constrained by the built-in JSON grammar (or `--grammar`, `--schema`), then
//! unconstrained for the same number of tokens. Generation rates are tokens per second of decode time (the prompt is served
//! from the KV cache after the first round); the ratio constrained / unconstrained is the
//! figure the constraint engine answers for (issue 3: ≥ 0.98 on one thread).

use anyhow::{Context, Result};
use formwork_engine::{generate, ChatMessage, Constraint, GenerateOptions, GrammarConstraint, Model, Prompt, SamplerOptions};
use formwork_grammar::{matcher::CompiledGrammar, Limits};
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::Duration;

/// Flags of `bench e2e`.
#[derive(clap::Args, Debug)]
pub struct E2eArgs {
    /// Model name or GGUF path.
    #[arg(long, default_value = "smollm2")]
    pub model: String,
    /// Evaluation threads.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Tokens to generate per run (at most).
    #[arg(long, default_value_t = 128)]
    pub num_predict: usize,
    /// Rounds; each round runs both modes.
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// Constrain with this GBNF grammar instead of the built-in JSON grammar.
    #[arg(long, conflicts_with = "schema")]
    pub grammar: Option<PathBuf>,
    /// Constrain with this JSON Schema instead of the built-in JSON grammar.
    #[arg(long)]
    pub schema: Option<PathBuf>,
    /// Append the text the constraint forces without sampling, in one batch (as `formwork run`
    /// and the server do); off by default, so the ratio measures the mask and check alone.
    #[arg(long)]
    pub force_tokens: bool,
    /// The user message.
    #[arg(long, default_value = "Describe a cat as a JSON object with the keys name, age, colour and favourite foods.")]
    pub prompt: String,
}

#[derive(Default)]
struct Totals {
    tokens: usize,
    eval: Duration,
    constraint: Duration,
    masks: usize,
    fast_accepts: usize,
    forced: usize,
}

impl Totals {
    fn rate(&self) -> f64 {
        self.tokens as f64 / self.eval.as_secs_f64().max(1e-9)
    }
}

/// Runs `formwork bench e2e`.
pub fn e2e(a: E2eArgs) -> Result<()> {
    let limits = Limits::default();
    let grammar = if let Some(p) = &a.grammar {
        let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
        formwork_grammar::gbnf::parse(&text, &limits).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?
    } else if let Some(p) = &a.schema {
        let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
        let schema: serde_json::Value = serde_json::from_str(&text).with_context(|| format!("{} is not JSON", p.display()))?;
        formwork_schema::compile(&schema, &formwork_schema::SchemaOptions::default())?
    } else {
        formwork_grammar::json::grammar(&formwork_grammar::json::JsonGrammarOptions::default())
    };
    let path = formwork_models::resolve(&a.model)?;
    let load = formwork_llama::LoadOptions { n_threads: Some(a.threads), ..Default::default() };
    let mut model = formwork_llama::LlamaModel::load(&path, load).with_context(|| format!("loading {}", path.display()))?;
    let compiled = CompiledGrammar::new(&grammar, model.vocab().clone(), &limits).context("compiling the grammar")?;
    let prompt = Prompt::Chat {
        messages: vec![ChatMessage { role: "user".into(), content: a.prompt.clone(), ..Default::default() }],
        tools: None,
    };
    let opts = GenerateOptions {
        sampler: SamplerOptions { temperature: 0.0, seed: Some(1), ..Default::default() },
        num_predict: Some(a.num_predict),
        force_tokens: a.force_tokens,
        ..Default::default()
    };
    let (mut free, mut constrained) = (Totals::default(), Totals::default());
    let mut sink = |_: &str| ControlFlow::Continue(());
    eprintln!("model {} · {} thread(s) · {} rounds · ≤{} tokens per run", path.display(), a.threads, a.rounds, a.num_predict);
    for round in 0..a.rounds {
        // Constrained first; the unconstrained run then generates the same number of tokens
        // (decode cost grows with the sequence, so equal lengths keep the rates comparable).
        let mut c = GrammarConstraint::new(&compiled);
        let g2 = generate(&mut model, &prompt, &opts, Some(&mut c as &mut dyn Constraint), &mut sink)?;
        constrained.tokens += g2.eval_tokens;
        constrained.eval += g2.eval_duration;
        if let Some(s) = &g2.constraint {
            constrained.constraint += s.time;
            constrained.masks += s.masks;
            constrained.fast_accepts += s.fast_accepts;
            constrained.forced += s.forced;
        }
        let same_length = GenerateOptions { num_predict: Some(g2.eval_tokens.max(1)), force_tokens: false, ..opts.clone() };
        let g = generate(&mut model, &prompt, &same_length, None, &mut sink)?;
        free.tokens += g.eval_tokens;
        free.eval += g.eval_duration;
        eprintln!(
            "round {}: unconstrained {} tokens {:.1} tok/s · constrained {} tokens {:.1} tok/s",
            round + 1,
            g.eval_tokens,
            g.eval_rate(),
            g2.eval_tokens,
            g2.eval_rate()
        );
    }
    let ratio = constrained.rate() / free.rate();
    println!("unconstrained: {} tokens, {:.1} tok/s", free.tokens, free.rate());
    println!("constrained:   {} tokens, {:.1} tok/s", constrained.tokens, constrained.rate());
    println!(
        "constraint:    {:.1} µs per token ({} full masks, {} fast-path accepts, {} forced)",
        constrained.constraint.as_secs_f64() * 1e6 / constrained.tokens.max(1) as f64,
        constrained.masks,
        constrained.fast_accepts,
        constrained.forced
    );
    println!("ratio constrained/unconstrained: {ratio:.3}");
    Ok(())
}
