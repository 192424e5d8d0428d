//! Token-mask computation: walking a [`TokenTrie`] through the automaton.
//!
//! [`walk`] visits the trie depth-first from a state; a node whose byte kills every stack
//! skips its whole subtree in O(1) (the trie's `end` links), so the cost is the number of
//! trie nodes whose prefix is still viable (plus one failed step per rejected child).
//! Each step is a memoized table lookup once the automaton is warm.
//!
//! ## Context-independent masks
//! Stacks are deep (one frame per open rule), so the same grammar position is reached in
//! many states that differ only below the top few frames — a JSON string value at depth 1
//! or 5 — and each would cost a full walk. A miss on state `S` instead walks from
//! `T = truncate(S, k)`, where frames below the top `k` are replaced by a placeholder `CTX`.
//! A token consumed by `T` without popping into `CTX` is allowed in `S`; one rejected before
//! reaching `CTX` is rejected in `S`; the rest (`uncertain`: the walk popped into `CTX`) are
//! checked from `S` itself. `T`'s result ([`CiMask`]) is shared by every state with the same
//! top frames, so a new nesting context costs only the uncertain checks (tokens that close
//! the current rule, typically a few hundred).
//!
//! ## First-byte dispatch
//! A state that does not loop itself, but whose first bytes mostly lead to one state that
//! loops on them (just after an object key's opening quote: any letter but the first letters
//! of the listed keys leads to "some other key"), builds its context-independent mask from
//! that looping state's (cached, accelerated) one, restricted to those first bytes; the
//! other first bytes' subtrees are walked and kept by the state after the byte ([`SubCi`]).
//! Both parts are cached, so the next key of the same object, whose state differs only in
//! the keys still unseen, re-walks only the subtree of the letter whose keys changed.
//!
//! ## Unordered groups
//! A frame inside an unordered group's family rule records the members seen so far, so the
//! states of two keys of one object differ there even when the member being written is the
//! same. Truncation also cuts at the topmost such frame (see `Builder::truncate`): what
//! happens inside a member does not depend on the members before it.
//!
//! ## Bounded repetitions
//! A state inside `e{m,n}` is new after every unit, so it would always miss the caches.
//! Its canonical state (`Builder::canonical`: the repetition's frames replaced by loop
//! frames) repeats and loops, and agrees with it on every token of at most `budget` bytes.
//! [`repeat_split`] takes those tokens from the canonical state's (cached) mask and walks
//! only the trie subtrees that hold longer tokens from the state itself — nothing when the
//! budget reaches the longest token, a few hundred nodes when it is above ~16 bytes.
//! (One difference is left: a canonical state may merge stacks, so a token that would
//! exceed `Limits::max_stacks` from the state itself can be allowed from the canonical
//! one; such a token is refused on commit with `TooManyStacks`.)
//!
//! ## Threads
//! Walks run with no lock held, on a grammar other threads use at the same time. They step
//! through a [`Stepper`]: a known transition is a lock-free load; an unknown one takes the
//! automaton's builder lock, which the stepper keeps through a stretch of new transitions
//! and lets go after a run of known ones (see `automaton`). So a walk over warm ground
//! locks nothing, and one over new ground locks once per stretch, not per transition.
//! The results (`CiMask`, `SubCi`, full masks) are immutable once built and cached by the
//! compiled grammar, which any thread then reads in place.

use super::automaton::{State, Stepper, DEAD, OVERFLOW};
use formwork_vocab::TokenId;
use formwork_vocab::{TokenMask, TokenTrie};

/// Sets in `mask` every token in the subtree of trie node `root` whose bytes (after the
/// node's prefix, which led to state `s0`) can be fully consumed. Returns nodes visited.
pub(crate) fn walk_from(
    aut: &mut Stepper<'_>,
    trie: &TokenTrie,
    root: usize,
    s0: u32,
    mask: &mut TokenMask,
) -> usize {
    let words = mask.words_mut();
    // From a full state nothing pops into `CTX`, so nothing is uncertain.
    let mut none = Vec::new();
    let visited = walk_ci_below(aut, trie, root, &[], s0, None, |t| words[t.index() / 64] |= 1 << (t.index() % 64), &mut none);
    debug_assert!(none.is_empty(), "a walk from a full state reached CTX");
    visited
}

