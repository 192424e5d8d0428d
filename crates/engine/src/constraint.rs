//! The [`Constraint`] trait: what the loop needs from a grammar (or any other rule that
//! restricts which tokens may come next).

use formwork_vocab::{TokenId, TokenMask};

/// A per-request constraint on the generated tokens, advanced as tokens are chosen.
///
/// The loop never passes EOS/end-of-turn tokens to a constraint: it allows them exactly
/// when [`Constraint::is_accepting`] is true, and ends the generation when one is chosen.
pub trait Constraint {
    /// Fills `mask` (which the caller has sized to the vocabulary) with the tokens that keep
    /// the output on a valid path from the current state. EOS bits are overwritten by the
    /// loop, so an implementation may set or leave them.
    fn compute_mask(&mut self, mask: &mut TokenMask);
    /// Is `t` a valid next token? Must agree with [`Constraint::compute_mask`]; used by the
    /// loop's fast path, so it should cost far less than a whole mask.
    fn is_allowed(&mut self, t: TokenId) -> bool;
    /// Advances the state by `t`. An error means `t` was not allowed.
    fn commit(&mut self, t: TokenId) -> Result<(), String>;
    /// True when the output so far is a complete match (EOS is allowed now).
    fn is_accepting(&self) -> bool;
    /// Accepting, and nothing but EOS can follow (the loop then stops without sampling)?
    /// `None` (the default) means "don't know": when accepting, the loop computes a mask
    /// and checks whether any non-EOS token is in it.
    fn is_complete(&mut self) -> Option<bool> {
        None
    }

    /// **Budget support.** Tokens that finish a valid output from the current state, as few
    /// as the constraint can find: each allowed in turn, and after the last one the
    /// constraint accepts. Empty when it accepts now. The state is unchanged.
    ///
    /// The loop forces these tokens when the token budget (`num_predict`, or what is left of
    /// the context) is only just enough to finish the output; it also asks for the plan at
    /// the start, and refuses a budget smaller than the plan
    /// ([`EngineError::BudgetTooSmall`](crate::EngineError::BudgetTooSmall)).
    ///
    /// `None` (the default) means "cannot say": the loop then does not steer, and the
    /// budget may cut the output as it would without a constraint. A wrapper constraint
    /// delegates to what it wraps, adding what its own state still needs (for example the
    /// rest of a close marker before the inner constraint's plan).
    fn completion_plan(&mut self) -> Option<Vec<TokenId>> {
        None
    }

    /// **Budget support.** Could the output still be finished within `budget` tokens after
    /// `t` (not committed; the state is unchanged)? `Some(true)` promises that
    /// [`completion_plan`](Constraint::completion_plan) after committing `t` has at most
    /// `budget` tokens; `Some(false)` when it would not (or `t` is not allowed); `None`
    /// (the default) when the constraint cannot say, and the loop then takes `t`.
    ///
    /// The loop asks this of every sampled token while a budget applies, so the easy
    /// answer (far from the end of the budget) must cost about as little as
    /// [`is_allowed`](Constraint::is_allowed). `t` is never an EOS token.
    fn completion_fits_after(&mut self, t: TokenId, budget: usize) -> Option<bool> {
        let _ = (t, budget);
        None
    }

    /// **Forced text.** The bytes every valid continuation starts with (empty when there is
    /// a choice now, or the output may end here). The loop, when asked to
    /// ([`GenerateOptions::force_tokens`](crate::GenerateOptions::force_tokens)), appends
    /// them without sampling — tokenized by the model's own tokenizer — and evaluates them
    /// in one batch. Empty by default.
    fn forced_bytes(&mut self) -> Vec<u8> {
        Vec::new()
    }
}

/// Makes a fresh [`Constraint`] for each generation (each attempt of a validated request):
/// how a constraint that is not one grammar — the SQL of a live database, whose grammar
/// grows with what was generated — joins a [`Request`](crate::request::Request) through
/// [`Format::Custom`](crate::request::Format::Custom).
pub trait ConstraintFactory: std::fmt::Debug + Send + Sync {
    /// A constraint at the start of the output, for the model's vocabulary. An error says
    /// why this format cannot be used with this vocabulary.
    fn make(&self, vocab: &std::sync::Arc<formwork_vocab::Vocabulary>) -> Result<Box<dyn Constraint>, String>;
}

