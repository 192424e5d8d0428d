//! # formwork-alloc: the allocator of formwork's programs
//!
//! mimalloc, for the `formwork` binary (`crates/cli`) and the Python extension
//! (`crates/python`), set up the same way in both. Each artifact declares it itself, so that
//! what allocates is visible where the program is defined:
//!
//! ```text
//! #[global_allocator]
//! static GLOBAL: formwork_alloc::MiMalloc = formwork_alloc::MiMalloc;
//! // at start (main, or the Python module's init):
//! formwork_alloc::keep_freed_memory();
//! ```
//!
//! In the Python extension this covers the Rust side only (grammars, matchers, masks); Python's
//! objects and other extensions keep their allocators. The extension links its own static
//! mimalloc, whose symbols it does not export.
//!
//! Measured (MaskBench dev sample through Python, `bench/python_masks.py --sample 4
//! --engines formwork,llguidance`, the wheel with glibc's malloc against the wheel with this
//! crate, run one after the other, llguidance in the same process as the yardstick): see the
//! README's "Through Python" section for the figures.

pub use mimalloc::MiMalloc;

/// `mi_option_purge_delay`: its place in mimalloc v3's `mi_option_e` (the version that
/// `libmimalloc-sys` builds by default; v3.3 here).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
/// Its default in that version, in milliseconds (`MIMALLOC_VERBOSE=1 formwork --version`
/// lists every option).
const MI_DEFAULT_PURGE_DELAY: std::ffi::c_long = 1000;

/// Keeps memory that the program frees for its own reuse instead of handing it back to the
/// operating system. mimalloc's default returns freed pages a second after they are freed
/// (a "purge"); a purge after a large grammar is dropped took 4–7 ms inside whichever mask
/// happened to trigger it, the largest single mask time in `formwork bench masks` (half A,
/// SmolLM2: maximum 6.3–7.7 ms with purging, 1.9–2.1 ms without). The cost is that the
/// heap stays at its high-water mark while the process lives. `MIMALLOC_PURGE_DELAY` in the
/// environment (milliseconds, as mimalloc reads it) takes precedence; the option is only
/// changed when it still reads as that default, so a renumbered option in a future
/// mimalloc is left alone (and the test below fails).
///
/// Only meaningful where [`MiMalloc`] is the global allocator; elsewhere it sets an option
/// of an allocator nothing uses.
pub fn keep_freed_memory() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: reading and setting a mimalloc option are plain calls with no preconditions;
    // options are atomics that mimalloc reads when it next decides whether to purge.
    unsafe {
        if libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) == MI_DEFAULT_PURGE_DELAY {
            libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1);
        }
    }
}

#[cfg(test)]
mod tests {
    #[global_allocator]
    static GLOBAL: super::MiMalloc = super::MiMalloc;

    /// The allocator keeps freed memory: the option number and its default still match
    /// the mimalloc that is built (a new `libmimalloc-sys` that renumbers its options fails
    /// here rather than silently changing another option or none).
    #[test]
    fn freed_memory_is_kept() {
        super::keep_freed_memory();
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            // SAFETY: as in `keep_freed_memory`.
            assert_eq!(unsafe { libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY) }, -1);
        }
        let v: Vec<u64> = (0..1_000_000).collect(); // allocates and frees through mimalloc
        assert_eq!(v.iter().sum::<u64>(), 499_999_500_000);
    }
}
