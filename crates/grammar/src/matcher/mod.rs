//! The matcher: compiled grammars and per-request token-mask state.
//!
//! ## Design
//! 1. **Lowering** ([`lower`](self) module `lower`): the IR becomes a flat byte-level grammar —
//!    rules of alternatives of elements (a byte set, a rule reference, a token reference,
//!    plain or negated).
//!    Unicode classes go through `regex_syntax::utf8::Utf8Sequences`; repetitions become
//!    helper rules (`{m,n}` bounded by `Limits::max_repeat`, sizes by `max_elements` /
//!    `max_rules`). The root must match something; left recursion (also through nullable
//!    prefixes) is refused with the cycle named. All bounded and iterative.
//! 2. **Automaton** (`automaton`): a pushdown parser in the llama.cpp style (a set of
//!    stacks whose tops are terminals), but with persistent, hash-consed stacks: an arena of
//!    interned `(position, parent)` nodes, so a stack is one `u32` and a parser state is a
//!    small sorted set of them (a Unicode class's UTF-8 forms are one stack: a dispatch
//!    rule, entered by the byte that picks its alternative). States are interned too
//!    (`StateId`), and byte transitions
//!    `(StateId, byte) → StateId` are memoized in a dense per-state table: once warm, a byte
//!    step is a single load. `Limits::max_stacks` bounds ambiguity.
//! 3. **Masks** (`mask`, `index`): the vocabulary's [`TokenTrie`](formwork_vocab::TokenTrie)
//!    (DFS order, subtree ends) is walked from a state, skipping every subtree whose prefix
//!    dies. States whose self-loop class `C = {b : δ(S,b) = S}` is large (string bodies) use
//!    an accelerator shared per vocabulary and class: the tokens made only of bytes in `C`
//!    (a precomputed bitset) plus a walk of the other tokens' suffixes from their first byte
//!    outside `C` — a few thousand trie steps instead of the whole vocabulary. A state that
//!    does not loop but counts through `C` (a string before its `minLength`, under a large
//!    `maxLength`) uses a chain: the same, with the exit suffixes kept by how many
//!    characters of `C` precede them, each walked from the state after that many. A state
//!    that neither loops nor counts, but whose steps on `C` stay within a small set of live
//!    states (an unanchored pattern's search), uses a closed set: the tokens made only of
//!    `C`, plus a walk of the other tokens whole (also for a state whose loop misses a few
//!    string characters, when the set allows more). A class counts multi-byte characters
//!    in by lead byte, so one excluded character (ECMA `.` and U+2028) costs only the tokens
//!    holding characters with its lead byte. Whole masks are cached per state.
//! 4. **Sharing**: a [`CompiledGrammar`] holds the automaton and the mask caches, so all
//!    requests using the grammar share the warm-up (the built-in JSON grammar compiled once
//!    per vocabulary is warm after the first few requests) — without a lock around them:
//!    states, transitions and cached masks sit in append-only, set-once tables (`slots`)
//!    that any thread reads with plain loads, so sequences masking on one grammar from
//!    several threads never wait for each other's trie walks. Only building (a new
//!    transition's closure, a new cache entry) takes a lock, briefly; see `compiled` for
//!    the design and its cost. A [`Matcher`] is just a history of state ids: `commit`
//!    pushes, `rollback(n)` truncates. A [`GrammarCache`] (held by the server/engine)
//!    shares compiled grammars across requests, keyed by grammar and vocabulary.
//! 5. **Deferred rules** (`lower::deferred`, [`LazyGrammar`](crate::LazyGrammar)): a grammar
//!    may name rules whose bodies a [`RuleSource`](crate::RuleSource) builds when a closure
//!    first reaches them; each such part is lowered and checked on its own and appended to the
//!    byte grammar behind the builder's lock. States already built never depend on a rule
//!    built later (a closure expands a rule before reading it).
//! 6. **Completions** (`complete`): per rule, the length of a shortest string (Knuth's
//!    grammar variant of Dijkstra), computed once per compiled grammar on first use; per
//!    state, the fewest bytes to a complete match (memoized). [`Matcher::shortest_completion`]
//!    spells one and [`Matcher::completion_tokens`] tokenizes it with the fewest tokens, for
//!    closing an output before a token budget runs out.
//!
//! ## Semantics
//! - Special tokens are never produced by grammar text; EOS tokens are allowed exactly when
//!   the input so far is a complete match; a token named by the grammar (`Expr::Token`) is
//!   allowed exactly where it is named; a negated reference (`Expr::NotToken`) allows every
//!   token but the one it names (EOS tokens and unused slots excepted) and consumes it whole.
//!   A token that is both a viable run of bytes and taken whole by a reference continues
//!   both ways (the next state is the union).
//! - A token that spans several grammar elements or rules (`",` then the next key's `"`) is
//!   allowed exactly when its bytes are a viable continuation: the walk is byte-level.
//! - `forced_tokens` is greedy longest-match, conservative at the end (see its docs).
//!
//! ## The loop
//! ```
//! use std::sync::Arc;
//! use formwork_grammar::{Expr, GrammarBuilder, Limits, matcher::CompiledGrammar};
//! use formwork_vocab::{TokenMask, Vocabulary};
//! let mut b = GrammarBuilder::new();
//! b.define("root", Expr::seq([Expr::lit("a"), Expr::plus(Expr::lit("b"))]));
//! let g = b.build("root").unwrap();
//! let vocab = Arc::new(Vocabulary::from_strings(&["a", "b", "ab", "c"], &["</s>"]));
//! let cg = CompiledGrammar::new(&g, vocab.clone(), &Limits::default()).unwrap();
//! let mut m = cg.matcher();
//! let mut mask = TokenMask::new(vocab.len());
//! m.compute_mask(&mut mask);
//! assert_eq!(mask.iter_ones().map(|t| t.0).collect::<Vec<_>>(), vec![0, 2]); // "a", "ab"
//! m.commit(formwork_vocab::TokenId(2)).unwrap();
//! assert!(m.is_accepting());
//! ```

mod automaton;
mod cache;
mod compiled;
mod complete;
mod error;
mod index;
mod lower;
mod mask;
mod matching;
mod sharded;
mod slots;

pub use cache::GrammarCache;
pub use compiled::{accepts, CompiledGrammar};
pub use matching::{MatchStats, Matcher};
pub use error::{CompileError, MatchError};
pub use index::{ClassBuilds, TokenIndex};

#[cfg(test)]
mod tests;
#[cfg(test)]
mod complete_tests;
