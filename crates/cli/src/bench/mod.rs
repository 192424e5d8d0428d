//! `formwork bench`: benchmarks of the constraint engine.
//!
//! - `bench mask-engine --tokenizer /abs/tokenizer.json --eos ID`: the line protocol of
//!   `shared/MASK_PROTOCOL.md`, through which an outside harness drives formwork on MaskBench
//!   files with token ids it chose (JSON lines on stdin/stdout, logs on stderr, one thread).
//! - `bench masks`: grammars (the built-in JSON grammar, `--grammar FILE.gbnf`) and JSON Schemas
//!   (MaskBench files in `--data`) run through formwork and, in the same process on the same
//!   vocabulary, through the `llguidance` crate (cargo feature `llguidance-peer`, part of
//!   the `bench` feature that builds this module). Each MaskBench test is walked exactly as the protocol says; the table gives,
//!   per engine, files compiled/refused, pass / validation errors / invalidation errors, TTFM
//!   and TBM percentiles, memory per compiled grammar, and the ratio formwork / llguidance.
//! - `bench serve --url URL`: concurrent clients over the OpenAI API against a running
//!   server (formwork's or another, such as llama.cpp's), with and without a JSON Schema:
//!   aggregate tok/s, requests/s, TTFT and latency percentiles, errors, invalid answers
//!   (`serve.rs`).

use std::io::{BufRead, Write};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context};
use formwork_grammar::matcher::CompiledGrammar;
use formwork_grammar::{Grammar, Limits};
use formwork_vocab::{TokenId, TokenMask, Vocabulary};
use serde_json::{json, Value};

mod e2e;
mod extract;
mod lark;
pub(crate) mod masks;
#[cfg(feature = "llguidance-peer")]
mod peer;
mod report;
mod serve;
mod sql;

use masks::masks;
#[cfg(test)]
use report::{pct, Tally};

/// Subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Speak the mask-engine line protocol (shared/MASK_PROTOCOL.md) on stdin/stdout.
    MaskEngine(MaskEngineArgs),
    /// Compare formwork with llguidance on grammars and MaskBench schemas, same run.
    Masks(MasksArgs),
    /// Constrained vs unconstrained generation speed on a real model, alternating, same run.
    E2e(e2e::E2eArgs),
    /// Extraction accuracy with and without the schema in the prompt, on a real model.
    Extract(extract::ExtractArgs),
    /// Concurrent clients against an OpenAI-compatible server: tok/s, latency, validity.
    Serve(serve::ServeArgs),
    /// Text-to-SQL on sample databases: free, generic-grammar, schema-grammar and full SQL constraint.
    Sql(sql::SqlArgs),
}

/// Flags of `bench mask-engine`.
#[derive(clap::Args, Debug)]
pub struct MaskEngineArgs {
    /// The HuggingFace tokenizer.json of the vocabulary.
    #[arg(long)]
    pub tokenizer: PathBuf,
    /// The end-of-sequence token id that ends an instance.
    #[arg(long)]
    pub eos: u32,
    /// Object key order that schemas accept (see `KeyOrder`).
    #[arg(long, value_enum, default_value_t = KeyOrderArg::Any)]
    pub key_order: KeyOrderArg,
}

/// `--key-order`: `any` (each key once, in any order: what JSON Schema means, and what
/// documents written elsewhere need) or `listed` (`properties` order: the grammar `formwork
/// run` and the server generate with).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyOrderArg {
    /// Any order, each key at most once.
    Any,
    /// `properties` order, listed keys before additional ones.
    Listed,
}

impl From<KeyOrderArg> for formwork_schema::KeyOrder {
    fn from(k: KeyOrderArg) -> Self {
        match k {
            KeyOrderArg::Any => formwork_schema::KeyOrder::Any,
            KeyOrderArg::Listed => formwork_schema::KeyOrder::Listed,
        }
    }
}

