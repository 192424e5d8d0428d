//! `formwork bench`: benchmarks of the constraint engine.
//!
//! - `bench mask-engine --tokenizer /abs/tokenizer.json --eos ID`: the line protocol of
//!   `shared/MASK_PROTOCOL.md`, through which an outside harness drives formwork on MaskBench
//!   files with token ids it chose (JSON lines on stdin/stdout, logs on stderr, one thread).
//! - `bench masks`: grammars (the built-in JSON grammar, `--grammar FILE.gbnf`) and JSON Schemas
//!   (MaskBench files in `--data`) run through formwork and, in the same process on the same
//!   vocabulary, through the `llguidance` crate (cargo feature `llguidance-peer`, on by
//!   default). Each MaskBench test is walked exactly as the protocol says; the table gives,
//!   per engine, files compiled/refused, pass / validation errors / invalidation errors, TTFM
//!   and TBM percentiles, memory per compiled grammar, and the ratio formwork / llguidance.

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

/// Subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Speak the mask-engine line protocol (shared/MASK_PROTOCOL.md) on stdin/stdout.
    MaskEngine(MaskEngineArgs),
    /// Compare formwork with llguidance on grammars and MaskBench schemas, same run.
    Masks(MasksArgs),
    /// Constrained vs unconstrained generation speed on a real model, alternating, same run.
    E2e(crate::bench_e2e::E2eArgs),
    /// Extraction accuracy with and without the schema in the prompt, on a real model.
    Extract(crate::bench_extract::ExtractArgs),
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
    /// Also list each engine's N slowest schema masks (file, test, step, work, text before).
    #[arg(long, default_value_t = 0)]
    pub slowest: usize,
}

/// Runs a subcommand.
pub fn main(c: Command) -> anyhow::Result<()> {
    match c {
        Command::MaskEngine(a) => mask_engine(a),
        Command::Masks(a) => masks(a),
        Command::E2e(a) => crate::bench_e2e::e2e(a),
        Command::Extract(a) => crate::bench_extract::extract(a),
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
}

impl Formwork {
    /// Builds the vocabulary's shared token index up front (untimed, like llguidance's token
    /// tables), so no file pays for it.
    fn new(vocab: Arc<Vocabulary>) -> Self {
        let index = formwork_grammar::matcher::TokenIndex::for_vocab(&vocab);
        Formwork {
            index,
            limits: Limits::default(),
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
                    ..Default::default()
                };
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

#[cfg(feature = "llguidance-peer")]
mod peer {
    //! llguidance as the peer engine, on a token table built from the same [`Vocabulary`].
    use super::*;
    use llguidance::api::TopLevelGrammar;
    use llguidance::toktrie::{SimpleVob, TokEnv, TokRxInfo, TokTrie, TokenizerEnv};
    use llguidance::ParserFactory;

    struct Env {
        trie: TokTrie,
    }

    impl TokenizerEnv for Env {
        fn tok_trie(&self) -> &TokTrie {
            &self.trie
        }
        fn tokenize_bytes(&self, s: &[u8]) -> Vec<u32> {
            self.trie.greedy_tokenize(s)
        }
        fn tokenize_is_canonical(&self) -> bool {
            false
        }
    }

    pub(super) struct Llg {
        factory: ParserFactory,
    }

    impl Llg {
        /// Special and unused tokens get llguidance's marker byte 0xFF in front, so grammar
        /// text never produces them (the same rule formwork follows).
        pub(super) fn new(vocab: &Vocabulary, eos: TokenId) -> anyhow::Result<Self> {
            let words: Vec<Vec<u8>> = vocab
                .ids()
                .map(|t| {
                    if vocab.is_text(t) {
                        vocab.token_bytes(t).to_vec()
                    } else {
                        let mut w = vec![0xFF];
                        w.extend_from_slice(vocab.token_bytes(t));
                        if w.len() == 1 {
                            w.extend_from_slice(format!("<unused_{}>", t.0).as_bytes());
                        }
                        w
                    }
                })
                .collect();
            let info = TokRxInfo::new(vocab.len() as u32, eos.0);
            let trie = TokTrie::from(&info, &words);
            let env: TokEnv = Arc::new(Env { trie });
            let mut factory =
                ParserFactory::new_simple(&env).map_err(|e| anyhow::anyhow!("llguidance: {e}"))?;
            factory.quiet();
            Ok(Llg { factory })
        }
    }

    struct LlgCompiled<'a> {
        factory: &'a ParserFactory,
        parser: llguidance::TokenParser,
    }

    struct LlgWalk {
        m: llguidance::Matcher,
        mask: Option<SimpleVob>,
    }

    impl Walk for LlgWalk {
        fn compute_mask(&mut self) -> Result<(), String> {
            match self.m.compute_mask_or_eos() {
                Ok(v) => {
                    self.mask = Some(v);
                    Ok(())
                }
                Err(e) => Err(e.to_string()),
            }
        }
        fn allowed(&self, t: u32) -> bool {
            self.mask.as_ref().is_some_and(|m| m.is_allowed(t))
        }
        fn commit(&mut self, t: u32) -> Result<(), String> {
            self.m.consume_token(t).map_err(|e| e.to_string())
        }
    }

    impl Compiled for LlgCompiled<'_> {
        fn walk(&self) -> Result<Box<dyn Walk + '_>, String> {
            let _ = self.factory;
            let m = llguidance::Matcher::new(Ok(self.parser.deep_clone()));
            if let Some(e) = m.get_error() {
                return Err(e);
            }
            Ok(Box::new(LlgWalk { m, mask: None }))
        }
        fn memory(&self) -> Option<usize> {
            None
        }
    }

    impl Engine for Llg {
        fn name(&self) -> &'static str {
            "llguidance"
        }
        fn compile(&self, src: &Source<'_>) -> Result<Box<dyn Compiled + '_>, String> {
            let tg = match src {
                Source::Schema(s) => TopLevelGrammar::from_json_schema((*s).clone()),
                Source::Grammar(g) => TopLevelGrammar::from_lark(super::lark::to_lark(g)),
                Source::AnyJson(_) => TopLevelGrammar::from_json_schema(json!({})),
            };
            let parser = self.factory.create_parser(tg).map_err(|e| e.to_string())?;
            Ok(Box::new(LlgCompiled {
                factory: &self.factory,
                parser,
            }))
        }
    }
}

