//! `formwork run` with reasoning models: the `--think` flags, which reasoning a run gets, and
//! the reasoning printed (dimmed on a terminal) to stderr before the answer, which goes to
//! stdout (so `formwork run --format json ... | jq` sees the answer only).

use anyhow::{bail, Result};
use formwork_engine::reasoning::{Reasoning, ReasoningFormat, ReasoningMarkers, Think};
use formwork_engine::Model;
use std::io::{IsTerminal, Write};

/// Reasoning flags of `formwork run`.
#[derive(clap::Args, Debug, Default)]
pub struct ThinkArgs {
    /// Reasoning models: reason before answering (the default for chats when the model's
    /// chat template shows a reasoning section, e.g. `<think>`). The reasoning is printed to
    /// stderr, dimmed; `--format`/`--grammar` constrain the answer after it.
    #[arg(long, conflicts_with = "no_think")]
    pub think: bool,
    /// Reasoning models: answer directly, without reasoning.
    #[arg(long)]
    pub no_think: bool,
    /// Most reasoning tokens; then the end of the reasoning section is forced.
    #[arg(long, value_name = "N", conflicts_with = "no_think")]
    pub think_budget: Option<usize>,
    /// The reasoning section's markers, when the chat template does not show them (or shows
    /// others): `OPEN,CLOSE`, e.g. `<think>,</think>`.
    #[arg(long, value_name = "OPEN,CLOSE", value_parser = ReasoningMarkers::parse)]
    pub think_markers: Option<ReasoningMarkers>,
}

impl ThinkArgs {
    /// What this run does about reasoning, once the model is loaded: `None` for plain
    /// generation (a model without a reasoning section, `--raw` without `--think`).
    pub fn reasoning(&self, model: &dyn Model, raw: bool) -> Result<Option<Reasoning>> {
        let Some(format) = ReasoningFormat::for_model(model, self.think_markers.clone()) else {
            if self.think || self.think_budget.is_some() {
                bail!(
                    "--think/--think-budget: the model's chat template shows no reasoning section; \
                     if it has one, give its markers with --think-markers OPEN,CLOSE"
                );
            }
            return Ok(None);
        };
        let think = if self.no_think {
            Think::Off
        } else if self.think || !raw {
            Think::On { effort: None }
        } else {
            return Ok(None);
        };
        Ok(Some(Reasoning { format, think, budget: self.think_budget }))
    }
}

/// Prints reasoning pieces to stderr (dimmed on a terminal) and ends the block before the
/// answer.
pub struct ThinkingPrinter {
    err: std::io::Stderr,
    color: bool,
    open: bool,
}

impl ThinkingPrinter {
    /// A printer to stderr.
    pub fn new() -> Self {
        let err = std::io::stderr();
        let color = err.is_terminal();
        ThinkingPrinter { err, color, open: false }
    }

    /// Prints a piece of reasoning.
    pub fn piece(&mut self, t: &str) {
        let mut e = self.err.lock();
        let _ = if self.color { write!(e, "\x1b[2m{t}\x1b[0m") } else { write!(e, "{t}") };
        let _ = e.flush();
        self.open = true;
    }

    /// Ends the reasoning block (a blank line before the answer), once.
    pub fn end(&mut self) {
        if std::mem::take(&mut self.open) {
            let _ = writeln!(self.err.lock(), "\n");
        }
    }
}