/// Flags of `bench masks`.
#[derive(clap::Args, Debug)]
pub struct MasksArgs {
    /// `smollm2`, `llama3`, or the path of a tokenizer.json.
    #[arg(long, default_value = "smollm2")]
    pub tokenizer: String,
    /// The end-of-sequence token (default: the tokenizer's own, found by name).
    #[arg(long)]
    pub eos: Option<u32>,
    /// A folder of MaskBench files (default: the shared maskbench-dev).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// GBNF grammars to run besides the built-in JSON grammar.
    #[arg(long)]
    pub grammar: Vec<PathBuf>,
    /// Texts (one per line) to walk through each `--grammar` file.
    #[arg(long)]
    pub input: Option<PathBuf>,
    /// Only the first N MaskBench files (sorted by name).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Run only this engine (`formwork` or `llguidance`); default both.
    #[arg(long)]
    pub engine: Option<String>,
    /// Skip the grammar part (only schemas).
    #[arg(long)]
    pub no_grammars: bool,
    /// Skip the schema part (only grammars).
    #[arg(long)]
    pub no_schemas: bool,
    /// A grammar corpus folder (`*.json` files of `[{name, grammar, accept, reject}]`, as
    /// crates/grammar/testdata/corpus): every case's inputs through both engines, tallied
    /// together as one table (accept inputs expected accepted, reject inputs rejected).
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    /// Also list each engine's N slowest schema masks (file, test, step, work, text before).
    #[arg(long, default_value_t = 0)]
    pub slowest: usize,
    /// Object key order that formwork's schema grammars accept.
    #[arg(long, value_enum, default_value_t = KeyOrderArg::Any)]
    pub key_order: KeyOrderArg,
    /// Only the files of one half of the data: `A` when the low bit of the first byte of
    /// sha256(file name) is 0, else `B` (the rule of bench/common.py `half_of`). Tune on A,
    /// report on B; look at files one by one (`--slowest`) only on the tuning half.
    #[arg(long, value_enum, ignore_case = true)]
    pub half: Option<HalfArg>,
    /// Compile every schema location up front (`formwork_schema::compile`) instead of
    /// deferring the ones the first masks do not reach (`compile_lazy`, the default, as the
    /// server and the Python package do): for comparing the two.
    #[arg(long)]
    pub eager: bool,
    /// When formwork builds a class index's suffix trie and counts: `background` (the
    /// default, on a thread of their own), `now` (in the mask that first needs them) or
    /// `never` (masks walk pruned): for measuring what the background builds cost.
    #[arg(long, value_enum, default_value_t = ClassBuildsArg::Background)]
    pub class_builds: ClassBuildsArg,
}

/// `--class-builds` (see [`formwork_grammar::matcher::ClassBuilds`]).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClassBuildsArg {
    /// On a thread of their own (the default).
    Background,
    /// In the mask that first needs them.
    Now,
    /// Never: masks walk pruned.
    Never,
}

impl From<ClassBuildsArg> for formwork_grammar::matcher::ClassBuilds {
    fn from(a: ClassBuildsArg) -> Self {
        match a {
            ClassBuildsArg::Background => Self::Background,
            ClassBuildsArg::Now => Self::Now,
            ClassBuildsArg::Never => Self::Never,
        }
    }
}

/// `--half`: one of the two halves of a data folder, split by sha256 of the file name.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum HalfArg {
    /// sha256(name)[0] is even: the half to tune on.
    A,
    /// sha256(name)[0] is odd: the half to report on.
    B,
}

/// Runs a subcommand.
pub fn main(c: Command) -> anyhow::Result<()> {
    match c {
        Command::MaskEngine(a) => mask_engine(a),
        Command::Masks(a) => masks(a),
        Command::E2e(a) => e2e::e2e(a),
        Command::Extract(a) => extract::extract(a),
        Command::Serve(a) => serve::serve(a),
        Command::Sql(a) => sql::sql(a),
    }
}

// ---------------------------------------------------------------------------------------
// Engines: what the walk needs from a constraint engine.