mod lark {
    //! The grammar IR printed as llguidance's Lark dialect, so both engines run the very
    //! same grammar. Every literal and class becomes an inline regex (`\x{..}` escapes).
    use formwork_grammar::{Expr, Grammar, TokenRef};
    use std::fmt::Write;

    fn esc(out: &mut String, c: char) {
        if c.is_ascii_alphanumeric() || c == '_' {
            out.push(c);
        } else {
            let _ = write!(out, "\\x{{{:x}}}", c as u32);
        }
    }

    fn expr(out: &mut String, e: &Expr) {
        match e {
            Expr::Literal(s) if s.is_empty() => out.push_str("\"\""),
            Expr::Literal(s) => {
                out.push('/');
                s.chars().for_each(|c| esc(out, c));
                out.push('/');
            }
            Expr::Class(ranges) => {
                out.push_str("/[");
                if ranges.is_empty() {
                    out.push_str("^\\x{0}-\\x{10ffff}");
                }
                for &(a, b) in ranges {
                    esc(out, a);
                    if a != b {
                        out.push('-');
                        esc(out, b);
                    }
                }
                out.push_str("]/");
            }
            Expr::Seq(items) if items.is_empty() => out.push_str("\"\""),
            Expr::Seq(items) => {
                out.push('(');
                for (i, x) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(' ');
                    }
                    expr(out, x);
                }
                out.push(')');
            }
            Expr::Alt(items) => {
                let empty = |x: &Expr| {
                    matches!(x, Expr::Seq(v) if v.is_empty())
                        || matches!(x, Expr::Literal(s) if s.is_empty())
                };
                let rest: Vec<&Expr> = items.iter().filter(|x| !empty(x)).collect();
                out.push('(');
                for (i, x) in rest.iter().enumerate() {
                    if i > 0 {
                        out.push_str(" | ");
                    }
                    expr(out, x);
                }
                out.push(')');
                if rest.len() < items.len() {
                    out.push('?');
                }
            }
            Expr::Repeat { expr: x, min, max } => {
                out.push('(');
                expr(out, x);
                out.push(')');
                match (min, max) {
                    (0, None) => out.push('*'),
                    (1, None) => out.push('+'),
                    (0, Some(1)) => out.push('?'),
                    (m, None) => {
                        let _ = write!(out, "{{{m},}}");
                    }
                    (m, Some(n)) => {
                        let _ = write!(out, "{{{m},{n}}}");
                    }
                }
            }
            Expr::Rule(r) => {
                let _ = write!(out, "r{}", r.0);
            }
            Expr::Token(TokenRef::Id(t)) => {
                let _ = write!(out, "<[{}]>", t.0);
            }
            Expr::Token(TokenRef::Name(n)) => out.push_str(n),
        }
    }

    /// The grammar in Lark syntax (`start` is the root).
    pub fn to_lark(g: &Grammar) -> String {
        let mut out = format!("start: r{}\n", g.root().0);
        for (i, r) in g.rules().iter().enumerate() {
            let _ = write!(out, "r{i}: ");
            expr(&mut out, &r.expr);
            out.push('\n');
        }
        out
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
    let engine = Formwork::new(vocab.clone());
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

// ---------------------------------------------------------------------------------------
// masks

fn shared_data() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/data"))
}

