//! The model store commands: `list`, `show`, `rm`, `cp`, `create` and `ps`.
//!
//! All but `ps` work on [`formwork_models::Cache::from_env`]: formwork's cache and aliases
//! (`$FORMWORK_HOME`), with Ollama's store and the Hugging Face cache read in place. Only
//! formwork's own entries are ever changed; `rm` of another tool's model is refused, naming
//! the command that removes it. `ps` asks a running server's `GET /api/ps`.

use anyhow::{bail, Context, Result};
use formwork_models::{Cache, LocalModel, Modelfile, Source};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Flags of `formwork list`.
#[derive(clap::Args, Debug)]
pub struct ListArgs {
    /// Only models whose name contains this text.
    pub filter: Option<String>,
}

/// Flags of `formwork show`.
#[derive(clap::Args, Debug)]
pub struct ShowArgs {
    /// The model: a name (`formwork list`) or a GGUF path.
    pub model: String,
    /// Print the model as a Modelfile instead.
    #[arg(long)]
    pub modelfile: bool,
}

/// Flags of `formwork rm`.
#[derive(clap::Args, Debug)]
pub struct RmArgs {
    /// The aliases or formwork-pulled models to delete.
    #[arg(required = true)]
    pub models: Vec<String>,
}

/// Flags of `formwork cp`.
#[derive(clap::Args, Debug)]
pub struct CpArgs {
    /// The model to copy (an alias is copied with its settings; any other model becomes
    /// the base of the new alias).
    pub source: String,
    /// The new alias's name.
    pub destination: String,
}

/// Flags of `formwork create`.
#[derive(clap::Args, Debug)]
pub struct CreateArgs {
    /// The new alias's name (`name` or `name:tag`).
    pub name: String,
    /// The Modelfile (`FROM`, `SYSTEM`, `TEMPLATE`, `PARAMETER`); `-` reads stdin. A relative
    /// path in `FROM` is taken from the Modelfile's folder.
    #[arg(long, short = 'f', default_value = "Modelfile")]
    pub file: PathBuf,
}

/// Flags of `formwork ps`.
#[derive(clap::Args, Debug)]
pub struct PsArgs {
    /// The server to ask.
    #[arg(long, default_value = "http://127.0.0.1:11434")]
    pub host: String,
}

/// Runs `formwork list`.
pub fn list(args: ListArgs) -> Result<()> {
    let cache = Cache::from_env()?;
    let models: Vec<LocalModel> = cache
        .list()
        .into_iter()
        .filter(|m| args.filter.as_deref().is_none_or(|f| m.name.contains(f)))
        .collect();
    let now = SystemTime::now();
    let rows: Vec<[String; 4]> = models
        .iter()
        .map(|m| {
            let source = match (&m.base, m.source) {
                (Some(b), Source::Alias) => format!("alias of {b}"),
                (None, Source::Alias) => "alias (base missing)".into(),
                (_, s) => s.to_string(),
            };
            [m.name.clone(), source, human_size(m.size), m.modified.map_or_else(|| "-".into(), |t| ago(now, t))]
        })
        .collect();
    print_table(&["NAME", "SOURCE", "SIZE", "MODIFIED"], &rows);
    if rows.is_empty() {
        eprintln!("no models found in {}{}{}; `formwork pull` fetches the default model", cache.models_dir().display(), place(cache.ollama_store().map(|o| o.root())), place(cache.hf_cache().map(|h| h.root())));
    }
    Ok(())
}

fn place(p: Option<&Path>) -> String {
    p.map(|p| format!(", {}", p.display())).unwrap_or_default()
}

