//! The matcher's completion questions (fewest bytes to a complete match, a shortest
//! completion, a token plan for it), answered from the grammar's completion tables
//! (`super::super::complete`).

use super::super::automaton::{BOTTOM, DEAD, ENDED, OVERFLOW};
use super::super::complete::MAX_COMPLETION;
use super::Matcher;
use formwork_vocab::{TokenId, TokenKind};

impl Matcher {
    /// The fewest bytes that take the current state to a complete match: 0 when accepting,
    /// `None` when only tokens named by the grammar (negated or not) could finish it. Cheap (one hash
    /// probe once the state has been seen).
    pub fn min_completion_len(&self) -> Option<usize> {
        let s = self.cur();
        if s == ENDED {
            return Some(0);
        }
        self.grammar().completion_need(s).map(|v| v as usize)
    }

    /// [`min_completion_len`](Self::min_completion_len) after token `t`, without committing
    /// it: `None` when `t` is not allowed (EOS included) or nothing but special tokens could
    /// finish the output after it. About the cost of [`is_allowed`](Self::is_allowed).
    pub fn min_completion_len_after(&self, t: TokenId) -> Option<usize> {
        let s = self.cur();
        let g = self.grammar();
        let vocab = g.vocab();
        if s == ENDED || t.index() >= vocab.len() {
            return None;
        }
        // The step first: it may build deferred rules the tables must know.
        let after = g.after_token(s, t);
        match g.completion().known(after) {
            Some(v) => Some(v as usize),
            None => g.completion_need(after).map(|v| v as usize),
        }
    }

    /// True when the grammar's completions only use bytes that are single-byte text tokens
    /// of the vocabulary (byte-level BPE and byte-fallback vocabularies): then
    /// [`completion_tokens`](Self::completion_tokens) never fails and never needs more tokens
    /// than [`min_completion_len`](Self::min_completion_len) bytes.
    pub fn completion_bytes_bound_tokens(&self) -> bool {
        self.grammar().completion().per_byte
    }

    /// A shortest byte string that takes the current state to a complete match (empty when
    /// accepting). `None` when only special tokens could finish the output, or when the
    /// shortest completion is longer than 1 MiB.
    pub fn shortest_completion(&self) -> Option<Vec<u8>> {
        let s = self.cur();
        if s == ENDED {
            return Some(Vec::new());
        }
        let g = self.grammar();
        let (found, comp) = g.state_completion(s);
        let (need, mut n) = found?;
        if need > MAX_COMPLETION {
            return None;
        }
        let mut out = Vec::with_capacity(need as usize);
        let b = g.aut.builder();
        while n != BOTTOM {
            if b.is_join(n) {
                n = comp.cheapest_member(&b, n);
                continue;
            }
            let (pos, parent) = b.node(n);
            comp.emit_from(&b.flat, pos, &mut out);
            n = parent;
        }
        debug_assert_eq!(out.len(), need as usize);
        Some(out)
    }

    /// The fewest tokens that spell [`shortest_completion`](Self::shortest_completion), each
    /// a prefix of the rest of it (so each is allowed in turn; after the last one the matcher
    /// accepts). Empty when accepting. The matcher's state is unchanged. `None` when there is
    /// no byte completion, or it cannot be spelled with the vocabulary's tokens.
    ///
    /// The tokens are not necessarily the model tokenizer's canonical ones (like
    /// [`forced_tokens`](Self::forced_tokens)); they are meant for closing an output when the
    /// token budget runs out.
    pub fn completion_tokens(&mut self) -> Option<Vec<TokenId>> {
        let bytes = self.shortest_completion()?;
        if bytes.is_empty() {
            return Some(Vec::new());
        }
        let g = self.grammar().clone();
        let trie = g.index().trie();
        let vocab = g.vocab();
        let n = bytes.len();
        // cost[i]: fewest tokens for bytes[i..]; next[i]: (end, token) of the first one.
        let mut cost = vec![u32::MAX; n + 1];
        let mut next = vec![(0usize, TokenId(0)); n + 1];
        cost[n] = 0;
        for i in (0..n).rev() {
            let mut node = 0;
            for (j, &b) in bytes[i..].iter().enumerate() {
                let Some(c) = trie.child(node, b) else { break };
                node = c;
                let toks = trie.tokens_at(c);
                let Some(&t) = toks.iter().find(|&&t| vocab.kind(t) == TokenKind::Normal).or(toks.first()) else {
                    continue;
                };
                let end = i + j + 1;
                if cost[end] < cost[i] {
                    cost[i] = cost[end] + 1;
                    next[i] = (end, t);
                }
            }
        }
        if cost[0] == u32::MAX {
            return None;
        }
        // The bytes are a path of the grammar by construction; check that stepping them stays
        // within the ambiguity limit and ends accepting.
        {
            let aut = &g.aut;
            let x = aut.steps(self.cur(), &bytes);
            if x == DEAD || x == OVERFLOW || !aut.info(x).accepting {
                return None;
            }
        }
        let mut out = Vec::with_capacity(cost[0] as usize);
        let mut i = 0;
        while i < n {
            let (end, t) = next[i];
            out.push(t);
            i = end;
        }
        Some(out)
    }
}