/// Real tokenization for MaskBench instances (the harness's: no special tokens).
struct HfTokenizer {
    tok: tokenizers::pipeline::PipelineTokenizer,
    vocab_len: usize,
}

impl HfTokenizer {
    fn load(path: &Path, vocab_len: usize) -> anyhow::Result<Self> {
        // The tokenizers release reads its canonical format; a byte-level vocabulary missing
        // single-byte tokens (SmolLM2 lacks 8) gets placeholder ids past the vocabulary, which
        // `encode` reports if they ever come out.
        let canon = tokenizers::canonicalize_file(path)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let mut v: Value = serde_json::from_str(&canon)?;
        if v.pointer("/model/byte_level").and_then(Value::as_bool) == Some(true) {
            if let Some(map) = v.pointer_mut("/model/vocab").and_then(Value::as_object_mut) {
                let printable = |x: u8| matches!(x, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
                let mut next = vocab_len;
                for b in 0u8..=255 {
                    let c = if printable(b) {
                        b as char
                    } else {
                        char::from_u32(256 + (0..b).filter(|&x| !printable(x)).count() as u32)
                            .unwrap_or('?')
                    };
                    if !map.contains_key(&c.to_string()) {
                        map.insert(c.to_string(), json!(next));
                        next += 1;
                    }
                }
            }
        }
        let tok = tokenizers::from_json(&v.to_string())
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        Ok(HfTokenizer { tok, vocab_len })
    }

    fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
        let opts = tokenizers::pipeline::EncodeOptions {
            add_special_tokens: false,
            ..Default::default()
        };
        let encs = self
            .tok
            .encode(text, &opts)
            .wait()
            .map_err(|e| e.to_string())?;
        let ids: Vec<u32> = encs
            .iter()
            .flat_map(|e| e.ids().iter().map(|t| t.id()))
            .collect();
        if ids.iter().any(|&i| i as usize >= self.vocab_len) {
            return Err("the text has a byte the vocabulary has no token for".into());
        }
        Ok(ids)
    }
}

/// Statistics of one engine over a run.
#[derive(Default)]
struct Tally {
    files: usize,
    compiled: usize,
    refused: usize,
    pass: usize,
    validation_errors: usize,
    invalidation_errors: usize,
    ttfm: Vec<f64>,
    tbm: Vec<f64>,
    memory: Vec<usize>,
    refusals: Vec<(String, String)>,
    /// How many of the slowest masks to keep in `slowest`.
    keep_slowest: usize,
    /// The slowest masks: (µs, file, test, step, work counter).
    slowest: Vec<(f64, String, u32, u32, u64)>,
}

