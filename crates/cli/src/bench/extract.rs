//! `formwork bench extract`: how putting the schema in the prompt changes the answers.
//!
//! Runs an extraction set (JSON lines: `id`, `text`, `schema`, `expected`; the built-in set
//! `testdata/extraction.jsonl` has 34 items) through a real model, every answer constrained by
//! its schema, once per mode: `off` (the model sees only the request), `user` (schema and
//! instruction appended to the user message) and `system` (in the system message) — the
//! instruction formwork uses, a list of keys and types — and the `-schema` variants of both
//! (the raw JSON Schema instead). With `--bare` the request does not name the fields. Greedy
//! sampling, so a run is repeatable. For each mode it reports how many answers validate
//! (they all should: the grammar guarantees it, and a failure is an engine bug), how many
//! expected fields were extracted exactly, the mean tokens generated and the time.
//!
//! Fields are compared after normalisation ([`field_matches`]): strings case-insensitively
//! with surrounding whitespace and a final full stop ignored, numbers by value, arrays item
//! by item.
//!
//! With `--whitespace flexible,compact,pretty` every mode runs once per whitespace style,
//! reporting also the forced tokens per answer (pretty indentation is forced, so it costs
//! tokens but no sampling).

use anyhow::{bail, Context, Result};
use formwork_engine::instruct::add_instruction;
use formwork_engine::{add_schema_instruction, generate, ChatMessage, Constraint, GenerateOptions, GrammarConstraint, Prompt, SamplerOptions, SchemaPlacement};
use formwork_grammar::{matcher::CompiledGrammar, Limits};
use serde::Deserialize;
use serde_json::Value;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The built-in extraction set.
const BUILTIN_SET: &str = include_str!("../../testdata/extraction.jsonl");

/// Flags of `bench extract`.
#[derive(clap::Args, Debug)]
pub struct ExtractArgs {
    /// Model name or GGUF path.
    #[arg(long, default_value = "smollm2")]
    pub model: String,
    /// Evaluation threads.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// An extraction set (JSON lines with `id`, `text`, `schema`, `expected`); default: the built-in set.
    #[arg(long)]
    pub set: Option<PathBuf>,
    /// Modes to compare, comma-separated: `off`, `user`, `system` (the instruction formwork
    /// uses: a list of the keys and their types), `user-schema`, `system-schema` (the raw schema).
    #[arg(long, default_value = "off,user,system,user-schema,system-schema")]
    pub modes: String,
    /// Don't name the expected fields in the request ("Extract the details from this text"),
    /// so that only the schema tells the model what to extract.
    #[arg(long)]
    pub bare: bool,
    /// Whitespace styles to compare, comma-separated: `flexible`, `compact`, `pretty`; each
    /// mode runs once per style.
    #[arg(long, default_value = "flexible")]
    pub whitespace: String,
    /// Most tokens per answer.
    #[arg(long, default_value_t = 160)]
    pub num_predict: usize,
    /// Print every answer with its score.
    #[arg(long, short)]
    pub verbose: bool,
}

/// One item of an extraction set.
#[derive(Debug, Deserialize)]
pub struct Item {
    /// A short name.
    pub id: String,
    /// The text to extract from.
    pub text: String,
    /// The schema of the answer.
    pub schema: Value,
    /// Expected values, by top-level field.
    pub expected: serde_json::Map<String, Value>,
}

/// Parses a JSON-lines extraction set (blank lines skipped); errors name the line.
pub fn parse_set(text: &str) -> Result<Vec<Item>> {
    let mut items = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let item: Item = serde_json::from_str(line).with_context(|| format!("extraction set line {}: not an item", i + 1))?;
        items.push(item);
    }
    if items.is_empty() {
        bail!("the extraction set is empty");
    }
    Ok(items)
}

/// The request the model gets (before any schema instruction).
fn request(item: &Item, bare: bool) -> String {
    if bare {
        return format!("Extract the details from this text:\n{}", item.text);
    }
    let fields: Vec<&str> = item.expected.keys().map(String::as_str).collect();
    format!("Extract the fields {} from this text:\n{}", fields.join(", "), item.text)
}

fn norm(s: &str) -> String {
    s.trim().trim_end_matches('.').trim().to_lowercase()
}

