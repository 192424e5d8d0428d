//! `formwork sql`: a question in, a query over a live database out — one that can only name
//! the tables and columns that exist, joined along the relationships (see `formwork-sql`) —
//! and, with `--execute`, its rows.
//!
//! `formwork grammar sql` (in `grammar_cmd`) prints the GBNF-expressible part of the same
//! constraint.

use anyhow::{Context, Result};
use formwork_engine::request::Event;
use formwork_engine::retry::{RetryMode, Validation};
use formwork_engine::SamplerOptions;
use formwork_sql::{ExecOptions, ReadOptions, Rows, SqlDatabase, SqlGrammarOptions};
use std::io::Write;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::Duration;

/// Where the database is and what of it to use (shared with `formwork grammar sql`).
#[derive(clap::Args, Debug, Clone)]
pub struct DbArgs {
    /// The database: a SQLite file's path, or a `postgres://user:pass@host/db` URL.
    #[arg(long, value_name = "PATH|URL", env = "FORMWORK_DB")]
    pub db: String,
    /// A rules file (TOML): hidden tables/columns, relationships, required filters.
    #[arg(long, value_name = "RULES.toml")]
    pub rules: Option<PathBuf>,
    /// Do not read the values of few-valued text columns (literals are then free text).
    #[arg(long)]
    pub no_values: bool,
    /// A text column with at most this many distinct values (each at most 40 characters)
    /// takes only those values as literals in `=` and `IN`.
    #[arg(long, default_value_t = 12, value_name = "N")]
    pub max_values: usize,
}

impl DbArgs {
    /// Opens the database and applies the rules.
    pub fn open(&self) -> Result<SqlDatabase> {
        let read = ReadOptions { values: !self.no_values && self.max_values > 0, max_values: self.max_values, ..Default::default() };
        Ok(SqlDatabase::open(&self.db, self.rules.as_deref(), &read, SqlGrammarOptions::default())?)
    }
}

/// Flags of `formwork sql`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub db: DbArgs,
    /// The question, in words.
    pub question: String,
    /// Model: a known name or a GGUF path.
    #[arg(long, short, env = "FORMWORK_MODEL", default_value = formwork_models::DEFAULT_MODEL)]
    pub model: String,
    /// Run the query (read-only) and print its rows.
    #[arg(long)]
    pub execute: bool,
    /// With --execute: when the database refuses the query, show the model the error and
    /// try again, up to N more times.
    #[arg(long, default_value_t = 2)]
    pub retries: usize,
    /// With --execute: most rows returned.
    #[arg(long, default_value_t = 100)]
    pub max_rows: usize,
    /// With --execute: time limit of the query, in seconds.
    #[arg(long, default_value_t = 10.0)]
    pub timeout: f64,
    /// Print `{sql, columns, rows, attempts}` as JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Print the prompt (the schema as the model sees it) to stderr first.
    #[arg(long)]
    pub show_prompt: bool,
    /// Sampling temperature (default 0: the most likely query).
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f32,
    /// Random seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Most tokens of one query.
    #[arg(long, short = 'n', default_value_t = 256)]
    pub num_predict: usize,
    /// Evaluation threads (default: up to the physical cores, fewer while other processes
    /// keep cores busy; a number given here is used as is).
    #[arg(long, short = 't')]
    pub threads: Option<usize>,
}