/// The text-token mask of `s` from `canon`, the mask of its canonical state `c` whose
/// budget is `budget` (see module docs): `canon`'s tokens of at most `budget` bytes, plus the
/// longer tokens walked from `s`. Returns the mask and the trie nodes walked.
pub(crate) fn repeat_split(
    aut: &mut Stepper<'_>,
    index: &super::index::TokenIndex,
    s: u32,
    c: u32,
    budget: u32,
    canon: &TokenMask,
) -> (TokenMask, usize) {
    let longest = index.max_token_len().min(u16::MAX as usize - 1) as u32;
    let k = budget.min(longest);
    let mut m = canon.clone();
    // Special tokens and EOS are the caller's (from the state's own info).
    let info = aut.info(c);
    for &t in info.tokens.iter() {
        m.remove(t);
    }
    if info.accepting {
        for &t in index.vocab().eos_tokens() {
            m.remove(t);
        }
    }
    if k >= longest {
        return (m, 0);
    }
    for &t in index.tokens_longer_than(k) {
        m.remove(t);
    }
    let walked = walk_longer(aut, index.trie(), index.subtree_max(), s, k, &mut m);
    (m, walked)
}

/// Like [`walk_from`] from the root, but only for tokens longer than `k` bytes: subtrees
/// whose longest token (`subtree_max`, by node) has at most `k` bytes are skipped.
fn walk_longer(
    aut: &mut Stepper<'_>,
    trie: &TokenTrie,
    subtree_max: &[u16],
    s0: u32,
    k: u32,
    mask: &mut TokenMask,
) -> usize {
    let words = mask.words_mut();
    let mut visited = 0usize;
    // (end of the node's subtree, state after the node, its entry)
    let mut stack: Vec<(u32, u32, &State)> = Vec::with_capacity(trie.max_depth() + 2);
    stack.push((trie.end(0) as u32, s0, aut.entry(s0)));
    let mut i = 1;
    let n = trie.len();
    while i < n {
        while i as u32 >= stack[stack.len() - 1].0 {
            stack.pop();
        }
        if subtree_max[i] as u32 <= k {
            i = trie.end(i);
            continue;
        }
        let (_, parent, entry) = stack[stack.len() - 1];
        visited += 1;
        let s = aut.step_from(entry, parent, trie.byte(i));
        if s == DEAD || s == OVERFLOW {
            i = trie.end(i);
            continue;
        }
        // The node's depth is its token length.
        if stack.len() as u32 > k {
            for &t in trie.tokens_at(i) {
                words[t.index() / 64] |= 1 << (t.index() % 64);
            }
        }
        stack.push((trie.end(i) as u32, s, aut.entry(s)));
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
        aut: &mut Stepper<'_>,
        index: &super::index::TokenIndex,
        s: u32,
    ) -> Option<std::sync::Arc<Accel>> {
        let (info, entry) = (aut.info(s), aut.entry(s));
        if info.first.len() < MIN_CLASS {
            return None;
        }
        let mut c = super::lower::ByteSet::default();
        for b in 0..=255u8 {
            if info.first.contains(b) && aut.step_from(entry, s, b) == s {
                c.insert(b);
            }
        }
        if c.len() < MIN_CLASS {
            return None;
        }
        let utf8 = utf8_loops(aut, s);
        Some(std::sync::Arc::new(Accel {
            class: index.class_index(c, utf8)?,
        }))
    }
}

