//! The GBNF abstract syntax tree: the text's structure, with spans.
//!
//! An [`Ast`] is what [`parse_ast`](super::parse_ast) returns: rules in source order, each
//! body a tree of [`Node`]s that keeps every group, every repetition operator as written
//! and the [`Span`] (byte offsets) of each element, so tools can point at any part of the
//! source. Nothing is resolved yet: rule references are names, classes are the items as
//! written (with their negation). [`Ast::to_grammar`] lowers it to the checked
//! [`Grammar`](crate::Grammar) IR.
//!
//! ## Invariants of a parsed `Ast`
//! - groups and stacked repetitions nest at most `Limits::max_nesting` deep, so walking a
//!   node recursively is bounded;
//! - repetition counts are at most `Limits::max_repeat`, and `min <= max`;
//! - class items have `lo <= hi`, and a class has at least one item;
//! - rule names are non-empty runs of `[A-Za-z0-9_-]`.

use super::error::Span;
use crate::TokenRef;

/// A parsed GBNF text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ast {
    /// The rule definitions, in source order.
    pub rules: Vec<RuleDef>,
}

/// `name ::= body`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleDef {
    /// The rule's name.
    pub name: String,
    /// Span of the name.
    pub name_span: Span,
    /// The body.
    pub body: Node,
}

/// One element of a rule body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// What it is.
    pub kind: NodeKind,
    /// Where it is.
    pub span: Span,
}

/// The kinds of [`Node`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// `"text"`, escapes decoded.
    Literal(String),
    /// `[...]` or `[^...]`.
    Class {
        /// True for `[^...]`.
        negated: bool,
        /// The characters and ranges as written, escapes decoded.
        items: Vec<ClassItem>,
    },
    /// `.`: any one character.
    Any,
    /// A reference to a rule by name.
    RuleRef(String),
    /// `<[123]>` or `<|name|>`: one special token.
    Token(TokenRef),
    /// `!<[123]>` or `!<|name|>`: any one token but this one.
    NotToken(TokenRef),
    /// `( ... )`.
    Group(Box<Node>),
    /// Elements in sequence (zero elements: the empty string).
    Seq(Vec<Node>),
    /// `a | b | ...` (at least two branches).
    Alt(Vec<Node>),
    /// A postfix repetition.
    Repeat {
        /// What is repeated.
        node: Box<Node>,
        /// The operator as written.
        op: RepeatOp,
    },
}

/// A class item: one character (`lo == hi`) or an inclusive range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassItem {
    /// First character.
    pub lo: char,
    /// Last character.
    pub hi: char,
    /// Where it is written.
    pub span: Span,
}

/// A repetition operator, as written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RepeatOp {
    /// `*`
    Star,
    /// `+`
    Plus,
    /// `?`
    Question,
    /// `{m}`, `{m,}`, `{m,n}` or `{,n}`.
    Range {
        /// Least count.
        min: u32,
        /// Greatest count (`None`: unbounded).
        max: Option<u32>,
    },
}

impl RepeatOp {
    /// The `(min, max)` counts the operator means.
    pub fn bounds(self) -> (u32, Option<u32>) {
        match self {
            RepeatOp::Star => (0, None),
            RepeatOp::Plus => (1, None),
            RepeatOp::Question => (0, Some(1)),
            RepeatOp::Range { min, max } => (min, max),
        }
    }
}
