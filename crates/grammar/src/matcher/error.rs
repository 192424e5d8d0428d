//! Errors of the matcher: [`CompileError`] (grammar → compiled form) and [`MatchError`]
//! (per-request operations).

use formwork_vocab::TokenId;

/// An error compiling a grammar for matching. Each says what is wrong and how to fix it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CompileError {
    /// A rule can derive itself at its own left edge (directly or through rules that can
    /// match the empty string); a pushdown matcher cannot run it.
    #[error("rule `{rule}` is left-recursive (it can reach itself without consuming input, via {path}); rewrite it with repetition, e.g. `x ::= y (op y)*` instead of `x ::= x op y | y`")]
    LeftRecursion {
        /// A rule on the cycle.
        rule: String,
        /// The cycle, as rule names.
        path: String,
    },
    /// A member or separator of an unordered group can match the empty string.
    #[error("rule `{rule}` has an unordered group whose member or separator can match the empty string; members must start with a key")]
    EmptyMember {
        /// The rule.
        rule: String,
    },
    /// The start rule matches no string at all.
    #[error("the grammar matches nothing: rule `{rule}` has no alternative that can complete (check for empty character classes or rules that only refer to themselves)")]
    MatchesNothing {
        /// The rule (the root).
        rule: String,
    },
    /// A bounded repetition count is over [`Limits::max_repeat`](crate::Limits::max_repeat).
    #[error("repetition count {count} in rule `{rule}` is over the limit of {limit}; write the repetition unbounded (`*`, `+`, `{{m,}}`) or raise `max_repeat`")]
    RepeatTooLarge {
        /// The rule.
        rule: String,
        /// The count.
        count: u32,
        /// The limit.
        limit: u32,
    },
    /// The lowered grammar has more elements than [`Limits::max_elements`](crate::Limits::max_elements).
    #[error("the grammar is too large: more than {limit} elements after expanding repetitions and classes (rule `{rule}`); simplify it or raise `max_elements`")]
    TooManyElements {
        /// The rule being lowered when the limit was hit.
        rule: String,
        /// The limit.
        limit: usize,
    },
    /// The lowered grammar has more rules than [`Limits::max_rules`](crate::Limits::max_rules).
    #[error("the grammar is too large: more than {limit} rules after lowering (rule `{rule}`); simplify it or raise `max_rules`")]
    TooManyRules {
        /// The rule being lowered when the limit was hit.
        rule: String,
        /// The limit.
        limit: usize,
    },
    /// An expression is nested deeper than the limit.
    #[error("expression nesting in rule `{rule}` is deeper than {limit}; split it into named rules or raise `max_nesting`")]
    NestingTooDeep {
        /// The rule.
        rule: String,
        /// The limit.
        limit: usize,
    },
    /// A special token named by the grammar is not in the vocabulary.
    #[error("rule `{rule}` names token {token} which this vocabulary does not have")]
    UnknownToken {
        /// The rule.
        rule: String,
        /// The token as written (`<|im_end|>` or `<[123]>`).
        token: String,
    },
    /// The initial parser state already needs more stacks than allowed.
    #[error("the grammar is too ambiguous: more than {limit} parser stacks at the start; simplify it or raise `max_stacks`")]
    TooManyStacks {
        /// The limit.
        limit: usize,
    },
    /// Checking an input ([`accepts`](super::accepts)) hit a limit at byte `offset` (too many
    /// parser stacks or states at once): whether the grammar accepts the input is not known,
    /// which is not the same as rejected.
    #[error("undecided at byte {offset}: {error}")]
    Undecided {
        /// The byte whose step went over the limit.
        offset: usize,
        /// The limit hit ([`MatchError::TooManyStacks`] or [`MatchError::TooManyStates`]).
        error: MatchError,
    },
}

impl MatchError {
    /// The error for a step that went over a limit: too many states in the grammar
    /// (`capped`: the automaton refused a new state) or too many stacks at once.
    pub(crate) fn overflow(limits: &crate::Limits, capped: bool) -> MatchError {
        if capped {
            MatchError::TooManyStates { limit: limits.max_states }
        } else {
            MatchError::TooManyStacks { limit: limits.max_stacks }
        }
    }
}

/// An error from a [`Matcher`](super::Matcher) operation. The matcher's state is unchanged
/// after an error.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MatchError {
    /// The token is not allowed here.
    #[error("token {token} ({text:?}) is not allowed by the grammar here")]
    TokenRejected {
        /// The token.
        token: TokenId,
        /// Its text (lossy).
        text: String,
    },
    /// The bytes are not allowed here; `offset` is the first rejected byte.
    #[error("bytes rejected by the grammar at offset {offset} of {len}")]
    BytesRejected {
        /// Index of the first byte that does not fit.
        offset: usize,
        /// Length of the input.
        len: usize,
    },
    /// A token id outside the vocabulary.
    #[error("token {token} is outside the vocabulary of {len} tokens")]
    TokenOutOfRange {
        /// The token.
        token: TokenId,
        /// Vocabulary size.
        len: usize,
    },
    /// Rolled back more steps than were committed.
    #[error("cannot roll back {requested} steps: only {available} were committed")]
    RollbackTooFar {
        /// Requested.
        requested: usize,
        /// Committed so far.
        available: usize,
    },
    /// The grammar is too ambiguous at this point.
    #[error("the grammar is too ambiguous here: more than {limit} parser stacks; simplify it or raise `max_stacks`")]
    TooManyStacks {
        /// The limit.
        limit: usize,
    },
    /// The compiled grammar already holds as many parser states as allowed.
    #[error("the grammar needs more than {limit} parser states (they are kept for every request that uses it); simplify it or raise `max_states`")]
    TooManyStates {
        /// The limit.
        limit: usize,
    },
    /// The matcher already ended (an end-of-sequence token was committed).
    #[error("the matcher has ended (end of sequence was committed); roll back to continue")]
    Ended,
}
