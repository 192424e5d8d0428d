//! `formwork run --retries N --rules FILE --check CMD --retry-mode M --repair`: validate the answer and, when it
//! fails, ask again with the errors fed back (through `formwork_engine::retry`).
//!
//! Validation is on when any of these flags is given. The validators are the `--format`
//! schema (or "a JSON object" for `--format json`), the `--rules` schema and each `--check`
//! command. The answer is not streamed: each attempt is reported on stderr as it is checked
//! and the final answer is printed to stdout at the end. When the retries are exhausted the
//! last answer is still printed, and the command fails (exit status 1) saying so.

use super::think::ThinkingPrinter;
use super::{fmt_duration, print_stats, Settings};
use anyhow::{bail, Context, Result};
use formwork_engine::request::{Event, Request};
use formwork_engine::retry::{Attempt, RetryMode, Validation, Validator};
use std::io::Write;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::Duration;

/// Flags of validation and retry (flattened into `formwork run`).
#[derive(clap::Args, Debug)]
pub struct RetryArgs {
    /// Validate the answer and, when it fails, ask again up to N times with the errors fed back
    /// to the model. Validators: the --format schema, --rules, --check. Each attempt is
    /// reported on stderr. Default 0 (validate once) when --rules, --check or --repair is given.
    #[arg(long, value_name = "N", help_heading = "Validation")]
    pub retries: Option<usize>,
    /// Extra rules the answer must also satisfy: a JSON Schema file (any keyword, including
    /// those a grammar cannot enforce).
    #[arg(long, value_name = "FILE", help_heading = "Validation")]
    pub rules: Option<PathBuf>,
    /// A shell command that checks the answer, given on its stdin: exit status 0 passes;
    /// otherwise its stderr (or stdout) is the error fed back. Repeatable.
    #[arg(long, value_name = "CMD", help_heading = "Validation")]
    pub check: Vec<String>,
    /// Seconds a --check command may run before it is killed (an error, not a failed answer).
    #[arg(long, value_name = "SECS", default_value_t = 10.0, help_heading = "Validation")]
    pub check_timeout: f64,
    /// What a retry sees: `feedback` (the failed answer and its errors, in the chat) or
    /// `resample` (the original prompt again, with the next seed). Small models often do better
    /// with `resample`.
    #[arg(long, value_name = "MODE", default_value = "feedback", value_parser = ["feedback", "resample"], help_heading = "Validation")]
    pub retry_mode: String,
    /// Extract and repair JSON from the answer (code fences, prose, trailing commas...) before
    /// validating, and print the repaired JSON: for runs without --format.
    #[arg(long, help_heading = "Validation")]
    pub repair: bool,
}

/// Resolved validation settings.
#[derive(Debug)]
pub(super) struct Plan {
    retries: usize,
    rules: Option<serde_json::Value>,
    checks: Vec<String>,
    check_timeout: Duration,
    repair: bool,
    mode: RetryMode,
}

impl Plan {
    /// Attempts at most (the first and the retries).
    pub(super) fn attempts(&self) -> usize {
        self.retries + 1
    }
}

impl RetryArgs {
    /// `None` when no validation flag is given; reads and checks the rules file.
    /// `has_schema`: `--format` gives a schema to validate against.
    pub(super) fn resolve(self, has_schema: bool) -> Result<Option<Plan>> {
        if self.retries.is_none() && self.rules.is_none() && self.check.is_empty() && !self.repair {
            return Ok(None);
        }
        if !has_schema && self.rules.is_none() && self.check.is_empty() && !self.repair {
            bail!("--retries needs something to validate against: --format SCHEMA, --rules FILE, --check CMD or --repair");
        }
        let rules = match &self.rules {
            Some(p) => {
                let text = std::fs::read_to_string(p).with_context(|| format!("reading the rules {}", p.display()))?;
                let v: serde_json::Value =
                    serde_json::from_str(&text).with_context(|| format!("the rules {} are not valid JSON", p.display()))?;
                formwork_schema::check_schema(&v).map_err(|e| anyhow::anyhow!("--rules {}: {e}", p.display()))?;
                Some(v)
            }
            None => None,
        };
        if !(self.check_timeout.is_finite() && self.check_timeout > 0.0) {
            bail!("--check-timeout must be a positive number of seconds");
        }
        Ok(Some(Plan {
            retries: self.retries.unwrap_or(0),
            rules,
            checks: self.check,
            check_timeout: Duration::from_secs_f64(self.check_timeout),
            repair: self.repair,
            mode: self.retry_mode.parse().map_err(anyhow::Error::msg)?,
        }))
    }
}