/// The grammar matcher ([`formwork_grammar::matcher::Matcher`]) as a [`Constraint`].
///
/// ```
/// use std::sync::Arc;
/// use formwork_engine::GrammarConstraint;
/// use formwork_grammar::{matcher::CompiledGrammar, Expr, GrammarBuilder, Limits};
/// use formwork_vocab::Vocabulary;
/// let mut b = GrammarBuilder::new();
/// b.define("root", Expr::lit("yes"));
/// let vocab = Arc::new(Vocabulary::from_strings(&["y", "es", "no"], &["</s>"]));
/// let compiled = CompiledGrammar::new(&b.build("root").unwrap(), vocab, &Limits::default()).unwrap();
/// let constraint = GrammarConstraint::new(&compiled);   // pass `Some(&mut constraint)` to `generate`
/// # let _ = constraint;
/// ```
#[derive(Debug)]
pub struct GrammarConstraint {
    matcher: formwork_grammar::matcher::Matcher,
}

impl GrammarConstraint {
    /// A fresh matcher of `compiled`, at the start of the grammar.
    pub fn new(compiled: &std::sync::Arc<formwork_grammar::matcher::CompiledGrammar>) -> Self {
        GrammarConstraint { matcher: compiled.matcher() }
    }

    /// Wraps an existing matcher (for example one already advanced past a prefix).
    pub fn from_matcher(matcher: formwork_grammar::matcher::Matcher) -> Self {
        GrammarConstraint { matcher }
    }

    /// The matcher (for its statistics, forced tokens, ...).
    pub fn matcher(&self) -> &formwork_grammar::matcher::Matcher {
        &self.matcher
    }

    /// The matcher, mutably (rollback, commit_bytes).
    pub fn matcher_mut(&mut self) -> &mut formwork_grammar::matcher::Matcher {
        &mut self.matcher
    }
}

impl Constraint for GrammarConstraint {
    fn compute_mask(&mut self, mask: &mut TokenMask) {
        self.matcher.compute_mask(mask);
    }

    fn is_allowed(&mut self, t: TokenId) -> bool {
        self.matcher.is_allowed(t)
    }

    fn commit(&mut self, t: TokenId) -> Result<(), String> {
        self.matcher.commit(t).map_err(|e| e.to_string())
    }

    fn is_accepting(&self) -> bool {
        self.matcher.is_accepting()
    }

    fn is_complete(&mut self) -> Option<bool> {
        Some(self.matcher.is_finished())
    }

    /// [`Matcher::completion_tokens`](formwork_grammar::matcher::Matcher::completion_tokens):
    /// the fewest tokens spelling a shortest byte completion.
    fn completion_plan(&mut self) -> Option<Vec<TokenId>> {
        self.matcher.completion_tokens()
    }

    /// Cheap when the bytes of a shortest completion after `t` fit in `budget` and each
    /// byte has its own token (byte-level vocabularies): a hash probe after stepping `t`'s
    /// bytes. Otherwise `t` is committed, the plan computed and `t` rolled back.
    fn completion_fits_after(&mut self, t: TokenId, budget: usize) -> Option<bool> {
        let Some(bytes) = self.matcher.min_completion_len_after(t) else {
            return Some(false);
        };
        if bytes <= budget && self.matcher.completion_bytes_bound_tokens() {
            return Some(true);
        }
        if self.matcher.commit(t).is_err() {
            return Some(false);
        }
        let plan = self.matcher.completion_tokens();
        self.matcher.rollback(1).expect("one commit to undo");
        Some(plan.is_some_and(|p| p.len() <= budget))
    }

    fn forced_bytes(&mut self) -> Vec<u8> {
        self.matcher.forced_bytes()
    }
}