/// One matcher state of some engine, walked token by token.
trait Walk {
    /// Computes the full mask for the current state (the timed part).
    fn compute_mask(&mut self) -> Result<(), String>;
    /// Is `t` in the mask last computed?
    fn allowed(&self, t: u32) -> bool;
    /// Commits `t`.
    fn commit(&mut self, t: u32) -> Result<(), String>;
    /// Work counter of the last mask (formwork: trie nodes walked), for `--slowest`.
    fn work(&self) -> Option<u64> {
        None
    }
}

/// A grammar compiled by some engine, making fresh walks.
trait Compiled {
    fn walk(&self) -> Result<Box<dyn Walk + '_>, String>;
    /// Heap bytes of the compiled grammar, when the engine reports it.
    fn memory(&self) -> Option<usize>;
}

/// What an engine compiles.
enum Source<'a> {
    Schema(&'a Value),
    Grammar(&'a Grammar),
    /// Any JSON value: formwork runs this grammar (its built-in JSON grammar); a peer may use
    /// its own native JSON support instead.
    AnyJson(&'a Grammar),
}

trait Engine {
    fn name(&self) -> &'static str;
    fn compile(&self, src: &Source<'_>) -> Result<Box<dyn Compiled + '_>, String>;
}

struct Formwork {
    /// The vocabulary's token index, held for the whole run (the matcher's registry only
    /// keeps it while some compiled grammar is alive).
    index: Arc<formwork_grammar::matcher::TokenIndex>,
    limits: Limits,
    key_order: formwork_schema::KeyOrder,
    /// Schemas compiled with [`formwork_schema::compile_lazy`] (else all up front).
    lazy: bool,
}

impl Formwork {
    /// Builds the vocabulary's shared token index up front (untimed, like llguidance's token
    /// tables), so no file pays for it.
    fn new(vocab: Arc<Vocabulary>, key_order: formwork_schema::KeyOrder) -> Self {
        let index = formwork_grammar::matcher::TokenIndex::for_vocab(&vocab);
        Formwork {
            index,
            limits: Limits::default(),
            key_order,
            lazy: true,
        }
    }
}

struct FwCompiled(Arc<CompiledGrammar>);

struct FwWalk {
    m: formwork_grammar::Matcher,
    mask: TokenMask,
    /// Trie nodes walked by the last mask.
    walked: u64,
}

impl Walk for FwWalk {
    fn compute_mask(&mut self) -> Result<(), String> {
        let before = self.m.stats().trie_nodes_walked;
        self.m.compute_mask(&mut self.mask);
        self.walked = self.m.stats().trie_nodes_walked - before;
        Ok(())
    }
    fn allowed(&self, t: u32) -> bool {
        self.mask.contains(TokenId(t))
    }
    fn commit(&mut self, t: u32) -> Result<(), String> {
        self.m.commit(TokenId(t)).map_err(|e| e.to_string())
    }
    fn work(&self) -> Option<u64> {
        Some(self.walked)
    }
}

impl Compiled for FwCompiled {
    fn walk(&self) -> Result<Box<dyn Walk + '_>, String> {
        let n = self.0.vocab().len();
        Ok(Box::new(FwWalk {
            m: self.0.matcher(),
            mask: TokenMask::new(n),
            walked: 0,
        }))
    }
    fn memory(&self) -> Option<usize> {
        Some(self.0.memory_usage())
    }
}

impl Engine for Formwork {
    fn name(&self) -> &'static str {
        "formwork"
    }
    fn compile(&self, src: &Source<'_>) -> Result<Box<dyn Compiled + '_>, String> {
        let owned;
        let g = match src {
            Source::Schema(s) => {
                let opts = formwork_schema::SchemaOptions {
                    limits: self.limits.clone(),
                    key_order: self.key_order,
                    ..Default::default()
                };
                if self.lazy {
                    let (g, _) = formwork_schema::compile_lazy(s, &opts).map_err(|e| e.to_string())?;
                    let c = CompiledGrammar::lazy(g, self.index.clone(), &self.limits).map_err(|e| e.to_string())?;
                    return Ok(Box::new(FwCompiled(c)));
                }
                owned = formwork_schema::compile(s, &opts).map_err(|e| e.to_string())?;
                &owned
            }
            Source::Grammar(g) | Source::AnyJson(g) => *g,
        };
        let c = CompiledGrammar::with_index(g, self.index.clone(), &self.limits)
            .map_err(|e| e.to_string())?;
        Ok(Box::new(FwCompiled(c)))
    }
}

// ---------------------------------------------------------------------------------------
// The walk of one file, as MASK_PROTOCOL.md says.

/// How one test ended.
#[derive(Clone, Debug)]
struct TestOutcome {
    accepted: bool,
    steps: usize,
    reject: Option<&'static str>,
    error: Option<String>,
}

impl TestOutcome {
    fn to_json(&self) -> Value {
        let mut v = json!({"accepted": self.accepted, "steps": self.steps});
        if let Some(r) = self.reject {
            v["reject"] = json!(r);
        }
        if let Some(e) = &self.error {
            v["error"] = json!(e);
        }
        v
    }
}

/// The result of one file on one engine.
#[derive(Debug, Default)]
struct FileRun {
    compile_error: Option<String>,
    compile_us: f64,
    ttfm_us: f64,
    mask_us: Vec<f64>,
    /// Parallel to `mask_us`: (test, step, work counter).
    mask_at: Vec<(u32, u32, u64)>,
    tests: Vec<TestOutcome>,
    memory: Option<usize>,
}

fn us(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e6
}

fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".into())
}

/// Walks one test's tokens through a fresh state; `first` is a state whose first mask is
/// already computed (the file's very first mask, inside TTFM). Each timed mask also goes to
/// `at` as (`test`, step, the engine's work counter).
fn walk_test(
    w: &mut dyn Walk,
    (test, tokens): (usize, &[u32]),
    eos: u32,
    mut first_done: bool,
    mask_us: &mut Vec<f64>,
    at: &mut Vec<(u32, u32, u64)>,
) -> TestOutcome {
    let mut steps = 0;
    let reject = |steps, r: &'static str, e: Option<String>| TestOutcome {
        accepted: false,
        steps,
        reject: Some(r),
        error: e,
    };
    let mut timed = |w: &mut dyn Walk, steps: usize| {
        let t0 = Instant::now();
        let r = w.compute_mask();
        mask_us.push(us(t0));
        at.push((test as u32, steps as u32, w.work().unwrap_or(0)));
        r
    };
    for &t in tokens {
        if !first_done {
            if let Err(e) = timed(w, steps) {
                return reject(steps, "exception", Some(e));
            }
        }
        first_done = false;
        if !w.allowed(t) {
            return reject(steps, "mask", None);
        }
        if let Err(e) = w.commit(t) {
            return reject(steps, "consume", Some(e));
        }
        steps += 1;
    }
    if !first_done {
        if let Err(e) = timed(w, steps) {
            return reject(steps, "exception", Some(e));
        }
    }
    if !w.allowed(eos) {
        return reject(steps, "eos", None);
    }
    TestOutcome {
        accepted: true,
        steps,
        reject: None,
        error: None,
    }
}