/// Runs `formwork show`.
pub fn show(args: ShowArgs) -> Result<()> {
    let cache = Cache::from_env()?;
    let m = cache.find(&args.model)?.ok_or_else(|| cache.not_found(&args.model))?;
    let from = m.base.clone().unwrap_or_else(|| m.path.display().to_string());
    if args.modelfile {
        print!("# {} ({})\n{}", m.name, m.source, Modelfile::render(&from, &m.defaults));
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    let mut line = |k: &str, v: &str| writeln!(out, "  {k:<16}{v}");
    line("name", &m.name)?;
    line("source", &match (&m.base, m.source) {
        (Some(b), Source::Alias) => format!("alias of {b}"),
        (_, s) => s.to_string(),
    })?;
    line("path", &m.path.display().to_string())?;
    line("size", &human_size(m.size))?;
    if let Ok(g) = formwork_vocab::gguf::GgufFile::open(&m.path) {
        let arch = g.architecture().unwrap_or("unknown").to_string();
        line("architecture", &arch)?;
        if let Some(p) = g.get_str("general.size_label") {
            line("parameters", p)?;
        }
        if let Some(n) = g.context_length() {
            line("context length", &n.to_string())?;
        }
        if let Some(t) = g.get("general.file_type").and_then(|v| v.as_i128()) {
            line("quantization", formwork_vocab::gguf::file_type_name(t))?;
        }
    }
    if let Some(s) = &m.defaults.system {
        line("system", &indent(s))?;
    }
    let params: Vec<String> = m.defaults.parameters.lines().iter().map(|(k, v)| format!("{k} {v}")).collect();
    if !params.is_empty() {
        line("parameters", &indent(&params.join("\n")))?;
    }
    if let Some(t) = &m.defaults.template {
        line("template", &indent(t))?;
    }
    Ok(())
}

/// Runs `formwork rm`.
pub fn rm(args: RmArgs) -> Result<()> {
    let cache = Cache::from_env()?;
    for name in &args.models {
        // Pulled from an Ollama registry: formwork's own store of that layout.
        let pulled = cache.pulled_store().find(name).ok().flatten().is_some();
        match cache.delete(name)? {
            Source::Alias => println!("deleted alias {name}"),
            _ if pulled => println!("deleted {name} from {}", cache.pulled_store().root().display()),
            _ => println!("deleted {name} from {}", cache.models_dir().display()),
        }
    }
    Ok(())
}

/// Runs `formwork cp`.
pub fn cp(args: CpArgs) -> Result<()> {
    let cache = Cache::from_env()?;
    let a = cache.copy(&args.source, &args.destination)?;
    println!("copied {} to {} (over {})", args.source, a.name, a.from);
    Ok(())
}

/// Runs `formwork create`.
pub fn create(args: CreateArgs) -> Result<()> {
    let text = if args.file.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin().take(formwork_models::modelfile::MAX_MODELFILE_BYTES as u64 + 1).read_to_string(&mut s).context("reading the Modelfile from stdin")?;
        s
    } else {
        std::fs::read_to_string(&args.file).with_context(|| format!("cannot read the Modelfile {} (give one with -f FILE)", args.file.display()))?
    };
    let mf = Modelfile::parse(&text).with_context(|| format!("{}", args.file.display()))?;
    let from = from_relative_to(&mf.from, &args.file);
    let cache = Cache::from_env()?;
    let a = cache.create_alias(&args.name, &from, &mf.defaults)?;
    println!("created {} (over {})", a.name, a.from);
    Ok(())
}

/// A relative GGUF path in `FROM` is taken from the Modelfile's folder (as Ollama does);
/// names and absolute paths stay as they are.
fn from_relative_to(from: &str, modelfile: &Path) -> String {
    let dir = modelfile.parent().filter(|d| !d.as_os_str().is_empty());
    match dir {
        Some(dir) if formwork_models::looks_like_path(from) && Path::new(from).is_relative() && !from.starts_with('~') => {
            dir.join(from).display().to_string()
        }
        _ => from.to_string(),
    }
}

/// Runs `formwork ps`.
pub fn ps(args: PsArgs) -> Result<()> {
    let body = http_get(&args.host, "/api/ps")?;
    let v: serde_json::Value = serde_json::from_str(&body).with_context(|| format!("{} did not answer /api/ps with JSON", args.host))?;
    let models = v["models"].as_array().cloned().unwrap_or_default();
    let rows: Vec<[String; 5]> = models
        .iter()
        .map(|m| {
            let u = |k: &str| m[k].as_u64().map(|n| n.to_string()).unwrap_or_else(|| "-".into());
            [
                m["name"].as_str().unwrap_or("?").to_string(),
                human_size(m["size"].as_u64().unwrap_or(0)),
                u("context_length"),
                format!("{}/{}", u("slots_busy"), u("slots")),
                u("queued"),
            ]
        })
        .collect();
    print_table(&["NAME", "SIZE", "CONTEXT", "BUSY/SLOTS", "QUEUED"], &rows);
    Ok(())
}

