//! `formwork repair [--schema FILE] [--compact] < text`: recover JSON from the output of
//! another system (an unconstrained model, an API without structured output).
//!
//! Reads stdin, finds the JSON in it (code fences, prose around it) and fixes the common faults
//! (trailing commas, single quotes, comments, unquoted keys, Python literals, a cut-off end...)
//! with `formwork_repair`; prints the JSON to stdout and what was fixed to stderr. With
//! `--schema`, the JSON is validated too (and among several JSON values in the text, the first
//! that validates is taken).
//!
//! Exit status: 0 JSON recovered (and valid against the schema, when one is given); 1 recovered
//! but invalid against the schema (the JSON is still printed, the errors go to stderr); 2 no
//! JSON could be recovered (or the input is over the size limit); 3 the command could not run
//! (unreadable or invalid schema, stdin not UTF-8).

use anyhow::{Context, Result};
use formwork_repair::{repair_and_validate, repair_with, Checked, RepairOptions};
use std::io::{Read, Write};
use std::path::PathBuf;

/// Flags of `formwork repair`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Validate the repaired JSON against this JSON Schema (exit status 1 when invalid).
    #[arg(long, value_name = "FILE")]
    pub schema: Option<PathBuf>,
    /// Print the JSON on one line (default: indented).
    #[arg(long)]
    pub compact: bool,
    /// Refuse inputs longer than this many bytes.
    #[arg(long, value_name = "BYTES", default_value_t = RepairOptions::default().max_bytes)]
    pub max_bytes: usize,
    /// Print nothing to stderr but errors.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Exit status for JSON that does not validate.
const INVALID: i32 = 1;
/// Exit status when no JSON could be recovered.
const NO_JSON: i32 = 2;
/// Exit status when the command could not run.
const FAILED: i32 = 3;

/// Runs `formwork repair`; exits with the status of the module docs.
pub fn main(args: Args) -> Result<()> {
    match run(args) {
        Ok(0) => Ok(()),
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(FAILED)
        }
    }
}

fn run(args: Args) -> Result<i32> {
    let schema: Option<serde_json::Value> = match &args.schema {
        Some(p) => {
            let text = std::fs::read_to_string(p).with_context(|| format!("reading the schema {}", p.display()))?;
            Some(serde_json::from_str(&text).with_context(|| format!("the schema {} is not valid JSON", p.display()))?)
        }
        None => None,
    };
    let opts = RepairOptions { max_bytes: args.max_bytes, ..Default::default() };
    let mut input = Vec::new();
    // One byte past the limit is enough to know the input is too long.
    std::io::stdin().take(opts.max_bytes as u64 + 1).read_to_end(&mut input).context("reading stdin")?;
    let text = String::from_utf8(input).map_err(|e| anyhow::anyhow!("stdin is not UTF-8 text (invalid byte at offset {})", e.utf8_error().valid_up_to()))?;
    let result = match &schema {
        Some(s) => repair_and_validate(&text, s, &opts),
        None => repair_with(&text, &opts).map(|repaired| Checked { repaired, errors: Vec::new() }),
    };
    let checked = match result {
        Ok(c) => c,
        Err(formwork_repair::RepairError::InvalidSchema(e)) => {
            let p = args.schema.as_deref().map(|p| p.display().to_string()).unwrap_or_default();
            anyhow::bail!("the schema {p} is not a valid JSON Schema: {e}");
        }
        Err(formwork_repair::RepairError::TooLarge { len, max }) => {
            eprintln!("error: the input is over {max} bytes (at least {len}); raise --max-bytes");
            return Ok(NO_JSON);
        }
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(NO_JSON);
        }
    };
    let r = &checked.repaired;
    let json = if args.compact { r.json.clone() } else { serde_json::to_string_pretty(&r.value)? };
    let mut out = std::io::stdout().lock();
    if let Err(e) = writeln!(out, "{json}").and_then(|_| out.flush()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(e).context("writing to stdout");
        }
    }
    let mut err = std::io::stderr().lock();
    if !args.quiet {
        for f in &r.fixes {
            let _ = writeln!(err, "fixed: {f}");
        }
    }
    if checked.is_valid() {
        if schema.is_some() && !args.quiet {
            let _ = writeln!(err, "valid against the schema");
        }
        Ok(0)
    } else {
        let _ = writeln!(err, "invalid against the schema ({} error(s)):", checked.errors.len());
        for e in &checked.errors {
            let _ = writeln!(err, "  - {e}");
        }
        Ok(INVALID)
    }
}