fn pct(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((q * sorted.len() as f64) as usize).min(sorted.len() - 1)]
}

impl Tally {
    fn add(&mut self, name: &str, run: &FileRun, expected: &[bool]) {
        self.files += 1;
        if let Some(e) = &run.compile_error {
            self.refused += 1;
            self.refusals.push((name.to_string(), e.clone()));
            return;
        }
        self.compiled += 1;
        self.ttfm.push(run.ttfm_us);
        self.tbm.extend_from_slice(&run.mask_us);
        if self.keep_slowest > 0 {
            for (&us, &(test, step, work)) in run.mask_us.iter().zip(&run.mask_at) {
                let full = self.slowest.len() >= self.keep_slowest;
                if full && us <= self.slowest[self.slowest.len() - 1].0 {
                    continue;
                }
                if full {
                    self.slowest.pop();
                }
                let at = self.slowest.partition_point(|x| x.0 >= us);
                self.slowest
                    .insert(at, (us, name.to_string(), test, step, work));
            }
        }
        if let Some(m) = run.memory {
            self.memory.push(m);
        }
        let mut ok = true;
        for (o, &valid) in run.tests.iter().zip(expected) {
            if valid && !o.accepted {
                self.validation_errors += 1;
                ok = false;
            }
            if !valid && o.accepted {
                self.invalidation_errors += 1;
                ok = false;
            }
        }
        if ok {
            self.pass += 1;
        }
    }

    fn figures(&mut self) -> Figures {
        self.ttfm.sort_by(f64::total_cmp);
        self.tbm.sort_by(f64::total_cmp);
        Figures {
            ttfm_p50: pct(&self.ttfm, 0.5),
            ttfm_p99: pct(&self.ttfm, 0.99),
            tbm_p50: pct(&self.tbm, 0.5),
            tbm_p90: pct(&self.tbm, 0.9),
            tbm_p99: pct(&self.tbm, 0.99),
            tbm_p999: pct(&self.tbm, 0.999),
            tbm_max: self.tbm.last().copied().unwrap_or(f64::NAN),
            mem: if self.memory.is_empty() {
                f64::NAN
            } else {
                self.memory.iter().sum::<usize>() as f64 / self.memory.len() as f64
            },
        }
    }
}

#[derive(Clone, Copy)]
struct Figures {
    ttfm_p50: f64,
    ttfm_p99: f64,
    tbm_p50: f64,
    tbm_p90: f64,
    tbm_p99: f64,
    tbm_p999: f64,
    tbm_max: f64,
    mem: f64,
}

impl Figures {
    fn cells(&self) -> [f64; 8] {
        [
            self.ttfm_p50,
            self.ttfm_p99,
            self.tbm_p50,
            self.tbm_p90,
            self.tbm_p99,
            self.tbm_p999,
            self.tbm_max,
            self.mem,
        ]
    }
}

