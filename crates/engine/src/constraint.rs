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
}
