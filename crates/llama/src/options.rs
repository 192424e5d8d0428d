//! Load options and the default thread count.

/// The default context length is the model's trained length, capped at this many tokens
/// (a 128k-context model would otherwise allocate a KV cache of many GB by default).
pub const DEFAULT_MAX_CONTEXT: usize = 8192;

/// The default thread count is the number of physical cores, capped at this.
pub const MAX_DEFAULT_THREADS: usize = 8;

/// How to load a model. `Default` gives the defaults described on each field.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// Context length in tokens. Default: the model's trained context length, capped at
    /// [`DEFAULT_MAX_CONTEXT`].
    pub n_ctx: Option<usize>,
    /// Threads for evaluation (prompt and generation), used as given. Default: up to
    /// [`default_threads`], fewer while the machine is busy (see [`default_threads`]).
    pub n_threads: Option<usize>,
    /// Most tokens evaluated in one llama.cpp batch; longer prompts are split. Default 512.
    pub n_batch: Option<usize>,
    /// Display name in [`formwork_model::ModelInfo::name`]. Default: the file stem.
    pub name: Option<String>,
}

/// The default number of evaluation threads: the number of physical cores this process may
/// use, at least 1 and at most [`MAX_DEFAULT_THREADS`] (what llama.cpp and Ollama use).
///
/// Physical, not logical: hyper-threads share the core's vector units. **Shared machines**:
/// llama.cpp's workers meet at a spinning barrier hundreds of times per token, so when
/// another process keeps a core busy, a worker that is descheduled holds the others up.
/// Measured on 2 cores (SmolLM2, `examples/throughput`): idle, 1 thread 66 and 2 threads
/// 134 tokens/s; with one busy process, 1 thread 80–84 and 2 threads 36 tokens/s (an
/// OpenMP build: 8). So a model loaded without `LoadOptions::n_threads` starts at this
/// count and follows the machine's load below it, step by step (the crate's `threads`
/// module: 2 threads collapsed to 19 tokens/s with a busy core where the default settled
/// on 1 thread and did 47, against 53 for 1 thread; idle, 110 against 114 for 2). A count
/// given is used as is. (The default used to be one fewer than the cores on 2-4 core
/// machines: half the speed of every idle 2-core machine.)
pub fn default_threads() -> usize {
    let logical = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let physical = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|s| physical_cores(&s)).unwrap_or(logical);
    physical.min(logical).clamp(1, MAX_DEFAULT_THREADS)
}

/// Counts distinct `(physical id, core id)` pairs in `/proc/cpuinfo` text; `None` when the
/// file does not say (some virtual machines and non-x86 kernels omit the fields).
fn physical_cores(cpuinfo: &str) -> Option<usize> {
    let mut cores = std::collections::HashSet::new();
    for block in cpuinfo.split("\n\n") {
        let field = |name: &str| {
            block.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == name).then(|| v.trim().to_string())
            })
        };
        if let Some(core) = field("core id") {
            cores.insert((field("physical id").unwrap_or_default(), core));
        }
    }
    (!cores.is_empty()).then_some(cores.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_physical_cores_not_hyperthreads() {
        let two_cores_four_threads = "processor\t: 0\nphysical id\t: 0\ncore id\t: 0\n\n\
            processor\t: 1\nphysical id\t: 0\ncore id\t: 1\n\n\
            processor\t: 2\nphysical id\t: 0\ncore id\t: 0\n\n\
            processor\t: 3\nphysical id\t: 0\ncore id\t: 1\n";
        assert_eq!(physical_cores(two_cores_four_threads), Some(2));
        let two_sockets = "processor: 0\nphysical id: 0\ncore id: 0\n\nprocessor: 1\nphysical id: 1\ncore id: 0\n";
        assert_eq!(physical_cores(two_sockets), Some(2));
        assert_eq!(physical_cores("processor: 0\nBogoMIPS: 50\n"), None);
    }

    #[test]
    fn default_threads_is_bounded() {
        let n = default_threads();
        assert!((1..=MAX_DEFAULT_THREADS).contains(&n));
        let logical = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        assert!(n <= logical, "never more threads than CPUs we may use");
    }
}