fn fmt_us(x: f64) -> String {
    if x.is_nan() {
        "-".into()
    } else if x >= 10_000.0 {
        format!("{:.1}ms", x / 1000.0)
    } else if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

fn fmt_mem(x: f64) -> String {
    if x.is_nan() {
        "n/a".into()
    } else {
        format!("{:.0}KiB", x / 1024.0)
    }
}

fn print_table(title: &str, tallies: &mut [(&'static str, Tally)]) {
    println!("\n## {title}\n");
    println!(
        "| engine | files | compiled | refused | pass | valid. err | invalid. err | TTFM p50 µs | TTFM p99 | TBM p50 µs | p90 | p99 | p99.9 | max | masks | mem/grammar |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut figs = Vec::new();
    for (name, t) in tallies.iter_mut() {
        let f = t.figures();
        let c = f.cells();
        println!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            t.files,
            t.compiled,
            t.refused,
            t.pass,
            t.validation_errors,
            t.invalidation_errors,
            fmt_us(c[0]),
            fmt_us(c[1]),
            fmt_us(c[2]),
            fmt_us(c[3]),
            fmt_us(c[4]),
            fmt_us(c[5]),
            fmt_us(c[6]),
            t.tbm.len(),
            fmt_mem(c[7])
        );
        figs.push(f);
    }
    if figs.len() == 2 {
        let (a, b) = (figs[0].cells(), figs[1].cells());
        let ratio = |x: f64, y: f64| {
            let r = x / y;
            if !(y > 0.0) || r.is_nan() {
                "-".to_string()
            } else if r < 0.1 {
                format!("{r:.3}×")
            } else {
                format!("{r:.2}×")
            }
        };
        let r: Vec<String> = (0..7).map(|i| ratio(a[i], b[i])).collect();
        println!(
            "| ratio {}/{} | | | | | | | {} | {} | {} | {} | {} | {} | {} | | |",
            tallies[0].0, tallies[1].0, r[0], r[1], r[2], r[3], r[4], r[5], r[6]
        );
    }
    for (name, t) in tallies.iter() {
        if !t.refusals.is_empty() {
            println!("\n{name} refused {} file(s), e.g.:", t.refusals.len());
            for (f, e) in t.refusals.iter().take(5) {
                let e: String = e.chars().take(160).collect();
                println!("  {f}: {e}");
            }
        }
    }
}

fn masks(a: MasksArgs) -> anyhow::Result<()> {
    let (tok_path, default_eos) = match a.tokenizer.as_str() {
        "smollm2" => (shared_data().join("tokenizers/smollm2.json"), Some(2)),
        "llama3" | "llama3_1" => (
            shared_data().join("tokenizers/llama3_1.json"),
            Some(128_009),
        ),
        p => (PathBuf::from(p), None),
    };
    let eos = a.eos.or(default_eos);
    let mut vocab = Vocabulary::from_tokenizer_json_file(&tok_path, eos.map(TokenId))
        .with_context(|| format!("loading {}", tok_path.display()))?;
    let Some(eos) = eos.map(TokenId).or_else(|| vocab.eos_token()) else {
        bail!(
            "{} has no end-of-sequence token I recognize; pass --eos ID",
            tok_path.display()
        );
    };
    vocab.set_eos_tokens(vec![eos])?;
    let vocab = Arc::new(vocab);
    eprintln!(
        "vocabulary: {} ({} tokens, EOS {eos})",
        tok_path.display(),
        vocab.len()
    );

    let mut engines: Vec<Box<dyn Engine>> = Vec::new();
    let want = |n: &str| a.engine.as_deref().is_none_or(|e| e == n);
    if want("formwork") {
        engines.push(Box::new(Formwork::new(vocab.clone())));
    }
    #[cfg(feature = "llguidance-peer")]
    if want("llguidance") {
        let t0 = Instant::now();
        engines.push(Box::new(peer::Llg::new(&vocab, eos)?));
        eprintln!(
            "llguidance token tables built in {:.0} ms",
            t0.elapsed().as_secs_f64() * 1e3
        );
    }
    #[cfg(not(feature = "llguidance-peer"))]
    eprintln!(
        "NOTE: built without the `llguidance-peer` feature: formwork only, no comparison (rebuild with default features)"
    );
    if engines.is_empty() {
        bail!("no engine selected (--engine formwork|llguidance)");
    }

    let data = a
        .data
        .clone()
        .unwrap_or_else(|| shared_data().join("maskbench-dev"));
    let mut files: Vec<PathBuf> = std::fs::read_dir(&data)
        .with_context(|| format!("reading {}", data.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    if let Some(n) = a.limit {
        files.truncate(n);
    }
    let hf = HfTokenizer::load(&tok_path, vocab.len())?;
    // Instances are serialized with their keys in document order, and schemas keep the order
    // of `properties`: that needs serde_json's `preserve_order` somewhere in the build
    // (llguidance turns it on).
    let ordered: Value = serde_json::from_str(r#"{"b":0,"a":0}"#)?;
    if ordered
        .as_object()
        .and_then(|o| o.keys().next())
        .map(String::as_str)
        != Some("b")
    {
        eprintln!(
            "WARNING: serde_json was built without `preserve_order`: object keys come out sorted, so \
             instances and schemas lose their key order and results will be wrong"
        );
    }

    // Load and tokenize every instance once.
    struct Case {
        name: String,
        schema: Value,
        tokens: Vec<Vec<u32>>,
        valid: Vec<bool>,
    }
    let mut cases = Vec::new();
    let mut skipped = 0;
    for f in &files {
        let v: Value = match std::fs::read_to_string(f)
            .map_err(|e| e.to_string())
            .and_then(|s| serde_json::from_str(&s).map_err(|e| e.to_string()))
        {
            Ok(v) => v,
            Err(e) => {
                eprintln!("skipping {}: {e}", f.display());
                skipped += 1;
                continue;
            }
        };
        let (Some(schema), Some(tests)) =
            (v.get("schema"), v.get("tests").and_then(Value::as_array))
        else {
            skipped += 1;
            continue;
        };
        let mut c = Case {
            name: f
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned(),
            schema: schema.clone(),
            tokens: Vec::new(),
            valid: Vec::new(),
        };
        let mut ok = true;
        for t in tests {
            let text = serde_json::to_string(t.get("data").unwrap_or(&Value::Null))?;
            match hf.encode(&text) {
                Ok(ids) => c.tokens.push(ids),
                Err(e) => {
                    eprintln!("skipping {}: {e}", c.name);
                    ok = false;
                    break;
                }
            }
            c.valid
                .push(t.get("valid").and_then(Value::as_bool).unwrap_or(true));
        }
        if ok {
            cases.push(c);
        } else {
            skipped += 1;
        }
    }
    eprintln!(
        "{} MaskBench files from {} ({} skipped)",
        cases.len(),
        data.display(),
        skipped
    );

    // Grammars.
    if !a.no_grammars {
        let mut grammars: Vec<(String, Grammar, Vec<Vec<u32>>)> = Vec::new();
        let json_opts = formwork_grammar::json::JsonGrammarOptions {
            root_object_only: false,
            ..Default::default()
        };
        let json_inputs: Vec<Vec<u32>> = cases
            .iter()
            .flat_map(|c| c.tokens.iter().cloned())
            .collect();
        grammars.push((
            "json (built-in)".into(),
            formwork_grammar::json::grammar(&json_opts),
            json_inputs,
        ));
        let inputs: Vec<Vec<u32>> = match &a.input {
            Some(p) => std::fs::read_to_string(p)
                .with_context(|| format!("reading {}", p.display()))?
                .lines()
                .map(|l| hf.encode(l).map_err(|e| anyhow::anyhow!(e)))
                .collect::<anyhow::Result<_>>()?,
            None => Vec::new(),
        };
        for p in &a.grammar {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            let g = formwork_grammar::gbnf::parse(&text, &Limits::default())
                .map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
            grammars.push((p.display().to_string(), g, inputs.clone()));
        }
        for (i, (name, g, inputs)) in grammars.iter().enumerate() {
            // The JSON grammar runs twice: the same grammar on both engines (llguidance gets it
            // printed as Lark), then llguidance with its native JSON support (schema `{}`).
            for native in [false, true] {
                if native && (i > 0 || engines.len() < 2) {
                    continue;
                }
                let src = if native {
                    Source::AnyJson(g)
                } else {
                    Source::Grammar(g)
                };
                let mut tallies: Vec<(&'static str, Tally)> = Vec::new();
                for e in &engines {
                    let run = run_file(e.as_ref(), &src, inputs, eos.0);
                    let mut t = Tally::default();
                    // For grammars every input is expected to be accepted.
                    t.add(name, &run, &vec![true; inputs.len()]);
                    tallies.push((e.name(), t));
                }
                let how = if native {
                    " (llguidance: its native JSON, schema {})"
                } else {
                    ""
                };
                print_table(
                    &format!("grammar {name}{how}: {} inputs walked", inputs.len()),
                    &mut tallies,
                );
            }
        }
    }

    // Schemas.
    if !a.no_schemas {
        let mut tallies: Vec<(&'static str, Tally)> = engines
            .iter()
            .map(|e| {
                (
                    e.name(),
                    Tally {
                        keep_slowest: a.slowest,
                        ..Default::default()
                    },
                )
            })
            .collect();
        let t0 = Instant::now();
        for (i, c) in cases.iter().enumerate() {
            for (e, (_, t)) in engines.iter().zip(tallies.iter_mut()) {
                let run = run_file(e.as_ref(), &Source::Schema(&c.schema), &c.tokens, eos.0);
                t.add(&c.name, &run, &c.valid);
            }
            if (i + 1) % 100 == 0 {
                eprintln!(
                    "{} / {} files ({:.0} s)",
                    i + 1,
                    cases.len(),
                    t0.elapsed().as_secs_f64()
                );
            }
        }
        print_table(
            &format!(
                "MaskBench schemas: {} files from {}, tokenizer {}",
                cases.len(),
                data.display(),
                a.tokenizer
            ),
            &mut tallies,
        );
        for (name, t) in &tallies {
            if t.slowest.is_empty() {
                continue;
            }
            println!(
                "\n{name}: the {} slowest masks (µs, file, test:step, work, text before the mask)",
                t.slowest.len()
            );
            for (us, file, test, step, work) in &t.slowest {
                let c = cases.iter().find(|c| &c.name == file);
                let before = c.map(|c| {
                    let toks = &c.tokens[*test as usize][..*step as usize];
                    let bytes: Vec<u8> = toks
                        .iter()
                        .flat_map(|&t| vocab.token_bytes(TokenId(t)).to_vec())
                        .collect();
                    let text = String::from_utf8_lossy(&bytes).into_owned();
                    let tail: String = text
                        .chars()
                        .rev()
                        .take(70)
                        .collect::<Vec<_>>()
                        .into_iter()
                        .rev()
                        .collect();
                    tail
                });
                println!(
                    "  {} {file} {test}:{step} {work} {:?}",
                    fmt_us(*us),
                    before.unwrap_or_default()
                );
            }
        }
    }
    #[cfg(not(feature = "llguidance-peer"))]
    println!("\n(built without the llguidance-peer feature: no llguidance figures)");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scripted engine: accepts exactly the token sequence `0 1 2`, then EOS (9).
    struct Script;
    struct ScriptWalk {
        pos: usize,
        mask: Vec<u32>,
    }
    impl Walk for ScriptWalk {
        fn compute_mask(&mut self) -> Result<(), String> {
            self.mask = if self.pos < 3 {
                vec![self.pos as u32]
            } else {
                vec![9]
            };
            Ok(())
        }
        fn allowed(&self, t: u32) -> bool {
            self.mask.contains(&t)
        }
        fn commit(&mut self, t: u32) -> Result<(), String> {
            if t == 1 && self.pos == 1 {
                self.pos += 1;
                return Ok(());
            }
            if t as usize == self.pos {
                self.pos += 1;
                Ok(())
            } else {
                Err("no".into())
            }
        }
    }
    impl Compiled for Script {
        fn walk(&self) -> Result<Box<dyn Walk + '_>, String> {
            Ok(Box::new(ScriptWalk {
                pos: 0,
                mask: vec![],
            }))
        }
        fn memory(&self) -> Option<usize> {
            Some(1)
        }
    }
    impl Engine for Script {
        fn name(&self) -> &'static str {
            "script"
        }
        fn compile(&self, src: &Source<'_>) -> Result<Box<dyn Compiled + '_>, String> {
            match src {
                Source::Schema(v) if v.get("refuse").is_some() => {
                    Err("refused: keyword `refuse`".into())
                }
                _ => Ok(Box::new(Script)),
            }
        }
    }

    #[test]
    fn walk_follows_the_protocol() {
        let schema = json!({});
        let tests = vec![vec![0, 1, 2], vec![0, 2], vec![0, 1], vec![]];
        let run = run_file(&Script, &Source::Schema(&schema), &tests, 9);
        assert!(run.compile_error.is_none());
        let got: Vec<(bool, usize, Option<&str>)> = run
            .tests
            .iter()
            .map(|t| (t.accepted, t.steps, t.reject))
            .collect();
        assert_eq!(
            got,
            vec![
                (true, 3, None),
                (false, 1, Some("mask")),
                (false, 2, Some("eos")),
                (false, 0, Some("eos"))
            ]
        );
        // Masks: test 0 has 4 (the first inside TTFM, so 3 samples); test 1: 2; test 2: 3; test 3: 1.
        assert_eq!(run.mask_us.len(), 3 + 2 + 3 + 1);
        assert!(run.ttfm_us >= run.compile_us);

        let mut t = Tally::default();
        t.add("x", &run, &[true, false, false, false]);
        assert_eq!(
            (t.pass, t.validation_errors, t.invalidation_errors),
            (1, 0, 0)
        );
        let mut t = Tally::default();
        t.add("x", &run, &[false, true, false, false]);
        assert_eq!(
            (t.pass, t.validation_errors, t.invalidation_errors),
            (0, 1, 1)
        );

        let refused = run_file(&Script, &Source::Schema(&json!({"refuse": 1})), &tests, 9);
        assert!(refused.compile_error.unwrap().contains("refuse"));
    }

    #[test]
    fn lark_printing_of_the_json_grammar() {
        let g = formwork_grammar::json::grammar(&Default::default());
        let l = lark::to_lark(&g);
        assert!(l.starts_with("start: r"));
        assert_eq!(l.lines().count(), g.rules().len() + 1);
        assert!(!l.contains("\"\"\""));
    }

    #[test]
    fn percentiles() {
        let v: Vec<f64> = (1..=100).map(|x| x as f64).collect();
        assert_eq!(pct(&v, 0.5), 51.0);
        assert_eq!(pct(&v, 0.99), 100.0);
        assert!(pct(&[], 0.5).is_nan());
    }

    #[test]
    fn mask_engine_answers_a_request_with_the_real_engine() {
        // A byte-level vocabulary: token b is byte b, EOS is 256.
        let bytes: Vec<Vec<u8>> = (0u8..=255).map(|b| vec![b]).collect();
        let vocab = Arc::new(Vocabulary::from_strings(&bytes, &["</s>"]));
        let engine = Formwork::new(vocab);
        let dir = std::env::temp_dir().join(format!("formwork-bench-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("case.json");
        let schema =
            json!({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]});
        std::fs::write(&path, json!({"schema": schema, "tests": []}).to_string()).unwrap();
        let toks = |s: &str| s.bytes().map(|b| b as u32).collect::<Vec<_>>();
        let req = json!({"path": path, "tokens": [toks("{\"a\":12}"), toks("{\"a\":\"x\"}"), toks("{\"a\":1")]});
        let mut progress = Vec::new();
        let v = answer(&engine, &req.to_string(), 256, &mut progress).unwrap();
        let progress: Value = serde_json::from_slice(&progress).unwrap();
        assert_eq!(progress["kind"], "compiled");
        assert_eq!(v["kind"], "result");
        assert_eq!(v["tests"][0], json!({"accepted": true, "steps": 8}));
        assert_eq!(v["tests"][1]["accepted"], false);
        assert_eq!(v["tests"][1]["reject"], "mask");
        assert_eq!(
            v["tests"][1]["steps"], 5,
            "the quote after the colon is refused"
        );
        assert_eq!(v["tests"][2]["reject"], "eos");
        // 8 + 1 masks for test 0 minus the first (inside TTFM), 6 for test 1, 6 + 1 for test 2.
        assert_eq!(v["mask_us"].as_array().unwrap().len(), 8 + 6 + 7);
        assert!(v["ttfm_us"].as_f64().unwrap() >= v["compile_us"].as_f64().unwrap());

        let bad = answer(
            &engine,
            "{\"path\": \"/nonexistent/x.json\", \"tokens\": []}",
            256,
            &mut Vec::new(),
        );
        assert!(format!("{:#}", bad.unwrap_err()).contains("/nonexistent/x.json"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
