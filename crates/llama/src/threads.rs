//! A thread count that follows the machine's load (issue 13, item 5).
//!
//! ## Why
//! llama.cpp's workers meet at a spinning barrier many times per token. When another
//! process keeps a core busy, a worker that the kernel deschedules holds the others at the
//! barrier until its next time slice: on 2 cores, SmolLM2 generates 36 tokens/s with 2
//! threads against 84 with 1 (idle: 134 against 66). A fixed default is wrong one way or
//! the other, so the default (no `--threads`) measures instead.
//!
//! ## How
//! [`Governor`] times every decode step and keeps, per thread count and per batch size
//! (powers of two of the tokens in the step), a moving average of the step time. It stays
//! on one thread count and, every [`EXPLORE_EVERY`] steps, runs a trial: [`EXPLORE_STEPS`]
//! steps on a neighbour (one thread fewer or one more, within `1..=max`), then as many on
//! the current count, each step relative to the current count's average for its batch
//! size. When the neighbour's median is below [`SWITCH_GAIN`] times the current count's,
//! the neighbour becomes the current count. A step slower than [`COLLAPSE`] times its
//! average starts a trial at once, so a collapse costs a few steps, not a stretch. Trials
//! cost at most `EXPLORE_STEPS / EXPLORE_EVERY` (6 %) of steps at a worse count; on an idle
//! machine the neighbours lose and nothing changes; each trial that changes nothing doubles
//! the wait before the next, up to [`EXPLORE_MAX`] steps, so a settled machine spends well
//! under 1 % of its steps on trials (and takes up to that many steps to notice that a busy
//! core has freed: a few seconds).
//!
//! A scheduled trial on fewer threads is skipped when nothing else uses the CPU
//! ([`LoadProbe`]: the machine's busy time from `/proc/stat` less this process's own, under a
//! quarter of a core since the last look), so an idle machine runs all its steps on all its
//! threads; a collapse still starts a trial at once.
//!
//! ## The thread pool
//! Without a pool of its own, llama.cpp starts and joins its worker threads on every
//! evaluation. [`Pool`] gives the context workers that last as long as it does, as
//! llama-bench and llama-server do.
//!
//! ## The context pointer
//! `llama_set_n_threads` changes the count of a live context, but llama-cpp-2 0.1.160 keeps
//! the `llama_context` pointer private. Its `Debug` output prints it
//! (`LlamaContext { context: 0x… }`), so [`raw_context`] reads it from there, exactly in
//! that shape, and checks it against the context's own answers (context length, batch
//! size, thread count) before anything uses it; if any of that fails, the thread count
//! simply stays fixed. Both crates are pinned exactly, and a test on the real model checks
//! that the pointer is found and the count changes.

use llama_cpp_2::context::LlamaContext;
use llama_cpp_sys_2::llama_context;

/// Steps on the current count before the first trial, and after a trial that switched.
pub(crate) const EXPLORE_EVERY: u32 = 48;
/// Each trial that changes nothing doubles the steps before the next, up to this.
pub(crate) const EXPLORE_MAX: u32 = 768;
/// Steps an exploration lasts.
pub(crate) const EXPLORE_STEPS: u32 = 3;
/// A neighbour must be this much faster (median step time over the current average).
pub(crate) const SWITCH_GAIN: f64 = 0.85;
/// A step this many times slower than its average explores at once.
pub(crate) const COLLAPSE: f64 = 2.0;
/// Weight of a new step in an average.
const ALPHA: f64 = 0.2;
/// Batch-size buckets (1, 2-3, 4-7, ..., 128 and more tokens).
const BUCKETS: usize = 8;

fn bucket(n_tokens: usize) -> usize {
    (usize::BITS - n_tokens.max(1).leading_zeros() - 1).min(BUCKETS as u32 - 1) as usize
}

