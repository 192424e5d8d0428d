//! `formwork serve`: the Ollama- and OpenAI-compatible HTTP server.
//!
//! Raw flags ([`Args`]) are resolved into a [`formwork_server::ServerConfig`] and a list of
//! models; each model is loaded with llama.cpp with `--parallel` sequences, stepped together
//! by a `formwork_engine::batch::Batcher`, and served by one worker thread per slot (the
//! engine backends share one compiled-grammar cache). The server binds 127.0.0.1 unless
//! `--host` says otherwise, prints where it listens, and stops gracefully on ctrl-c/SIGTERM.

use anyhow::Context;
use formwork_server::engine_backend::{EngineBackend, ConstraintCache};
use formwork_server::{AppState, ModelMeta, ModelWorker, ServerConfig};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Flags of `formwork serve`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Address to bind. The default serves this machine only; pass `--host 0.0.0.0` to
    /// accept connections from the network.
    #[arg(long, default_value = "127.0.0.1", env = "FORMWORK_HOST")]
    pub host: String,
    /// Port to listen on (Ollama's port by default; 0 picks a free one).
    #[arg(long, default_value_t = 11434, env = "FORMWORK_PORT")]
    pub port: u16,
    /// A model to serve: a known name (`smollm2`) or a GGUF path. Repeat to serve several;
    /// clients address them by name (a path's file stem). Default: smollm2.
    #[arg(long = "model", short = 'm')]
    pub models: Vec<String>,
    /// Context length of each slot (default: the model's, capped at 8192, and at
    /// 32768 / --parallel but no lower than 2048, so the KV cache stays modest).
    #[arg(long)]
    pub ctx_size: Option<usize>,
    /// Requests each model generates at once (its slots, decoded together in one batch per
    /// step).
    #[arg(long, default_value_t = DEFAULT_PARALLEL, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub parallel: u32,
    /// Requests that may wait for a slot; past this a request gets 503 with Retry-After.
    #[arg(long, default_value_t = 256)]
    pub max_queue: usize,
    /// Threads per model (default: up to the physical cores, at most 8, fewer while other
    /// processes keep cores busy; a number given here is used as is).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Largest request body in bytes.
    #[arg(long, default_value_t = 2 << 20)]
    pub max_body_bytes: usize,
    /// Largest JSON Schema in bytes.
    #[arg(long, default_value_t = 256 << 10)]
    pub max_schema_bytes: usize,
    /// Most tokens one request may generate.
    #[arg(long, default_value_t = 4096)]
    pub max_num_predict: u32,
    /// Wall-clock limit per request, in seconds (queueing included).
    #[arg(long, default_value_t = 300)]
    pub max_wall_time: u64,
    /// A database `POST /api/sql` may query: `NAME=PATH` (SQLite) or `NAME=postgres://...`;
    /// repeatable. Clients name it by NAME only.
    #[arg(long = "database", value_name = "NAME=PATH|URL")]
    pub databases: Vec<String>,
    /// A rules file for a database: `NAME=RULES.toml` (see `formwork sql --rules`).
    #[arg(long = "database-rules", value_name = "NAME=RULES.toml")]
    pub database_rules: Vec<String>,
    /// Another Ollama registry `/api/pull` may pull from (`host` or `host:port`), besides
    /// registry.ollama.ai; repeatable. Clients name models; the server connects only to
    /// these.
    #[arg(long = "pull-registry", value_name = "HOST[:PORT]")]
    pub pull_registries: Vec<String>,
    /// `/api/pull` pulls no model from any Ollama registry (only the known names).
    #[arg(long, conflicts_with = "pull_registries")]
    pub no_registry_pulls: bool,
}

/// Default slots per model: 4 sequences batched together give most of the throughput of a
/// small model on a few cores (llama.cpp's server also defaults to 4).
const DEFAULT_PARALLEL: u32 = 4;
/// The default slot context is capped so that all slots together hold at most this many
/// positions (but each at least [`MIN_SLOT_CONTEXT`]).
const DEFAULT_TOTAL_CONTEXT: usize = 32768;
/// See [`DEFAULT_TOTAL_CONTEXT`].
const MIN_SLOT_CONTEXT: usize = 2048;

/// Runs `formwork serve`.
pub fn main(args: Args) -> anyhow::Result<()> {
    let ip: IpAddr = args.host.parse().with_context(|| format!("--host {:?} is not an IP address (try 127.0.0.1 or 0.0.0.0)", args.host))?;
    let addr = SocketAddr::new(ip, args.port);
    let databases = open_databases(&args.databases, &args.database_rules)?;
    let config = ServerConfig {
        databases,
        max_body_bytes: args.max_body_bytes,
        max_schema_bytes: args.max_schema_bytes,
        max_num_predict: args.max_num_predict,
        default_num_predict: args.max_num_predict.min(ServerConfig::default().default_num_predict),
        max_wall_time: Duration::from_secs(args.max_wall_time),
        store: Some(formwork_models::Cache::from_env()?),
        pull_registries: if args.no_registry_pulls {
            Vec::new()
        } else {
            let mut r = ServerConfig::default().pull_registries;
            r.extend(args.pull_registries.iter().cloned());
            r
        },
        ..ServerConfig::default()
    };
    let names = if args.models.is_empty() { vec!["smollm2".to_string()] } else { args.models.clone() };
    let cache = Arc::new(ConstraintCache::new(config.grammar_cache_entries));
    let mut workers: Vec<ModelWorker> = Vec::new();
    for name in &names {
        let w = load(name, &args, &config, cache.clone())?;
        if workers.iter().any(|x| x.meta().name == w.meta().name) {
            anyhow::bail!("two models are called {:?}; rename one of the files", w.meta().name);
        }
        workers.push(w);
    }
    let served: Vec<String> = workers.iter().map(|w| w.meta().name.clone()).collect();
    let state = AppState::new(config, workers);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the async runtime")?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr}"))?;
        let local = listener.local_addr()?;
        if !ip.is_loopback() {
            eprintln!("warning: serving on {ip}, reachable from the network");
        }
        println!("formwork serve: listening on http://{local} (models: {})", served.join(", "));
        eprintln!("  Ollama API at http://{local}/api, OpenAI API at http://{local}/v1; ctrl-c to stop");
        formwork_server::serve(listener, state, formwork_server::shutdown_signal()).await.context("server failed")
    })
}

