//! # formwork-grammar: grammars, and which tokens keep the output on a valid path
//!
//! The constraint engine: formwork's product. Pure Rust, no I/O, no async.
//!
//! ## Layers (dependencies point down)
//! 1. [`ir`]: the grammar IR — [`Grammar`] of named rules, each an [`Expr`] tree over
//!    literals, Unicode character classes, sequences, alternations, bounded/unbounded
//!    repetitions, rule references, explicitly named special tokens, and unordered member
//!    groups ([`Unordered`]: a JSON object's members in any order, whose rules the matcher
//!    builds lazily). Built only through
//!    [`GrammarBuilder`], which enforces the invariants (every reference resolved, a root).
//! 2. Front ends that produce IR: `gbnf` (llama.cpp-compatible GBNF text → AST with spans →
//!    IR, and IR → normalized GBNF text), `json` (the built-in JSON grammar),
//!    [`regex`] (a Rust-syntax regular expression the whole output must match), and in the
//!    `formwork-schema` crate JSON Schema → IR (its `pattern` lowered through regex-syntax).
//! 3. The matcher: a [`CompiledGrammar`] (immutable, `Arc`-shared, cached by hash of
//!    grammar + vocabulary) and a per-request `Matcher` with `compute_mask`, `commit`,
//!    `rollback`, `is_accepting` and forced-token lookahead.
//!
//! ## The loop a user writes
//! ```ignore
//! let grammar = formwork_grammar::gbnf::parse(text, &Limits::default())?;
//! let compiled = CompiledGrammar::new(&grammar, vocab.clone(), &Limits::default())?;
//! let mut m = compiled.matcher();
//! loop {
//!     m.compute_mask(&mut mask);      // which tokens keep us on a valid path
//!     let t = sample(&logits, &mask);
//!     if vocab.eos_tokens().contains(&t) { break; }   // only allowed when accepting
//!     m.commit(t)?;
//! }
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

#[cfg(feature = "corpus")]
pub mod corpus;
pub mod gbnf;
pub mod ir;
pub mod json;
pub mod lazy;
mod limits;
pub mod matcher;
pub mod regex;

pub use limits::Limits;
pub use ir::{Expr, Grammar, GrammarBuilder, IrError, Presence, Rule, RuleId, TokenRef, Unordered};
pub use lazy::{Expansion, LazyGrammar, RuleSource};
pub use matcher::{accepts, CompileError, CompiledGrammar, GrammarCache, MatchError, MatchStats, Matcher, TokenIndex};