/// Chooses the thread count of each decode step (see the module docs). Pure: no clock and
/// no llama.cpp, so its policy is tested with made-up timings.
#[derive(Debug)]
pub(crate) struct Governor {
    max: usize,
    current: usize,
    /// Indexed by thread count - 1, then bucket: average seconds per step.
    avg: Vec<[Option<f64>; BUCKETS]>,
    /// Steps on `current` since the last trial, and how many the next one waits for.
    since: u32,
    every: u32,
    trial: Option<Trial>,
    /// The next trial goes down (else up).
    down_next: bool,
}

/// A neighbour's steps, then as many of the current count's, each as a ratio to the current
/// count's average for its batch size: paired, so that a machine that just got busier
/// (the current count's average still from before) compares fresh against fresh.
#[derive(Debug)]
struct Trial {
    n: usize,
    theirs: Vec<f64>,
    ours: Vec<f64>,
}

impl Governor {
    /// Starts at `max` threads, never above it.
    pub(crate) fn new(max: usize) -> Self {
        let max = max.max(1);
        Governor { max, current: max, avg: vec![[None; BUCKETS]; max], since: 0, every: EXPLORE_EVERY, trial: None, down_next: true }
    }

    /// The count the settled steps use.
    pub(crate) fn current(&self) -> usize {
        self.current
    }

    /// The count the coming step should use.
    pub(crate) fn threads(&self) -> usize {
        match &self.trial {
            Some(t) if (t.theirs.len() as u32) < EXPLORE_STEPS => t.n,
            _ => self.current,
        }
    }

    /// Records a step of `n_tokens` that took `secs` with `threads` threads (what
    /// [`threads`](Self::threads) said). `quiet` is asked only when a scheduled trial on
    /// all threads is due: whether no other process has kept a notable share of a core busy
    /// lately ([`LoadProbe::quiet`]); then a trial on fewer threads could only lose, and is
    /// skipped.
    pub(crate) fn record(&mut self, threads: usize, n_tokens: usize, secs: f64, quiet: impl FnOnce() -> bool) {
        if self.max == 1 || threads == 0 || threads > self.max || !secs.is_finite() {
            return;
        }
        let b = bucket(n_tokens);
        let base = self.avg[self.current - 1][b];
        let slot = &mut self.avg[threads - 1][b];
        *slot = Some(slot.map_or(secs, |a| a + ALPHA * (secs - a)));
        let ratio = base.filter(|&a| a > 0.0).map(|a| secs / a);
        if let Some(t) = &mut self.trial {
            if threads == t.n && (t.theirs.len() as u32) < EXPLORE_STEPS {
                // A step without a comparable average still counts, as an even one.
                t.theirs.push(ratio.unwrap_or(1.0));
            } else if threads == self.current {
                t.ours.push(ratio.unwrap_or(1.0));
                if t.ours.len() as u32 >= EXPLORE_STEPS {
                    if median(&mut t.theirs) < SWITCH_GAIN * median(&mut t.ours) {
                        self.current = t.n;
                        self.every = EXPLORE_EVERY;
                    } else {
                        self.every = (self.every * 2).min(EXPLORE_MAX);
                    }
                    self.trial = None;
                    self.since = 0;
                }
            }
            return;
        }
        if threads != self.current {
            return;
        }
        self.since += 1;
        let collapsed = ratio.is_some_and(|r| r > COLLAPSE);
        if self.since >= self.every || collapsed {
            if !collapsed && self.current == self.max && quiet() {
                self.since = 0;
                return;
            }
            self.start_trial(collapsed);
        }
    }

    fn start_trial(&mut self, collapsed: bool) {
        let down = (self.current > 1).then(|| self.current - 1);
        let up = (self.current < self.max).then(|| self.current + 1);
        // A collapse is a busy machine: fewer threads first.
        let n = if collapsed || self.down_next { down.or(up) } else { up.or(down) };
        self.down_next = !self.down_next;
        self.since = 0;
        self.trial = n.map(|n| Trial { n, theirs: Vec::new(), ours: Vec::new() });
    }
}