fn load(name: &str, args: &Args, config: &ServerConfig, cache: Arc<ConstraintCache>) -> anyhow::Result<ModelWorker> {
    let found = formwork_models::Cache::from_env()?
        .resolve_model(name, formwork_models::Progress::Stderr)
        .with_context(|| format!("cannot find model {name:?}"))?;
    let path = found.path.clone();
    let display = if Path::new(name).exists() || name.ends_with(".gguf") {
        path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| name.to_string())
    } else {
        name.strip_suffix(":latest").unwrap_or(name).to_string()
    };
    let t = Instant::now();
    let parallel = args.parallel as usize;
    let n_ctx = args.ctx_size.or_else(|| {
        let trained = formwork_vocab::gguf::GgufFile::open(&path).ok().and_then(|g| g.context_length()).map(|n| n as usize);
        let per_slot = (DEFAULT_TOTAL_CONTEXT / parallel).max(MIN_SLOT_CONTEXT).min(formwork_llama::DEFAULT_MAX_CONTEXT);
        Some(trained.map_or(per_slot, |t| t.min(per_slot)))
    });
    let opts = formwork_llama::LoadOptions { n_ctx, n_threads: args.threads, name: Some(display.clone()), ..Default::default() };
    let model = formwork_llama::LlamaBatchModel::load(&path, opts, parallel).with_context(|| format!("cannot load {}", path.display()))?;
    let load_time = t.elapsed();
    let threads = model.n_threads();
    // FORMWORK_BATCH_MOVES=0 keeps sequences where they started (to measure what moving gains).
    let batch_options = formwork_engine::batch::BatcherOptions {
        move_sequences: std::env::var("FORMWORK_BATCH_MOVES").map_or(true, |v| v != "0"),
        ..Default::default()
    };
    let batcher = formwork_engine::batch::Batcher::new(Box::new(model), batch_options);
    let mut meta = meta(&display, &path, batcher.info());
    meta.defaults = found.defaults;
    eprintln!(
        "loaded {display} from {} in {:.1?}: {parallel} slots of {} tokens, {threads} threads",
        path.display(),
        load_time,
        batcher.info().context_length
    );
    let backends = EngineBackend::slots(&batcher, cache, config.grammar_limits.clone());
    ModelWorker::spawn_pool(meta, backends, load_time, args.max_queue).context("cannot start the model's worker threads")
}

fn meta(name: &str, path: &PathBuf, info: &formwork_engine::ModelInfo) -> ModelMeta {
    let details = formwork_vocab::gguf::GgufFile::open(path).map(|g| g.details()).unwrap_or_default();
    let family = if details.family.is_empty() { "llama".to_string() } else { details.family };
    ModelMeta {
        name: name.to_string(),
        path: Some(path.clone()),
        size: std::fs::metadata(path).map(|m| m.len()).unwrap_or(0),
        parameter_size: details.parameter_size,
        quantization_level: details.quantization_level,
        context_length: info.context_length as u32,
        template: info.chat_template.clone(),
        supports_tools: formwork_server::capabilities::supports_tools(info.chat_template.as_deref()),
        supports_thinking: info.chat_template.as_deref().and_then(formwork_engine::reasoning::ReasoningFormat::detect).is_some(),
        family,
        defaults: Default::default(),
    }
}

/// Opens the `--database NAME=SPEC` databases, each with its `--database-rules NAME=FILE`.
fn open_databases(specs: &[String], rules: &[String]) -> anyhow::Result<Vec<(String, Arc<formwork_sql::SqlDatabase>)>> {
    let split = |s: &str, flag: &str| -> anyhow::Result<(String, String)> {
        let (n, v) = s.split_once('=').ok_or_else(|| anyhow::anyhow!("{flag} {s:?}: expected NAME=VALUE"))?;
        anyhow::ensure!(!n.is_empty() && !v.is_empty(), "{flag} {s:?}: expected NAME=VALUE");
        Ok((n.to_string(), v.to_string()))
    };
    let rules: Vec<(String, String)> = rules.iter().map(|r| split(r, "--database-rules")).collect::<anyhow::Result<_>>()?;
    for (name, _) in &rules {
        anyhow::ensure!(specs.iter().any(|s| s.split_once('=').is_some_and(|(n, _)| n == name)), "--database-rules names `{name}`, which no --database defines");
    }
    let mut out: Vec<(String, Arc<formwork_sql::SqlDatabase>)> = Vec::new();
    for spec in specs {
        let (name, target) = split(spec, "--database")?;
        anyhow::ensure!(!out.iter().any(|(n, _)| *n == name), "two databases are called `{name}`");
        let rule = rules.iter().find(|(n, _)| *n == name).map(|(_, f)| std::path::PathBuf::from(f));
        let db = formwork_sql::SqlDatabase::open(&target, rule.as_deref(), &Default::default(), Default::default())
            .map_err(|e| anyhow::anyhow!("--database {name}: {e}"))?;
        tracing::info!(database = %name, tables = db.catalog.tables().len(), "SQL database ready");
        out.push((name, Arc::new(db)));
    }
    Ok(out)
}
