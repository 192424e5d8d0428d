//! [`Limits`]: bounds on work done for untrusted grammars and schemas.
//!
//! Grammars and schemas arrive over the network. Every front end and the matcher take a
//! `&Limits` and fail with an error naming the limit (and how to raise it) when one is hit,
//! instead of recursing without bound, allocating without bound or looping.

/// Bounds on grammar size and matcher work. `Default` gives limits generous enough for any
/// real-world schema (all of MaskBench) and small enough to keep a server alive.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Limits {
    /// Largest grammar or schema source text, in bytes.
    pub max_source_bytes: usize,
    /// Deepest nesting of groups / schema objects.
    pub max_nesting: usize,
    /// Most rules after lowering (repetitions and schema parts become rules).
    pub max_rules: usize,
    /// Most grammar elements (symbols across all lowered rules).
    pub max_elements: usize,
    /// Largest bounded repetition count `{m,n}` (larger must be written unbounded).
    pub max_repeat: u32,
    /// Most parser stacks (or items) alive at one step; ambiguity beyond this is an error.
    /// Stacks that share their top position count once (they are one stack over a join of
    /// their parents), so this bounds the distinct grammar positions alive, not the readings.
    pub max_stacks: usize,
    /// Most parser states one compiled grammar builds (they are shared by every request
    /// using it and kept, each with up to 1 KiB of transitions); past it, steps into new
    /// states fail with an error naming this limit.
    pub max_states: usize,
    /// Most `$ref` expansions while compiling a schema.
    pub max_ref_expansions: usize,
    /// Wall-clock budget for compiling one grammar or schema, in milliseconds.
    pub max_compile_ms: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_source_bytes: 1 << 20,
            max_nesting: 200,
            max_rules: 50_000,
            max_elements: 500_000,
            max_repeat: 10_000,
            max_stacks: 10_000,
            max_states: 200_000,
            max_ref_expansions: 10_000,
            max_compile_ms: 10_000,
        }
    }
}