/// Whether other processes are using the CPU, from `/proc` (Linux): the machine's busy
/// time (`/proc/stat`) less this process's own (`/proc/self/stat`), per second of wall time
/// since the last reading. Elsewhere, or before a first reading, it never says quiet.
#[derive(Debug, Default)]
pub(crate) struct LoadProbe {
    last: Option<(std::time::Instant, u64, u64)>,
}

/// Below this many cores' worth of other processes' CPU time, the machine counts as quiet.
const QUIET_CORES: f64 = 0.25;
/// `/proc`'s clock ticks per second (Linux's `USER_HZ`, 100 on every architecture it
/// exports to user space).
const TICKS_PER_SEC: f64 = 100.0;

impl LoadProbe {
    /// Whether other processes used less than [`QUIET_CORES`] since the previous call.
    pub(crate) fn quiet(&mut self) -> bool {
        let Some((all, own)) = Self::read() else { return false };
        let now = std::time::Instant::now();
        let before = self.last.replace((now, all, own));
        let Some((t0, all0, own0)) = before else { return false };
        let wall = now.duration_since(t0).as_secs_f64() * TICKS_PER_SEC;
        let others = (all.saturating_sub(all0) as f64 - own.saturating_sub(own0) as f64).max(0.0);
        wall > 0.0 && others / wall < QUIET_CORES
    }

    /// The machine's busy ticks and this process's, when `/proc` can be read.
    fn read() -> Option<(u64, u64)> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let cpu: Vec<u64> = stat.lines().next()?.strip_prefix("cpu ")?.split_whitespace().filter_map(|f| f.parse().ok()).collect();
        // user nice system idle iowait irq softirq steal: busy is all but idle and iowait.
        let all = [0, 1, 2, 5, 6, 7].iter().filter_map(|&i| cpu.get(i)).sum();
        let own = std::fs::read_to_string("/proc/self/stat").ok()?;
        // After the command name in parentheses: state is field 3, utime and stime 14 and 15.
        let rest: Vec<&str> = own.rsplit_once(')')?.1.split_whitespace().collect();
        let own = rest.get(11)?.parse::<u64>().ok()? + rest.get(12)?.parse::<u64>().ok()?;
        Some((all, own))
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(1.0)
}

/// The `llama_context` behind `ctx` (see the module docs), or `None` when it cannot be read
/// or does not check out against the context's own answers.
pub(crate) fn raw_context(ctx: &LlamaContext<'_>, n_threads: usize) -> Option<*mut llama_context> {
    let shown = format!("{ctx:?}");
    let hex = shown.strip_prefix("LlamaContext { context: 0x")?.strip_suffix(" }")?;
    if hex.is_empty() || hex.len() > 16 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let addr = usize::from_str_radix(hex, 16).ok()?;
    if addr == 0 || addr % std::mem::align_of::<usize>() != 0 {
        return None;
    }
    let p = addr as *mut llama_context;
    // SAFETY: `p` is what llama-cpp-2 prints for its own non-null context pointer (the
    // shape checked above); the calls only read the context's parameters.
    let ok = unsafe {
        llama_cpp_sys_2::llama_n_ctx(p) == ctx.n_ctx()
            && llama_cpp_sys_2::llama_n_batch(p) == ctx.n_batch()
            && usize::try_from(llama_cpp_sys_2::llama_n_threads(p)).ok() == Some(n_threads)
    };
    ok.then_some(p)
}

/// Sets the thread count of the context `p` (from [`raw_context`]) for both single-token
/// and batch evaluation.
pub(crate) fn set_threads(p: *mut llama_context, n: usize) {
    let n = i32::try_from(n).unwrap_or(i32::MAX);
    // SAFETY: `p` was checked by `raw_context` and lives as long as its `LlamaContext`,
    // which the caller holds; llama.cpp applies the count from the next evaluation on.
    unsafe { llama_cpp_sys_2::llama_set_n_threads(p, n, n) }
}

