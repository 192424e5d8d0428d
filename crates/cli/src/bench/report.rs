//! The summary of a `bench masks` run: per-engine tallies and the table with ratios.

use super::FileRun;

/// Statistics of one engine over a run.
#[derive(Default)]
pub(super) struct Tally {
    pub(super) files: usize,
    pub(super) compiled: usize,
    pub(super) refused: usize,
    pub(super) pass: usize,
    pub(super) validation_errors: usize,
    pub(super) invalidation_errors: usize,
    pub(super) ttfm: Vec<f64>,
    pub(super) tbm: Vec<f64>,
    pub(super) memory: Vec<usize>,
    pub(super) refusals: Vec<(String, String)>,
    /// How many of the slowest masks to keep in `slowest`.
    pub(super) keep_slowest: usize,
    /// The slowest masks: (µs, file, test, step, work counter).
    pub(super) slowest: Vec<(f64, String, u32, u32, u64)>,
    /// The slowest times to first mask (compile + first mask): (µs, file).
    pub(super) slowest_ttfm: Vec<(f64, String)>,
}

/// Inserts `x` into `v` (sorted slowest first) if it is among the `keep` slowest.
fn keep_slowest<T>(v: &mut Vec<(f64, T)>, keep: usize, x: (f64, T)) {
    if v.len() >= keep && v.last().is_none_or(|l| x.0 <= l.0) {
        return;
    }
    if v.len() >= keep {
        v.pop();
    }
    let at = v.partition_point(|y| y.0 >= x.0);
    v.insert(at, x);
}

pub(super) fn pct(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((q * sorted.len() as f64) as usize).min(sorted.len() - 1)]
}

impl Tally {
    pub(super) fn add(&mut self, name: &str, run: &FileRun, expected: &[bool]) {
        self.files += 1;
        if let Some(e) = &run.compile_error {
            self.refused += 1;
            self.refusals.push((name.to_string(), e.clone()));
            return;
        }
        self.compiled += 1;
        self.ttfm.push(run.ttfm_us);
        self.tbm.extend_from_slice(&run.mask_us);
        if self.keep_slowest > 0 {
            keep_slowest(&mut self.slowest_ttfm, self.keep_slowest, (run.ttfm_us, name.to_string()));
            for (&us, &(test, step, work)) in run.mask_us.iter().zip(&run.mask_at) {
                let full = self.slowest.len() >= self.keep_slowest;
                if full && us <= self.slowest[self.slowest.len() - 1].0 {
                    continue;
                }
                if full {
                    self.slowest.pop();
                }
                let at = self.slowest.partition_point(|x| x.0 >= us);
                self.slowest
                    .insert(at, (us, name.to_string(), test, step, work));
            }
        }
        if let Some(m) = run.memory {
            self.memory.push(m);
        }
        let mut ok = true;
        for (o, &valid) in run.tests.iter().zip(expected) {
            if valid && !o.accepted {
                self.validation_errors += 1;
                ok = false;
            }
            if !valid && o.accepted {
                self.invalidation_errors += 1;
                ok = false;
            }
        }
        if ok {
            self.pass += 1;
        }
    }

    fn figures(&mut self) -> Figures {
        self.ttfm.sort_by(f64::total_cmp);
        self.tbm.sort_by(f64::total_cmp);
        Figures {
            ttfm_p50: pct(&self.ttfm, 0.5),
            ttfm_p99: pct(&self.ttfm, 0.99),
            ttfm_max: self.ttfm.last().copied().unwrap_or(f64::NAN),
            tbm_p50: pct(&self.tbm, 0.5),
            tbm_p90: pct(&self.tbm, 0.9),
            tbm_p99: pct(&self.tbm, 0.99),
            tbm_p999: pct(&self.tbm, 0.999),
            tbm_max: self.tbm.last().copied().unwrap_or(f64::NAN),
            mem: if self.memory.is_empty() {
                f64::NAN
            } else {
                self.memory.iter().sum::<usize>() as f64 / self.memory.len() as f64
            },
        }
    }
}

