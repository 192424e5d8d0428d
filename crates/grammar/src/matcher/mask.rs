//! Token-mask computation: walking a [`TokenTrie`] through the automaton.
//!
//! [`walk`] visits the trie depth-first from a state; a node whose byte kills every stack
//! skips its whole subtree in O(1) (the trie's `end` links), so the cost is the number of
//! trie nodes whose prefix is still viable (plus one failed step per rejected child).
//! Each step is a memoized table lookup once the automaton is warm.

use super::automaton::{Automaton, DEAD, OVERFLOW};
use formwork_vocab::{TokenMask, TokenTrie};

/// Sets in `mask` every token in the subtree of trie node `root` whose bytes (after the
/// node's prefix, which led to state `s0`) can be fully consumed. Returns nodes visited.
pub(crate) fn walk_from(aut: &mut Automaton, trie: &TokenTrie, root: usize, s0: u32, mask: &mut TokenMask) -> usize {
    let words = mask.words_mut();
    let mut visited = 0usize;
    // (end of the subtree, state at its root)
    let mut stack: Vec<(u32, u32)> = Vec::with_capacity(trie.max_depth() + 2);
    stack.push((trie.end(root) as u32, s0));
    let mut i = root + 1;
    let n = trie.end(root);
    while i < n {
        while i as u32 >= stack[stack.len() - 1].0 {
            stack.pop();
        }
        let parent = stack[stack.len() - 1].1;
        visited += 1;
        let s = aut.step(parent, trie.byte(i));
        if s == DEAD || s == OVERFLOW {
            i = trie.end(i);
            continue;
        }
        for &t in trie.tokens_at(i) {
            words[t.index() / 64] |= 1 << (t.index() % 64);
        }
        stack.push((trie.end(i) as u32, s));
        i += 1;
    }
    visited
}

/// Smallest self-loop class worth an accelerator.
const MIN_CLASS: u32 = 16;

/// The self-loop accelerator of a state `S` whose loop class `C = {b : δ(S, b) = S}` is
/// large (a JSON string body): `mask(S) = all_in(C) ∪ walk(exit suffixes, S)`, because a
/// token's bytes up to its first byte outside `C` lead from `S` back to `S`.
#[derive(Debug)]
pub(crate) struct Accel {
    class: std::sync::Arc<super::index::ClassIndex>,
}

impl Accel {
    /// The accelerator for state `s`, when its loop class is large enough.
    pub(crate) fn for_state(
        aut: &mut Automaton,
        index: &super::index::TokenIndex,
        s: u32,
    ) -> Option<std::sync::Arc<Accel>> {
        if aut.info(s).first.len() < MIN_CLASS {
            return None;
        }
        let mut c = super::lower::ByteSet::default();
        for b in 0..=255u8 {
            if aut.info(s).first.contains(b) && aut.step(s, b) == s {
                c.insert(b);
            }
        }
        if c.len() < MIN_CLASS {
            return None;
        }
        Some(std::sync::Arc::new(Accel { class: index.class_index(c) }))
    }

    /// Fills `mask` with the text tokens allowed from `s`; returns trie nodes walked.
    pub(crate) fn fill(&self, aut: &mut Automaton, s: u32, mask: &mut TokenMask) -> usize {
        mask.words_mut().copy_from_slice(self.class.all_in.words());
        walk_from(aut, &self.class.exits, 0, s, mask)
    }

    pub(crate) fn memory_usage(&self) -> usize {
        0
    }
}
