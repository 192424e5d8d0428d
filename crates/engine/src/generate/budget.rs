//! Budget steering: a constrained output closes before the token budget cuts it.
//!
//! The budget `r` at a step is what is left of `num_predict` or of the context, whichever is
//! smaller. The loop keeps one invariant: **a plan that finishes a valid output in at most
//! `r` tokens exists** ([`Constraint::completion_plan`]). It holds at the start (the loop
//! refuses a smaller budget) and is kept step by step:
//! - a chosen token `t` is taken when the output still fits after it
//!   ([`Constraint::completion_fits_after`]`(t, r - 1)`; EOS always fits). Far from the end
//!   this is a cheap check, so ordinary steps cost about one more `is_allowed`;
//! - otherwise `t` is refused: when the plan has no slack left (`len == r`) its first token
//!   is forced; else the loop samples again from the mask without the refused tokens (at
//!   most [`MAX_RESAMPLES`] times) and then forces the plan's first token.
//!
//! A forced plan's tail is kept: it stays valid while the output follows it, even when a
//! plan computed afresh from the next state would be longer. A constraint that cannot plan
//! (`None`) is not steered.

use super::{fill_mask, pick, ConstraintStats, EngineError};
use crate::constraint::Constraint;
use formwork_sampler::Sampler;
use formwork_vocab::{TokenId, TokenMask, Vocabulary};
use std::time::Instant;

/// Samples drawn after a refusal before the plan's next token is forced.
pub(super) const MAX_RESAMPLES: usize = 8;

/// Tokens the loop may still generate, and whether the context (rather than `num_predict`)
/// is the limit. `history` counts the prompt and the generated tokens so far.
pub(super) fn room(num_predict: Option<usize>, ctx: usize, generated: usize, history: usize) -> (usize, bool) {
    let ctx_left = ctx.saturating_sub(history);
    match num_predict {
        Some(n) if n.saturating_sub(generated) <= ctx_left => (n.saturating_sub(generated), false),
        _ => (ctx_left, true),
    }
}

/// What one step of sampling needs (borrowed from the loop).
pub(super) struct Step<'a> {
    pub sampler: &'a mut Sampler,
    pub logits: &'a [f32],
    pub history: &'a [TokenId],
    pub vocab: &'a Vocabulary,
    pub mask: &'a mut TokenMask,
    pub stats: &'a mut ConstraintStats,
}

/// The steering state of one generation.
#[derive(Debug, Default)]
pub(super) struct Steering {
    /// The rest of the last forced plan, valid while the output follows it.
    tail: Vec<TokenId>,
    /// Some token was refused or forced because of the budget.
    pub intervened: bool,
    /// The last [`Steering::pick`] forced the plan's token (no sampling: the only choice).
    pub last_forced: bool,
}

impl Steering {
    /// Chooses the next token with `r >= 1` tokens left (see the module docs). The returned
    /// token is the one the loop commits next.
    pub fn pick(&mut self, s: Step<'_>, c: &mut (dyn Constraint + '_), r: usize) -> Result<TokenId, EngineError> {
        let Step { sampler, logits, history, vocab, mask, stats } = s;
        self.last_forced = false;
        let eos = vocab.eos_tokens();
        let masks_before = stats.masks;
        let t = pick(sampler, logits, history, Some(&mut *c), vocab, mask, stats)?;
        if eos.contains(&t) || self.fits(c, t, r, stats) {
            return Ok(self.taken(t));
        }
        self.intervened = true;
        let t0 = Instant::now();
        if stats.masks == masks_before {
            // The fast path chose without a mask.
            fill_mask(c, vocab, mask);
            stats.masks += 1;
        }
        mask.remove(t);
        let plan = self.plan(c);
        stats.time += t0.elapsed();
        if let Some(p) = plan.as_ref().filter(|p| p.len() >= r && !p.is_empty()) {
            return Ok(self.forced(p));
        }
        for _ in 0..MAX_RESAMPLES {
            if mask.is_none() {
                break;
            }
            let u = sampler.sample(logits, Some(mask), history).map_err(|e| EngineError::Sampler(e.to_string()))?;
            if eos.contains(&u) || self.fits(c, u, r, stats) {
                return Ok(self.taken(u));
            }
            mask.remove(u);
        }
        match plan {
            Some(p) if !p.is_empty() => Ok(self.forced(&p)),
            // Accepting: ending here is the shortest way.
            Some(_) if !eos.is_empty() => Ok(self.taken(eos[0])),
            // No plan from here: the model's token, and the budget may cut the output.
            _ => Ok(self.taken(t)),
        }
    }

    /// Does the output still fit in `r - 1` tokens after `t`?
    fn fits(&mut self, c: &mut (dyn Constraint + '_), t: TokenId, r: usize, stats: &mut ConstraintStats) -> bool {
        if self.tail.first() == Some(&t) && self.tail.len() <= r {
            return true;
        }
        let t0 = Instant::now();
        let ok = c.completion_fits_after(t, r - 1) != Some(false);
        stats.time += t0.elapsed();
        ok
    }

    /// The shorter of a fresh plan and the kept tail.
    fn plan(&mut self, c: &mut (dyn Constraint + '_)) -> Option<Vec<TokenId>> {
        let fresh = c.completion_plan();
        match fresh {
            Some(f) if self.tail.is_empty() || f.len() <= self.tail.len() => Some(f),
            _ if !self.tail.is_empty() => Some(self.tail.clone()),
            other => other,
        }
    }

    fn forced(&mut self, plan: &[TokenId]) -> TokenId {
        self.intervened = true;
        self.last_forced = true;
        self.tail = plan[1..].to_vec();
        plan[0]
    }

    /// Takes `t`, a token the constraint forces, when the output still fits in `r - 1`
    /// tokens after it (`r >= 1` tokens left); false leaves the choice to sampling.
    pub fn take_forced(&mut self, c: &mut (dyn Constraint + '_), t: TokenId, r: usize, stats: &mut ConstraintStats) -> bool {
        if !self.fits(c, t, r, stats) {
            return false;
        }
        self.taken(t);
        true
    }

    fn taken(&mut self, t: TokenId) -> TokenId {
        if self.tail.first() == Some(&t) {
            self.tail.remove(0);
        } else {
            self.tail.clear();
        }
        t
    }
}