/// Worker threads that live as long as their context (llama.cpp's `ggml_threadpool`).
///
/// Without one, llama.cpp makes a new set of threads for every evaluation and joins them at
/// its end: about 3.4 context switches per generated token against llama-bench's 0.3
/// (`perf stat`, SmolLM2, 2 threads, 256 tokens). The pool's workers wait for the next
/// evaluation by polling for a while (llama.cpp's default poll level) and then sleep. It
/// has as many workers as the context's thread count, the most the governor ever asks for.
pub(crate) struct Pool(*mut llama_cpp_sys_2::ggml_threadpool);

impl Pool {
    /// A pool of `n_threads` workers (the context's thread count), attached to `ctx`;
    /// `None` (llama.cpp's own per-call threads) when the context pointer cannot be read or
    /// the pool cannot be made.
    pub(crate) fn attach(ctx: &LlamaContext<'_>, n_threads: usize) -> Option<Pool> {
        let p = raw_context(ctx, n_threads)?;
        let n = i32::try_from(n_threads).ok()?;
        // SAFETY: plain C calls: llama.cpp fills in the parameter struct, and
        // `ggml_threadpool_new` returns null on failure (checked); `p` was checked by
        // `raw_context` and the context outlives the attachment (`Engine`'s `Drop` frees the
        // context first, then the pool).
        unsafe {
            let mut params = llama_cpp_sys_2::ggml_threadpool_params_default(n);
            let pool = llama_cpp_sys_2::ggml_threadpool_new(&mut params);
            if pool.is_null() {
                return None;
            }
            llama_cpp_sys_2::llama_attach_threadpool(p, pool, pool);
            Some(Pool(pool))
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // SAFETY: made by `ggml_threadpool_new`, freed once; its context is gone (or detached).
        unsafe { llama_cpp_sys_2::ggml_threadpool_free(self.0) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use formwork_vocab::TokenId;

    /// Feeds `steps` steps whose time depends on the thread count; returns the counts used.
    fn run(g: &mut Governor, steps: usize, n_tokens: usize, time: impl Fn(usize) -> f64) -> Vec<usize> {
        (0..steps)
            .map(|_| {
                let n = g.threads();
                g.record(n, n_tokens, time(n), || false);
                n
            })
            .collect()
    }

    #[test]
    fn an_idle_machine_keeps_all_threads() {
        let mut g = Governor::new(2);
        let used = run(&mut g, 1000, 1, |n| if n == 2 { 0.008 } else { 0.015 });
        assert_eq!(g.current(), 2);
        let share = used.iter().filter(|&&n| n == 2).count() as f64 / used.len() as f64;
        assert!(share > 0.97, "{share}");
    }

    #[test]
    fn a_busy_core_moves_to_fewer_threads_and_back_when_it_frees() {
        let mut g = Governor::new(2);
        run(&mut g, 200, 1, |n| if n == 2 { 0.008 } else { 0.015 });
        assert_eq!(g.current(), 2);
        // Another process takes a core: 2 threads collapse to 28 ms a token, 1 does 12 ms.
        let used = run(&mut g, 60, 1, |n| if n == 2 { 0.028 } else { 0.012 });
        assert_eq!(g.current(), 1, "{used:?}");
        let slow = used.iter().filter(|&&n| n == 2).count();
        assert!(slow <= 12, "{slow} slow steps before moving: {used:?}");
        // Stays there while the core is busy.
        run(&mut g, 500, 1, |n| if n == 2 { 0.028 } else { 0.012 });
        assert_eq!(g.current(), 1);
        // The core frees: back to 2 at the next trial, at most `EXPLORE_MAX` steps on.
        run(&mut g, EXPLORE_MAX as usize + 2 * EXPLORE_STEPS as usize, 1, |n| if n == 2 { 0.008 } else { 0.015 });
        assert_eq!(g.current(), 2);
    }

    #[test]
    fn batch_sizes_are_compared_with_their_own_kind() {
        // Big batches are slow with any count; only like is compared with like.
        let mut g = Governor::new(4);
        let t = |n: usize, k: usize| (k as f64) * 0.001 * (if n == 4 { 1.0 } else { 1.3 });
        for i in 0..2000 {
            let k = if i % 2 == 0 { 1 } else { 64 };
            let n = g.threads();
            g.record(n, k, t(n, k), || false);
        }
        assert_eq!(g.current(), 4);
    }

    #[test]
    fn a_quiet_machine_skips_scheduled_trials_but_not_a_collapse() {
        let mut g = Governor::new(2);
        let mut used = Vec::new();
        for i in 0..1000 {
            let n = g.threads();
            // Step 500 is a collapse (four times slower): a trial starts at once.
            let secs = if i == 500 { 0.04 } else if n == 2 { 0.01 } else { 0.02 };
            g.record(n, 1, secs, || true);
            used.push(n);
        }
        assert!(used[..=500].iter().all(|&n| n == 2), "no scheduled trial while quiet");
        assert_eq!(used[501..].iter().filter(|&&n| n == 1).count(), EXPLORE_STEPS as usize);
        assert_eq!(g.current(), 2);
    }

    #[test]
    fn the_load_probe_reads_proc() {
        let mut p = LoadProbe::default();
        assert!(!p.quiet(), "no verdict before a first reading");
        if cfg!(target_os = "linux") {
            assert!(LoadProbe::read().is_some(), "/proc/stat and /proc/self/stat parse");
        }
    }

    #[test]
    fn one_thread_never_explores() {
        let mut g = Governor::new(1);
        assert!(run(&mut g, 100, 1, |_| 0.01).iter().all(|&n| n == 1));
    }

    #[test]
    fn the_context_pointer_is_found_checked_and_its_thread_count_changes() {
        let path = formwork_models::resolve("smollm2").unwrap_or_else(|e| panic!("this test needs the default model: {e}"));
        let opts = crate::LoadOptions { n_ctx: Some(256), n_threads: Some(2), ..Default::default() };
        let loaded = crate::model::load(&path, opts, 1).unwrap();
        let ctx = &loaded.engine.ctx;
        let p = raw_context(ctx, 2).expect("llama-cpp-2 prints its context pointer in its Debug output");
        set_threads(p, 1);
        // SAFETY: `p` checked by `raw_context`; the context is alive.
        assert_eq!(unsafe { llama_cpp_sys_2::llama_n_threads(p) }, 1);
        assert_eq!(unsafe { llama_cpp_sys_2::llama_n_threads_batch(p) }, 1);
        // Answers that do not match are not taken for the context.
        assert!(raw_context(ctx, 3).is_none());
    }

    #[test]
    fn the_context_keeps_one_thread_pool_and_decodes_through_thread_changes() {
        use formwork_model::Model;
        let path = formwork_models::resolve("smollm2").unwrap_or_else(|e| panic!("this test needs the default model: {e}"));
        let opts = crate::LoadOptions { n_ctx: Some(256), n_threads: Some(2), ..Default::default() };
        let mut m = crate::LlamaModel::load(&path, opts).unwrap();
        assert!(m.engine.pool.is_some(), "the context has a lasting thread pool");
        let p = raw_context(&m.engine.ctx, 2).unwrap();
        let prompt = m.tokenize("The capital of France is", true, false).unwrap();
        let argmax = |l: &[f32]| (0..l.len()).max_by(|&a, &b| l[a].total_cmp(&l[b])).unwrap();
        let mut next = argmax(m.decode(&prompt).unwrap());
        // The pool has two workers; one step on one of them, then both again.
        for n in [1, 2, 1, 2] {
            set_threads(p, n);
            let l = m.decode(&[TokenId(next as u32)]).unwrap();
            assert!(l.iter().all(|x| x.is_finite()));
            next = argmax(l);
        }
    }

    #[test]
    fn buckets_are_powers_of_two() {
        assert_eq!((bucket(0), bucket(1), bucket(2), bucket(3), bucket(4), bucket(1000)), (0, 0, 1, 1, 2, 7));
    }
}