/// Compiles `src` on `engine` and walks every test, timing as the protocol says.
fn run_file(engine: &dyn Engine, src: &Source<'_>, tests: &[Vec<u32>], eos: u32) -> FileRun {
    let mut run = FileRun::default();
    let t0 = Instant::now();
    let compiled = match std::panic::catch_unwind(AssertUnwindSafe(|| engine.compile(src))) {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            run.compile_error = Some(e);
            return run;
        }
        Err(p) => {
            run.compile_error = Some(format!("the compiler panicked: {}", panic_text(p)));
            return run;
        }
    };
    run.compile_us = us(t0);
    run.memory = compiled.memory();
    for (i, tokens) in tests.iter().enumerate() {
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let mut w = compiled.walk()?;
            let mut first_done = false;
            if i == 0 {
                let r = w.compute_mask();
                run.ttfm_us = us(t0);
                r?;
                first_done = true;
            }
            Ok::<_, String>(walk_test(
                &mut *w,
                (i, tokens),
                eos,
                first_done,
                &mut run.mask_us,
                &mut run.mask_at,
            ))
        }));
        run.tests.push(match outcome {
            Ok(Ok(o)) => o,
            Ok(Err(e)) => TestOutcome {
                accepted: false,
                steps: 0,
                reject: Some("exception"),
                error: Some(e),
            },
            Err(p) => TestOutcome {
                accepted: false,
                steps: 0,
                reject: Some("exception"),
                error: Some(panic_text(p)),
            },
        });
    }
    if tests.is_empty() {
        // Still time the first mask so TTFM exists.
        if let Ok(mut w) = compiled.walk() {
            let _ = w.compute_mask();
            run.ttfm_us = us(t0);
        }
    }
    run
}

