//! `GET /metrics`: Prometheus text exposition of each model's requests.
//!
//! Per model (label `model`): requests running and queued, slots, requests finished by
//! outcome, requests refused because the queue was full, prompt and generated tokens, and
//! histograms of the time to first token and of request latency (from the moment the
//! request was queued). Counters are atomics updated by the workers and handlers; rendering
//! reads them without stopping anyone.
//!
//! A batched model (`formwork serve --parallel N` on llama.cpp) adds its batcher's counters
//! ([`BatchStats`]): batch steps, tokens evaluated, the most sequences in one step, prompt
//! tokens reused from the slots' caches, prefix copies between slots, and sequences moved
//! down to close gaps between the slots in use. Tokens evaluated per step
//! (`formwork_batch_tokens_total / formwork_batch_steps_total`) is how full the steps are.

use formwork_engine::batch::BatchStats;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// Upper bounds of the histogram buckets, in seconds (the last, +Inf, is implied).
const BUCKETS: [f64; 14] = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 60.0, 120.0, 300.0];

/// A Prometheus histogram of durations with fixed buckets.
#[derive(Debug, Default)]
pub struct Histogram {
    /// Observations at most `BUCKETS[i]` (not cumulative; summed when rendered).
    counts: [AtomicU64; BUCKETS.len() + 1],
    /// Sum of the observations, in microseconds.
    sum_us: AtomicU64,
}