pub fn main(args: Args) -> Result<()> {
    anyhow::ensure!(args.timeout > 0.0 && args.timeout.is_finite(), "--timeout must be a positive number of seconds");
    anyhow::ensure!(args.max_rows > 0, "--max-rows must be at least 1");
    let db = args.db.open()?;
    if args.show_prompt {
        eprintln!("{}", formwork_sql::prompt::system_prompt(&db.catalog));
        for e in formwork_sql::prompt::examples(&db.catalog) {
            eprintln!("\nuser: {}\nassistant: {}", e.question, e.sql);
        }
    }
    let path = formwork_models::resolve(&args.model)?;
    let load = formwork_llama::LoadOptions { n_threads: args.threads, ..Default::default() };
    let mut model = formwork_llama::LlamaModel::load(&path, load).with_context(|| format!("loading the model {}", path.display()))?;

    let mut sampler = SamplerOptions { temperature: args.temperature, ..SamplerOptions::default() };
    if args.temperature == 0.0 {
        sampler = SamplerOptions::greedy();
    }
    if let Some(seed) = args.seed {
        sampler.seed = Some(seed);
    }
    let mut request = db.request(&args.question).sampler(sampler).num_predict(args.num_predict);
    let exec = ExecOptions { max_rows: args.max_rows, timeout: Duration::from_secs_f64(args.timeout) };
    let last = if args.execute {
        let (validator, last) = db.executor(exec);
        request = request.validation(Validation { validators: vec![validator], retries: args.retries, repair: false, mode: RetryMode::Feedback });
        Some(last)
    } else {
        None
    };
    let stream = !args.json;
    let mut out = std::io::stdout().lock();
    let mut failed_attempts = Vec::new();
    let answer = request
        .run(&mut model, &mut |e| {
            match e {
                Event::Answer { text, .. } if stream => {
                    let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
                }
                Event::Checked(a) if !a.errors.is_empty() => {
                    let errors: Vec<String> = a.errors.iter().map(|e| e.message.clone()).collect();
                    if stream {
                        let _ = writeln!(out);
                        eprintln!("attempt {}: {}", a.number, errors.join("; "));
                    }
                    failed_attempts.push((a.text.clone(), errors));
                }
                _ => {}
            }
            ControlFlow::Continue(())
        })
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    if stream {
        let _ = writeln!(out);
    }
    let rows: Option<Rows> = last.and_then(|l| l.lock().unwrap_or_else(|e| e.into_inner()).take());
    let attempts = answer.attempts.len().max(1);
    if args.json {
        let v = serde_json::json!({
            "sql": answer.text,
            "columns": rows.as_ref().map(|r| r.columns.clone()),
            "rows": rows.as_ref().map(|r| r.rows.clone()),
            "truncated": rows.as_ref().map(|r| r.truncated),
            "attempts": attempts,
            "valid": answer.valid,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
    } else if let Some(r) = &rows {
        writeln!(out)?;
        write!(out, "{}", render_table(r))?;
    }
    if args.execute && answer.valid != Some(true) {
        anyhow::bail!("the database refused every query ({attempts} attempt(s)); the last error: {}", failed_attempts.last().map(|a| a.1.join("; ")).unwrap_or_default());
    }
    Ok(())
}

/// Rows as an aligned text table (cells cut at 40 characters), with a count line.
pub fn render_table(r: &Rows) -> String {
    const MAX: usize = 40;
    let cell = |v: &serde_json::Value| {
        let s = match v {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Null => "NULL".into(),
            v => v.to_string(),
        };
        if s.chars().count() > MAX {
            format!("{}…", s.chars().take(MAX - 1).collect::<String>())
        } else {
            s
        }
    };
    let body: Vec<Vec<String>> = r.rows.iter().map(|row| row.iter().map(cell).collect()).collect();
    let mut width: Vec<usize> = r.columns.iter().map(|c| c.chars().count().min(MAX)).collect();
    for row in &body {
        for (i, c) in row.iter().enumerate() {
            width[i] = width[i].max(c.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let parts: Vec<String> = cells.iter().enumerate().map(|(i, c)| format!("{c:<w$}", w = width[i])).collect();
        format!("{}\n", parts.join("  ").trim_end())
    };
    let mut out = line(&r.columns.iter().map(|c| cell(&serde_json::Value::String(c.clone()))).collect::<Vec<_>>());
    out.push_str(&line(&width.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>()));
    for row in &body {
        out.push_str(&line(row));
    }
    let n = r.rows.len();
    out.push_str(&format!("({n} row{}{})\n", if n == 1 { "" } else { "s" }, if r.truncated { ", more not shown" } else { "" }));
    out
}

/// `formwork grammar sql`: the GBNF-expressible part of a database's constraint, with a
/// header saying what it does and does not enforce.
pub fn print_grammar(db: &DbArgs) -> Result<()> {
    let db = db.open()?;
    let g = formwork_sql::grammar::relaxed_grammar(&db.catalog, &SqlGrammarOptions::default());
    println!(
        "# SQL over {} ({} tables): every table and column exists, every column is qualified by its table,\n\
         # every JOIN follows a relationship. A column may still be of a table the query does not read:\n\
         # `formwork sql` also keeps every column in scope, the grouping right and the rules file's\n\
         # required filters; a single GBNF cannot.",
        db.db.describe(),
        db.catalog.tables().len()
    );
    print!("{}", formwork_grammar::gbnf::print(&g));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_and_count() {
        let r = Rows {
            columns: vec!["name".into(), "n".into()],
            rows: vec![vec!["Ann".into(), 3.into()], vec![serde_json::Value::Null, 12.into()]],
            truncated: true,
        };
        assert_eq!(render_table(&r), "name  n\n----  --\nAnn   3\nNULL  12\n(2 rows, more not shown)\n");
    }
}