impl Plan {
    /// The engine's validation: the rules and the check commands (the `--format` schema is
    /// added by the request itself).
    pub(super) fn validation(&self) -> Validation {
        let mut validators = Vec::new();
        if let Some(r) = &self.rules {
            validators.push(Validator::Rules(r.clone()));
        }
        for c in &self.checks {
            validators.push(Validator::Command { command: c.clone(), timeout: self.check_timeout });
        }
        Validation { validators, retries: self.retries, repair: self.repair, mode: self.mode }
    }
}

/// Runs the request with validation and retry; prints each attempt's reasoning (stderr,
/// dimmed) and verdict (stderr) and the final answer (stdout).
pub(super) fn run(
    s: &Settings,
    plan: &Plan,
    request: Request,
    model: &mut formwork_llama::LlamaModel,
    load_duration: Duration,
) -> Result<()> {
    let total = plan.retries + 1;
    let verbose = s.verbose;
    let mut thinking = ThinkingPrinter::new();
    let v = request.run(model, &mut |e| {
        match e {
            Event::Thinking { text, .. } => thinking.piece(text),
            Event::Answer { .. } => thinking.end(),
            Event::Checked(a) => {
                thinking.end();
                report_attempt(a, total, verbose)
            }
        }
        ControlFlow::Continue(())
    })?;
    let mut out = std::io::stdout().lock();
    let text = v.text.trim_end_matches('\n');
    if let Err(e) = writeln!(out, "{text}").and_then(|_| out.flush()) {
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            return Err(e).context("writing the answer to stdout");
        }
    }
    drop(out);
    if s.verbose {
        let mut g = v.generation.clone();
        g.load_duration = load_duration;
        print_stats(&g, None);
    }
    let n = v.attempts.len();
    if v.valid != Some(true) {
        bail!("the answer failed validation after {n} attempt(s) (raise --retries, or loosen the rules)");
    }
    Ok(())
}

/// One attempt on stderr: its verdict and errors (with `--verbose`, its token counts too).
pub(super) fn report_attempt(a: &Attempt, total: usize, verbose: bool) {
    let mut e = std::io::stderr().lock();
    let verdict = if a.passed() {
        "passed validation".to_string()
    } else {
        format!("failed validation ({} error(s))", a.errors.len())
    };
    let _ = writeln!(e, "attempt {}/{total}: {verdict}", a.number);
    if verbose {
        let st = &a.stats;
        let _ = writeln!(
            e,
            "  {} prompt token(s) ({} reused), {} generated ({}), {} generating, {} validating",
            st.prompt_tokens,
            st.cached_prompt_tokens,
            st.eval_tokens,
            st.done_reason,
            fmt_duration(st.duration),
            fmt_duration(st.validation_duration)
        );
        if !a.passed() {
            let _ = writeln!(e, "  answer: {}", a.text.trim());
        }
    }
    if !a.fixes.is_empty() {
        let fixes: Vec<String> = a.fixes.iter().map(|f| f.to_string()).collect();
        let _ = writeln!(e, "  repaired: {}", fixes.join("; "));
    }
    for err in &a.errors {
        let _ = writeln!(e, "  - {err}");
    }
}