/// Does every valid multi-byte UTF-8 character lead from `s` back to `s`? Checked exactly
/// (per lead byte, every continuation byte of its valid range must give one same state).
fn utf8_loops(aut: &mut Stepper<'_>, s: u32) -> bool {
    // (lead bytes, ranges of the following bytes), from the UTF-8 definition.
    type Seq = ((u8, u8), &'static [(u8, u8)]);
    const SEQS: &[Seq] = &[
        ((0xC2, 0xDF), &[(0x80, 0xBF)]),
        ((0xE0, 0xE0), &[(0xA0, 0xBF), (0x80, 0xBF)]),
        ((0xE1, 0xEC), &[(0x80, 0xBF), (0x80, 0xBF)]),
        ((0xED, 0xED), &[(0x80, 0x9F), (0x80, 0xBF)]),
        ((0xEE, 0xEF), &[(0x80, 0xBF), (0x80, 0xBF)]),
        ((0xF0, 0xF0), &[(0x90, 0xBF), (0x80, 0xBF), (0x80, 0xBF)]),
        ((0xF1, 0xF3), &[(0x80, 0xBF), (0x80, 0xBF), (0x80, 0xBF)]),
        ((0xF4, 0xF4), &[(0x80, 0x8F), (0x80, 0xBF), (0x80, 0xBF)]),
    ];
    for &((lo, hi), rest) in SEQS {
        for lead in lo..=hi {
            let mut x = aut.step(s, lead);
            for (k, &(a, b)) in rest.iter().enumerate() {
                if x == DEAD || x == OVERFLOW {
                    return false;
                }
                let next = aut.step(x, a);
                for byte in a..=b {
                    if aut.step(x, byte) != next {
                        return false;
                    }
                }
                x = next;
                if k + 1 == rest.len() && x != s {
                    return false;
                }
            }
        }
    }
    true
}

/// The context-independent part of a truncated state's mask (see module docs).
#[derive(Debug)]
pub(crate) struct CiMask {
    /// Tokens allowed whatever the context.
    pub mask: TokenMask,
    /// Subtrees of the main trie whose fate depends on context: (node, bytes from the root).
    pub nodes: Vec<(u32, Box<[u8]>)>,
    /// Single tokens whose fate depends on context.
    pub tokens: Vec<TokenId>,
    /// Trie nodes walked to build it.
    pub walked: usize,
}

impl CiMask {
    /// Nothing allowed, nothing uncertain, over a vocabulary of `n` tokens.
    pub(crate) fn empty(n: usize) -> CiMask {
        CiMask { mask: TokenMask::new(n), nodes: Vec::new(), tokens: Vec::new(), walked: 0 }
    }

    pub(crate) fn memory_usage(&self) -> usize {
        self.mask.memory_usage()
            + self.nodes.iter().map(|(_, p)| p.len() + 24).sum::<usize>()
            + self.tokens.len() * 4
    }

    /// Computes the context-independent mask of truncated state `t`.
    pub(crate) fn build(
        aut: &mut Stepper<'_>,
        index: &super::index::TokenIndex,
        t: u32,
        accel: Option<&Accel>,
    ) -> CiMask {
        let mut ci = CiMask::empty(index.vocab().len());
        match accel {
            Some(a) => {
                ci.mask.words_mut().copy_from_slice(a.class.all_in.words());
                // Tokens leaving the class at their first byte: the main trie.
                ci.walked = walk_ci(
                    aut,
                    index.trie(),
                    t,
                    Some(&a.class.enters),
                    &mut ci.mask,
                    &mut ci.nodes,
                );
                let exits = &a.class.exits;
                let mut nodes = Vec::new();
                ci.walked += walk_ci(aut, exits, t, None, &mut ci.mask, &mut nodes);
                for (node, _) in nodes {
                    let node = node as usize;
                    for i in node..exits.end(node) {
                        ci.tokens.extend_from_slice(exits.tokens_at(i));
                    }
                }
            }
            None => {
                ci.walked = walk_ci(aut, index.trie(), t, None, &mut ci.mask, &mut ci.nodes);
            }
        }
        ci
    }
}

/// Like [`walk_from`] from the root, but a node whose state popped into `CTX` is recorded
/// in `uncertain` (with its path) and its subtree skipped; so are the root's children on
/// a byte in `skip_first`.
pub(crate) fn walk_ci(
    aut: &mut Stepper<'_>,
    trie: &TokenTrie,
    s0: u32,
    skip_first: Option<&super::lower::ByteSet>,
    mask: &mut TokenMask,
    uncertain: &mut Vec<(u32, Box<[u8]>)>,
) -> usize {
    let words = mask.words_mut();
    walk_ci_below(aut, trie, 0, &[], s0, skip_first, |t| words[t.index() / 64] |= 1 << (t.index() % 64), uncertain)
}

/// The context-independent part of one subtree of the trie below the root (the tokens that
/// start with one byte), walked from the state after that byte. A first-byte dispatch
/// keeps these per state, since the state after a byte changes less often than the state
/// before it (an object's key: one unseen key fewer changes the subtree of its first letter).
#[derive(Debug)]
pub(crate) struct SubCi {
    /// Tokens allowed whatever the context: a list, or a mask when that is smaller.
    tokens: Box<[TokenId]>,
    mask: Option<TokenMask>,
    /// Subtrees whose fate depends on context: (node, bytes from the root).
    pub nodes: Vec<(u32, Box<[u8]>)>,
    /// Trie nodes walked to build it.
    pub walked: usize,
}

impl SubCi {
    pub(crate) fn memory_usage(&self) -> usize {
        self.tokens.len() * 4
            + self.mask.as_ref().map_or(0, |m| m.memory_usage())
            + self.nodes.iter().map(|(_, p)| p.len() + 24).sum::<usize>()
            + 48
    }

    /// Adds the allowed tokens to `m`.
    pub(crate) fn allow_into(&self, m: &mut TokenMask) {
        match &self.mask {
            Some(mine) => {
                for (o, a) in m.words_mut().iter_mut().zip(mine.words()) {
                    *o |= a;
                }
            }
            None => {
                for &t in self.tokens.iter() {
                    m.insert(t);
                }
            }
        }
    }

    /// Walks the subtree of root child `node` (byte `b`) from `x`, the state after `b`.
    pub(crate) fn build(aut: &mut Stepper<'_>, trie: &TokenTrie, vocab_len: usize, node: usize, x: u32) -> SubCi {
        let b = trie.byte(node);
        let mut nodes = Vec::new();
        if aut.is_ctx(x) {
            nodes.push((node as u32, Box::from([b])));
            return SubCi { tokens: Box::default(), mask: None, nodes, walked: 1 };
        }
        let mut tokens = trie.tokens_at(node).to_vec();
        let walked = 1 + walk_ci_below(aut, trie, node, &[b], x, None, |t| tokens.push(t), &mut nodes);
        // A list of more than a sixteenth of the vocabulary is longer than its mask's words.
        if tokens.len() > vocab_len / 16 {
            let mut m = TokenMask::new(vocab_len);
            for &t in &tokens {
                m.insert(t);
            }
            return SubCi { tokens: Box::default(), mask: Some(m), nodes, walked };
        }
        SubCi { tokens: tokens.into_boxed_slice(), mask: None, nodes, walked }
    }
}

/// The walk of [`walk_ci`] over the subtree of `root` (reached by `prefix`, in state `s0`),
/// handing each allowed token to `allow`.
#[allow(clippy::too_many_arguments)]
fn walk_ci_below(
    aut: &mut Stepper<'_>,
    trie: &TokenTrie,
    root: usize,
    prefix: &[u8],
    s0: u32,
    skip_first: Option<&super::lower::ByteSet>,
    mut allow: impl FnMut(TokenId),
    uncertain: &mut Vec<(u32, Box<[u8]>)>,
) -> usize {
    let mut visited = 0usize;
    // (end of the node's subtree, state after the node, its entry)
    let mut stack: Vec<(u32, u32, &State)> = Vec::with_capacity(trie.max_depth() + 2);
    let mut path: Vec<u8> = Vec::with_capacity(trie.max_depth() + 1);
    path.extend_from_slice(prefix);
    stack.push((trie.end(root) as u32, s0, aut.entry(s0)));
    let mut i = root + 1;
    let n = trie.end(root);
    while i < n {
        while i as u32 >= stack[stack.len() - 1].0 {
            stack.pop();
            path.pop();
        }
        if stack.len() == 1 && skip_first.is_some_and(|k| k.contains(trie.byte(i))) {
            i = trie.end(i);
            continue;
        }
        let (_, parent, entry) = stack[stack.len() - 1];
        visited += 1;
        let s = aut.step_from(entry, parent, trie.byte(i));
        if s == DEAD || s == OVERFLOW {
            i = trie.end(i);
            continue;
        }
        let entry = aut.entry(s);
        if entry.is_ctx() {
            let mut p = path.clone();
            p.push(trie.byte(i));
            uncertain.push((i as u32, p.into_boxed_slice()));
            i = trie.end(i);
            continue;
        }
        for &t in trie.tokens_at(i) {
            allow(t);
        }
        stack.push((trie.end(i) as u32, s, entry));
        path.push(trie.byte(i));
        i += 1;
    }
    visited
}