/// A plain HTTP/1.0 GET (no TLS): the body of a 200 answer, else an error with the status.
fn http_get(base: &str, path: &str) -> Result<String> {
    let rest = base.strip_prefix("http://").unwrap_or(base);
    if base.starts_with("https://") {
        bail!("--host {base}: formwork ps speaks plain http only");
    }
    let authority = rest.split('/').next().unwrap_or(rest);
    let addr = if authority.contains(':') { authority.to_string() } else { format!("{authority}:80") };
    let mut stream = std::net::TcpStream::connect(&addr).with_context(|| format!("cannot reach a server at {base}; is `formwork serve` running there?"))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {authority}\r\nAccept: application/json\r\n\r\n")?;
    let mut resp = Vec::new();
    stream.take(16 << 20).read_to_end(&mut resp).with_context(|| format!("reading the answer of {base}{path}"))?;
    let text = String::from_utf8_lossy(&resp);
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(|| anyhow::anyhow!("{base}{path}: not an HTTP answer"))?;
    let status = head.lines().next().unwrap_or("");
    if status.split_whitespace().nth(1) != Some("200") {
        bail!("{base}{path} answered {status}: {}", body.trim());
    }
    Ok(body.to_string())
}

fn print_table<const N: usize>(header: &[&str; N], rows: &[[String; N]]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = std::io::stdout().lock();
    let mut put = |cells: Vec<&str>| {
        let line: Vec<String> = cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        let _ = writeln!(out, "{}", line.join("  ").trim_end());
    };
    put(header.to_vec());
    for r in rows {
        put(r.iter().map(String::as_str).collect());
    }
}

/// `1.3 GB`, `98 MB`, `512 B` (decimal units, as Ollama prints).
fn human_size(n: u64) -> String {
    const UNITS: [(&str, f64); 4] = [("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)];
    for (u, s) in UNITS {
        if n as f64 >= s {
            let x = n as f64 / s;
            return if x < 10.0 { format!("{x:.1} {u}") } else { format!("{x:.0} {u}") };
        }
    }
    format!("{n} B")
}

/// `5 minutes ago`, `3 days ago`.
fn ago(now: SystemTime, t: SystemTime) -> String {
    let s = now.duration_since(t).unwrap_or_default().as_secs();
    let (n, unit) = match s {
        0..60 => return "just now".into(),
        60..3600 => (s / 60, "minute"),
        3600..86_400 => (s / 3600, "hour"),
        86_400..2_592_000 => (s / 86_400, "day"),
        2_592_000..31_536_000 => (s / 2_592_000, "month"),
        _ => (s / 31_536_000, "year"),
    };
    format!("{n} {unit}{} ago", if n == 1 { "" } else { "s" })
}

/// Continuation lines indented under a `show` value.
fn indent(s: &str) -> String {
    s.trim_end().replace('\n', &format!("\n  {:<16}", ""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_ages() {
        assert_eq!(human_size(98_362_432), "98 MB");
        assert_eq!(human_size(1_300_000_000), "1.3 GB");
        assert_eq!(human_size(12), "12 B");
        let now = SystemTime::now();
        assert_eq!(ago(now, now), "just now");
        assert_eq!(ago(now, now - Duration::from_secs(3 * 86_400)), "3 days ago");
        assert_eq!(ago(now, now - Duration::from_secs(3600)), "1 hour ago");
    }

    #[test]
    fn from_paths_are_taken_from_the_modelfile_folder() {
        assert_eq!(from_relative_to("./m.gguf", Path::new("/models/Modelfile")), "/models/./m.gguf");
        assert_eq!(from_relative_to("llama3.2:1b", Path::new("/models/Modelfile")), "llama3.2:1b");
        assert_eq!(from_relative_to("/abs/m.gguf", Path::new("/models/Modelfile")), "/abs/m.gguf");
        assert_eq!(from_relative_to("m.gguf", Path::new("Modelfile")), "m.gguf");
    }
}
