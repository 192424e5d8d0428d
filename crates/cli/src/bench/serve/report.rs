//! The figures of a level ([`LevelResult`], from the outcomes of its requests) and the
//! markdown table or JSON object they are printed as.

use super::client::{clip, one_line, Outcome};
use super::{person_schema, Mode, Settings};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::time::Duration;

/// The figures of one level in one mode.
#[derive(Debug, Default)]
pub(super) struct LevelResult {
    pub(super) clients: usize,
    pub(super) mode: &'static str,
    pub(super) requests: usize,
    pub(super) answered: usize,
    pub(super) errors: usize,
    /// The first few distinct error messages.
    pub(super) error_messages: Vec<String>,
    /// Schema mode: answers that are not JSON or do not validate.
    pub(super) invalid: usize,
    /// The first few invalid answers, with why.
    pub(super) invalid_examples: Vec<String>,
    /// Answers that ended with `finish_reason: length`.
    pub(super) cut_off: usize,
    pub(super) completion_tokens: u64,
    /// Answered requests whose tokens were counted by content chunks (no `usage`).
    pub(super) counted_by_chunks: usize,
    pub(super) wall: Duration,
    /// Seconds, sorted.
    pub(super) ttft: Vec<f64>,
    /// Seconds, sorted.
    pub(super) latency: Vec<f64>,
}

pub(super) const KEEP_MESSAGES: usize = 3;

impl LevelResult {
    pub(super) fn tok_per_s(&self) -> f64 {
        self.completion_tokens as f64 / self.wall.as_secs_f64().max(1e-9)
    }

    pub(super) fn req_per_s(&self) -> f64 {
        self.answered as f64 / self.wall.as_secs_f64().max(1e-9)
    }

    pub(super) fn to_json(&self) -> Value {
        let opt = |x: f64| if x.is_nan() { Value::Null } else { json!(x) };
        json!({
            "clients": self.clients,
            "mode": self.mode,
            "requests": self.requests,
            "answered": self.answered,
            "errors": self.errors,
            "error_messages": self.error_messages,
            "invalid": if self.mode == "schema" { json!(self.invalid) } else { Value::Null },
            "invalid_examples": self.invalid_examples,
            "cut_off": self.cut_off,
            "completion_tokens": self.completion_tokens,
            "counted_by_chunks": self.counted_by_chunks,
            "wall_s": self.wall.as_secs_f64(),
            "tok_per_s": self.tok_per_s(),
            "req_per_s": self.req_per_s(),
            "ttft_p50_s": opt(percentile(&self.ttft, 0.5)),
            "ttft_p99_s": opt(percentile(&self.ttft, 0.99)),
            "latency_p50_s": opt(percentile(&self.latency, 0.5)),
            "latency_p99_s": opt(percentile(&self.latency, 0.99)),
        })
    }
}

/// Nearest-rank percentile of sorted values: the smallest value with at least a fraction `q`
/// of the values at or below it (`q` in (0, 1]); NaN when there are none.
pub(super) fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Why an answer in `mode` is invalid, if it is: in schema mode, not JSON or not valid
/// against `schema`; a free answer is never invalid.
pub(super) fn invalid_reason(mode: Mode, schema: &Value, content: &str) -> Option<String> {
    if mode == Mode::Free {
        return None;
    }
    formwork_schema::validate(schema, content).err().map(|errs| errs.join("; "))
}

/// Sums up the outcomes of a level that took `wall`.
pub(super) fn summarize(clients: usize, mode: Mode, schema: &Value, outcomes: &[Outcome], wall: Duration) -> LevelResult {
    let mut r = LevelResult { clients, mode: mode.name(), requests: outcomes.len(), wall, ..Default::default() };
    for o in outcomes {
        if let Some(e) = &o.error {
            r.errors += 1;
            if r.error_messages.len() < KEEP_MESSAGES && !r.error_messages.contains(e) {
                r.error_messages.push(e.clone());
            }
            continue;
        }
        r.answered += 1;
        let (n, from_usage) = o.tokens();
        r.completion_tokens += n;
        r.counted_by_chunks += usize::from(!from_usage);
        if o.finish_reason.as_deref() == Some("length") {
            r.cut_off += 1;
        }
        if let Some(why) = invalid_reason(mode, schema, &o.content) {
            r.invalid += 1;
            if r.invalid_examples.len() < KEEP_MESSAGES {
                r.invalid_examples.push(format!("{} ({})", clip(&one_line(&o.content), 160), clip(&why, 160)));
            }
        }
        if let Some(t) = o.ttft {
            r.ttft.push(t.as_secs_f64());
        }
        r.latency.push(o.latency.as_secs_f64());
    }
    r.ttft.sort_by(f64::total_cmp);
    r.latency.sort_by(f64::total_cmp);
    r
}

// ---------------------------------------------------------------------------------------
// The run.


pub(super) fn report_json(s: &Settings, results: &[LevelResult]) -> Value {
    json!({
        "label": s.label,
        "url": s.url,
        "model": s.model,
        "requests_per_client": s.requests,
        "max_tokens": s.max_tokens,
        "temperature": s.temperature,
        "seed": s.seed,
        "schema": person_schema(),
        "levels": results.iter().map(LevelResult::to_json).collect::<Vec<_>>(),
    })
}

/// Seconds as `850 ms` or `9.52 s`.
pub(super) fn fmt_secs(x: f64) -> String {
    if x.is_nan() {
        "-".into()
    } else if x < 1.0 {
        format!("{:.0} ms", x * 1000.0)
    } else {
        format!("{x:.2} s")
    }
}

pub(super) fn report_table(s: &Settings, results: &[LevelResult]) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "\n## bench serve: {} · model {} · ≤{} tokens · temperature {} · {} request(s) per client\n",
        s.label, s.model, s.max_tokens, s.temperature, s.requests
    );
    t.push_str("| server | clients | mode | requests | errors | invalid | cut off | gen tok/s | req/s | TTFT p50 | TTFT p99 | latency p50 | latency p99 | tokens/answer |\n");
    t.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for r in results {
        let invalid = if r.mode == "schema" { format!("{} / {}", r.invalid, r.answered) } else { "-".into() };
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {} | {} | {} | {:.1} | {:.2} | {} | {} | {} | {} | {:.1} |",
            s.label,
            r.clients,
            r.mode,
            r.requests,
            r.errors,
            invalid,
            r.cut_off,
            r.tok_per_s(),
            r.req_per_s(),
            fmt_secs(percentile(&r.ttft, 0.5)),
            fmt_secs(percentile(&r.ttft, 0.99)),
            fmt_secs(percentile(&r.latency, 0.5)),
            fmt_secs(percentile(&r.latency, 0.99)),
            r.completion_tokens as f64 / r.answered.max(1) as f64
        );
    }
    for r in results {
        let at = format!("{} client(s), {}", r.clients, r.mode);
        if !r.error_messages.is_empty() {
            let _ = writeln!(t, "\nerrors at {at} ({} in all), first ones:", r.errors);
            for m in &r.error_messages {
                let _ = writeln!(t, "  - {}", clip(m, 300));
            }
        }
        if !r.invalid_examples.is_empty() {
            let _ = writeln!(t, "\ninvalid answers at {at} ({} in all), e.g.:", r.invalid);
            for m in &r.invalid_examples {
                let _ = writeln!(t, "  - {m}");
            }
        }
        if r.counted_by_chunks > 0 {
            let _ = writeln!(
                t,
                "\nat {at}: the server sent no usage for {} of {} answers; their tokens were counted as content chunks",
                r.counted_by_chunks, r.answered
            );
        }
    }
    t
}
