//! Canonical states for masks: frames inside bounded repetitions replaced by their loop
//! equivalents (see the `repeats` module of `lower`).
//!
//! A state inside `e{0,100}` after 37 units differs from the one after 38 (another chain
//! rule), so neither the mask cache nor the self-loop accelerator helps. Its canonical
//! state has the chain frame replaced by the same frame of `e*`, which is the same state
//! after every unit (it loops on itself). A token of at most `budget` bytes — the smallest
//! budget of a replaced frame — is allowed in the state exactly when it is allowed in the
//! canonical state; longer tokens must be checked from the state itself.
//!
//! Cost: the top frames of each stack, then one memo lookup per stack (deeper frames are
//! memoized per node), so a state is canonicalized in time linear in its new frames.

use super::{Builder, StackId, StateId, Table, BOTTOM, CTX};

/// Joins within joins that [`Builder::canonical_join`] goes into (each level recurses).
const MAX_JOIN_DEPTH: u32 = 64;

/// No replaced frame: every token length is safe.
pub(crate) const UNBOUNDED: u32 = u32::MAX;

/// Top frames of a stack that are replaced from the budget asked for; deeper frames are
/// replaced only from a larger one (`deep_min`): a deep frame with a small budget (one
/// more array item allowed under the string being written) would shrink the budget of the
/// whole state, and with it the share of the mask taken from the canonical state.
const NEAR: usize = 2;

impl Builder {
    /// The canonical state of `s` and its budget: `(s, UNBOUNDED)` when no frame of `s` is
    /// replaced. Frames inside bounded repetitions are replaced: the top [`NEAR`] of each
    /// stack when their budget is at least `top_min`, deeper ones from `deep_min` (which
    /// must be the same on every call: deep frames are memoized per node). Memoized.
    pub(super) fn canonical(&mut self, t: &Table, s: StateId, top_min: u32, deep_min: u32) -> (StateId, u32) {
        if self.flat.repeats.is_empty() {
            return (s, UNBOUNDED);
        }
        if let Some(&r) = self.canon_states.get(&(s, top_min)) {
            return r;
        }
        let stacks = &t.state(s).info.stacks;
        let mut out = Vec::with_capacity(stacks.len());
        let mut budget = UNBOUNDED;
        let mut top = Vec::with_capacity(NEAR);
        for &n in stacks.iter() {
            let mut x = n;
            top.clear();
            while top.len() < NEAR && x != BOTTOM && x != CTX && !self.is_join(x) {
                top.push(x);
                x = self.nodes[x.index()].1;
            }
            let (mut y, mut b) = self.canonical_deep(x, deep_min);
            for &p in top.iter().rev() {
                (y, b) = self.replace(p, y, b, top_min);
            }
            out.push(y);
            budget = budget.min(b);
        }
        let r = if budget == UNBOUNDED {
            (s, UNBOUNDED)
        } else {
            out.sort_unstable();
            out.dedup();
            self.normalize(&mut out);
            (self.intern_state(t, &out), budget)
        };
        self.canon_states.insert((s, top_min), r);
        r
    }

    /// Node `p` on top of `below` (the canonical form of its parent, with budget `budget`),
    /// its frame replaced when its budget is at least `min` (and `MIN_BUDGET`, the least
    /// budget recorded).
    fn replace(&mut self, p: StackId, below: StackId, budget: u32, min: u32) -> (StackId, u32) {
        let (pos, parent) = self.nodes[p.index()];
        match self.flat.repeats.get(&pos).copied() {
            // Endless loop: nothing below is reachable within the budget.
            Some(rp) if rp.budget >= min && rp.endless => {
                (self.intern_node(rp.pos, BOTTOM), rp.budget)
            }
            Some(rp) if rp.budget >= min => {
                (self.intern_node(rp.pos, below), budget.min(rp.budget))
            }
            _ if below == parent => (p, budget),
            _ => (self.intern_node(pos, below), budget),
        }
    }

    /// Stack `n` with its frames of budget at least `min` replaced, and the smallest budget
    /// of those (memoized per node).
    fn canonical_deep(&mut self, n: StackId, min: u32) -> (StackId, u32) {
        // Frames down to the bottom or to a node already done, top first.
        let mut path = Vec::new();
        let mut x = n;
        let (mut cur, mut budget) = loop {
            if x == BOTTOM || x == CTX {
                break (x, UNBOUNDED);
            }
            if let Some(&r) = self.canon_nodes.get(&x) {
                break r;
            }
            if self.is_join(x) {
                break self.canonical_join(x, min);
            }
            path.push(x);
            x = self.nodes[x.index()].1;
        };
        for &p in path.iter().rev() {
            let r = self.replace(p, cur, budget, min);
            self.canon_nodes.insert(p, r);
            (cur, budget) = r;
        }
        (cur, budget)
    }

    /// Join `j` with each member made canonical (see `canonical_deep`), and the smallest
    /// budget of theirs (memoized per node). Joins nested deeper than [`MAX_JOIN_DEPTH`]
    /// stay as they are (replacing fewer frames is always allowed: it only lowers what the
    /// canonical state can answer for).
    fn canonical_join(&mut self, j: StackId, min: u32) -> (StackId, u32) {
        if self.canon_join_depth >= MAX_JOIN_DEPTH {
            return (j, UNBOUNDED);
        }
        self.canon_join_depth += 1;
        let members: Vec<StackId> = self.join_members(j).to_vec();
        let mut out = Vec::with_capacity(members.len());
        let mut budget = UNBOUNDED;
        for m in members {
            let (c, b) = self.canonical_deep(m, min);
            out.push(c);
            budget = budget.min(b);
        }
        self.canon_join_depth -= 1;
        let r = if budget == UNBOUNDED { (j, UNBOUNDED) } else { (self.join_of(out, 0), budget) };
        self.canon_nodes.insert(j, r);
        r
    }
}