impl Histogram {
    /// Records one duration.
    pub fn observe(&self, d: Duration) {
        let s = d.as_secs_f64();
        let i = BUCKETS.iter().position(|&b| s <= b).unwrap_or(BUCKETS.len());
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(u64::try_from(d.as_micros()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.counts.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }

    fn render(&self, out: &mut String, name: &str, model: &str) {
        let mut cumulative = 0;
        for (i, c) in self.counts.iter().enumerate() {
            cumulative += c.load(Ordering::Relaxed);
            let le = BUCKETS.get(i).map_or("+Inf".to_string(), |b| b.to_string());
            let _ = writeln!(out, "{name}_bucket{{model=\"{model}\",le=\"{le}\"}} {cumulative}");
        }
        let sum = self.sum_us.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum{{model=\"{model}\"}} {sum}");
        let _ = writeln!(out, "{name}_count{{model=\"{model}\"}} {cumulative}");
    }
}

/// The counters of one model.
#[derive(Debug, Default)]
pub struct Metrics {
    running: AtomicUsize,
    /// Requests refused because the queue was full.
    pub rejected: AtomicU64,
    /// Requests that finished successfully.
    pub succeeded: AtomicU64,
    /// Requests that finished with an error (including timeouts).
    pub failed: AtomicU64,
    /// Prompt tokens of finished requests.
    pub prompt_tokens: AtomicU64,
    /// Generated tokens of finished requests.
    pub generated_tokens: AtomicU64,
    /// Time from queueing to the first piece of output.
    pub ttft: Histogram,
    /// Time from queueing to the end.
    pub latency: Histogram,
}

/// Counts a running request until dropped.
#[derive(Debug)]
pub struct Running<'a>(&'a AtomicUsize);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Metrics {
    /// Marks a request as running until the guard is dropped.
    pub fn running(&self) -> Running<'_> {
        self.running.fetch_add(1, Ordering::Relaxed);
        Running(&self.running)
    }

    /// Requests running now.
    pub fn running_now(&self) -> usize {
        self.running.load(Ordering::Relaxed)
    }
}

/// Escapes a label value.
fn label(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// What `/metrics` shows of one model: its name, its counters, and its queue and slots now.
#[derive(Clone, Copy, Debug)]
pub struct ModelFigures<'a> {
    /// The model's name (the `model` label).
    pub name: &'a str,
    /// Its counters.
    pub metrics: &'a Metrics,
    /// Requests waiting for a slot now.
    pub queued: usize,
    /// Requests it runs at once (`--parallel`).
    pub slots: usize,
    /// Its batcher's counters now, if the model is batched.
    pub batch: Option<BatchStats>,
}

/// A batcher counter's series: name, help, type, and the counter.
type BatchSeries = (&'static str, &'static str, &'static str, fn(&BatchStats) -> u64);

/// The exposition text for `models`.
pub fn render(models: &[ModelFigures<'_>]) -> String {
    let mut out = String::new();
    // A series over `ms`, one line per model.
    let series = |out: &mut String, ms: &[&ModelFigures<'_>], name: &str, help: &str, kind: &str, value: &dyn Fn(&ModelFigures<'_>) -> String| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for m in ms {
            let _ = writeln!(out, "{name}{{model=\"{}\"}} {}", label(m.name), value(m));
        }
    };
    let all: Vec<&ModelFigures<'_>> = models.iter().collect();
    let gauge = |out: &mut String, name: &str, help: &str, kind: &str, value: &dyn Fn(&ModelFigures<'_>) -> String| series(out, &all, name, help, kind, value);
    let ld = |a: &AtomicU64| a.load(Ordering::Relaxed).to_string();
    gauge(&mut out, "formwork_requests_running", "Requests being generated now.", "gauge", &|m| m.metrics.running_now().to_string());
    gauge(&mut out, "formwork_requests_queued", "Requests waiting for a slot.", "gauge", &|m| m.queued.to_string());
    gauge(&mut out, "formwork_slots", "Requests a model runs at once (--parallel).", "gauge", &|m| m.slots.to_string());
    gauge(&mut out, "formwork_slots_busy", "Slots in use now.", "gauge", &|m| m.metrics.running_now().min(m.slots).to_string());
    gauge(&mut out, "formwork_requests_succeeded_total", "Requests finished successfully.", "counter", &|m| ld(&m.metrics.succeeded));
    gauge(&mut out, "formwork_requests_failed_total", "Requests finished with an error.", "counter", &|m| ld(&m.metrics.failed));
    gauge(&mut out, "formwork_requests_rejected_total", "Requests refused with 503 because the queue was full.", "counter", &|m| ld(&m.metrics.rejected));
    gauge(&mut out, "formwork_prompt_tokens_total", "Prompt tokens of finished requests.", "counter", &|m| ld(&m.metrics.prompt_tokens));
    gauge(&mut out, "formwork_generated_tokens_total", "Tokens generated by finished requests.", "counter", &|m| ld(&m.metrics.generated_tokens));
    // A batched model's batcher counters (models without a batcher have none).
    let batched: Vec<&ModelFigures<'_>> = models.iter().filter(|m| m.batch.is_some()).collect();
    let batch_series: [BatchSeries; 6] = [
        ("formwork_batch_steps_total", "Batch steps run (model evaluations).", "counter", |b| b.steps),
        ("formwork_batch_tokens_total", "Tokens evaluated in batch steps, prompts included.", "counter", |b| b.tokens),
        ("formwork_batch_sequences_max", "Most sequences evaluated in one batch step.", "gauge", |b| b.max_batch_sequences as u64),
        ("formwork_prompt_tokens_reused_total", "Prompt tokens reused from the slots' KV caches.", "counter", |b| b.reused_tokens),
        ("formwork_prefix_copies_total", "Requests started from a prefix copied from another slot's KV cache.", "counter", |b| b.prefix_copies),
        ("formwork_sequence_moves_total", "Sequences moved to a lower slot to close a gap between the slots in use.", "counter", |b| b.moves),
    ];
    if !batched.is_empty() {
        for (name, help, kind, pick) in batch_series {
            series(&mut out, &batched, name, help, kind, &|m| m.batch.as_ref().map_or(0, pick).to_string());
        }
    }
    for (name, help, pick) in [
        ("formwork_time_to_first_token_seconds", "Time from queueing a request to its first output.", (|m: &Metrics| &m.ttft) as fn(&Metrics) -> &Histogram),
        ("formwork_request_duration_seconds", "Time from queueing a request to its end.", |m: &Metrics| &m.latency),
    ] {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for m in models {
            pick(m.metrics).render(&mut out, name, &label(m.name));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative() {
        let h = Histogram::default();
        h.observe(Duration::from_millis(5));
        h.observe(Duration::from_millis(200));
        h.observe(Duration::from_secs(1000));
        let mut s = String::new();
        h.render(&mut s, "x", "m");
        assert!(s.contains("x_bucket{model=\"m\",le=\"0.01\"} 1\n"), "{s}");
        assert!(s.contains("x_bucket{model=\"m\",le=\"0.25\"} 2\n"), "{s}");
        assert!(s.contains("x_bucket{model=\"m\",le=\"300\"} 2\n"), "{s}");
        assert!(s.contains("x_bucket{model=\"m\",le=\"+Inf\"} 3\n"), "{s}");
        assert!(s.contains("x_count{model=\"m\"} 3\n"), "{s}");
        assert_eq!(h.count(), 3);
    }

    #[test]
    fn batch_counters_are_rendered_for_batched_models_only() {
        let (a, b) = (Metrics::default(), Metrics::default());
        let stats = BatchStats { steps: 7, tokens: 90, max_batch_sequences: 4, reused_tokens: 30, prefix_copies: 2, moves: 3, ..Default::default() };
        let text = render(&[
            ModelFigures { name: "batched", metrics: &a, queued: 0, slots: 4, batch: Some(stats) },
            ModelFigures { name: "single", metrics: &b, queued: 0, slots: 1, batch: None },
        ]);
        for line in [
            "formwork_batch_steps_total{model=\"batched\"} 7\n",
            "formwork_batch_tokens_total{model=\"batched\"} 90\n",
            "formwork_batch_sequences_max{model=\"batched\"} 4\n",
            "formwork_prompt_tokens_reused_total{model=\"batched\"} 30\n",
            "formwork_prefix_copies_total{model=\"batched\"} 2\n",
            "formwork_sequence_moves_total{model=\"batched\"} 3\n",
            "# TYPE formwork_sequence_moves_total counter\n",
            "# TYPE formwork_batch_sequences_max gauge\n",
        ] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
        assert!(!text.contains("formwork_batch_steps_total{model=\"single\"}"), "{text}");
        // Without a batched model there are no batch series at all.
        let text = render(&[ModelFigures { name: "single", metrics: &b, queued: 0, slots: 1, batch: None }]);
        assert!(!text.contains("formwork_batch_"), "{text}");
    }
}