#[derive(Clone, Copy)]
struct Figures {
    ttfm_p50: f64,
    ttfm_p99: f64,
    ttfm_max: f64,
    tbm_p50: f64,
    tbm_p90: f64,
    tbm_p99: f64,
    tbm_p999: f64,
    tbm_max: f64,
    mem: f64,
}

impl Figures {
    fn cells(&self) -> [f64; 9] {
        [
            self.ttfm_p50,
            self.ttfm_p99,
            self.ttfm_max,
            self.tbm_p50,
            self.tbm_p90,
            self.tbm_p99,
            self.tbm_p999,
            self.tbm_max,
            self.mem,
        ]
    }
}

pub(super) fn fmt_us(x: f64) -> String {
    if x.is_nan() {
        "-".into()
    } else if x >= 10_000.0 {
        format!("{:.1}ms", x / 1000.0)
    } else if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

fn fmt_mem(x: f64) -> String {
    if x.is_nan() {
        "n/a".into()
    } else {
        format!("{:.0}KiB", x / 1024.0)
    }
}

pub(super) fn print_table(title: &str, tallies: &mut [(&'static str, Tally)]) {
    println!("\n## {title}\n");
    println!(
        "| engine | files | compiled | refused | pass | valid. err | invalid. err | TTFM p50 µs | TTFM p99 | TTFM max | TBM p50 µs | p90 | p99 | p99.9 | max | masks | mem/grammar |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut figs = Vec::new();
    for (name, t) in tallies.iter_mut() {
        let f = t.figures();
        let c = f.cells();
        println!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            t.files,
            t.compiled,
            t.refused,
            t.pass,
            t.validation_errors,
            t.invalidation_errors,
            fmt_us(c[0]),
            fmt_us(c[1]),
            fmt_us(c[2]),
            fmt_us(c[3]),
            fmt_us(c[4]),
            fmt_us(c[5]),
            fmt_us(c[6]),
            fmt_us(c[7]),
            t.tbm.len(),
            fmt_mem(c[8])
        );
        figs.push(f);
    }
    if figs.len() == 2 {
        let (a, b) = (figs[0].cells(), figs[1].cells());
        let ratio = |x: f64, y: f64| {
            let r = x / y;
            if !(y > 0.0) || r.is_nan() {
                "-".to_string()
            } else if r < 0.1 {
                format!("{r:.3}×")
            } else {
                format!("{r:.2}×")
            }
        };
        let r: Vec<String> = (0..8).map(|i| ratio(a[i], b[i])).collect();
        println!(
            "| ratio {}/{} | | | | | | | {} | {} | {} | {} | {} | {} | {} | {} | | |",
            tallies[0].0, tallies[1].0, r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]
        );
    }
    for (name, t) in tallies.iter() {
        if !t.refusals.is_empty() {
            println!("\n{name} refused {} file(s), e.g.:", t.refusals.len());
            for (f, e) in t.refusals.iter().take(5) {
                let e: String = e.chars().take(160).collect();
                println!("  {f}: {e}");
            }
            println!("  by keyword: {}", refusals_by_keyword(&t.refusals));
        }
    }
}

/// The refusals counted by the keyword their message names (`unsupported keyword `k``),
/// most first: "oneOf 20, uniqueItems 7, other 1".
fn refusals_by_keyword(refusals: &[(String, String)]) -> String {
    let mut counts: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for (_, e) in refusals {
        let kw = e.split_once("keyword `").and_then(|(_, rest)| rest.split_once('`')).map_or("other", |(k, _)| k);
        *counts.entry(kw).or_default() += 1;
    }
    let mut v: Vec<(&str, usize)> = counts.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    v.iter().map(|(k, n)| format!("{k} {n}")).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod refusal_tests {
    #[test]
    fn refusals_are_counted_by_the_keyword_they_name() {
        let r = |e: &str| ("f.json".to_string(), e.to_string());
        let got = super::refusals_by_keyword(&[
            r("unsupported keyword `oneOf` at /a: branches 0 and 1 may both match"),
            r("unsupported keyword `uniqueItems` at /b: enforced only for small domains"),
            r("unsupported keyword `oneOf` at /c: the negation of `additionalProperties`"),
            r("grammar limit: too many rules"),
        ]);
        assert_eq!(got, "oneOf 2, other 1, uniqueItems 1");
    }
}
