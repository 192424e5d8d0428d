//! `formwork`: constrained generation from the command line.
//!
//! Each subcommand lives in its own module with an `Args` struct (raw flags, clap) and a
//! `main(args)` that resolves them into settings and runs.
//!
//! | command | module | what it does |
//! |---|---|---|
//! | `run` | `run` | generate with a model, optionally constrained by `--format` / `--grammar` |
//! | `pull` | `pull` | fetch a named model into the cache |
//! | `list`, `show`, `rm`, `cp`, `create` | `models_cmd` | the models on this machine (formwork's cache and aliases, Ollama's store, the Hugging Face cache); aliases with a system prompt and parameters |
//! | `ps` | `models_cmd` | the models a running server has loaded (`GET /api/ps`) |
//! | `grammar` | `grammar_cmd` | `check`, `print`, `compile` grammars and schemas |
//! | `bench` | `bench` (`bench::e2e`, `bench::extract`, …) | `masks`, `mask-engine`, `e2e`, `extract`, `serve`, `sql`; only with the `bench` feature (developers' builds) |
//! | `serve` | `serve` | the Ollama- and OpenAI-compatible HTTP server |
//! | `repair` | `repair_cmd` | recover JSON from free text (fences, prose, common faults), optionally validate |
//! | `sql` | `sql_cmd` | a question to a query over a live database (SQLite, PostgreSQL), optionally run |
//! | `embed` | `embed_cmd` | sentence embeddings of texts (arguments or stdin lines), one JSON vector per input |
#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};

#[global_allocator]
static GLOBAL: formwork_alloc::MiMalloc = formwork_alloc::MiMalloc;

#[cfg(feature = "bench")]
mod bench;
mod embed_cmd;
mod grammar_cmd;
mod models_cmd;
mod pull;
mod repair_cmd;
mod run;
mod serve;
mod sql_cmd;

/// formwork: language-model output guaranteed to match a JSON Schema or a grammar.
#[derive(Parser, Debug)]
#[command(name = "formwork", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Generate an answer with a model (optionally constrained).
    Run(run::Args),
    /// Fetch a named model into the model cache.
    Pull(pull::Args),
    /// List the models on this machine: formwork's cache and aliases, Ollama's store, the
    /// Hugging Face cache.
    #[command(alias = "ls")]
    List(models_cmd::ListArgs),
    /// Show a model: where it is, its GGUF header, an alias's system prompt and parameters.
    Show(models_cmd::ShowArgs),
    /// Delete an alias or a model formwork pulled (never another tool's).
    Rm(models_cmd::RmArgs),
    /// Copy a model to a new alias.
    Cp(models_cmd::CpArgs),
    /// Create an alias from a Modelfile (FROM, SYSTEM, TEMPLATE, PARAMETER).
    Create(models_cmd::CreateArgs),
    /// The models a running server has loaded.
    Ps(models_cmd::PsArgs),
    /// Grammar and schema tools: check, print, compile.
    #[command(subcommand)]
    Grammar(grammar_cmd::Command),
    /// Benchmarks of the constraint engine.
    #[cfg(feature = "bench")]
    #[command(subcommand)]
    Bench(bench::Command),
    /// Benchmarks: not in this build (see `BENCH_MISSING`).
    #[cfg(not(feature = "bench"))]
    #[command(hide = true, disable_help_flag = true)]
    Bench {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Serve the Ollama- and OpenAI-compatible HTTP APIs.
    Serve(serve::Args),
    /// Recover JSON from free text on stdin (code fences, prose, trailing commas, quotes...).
    Repair(repair_cmd::Args),
    /// Ask a database a question: a query that names only what exists, optionally run.
    Sql(sql_cmd::Args),
    /// Embed texts (arguments, or lines of stdin): one JSON vector per input.
    Embed(embed_cmd::Args),
}

/// What `formwork bench` says in a build without the benchmarks.
#[cfg(not(feature = "bench"))]
const BENCH_MISSING: &str = "this formwork was built without its benchmarks, which are for developers; \
build them with `cargo build --release -p formwork-cli --features bench` (they compare against \
llguidance and other servers, which the user binary does not carry)";

fn main() {
    formwork_alloc::keep_freed_memory();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("FORMWORK_LOG").unwrap_or_else(|_| "warn,formwork_server=info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(a) => run::main(a),
        Command::Pull(a) => pull::main(a),
        Command::List(a) => models_cmd::list(a),
        Command::Show(a) => models_cmd::show(a),
        Command::Rm(a) => models_cmd::rm(a),
        Command::Cp(a) => models_cmd::cp(a),
        Command::Create(a) => models_cmd::create(a),
        Command::Ps(a) => models_cmd::ps(a),
        Command::Grammar(c) => grammar_cmd::main(c),
        #[cfg(feature = "bench")]
        Command::Bench(c) => bench::main(c),
        #[cfg(not(feature = "bench"))]
        Command::Bench { .. } => Err(anyhow::anyhow!(BENCH_MISSING)),
        Command::Serve(a) => serve::main(a),
        Command::Repair(a) => repair_cmd::main(a),
        Command::Sql(a) => sql_cmd::main(a),
        Command::Embed(a) => embed_cmd::main(a),
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
