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
    /// Threads for evaluation (prompt and generation). Default: [`default_threads`].
    pub n_threads: Option<usize>,
    /// Most tokens evaluated in one llama.cpp batch; longer prompts are split. Default 512.
    pub n_batch: Option<usize>,
    /// Display name in [`formwork_engine::ModelInfo::name`]. Default: the file stem.
    pub name: Option<String>,
}

/// The default number of evaluation threads: the number of physical cores this process may
/// use (one fewer on machines of 2 to 4 cores), at least 1 and at most [`MAX_DEFAULT_THREADS`].
///
/// Physical, not logical: hyper-threads share the core's vector units, and more threads than
/// cores makes llama.cpp's spinning workers fight each other (generation collapsed from ~140
/// to ~2 tokens/s when over-subscribed while another process was busy).
pub fn default_threads() -> usize {
    let logical = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let physical = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|s| physical_cores(&s)).unwrap_or(logical);
    let cores = physical.min(logical);
    // On small machines leave one core to everything else (the HTTP server, the sampler,
    // the OS): measured on 2 cores with one other busy process, SmolLM2 generated at
    // 99 tokens/s with 1 thread and 65 tokens/s with 2.
    let cores = if (2..=4).contains(&cores) { cores - 1 } else { cores };
    cores.clamp(1, MAX_DEFAULT_THREADS)
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