/// Does an extracted value match the expected one (see the module docs)?
pub fn field_matches(expected: &Value, got: &Value) -> bool {
    match (expected, got) {
        (Value::String(a), Value::String(b)) => norm(a) == norm(b),
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (Value::Array(a), Value::Array(b)) => a.len() == b.len() && a.iter().zip(b).all(|(x, y)| field_matches(x, y)),
        (a, b) => a == b,
    }
}

/// Expected fields of `item` found in `answer` (0 when the answer is not a JSON object).
pub fn score(item: &Item, answer: &str) -> usize {
    let Ok(Value::Object(got)) = serde_json::from_str::<Value>(answer) else { return 0 };
    item.expected.iter().filter(|(k, v)| got.get(*k).is_some_and(|g| field_matches(v, g))).count()
}

#[derive(Default)]
struct Tally {
    valid: usize,
    fields: usize,
    /// Fields exact in half A and half B of the items (by sha256 of the id, as `bench masks
    /// --half` splits files): choose on A, report B.
    fields_half: [usize; 2],
    tokens: usize,
    forced: usize,
    prompt_tokens: usize,
    time: Duration,
}

/// Runs `formwork bench extract`.
pub fn extract(a: ExtractArgs) -> Result<()> {
    let text = match &a.set {
        Some(p) => std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?,
        None => BUILTIN_SET.to_string(),
    };
    let items = parse_set(&text)?;
    let modes: Vec<(String, Option<(SchemaPlacement, bool)>)> = a
        .modes
        .split(',')
        .map(|m| match m.trim() {
            "off" => Ok(("off".to_string(), None)),
            other => {
                let (place, raw_schema) = match other.strip_suffix("-schema") {
                    Some(p) => (p, true),
                    None => (other, false),
                };
                place.parse::<SchemaPlacement>().map(|p| (other.to_string(), Some((p, raw_schema)))).map_err(anyhow::Error::msg)
            }
        })
        .collect::<Result<_>>()?;
    let styles: Vec<(String, formwork_schema::Whitespace)> = a
        .whitespace
        .split(',')
        .map(|w| {
            formwork_schema::Whitespace::from_name(w.trim())
                .map(|s| (w.trim().to_string(), s))
                .with_context(|| format!("unknown whitespace style `{w}`: use flexible, compact or pretty"))
        })
        .collect::<Result<_>>()?;
    // Every mode under every style.
    let named = styles.len() > 1;
    let runs: Vec<(String, usize, Option<(SchemaPlacement, bool)>)> = styles
        .iter()
        .enumerate()
        .flat_map(|(si, (sn, _))| modes.iter().map(move |(m, p)| (if named { format!("{m}/{sn}") } else { m.clone() }, si, *p)))
        .collect();
    let path = formwork_models::resolve(&a.model)?;
    let load = formwork_llama::LoadOptions { n_threads: Some(a.threads), ..Default::default() };
    let mut model = formwork_llama::LlamaModel::load(&path, load).with_context(|| format!("loading {}", path.display()))?;
    let limits = Limits::default();
    // Indexed by item, then style.
    let mut compiled: Vec<Vec<_>> = Vec::new();
    for item in &items {
        let mut per_style = Vec::new();
        for (_, style) in &styles {
            let so = formwork_schema::SchemaOptions { whitespace: *style, ..Default::default() };
            let g = formwork_schema::compile(&item.schema, &so).with_context(|| format!("item {}: compiling its schema", item.id))?;
            per_style.push(CompiledGrammar::new(&g, formwork_engine::Model::vocab(&model).clone(), &limits)?);
        }
        compiled.push(per_style);
    }
    let opts = GenerateOptions {
        sampler: SamplerOptions { temperature: 0.0, seed: Some(1), ..Default::default() },
        num_predict: Some(a.num_predict),
        force_tokens: true,
        ..Default::default()
    };
    let total_fields: usize = items.iter().map(|i| i.expected.len()).sum();
    let mut half_fields = [0usize; 2];
    for i in &items {
        half_fields[half(&i.id)] += i.expected.len();
    }
    eprintln!("model {} · {} items · {} expected fields · modes {}", path.display(), items.len(), total_fields, a.modes);
    let bar = indicatif::ProgressBar::new((items.len() * runs.len()) as u64);
    let mut tallies: Vec<Tally> = runs.iter().map(|_| Tally::default()).collect();
    for (item, gs) in items.iter().zip(&compiled) {
        for ((name, si, placement), tally) in runs.iter().zip(tallies.iter_mut()) {
            let g = &gs[*si];
            let mut prompt = Prompt::Chat { messages: vec![ChatMessage::new("user", request(item, a.bare))], tools: None };
            match placement {
                Some((p, false)) => {
                    add_schema_instruction(&mut prompt, Some(&item.schema), *p);
                }
                Some((p, true)) => {
                    add_instruction(&mut prompt, &formwork_engine::schema_instruction(Some(&item.schema)), *p);
                }
                None => {}
            }
            let mut c = GrammarConstraint::new(g);
            let t0 = Instant::now();
            let out = generate(&mut model, &prompt, &opts, Some(&mut c as &mut dyn Constraint), &mut |_| ControlFlow::Continue(()))?;
            tally.time += t0.elapsed();
            tally.tokens += out.eval_tokens;
            tally.forced += out.constraint.as_ref().map_or(0, |c| c.forced);
            tally.prompt_tokens += out.prompt_tokens;
            let valid = formwork_schema::validate(&item.schema, &out.text).is_ok();
            let s = score(item, &out.text);
            tally.valid += valid as usize;
            tally.fields += s;
            tally.fields_half[half(&item.id)] += s;
            if a.verbose {
                bar.suspend(|| eprintln!("{:<10} {:<7} {}/{} {}{}", item.id, name, s, item.expected.len(), out.text.trim(), if valid { "" } else { "  (INVALID)" }));
            }
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    println!(
        "{:<16} {:>9} {:>16} {:>14} {:>14} {:>12} {:>8} {:>14} {:>8}",
        "mode", "valid", "fields exact", "half A", "half B", "gen tokens", "forced", "prompt tokens", "time"
    );
    let pct = |a: usize, b: usize| 100.0 * a as f64 / b.max(1) as f64;
    for ((name, _, _), t) in runs.iter().zip(&tallies) {
        println!(
            "{:<16} {:>5}/{:<3} {:>6}/{:<3} {:>4.0}% {:>4}/{:<3} {:>4.0}% {:>4}/{:<3} {:>4.0}% {:>12.1} {:>8.1} {:>14.1} {:>7.1}s",
            name,
            t.valid,
            items.len(),
            t.fields,
            total_fields,
            pct(t.fields, total_fields),
            t.fields_half[0],
            half_fields[0],
            pct(t.fields_half[0], half_fields[0]),
            t.fields_half[1],
            half_fields[1],
            pct(t.fields_half[1], half_fields[1]),
            t.tokens as f64 / items.len() as f64,
            t.forced as f64 / items.len() as f64,
            t.prompt_tokens as f64 / items.len() as f64,
            t.time.as_secs_f64()
        );
    }
    Ok(())
}

/// 0 for half A, 1 for half B (`bench masks --half`'s rule, on the item id).
fn half(id: &str) -> usize {
    match super::masks::half_of(id) {
        super::HalfArg::A => 0,
        super::HalfArg::B => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_builtin_set_parses_and_every_schema_compiles_and_accepts_its_expected_answer() {
        let items = parse_set(BUILTIN_SET).unwrap();
        assert!(items.len() >= 30, "{} items", items.len());
        for item in &items {
            formwork_schema::compile(&item.schema, &Default::default()).unwrap_or_else(|e| panic!("{}: {e}", item.id));
            let expected = Value::Object(item.expected.clone()).to_string();
            assert!(formwork_schema::validate(&item.schema, &expected).is_ok(), "{}: expected answer does not validate", item.id);
            assert_eq!(score(item, &expected), item.expected.len(), "{}", item.id);
        }
    }

    #[test]
    fn fields_are_compared_after_normalisation() {
        assert!(field_matches(&json!("Madrid"), &json!(" madrid. ")));
        assert!(!field_matches(&json!("Madrid"), &json!("Madrid, Spain")));
        assert!(field_matches(&json!(45), &json!(45.0)));
        assert!(!field_matches(&json!(45), &json!("45")));
        assert!(field_matches(&json!(["Tom", "Priya"]), &json!(["tom", "Priya"])));
        assert!(!field_matches(&json!(["Tom", "Priya"]), &json!(["Priya", "Tom"])));
        let item = &parse_set(r#"{"id":"x","text":"t","schema":{},"expected":{"a":1,"b":"x"}}"#).unwrap()[0];
        assert_eq!(score(item, r#"{"a":1,"b":"y"}"#), 1);
        assert_eq!(score(item, "not json"), 0);
        assert!(parse_set("\n\n").is_err());
        assert!(parse_set("{").unwrap_err().to_string().contains("line 1"));
    }
}