// ---------------------------------------------------------------------------------------
// mask-engine

fn mask_engine(a: MaskEngineArgs) -> anyhow::Result<()> {
    let vocab = Vocabulary::from_tokenizer_json_file(&a.tokenizer, Some(TokenId(a.eos)))
        .with_context(|| format!("loading {}", a.tokenizer.display()))?;
    let vocab = Arc::new(vocab);
    tracing::info!(tokens = vocab.len(), "vocabulary loaded");
    let engine = Formwork::new(vocab.clone(), a.key_order.into());
    // Warm-up: compile and walk a small schema so lazy statics and allocators are warm.
    let warm = json!({"type": "object", "properties": {"a": {"type": "string"}}});
    let _ = run_file(&engine, &Source::Schema(&warm), &[], a.eos);

    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let hello = json!({
        "kind": "hello",
        "engine": "formwork",
        "version": env!("CARGO_PKG_VERSION"),
        "options": {"whitespace": "flexible", "vocab_size": vocab.len(), "eos": a.eos, "threads": 1},
    });
    writeln!(out, "{hello}")?;
    out.flush()?;
    for line in std::io::stdin().lock().lines() {
        let line = line.context("reading a request from stdin")?;
        if line.trim().is_empty() {
            continue;
        }
        let reply = match answer(&engine, &line, a.eos, &mut out) {
            Ok(v) => v,
            Err(e) => {
                let path = serde_json::from_str::<Value>(&line)
                    .ok()
                    .and_then(|v| v.get("path").cloned())
                    .unwrap_or(Value::Null);
                json!({"kind": "result", "path": path, "compile_error": format!("bad request: {e:#}")})
            }
        };
        writeln!(out, "{reply}")?;
        out.flush()?;
    }
    Ok(())
}

fn answer(engine: &Formwork, line: &str, eos: u32, out: &mut impl Write) -> anyhow::Result<Value> {
    let req: Value = serde_json::from_str(line).context("the request is not JSON")?;
    let path = req
        .get("path")
        .and_then(Value::as_str)
        .context("the request has no \"path\" string")?;
    let tokens: Vec<Vec<u32>> =
        serde_json::from_value(req.get("tokens").cloned().unwrap_or(Value::Null))
            .context("\"tokens\" must be a list of lists of token ids")?;
    let file: Value = serde_json::from_str(
        &std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?,
    )
    .with_context(|| format!("{path} is not JSON"))?;
    let schema = file
        .get("schema")
        .with_context(|| format!("{path} has no \"schema\""))?;
    let run = run_file(engine, &Source::Schema(schema), &tokens, eos);
    if let Some(e) = run.compile_error {
        return Ok(json!({"kind": "result", "path": path, "compile_error": e}));
    }
    let progress = json!({"kind": "compiled", "path": path, "compile_us": run.compile_us, "ttfm_us": run.ttfm_us});
    writeln!(out, "{progress}")?;
    out.flush()?;
    Ok(json!({
        "kind": "result",
        "path": path,
        "compile_us": run.compile_us,
        "ttfm_us": run.ttfm_us,
        "mask_us": run.mask_us,
        "tests": run.tests.iter().map(TestOutcome::to_json).collect::<Vec<_>>(),
    }))
}

#[cfg(test)]
mod tests;
