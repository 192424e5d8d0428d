//! [`TokenTrie`]: the vocabulary's byte strings in a trie laid out for the mask walk.
//!
//! ## Layout
//! Nodes are stored in depth-first (pre-)order in one flat `Vec`. Node 0 is the root (the
//! empty string); every other node carries the byte on the edge from its parent. Each node
//! records `end`, the index one past its subtree, so a walker that rejects a node's prefix
//! jumps to `end` in O(1) instead of visiting the subtree. The children of node `i` are
//! `i + 1`, then `end(i + 1)`, ... up to `end(i)`.
//!
//! Tokens ending at a node are listed in a side table (`tokens_at`); several tokens can
//! share one byte string (a byte-fallback `<0x41>` and `A`, duplicated added tokens).
//!
//! Only text tokens ([`Vocabulary::is_text`]) are inserted: special, control and unused
//! tokens are never produced by grammar text.
//!
//! ## The walk a matcher writes
//! ```ignore
//! let mut at = vec![start_state; trie.max_depth() + 1];  // state after each depth
//! let mut i = 1;                                          // first child of the root
//! while i < trie.len() {
//!     let d = trie.depth(i);                              // from the label, with the byte
//!     let s = step(at[d - 1], trie.byte(i));
//!     if dead(s) { i = trie.end(i); continue; }           // skip the subtree
//!     for &t in trie.tokens_at(i) { allow(t) }
//!     at[d] = s;
//!     i += 1;
//! }
//! ```
//! A node's parent is the last node visited at the depth above it, so the walk keeps no
//! stack: leaving a subtree costs nothing.
//!
//! Building is O(total token bytes · log n) (one sort, no allocation per node); memory is
//! 16 bytes a node (label, end, token range: one [`Node`], read in one load) plus 4 bytes a
//! token, and 4 bytes per vocabulary id once [`TokenTrie::node_of`] is first asked
//! (sub-tries never are).

use crate::{TokenId, Vocabulary};

/// One trie node as a walk reads it, in one aligned 16-byte load: `[label, end, first
/// token, one past its last token]`.
/// - `label`: the node's depth (bytes from the root) above 8 bits, the byte on the edge into
///   it below. A depth-first walk keeps the state after each depth in an array indexed by
///   depth, so node `i`'s parent state is the entry at `depth(i) - 1`, and leaving a
///   subtree needs no pops.
/// - `end`: one past the last node of its subtree.
/// - `first token`, `last token`: its tokens are `all_tokens()[first..last]`
///   ([`TokenTrie::all_tokens`]); a subtree's tokens run from its first node's `first` to
///   the `first` of the node at its `end` (a sentinel after the last node holds the total).
///
/// (Read as three arrays, or as 12 bytes with the next node's start, a full walk cost
/// 6.0–6.5 ns a node; as one aligned node, 5.7–6.0: `benches/masks.rs`, "full walk".)
pub type Node = [u32; 4];

/// The vocabulary's text tokens in a byte trie, nodes in depth-first order (see module docs).
#[derive(Clone, Debug, Default)]
pub struct TokenTrie {
    /// Indexed by node, plus one sentinel: what a walk reads at every node, side by side
    /// (see [`Node`]).
    nodes: Vec<Node>,
    /// Token ids, grouped by node.
    tokens: Vec<TokenId>,
    /// Indexed by `TokenId`: the node where the token ends (`u32::MAX` for tokens not in the
    /// trie); made on first use (sub-tries, a class's exit suffixes, never ask).
    node_of: std::sync::OnceLock<Vec<u32>>,
    /// The size of the vocabulary the token ids come from.
    n_tokens: usize,
    /// Longest token, in bytes.
    max_depth: usize,
}

/// Sorts `(bytes, token)` pairs as `sort_unstable` would, faster: most comparisons are
/// settled by the first 8 bytes read as one big-endian integer (zero-padded), which orders
/// like the bytes themselves; only pairs whose first 8 bytes agree compare in full. (A class
/// index's suffix trie of 16,784 Llama 3.1 token suffixes, sort and build: 1.7 ms with
/// `sort_unstable`, 1.0 ms with this; the rest is reading the suffixes.)
fn sort_items(items: &mut [(&[u8], TokenId)]) {
    fn head(b: &[u8]) -> u64 {
        let mut w = [0u8; 8];
        let n = b.len().min(8);
        w[..n].copy_from_slice(&b[..n]);
        u64::from_be_bytes(w)
    }
    let mut keyed: Vec<(u64, u32)> = items.iter().enumerate().map(|(i, (b, _))| (head(b), i as u32)).collect();
    keyed.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| items[a.1 as usize].cmp(&items[b.1 as usize])));
    let sorted: Vec<(&[u8], TokenId)> = keyed.iter().map(|&(_, i)| items[i as usize]).collect();
    items.copy_from_slice(&sorted);
}

impl TokenTrie {
    /// Builds the trie of `vocab`'s text tokens.
    pub fn new(vocab: &Vocabulary) -> Self {
        let mut items: Vec<(&[u8], TokenId)> = vocab
            .ids()
            .filter(|&t| vocab.is_text(t))
            .map(|t| (vocab.token_bytes(t), t))
            .collect();
        Self::from_items(&mut items, vocab.len())
    }

    /// Builds a trie from `(bytes, token)` pairs over a vocabulary of `n_tokens` ids (empty
    /// byte strings are skipped). Useful for sub-tries (a suffix trie of some tokens).
    pub fn from_items(items: &mut [(&[u8], TokenId)], n_tokens: usize) -> Self {
        sort_items(items);
        let mut bytes = vec![0u8];
        let mut ends = vec![u32::MAX];
        // Sorted, a string's tokens come right after its nodes are made (a prefix sorts
        // before its extensions, equal strings are adjacent), so every token goes to the
        // newest node and each node's tokens are one run of `tokens`.
        let mut tok_start: Vec<u32> = vec![0];
        let mut tokens: Vec<TokenId> = Vec::with_capacity(items.len());
        // `path[d]` is the node at depth `d` along the current string (path[0] = root).
        let mut path: Vec<u32> = vec![0];
        let mut prev: &[u8] = &[];
        let mut max_depth = 0;
        for &(s, t) in items.iter() {
            if s.is_empty() {
                continue;
            }
            let common = prev.iter().zip(s).take_while(|(a, b)| a == b).count();
            // Close the nodes deeper than the common prefix.
            while path.len() > common + 1 {
                let n = path.pop().unwrap();
                ends[n as usize] = bytes.len() as u32;
            }
            for &b in &s[common..] {
                path.push(bytes.len() as u32);
                bytes.push(b);
                ends.push(u32::MAX);
                tok_start.push(tokens.len() as u32);
            }
            debug_assert_eq!(*path.last().unwrap() as usize, bytes.len() - 1, "a token goes to the newest node");
            tokens.push(t);
            max_depth = max_depth.max(s.len());
            prev = s;
        }
        while let Some(n) = path.pop() {
            ends[n as usize] = bytes.len() as u32;
        }
        tok_start.push(tokens.len() as u32);
        let labels = label_nodes(&bytes, &ends);
        let mut nodes: Vec<Node> = (0..bytes.len()).map(|i| [labels[i], ends[i], tok_start[i], tok_start[i + 1]]).collect();
        nodes.push([0, bytes.len() as u32, tokens.len() as u32, tokens.len() as u32]);
        TokenTrie {
            nodes,
            tokens,
            node_of: std::sync::OnceLock::new(),
            n_tokens,
            max_depth,
        }
    }

    /// Number of nodes (the root included).
    #[inline]
    pub fn len(&self) -> usize {
        self.nodes.len().saturating_sub(1)
    }

    /// True when the trie holds no token.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The byte on the edge into node `i`.
    #[inline]
    pub fn byte(&self, i: usize) -> u8 {
        self.nodes[i][0] as u8
    }

    /// One past the last node of `i`'s subtree.
    #[inline]
    pub fn end(&self, i: usize) -> usize {
        self.nodes[i][1] as usize
    }

    /// Every node, plus one sentinel (see [`Node`]): what a walk reads per node.
    #[inline]
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The depth of node `i`: its bytes' length.
    #[inline]
    pub fn depth(&self, i: usize) -> usize {
        (self.nodes[i][0] >> 8) as usize
    }

    /// Tokens whose bytes end exactly at node `i`.
    #[inline]
    pub fn tokens_at(&self, i: usize) -> &[TokenId] {
        &self.tokens[self.nodes[i][2] as usize..self.nodes[i][3] as usize]
    }

    /// Tokens whose bytes end anywhere in the subtree of node `i` (the node included): one
    /// slice, since nodes and their tokens are in depth-first order.
    #[inline]
    pub fn tokens_below(&self, i: usize) -> &[TokenId] {
        &self.tokens[self.nodes[i][2] as usize..self.nodes[self.end(i)][2] as usize]
    }

    /// The node where `t` ends, if `t` is in the trie.
    pub fn node_of(&self, t: TokenId) -> Option<usize> {
        self.node_of
            .get_or_init(|| {
                let mut node_of = vec![u32::MAX; self.n_tokens];
                for i in 0..self.len() {
                    for &t in self.tokens_at(i) {
                        if let Some(n) = node_of.get_mut(t.index()) {
                            *n = i as u32;
                        }
                    }
                }
                node_of
            })
            .get(t.index())
            .filter(|&&n| n != u32::MAX)
            .map(|&n| n as usize)
    }

    /// The child of node `i` on byte `b` (a linear scan of the children).
    pub fn child(&self, i: usize, b: u8) -> Option<usize> {
        let end = self.end(i);
        let mut c = i + 1;
        while c < end {
            if self.byte(c) == b {
                return Some(c);
            }
            c = self.end(c);
        }
        None
    }

    /// The node reached by `s` from the root, if every prefix of `s` is a node.
    pub fn find(&self, s: &[u8]) -> Option<usize> {
        s.iter().try_fold(0, |i, &b| self.child(i, b))
    }

    /// `text` as tokens, greedily: at each position the longest token that matches there.
    /// `None` when some byte starts no token. Close to what a real tokenizer gives, for
    /// benchmarks and diagnostics that walk documents token by token.
    pub fn longest_match_tokens(&self, text: &[u8]) -> Option<Vec<TokenId>> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < text.len() {
            let (mut node, mut best, mut j) = (0, None, i);
            while j < text.len() {
                let Some(c) = self.child(node, text[j]) else { break };
                node = c;
                j += 1;
                if let Some(&t) = self.tokens_at(c).first() {
                    best = Some((j, t));
                }
            }
            let (end, t) = best?;
            out.push(t);
            i = end;
        }
        Some(out)
    }

    /// Length of the longest token in bytes.
    pub fn max_depth(&self) -> usize {
        self.max_depth
    }

    /// All token ids in the trie, in node (byte-string) order.
    pub fn all_tokens(&self) -> &[TokenId] {
        &self.tokens
    }

    /// Heap bytes used.
    pub fn memory_usage(&self) -> usize {
        std::mem::size_of::<Node>() * self.nodes.capacity()
            + 4 * self.tokens.capacity()
            + 4 * self.node_of.get().map_or(0, |v| v.capacity())
    }
}

/// The labels (`depth << 8 | byte`) of nodes in depth-first order with subtree ends `ends`.
fn label_nodes(bytes: &[u8], ends: &[u32]) -> Vec<u32> {
    let mut labels = vec![0u32; bytes.len()];
    // The ends of the open ancestors: a node's depth is how many are still open.
    let mut open: Vec<u32> = Vec::new();
    for i in 1..bytes.len() {
        while open.last().is_some_and(|&e| e as usize <= i) {
            open.pop();
        }
        let depth = open.len() as u32 + 1;
        assert!(depth < 1 << 24, "a token of more than 16 MiB");
        labels[i] = depth << 8 | bytes[i] as u32;
        open.push(ends[i]);
    }
    labels
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast sort orders exactly as `sort_unstable` does, across the cases its integer
    /// heads cannot tell apart: prefixes, zero bytes (the padding's value), strings equal in
    /// their first 8 bytes, and equal strings of different tokens.
    #[test]
    fn sort_items_orders_as_sort_unstable() {
        let mut strings: Vec<Vec<u8>> = vec![
            vec![], b"a".to_vec(), b"a\0".to_vec(), b"a\0\0".to_vec(), b"ab".to_vec(), b"abcdefgh".to_vec(),
            b"abcdefgh\0".to_vec(), b"abcdefghi".to_vec(), b"abcdefghh".to_vec(), b"\xff\xff".to_vec(), b"\0".to_vec(),
        ];
        // Pseudo-random strings over a small alphabet, so that long common prefixes occur.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..2000 {
            let mut s = Vec::new();
            for _ in 0..(x % 14) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                s.push([0u8, b'a', b'b', 0xff][(x % 4) as usize]);
            }
            strings.push(s);
        }
        let mut items: Vec<(&[u8], TokenId)> = strings.iter().enumerate().map(|(i, s)| (s.as_slice(), TokenId((i % 7) as u32))).collect();
        let mut want = items.clone();
        want.sort_unstable();
        sort_items(&mut items);
        assert_eq!(items, want);
    }

    fn walk_all(trie: &TokenTrie) -> Vec<(Vec<u8>, TokenId)> {
        // Reconstruct each token's bytes from the DFS layout.
        let mut out = Vec::new();
        let mut stack: Vec<(usize, Vec<u8>)> = vec![(trie.end(0), Vec::new())];
        let mut i = 1;
        while i < trie.len() {
            while i >= stack.last().unwrap().0 {
                stack.pop();
            }
            let mut s = stack.last().unwrap().1.clone();
            s.push(trie.byte(i));
            for &t in trie.tokens_at(i) {
                out.push((s.clone(), t));
            }
            stack.push((trie.end(i), s));
            i += 1;
        }
        out
    }

    #[test]
    fn dfs_layout_round_trips_and_skips() {
        let v = Vocabulary::from_strings(&["ab", "a", "abc", "b", "ba", "", "ab"], &["</s>"]);
        let trie = TokenTrie::new(&v);
        let mut got = walk_all(&trie);
        got.sort();
        let mut want: Vec<(Vec<u8>, TokenId)> = v
            .ids()
            .filter(|&t| v.is_text(t))
            .map(|t| (v.token_bytes(t).to_vec(), t))
            .collect();
        want.sort();
        assert_eq!(got, want);
        // Nodes: root, a, ab, abc, b, ba.
        assert_eq!(trie.len(), 6);
        let a = trie.find(b"a").unwrap();
        assert_eq!(trie.end(a), trie.find(b"b").unwrap());
        assert_eq!(
            trie.tokens_at(trie.find(b"ab").unwrap()),
            &[TokenId(0), TokenId(6)]
        );
        assert_eq!(trie.node_of(TokenId(2)), trie.find(b"abc"));
        assert_eq!(
            trie.node_of(TokenId(7)),
            None,
            "EOS is special, not in the trie"
        );
        assert_eq!(trie.max_depth(), 3);
        assert!(trie.find(b"ac").is_none());
        // Longest match: "abc" whole, then "ba", then "b".
        assert_eq!(trie.longest_match_tokens(b"abcbab"), Some(vec![TokenId(2), TokenId(4), TokenId(3)]));
        assert_eq!(trie.longest_match_tokens(b"ax"), None);
        // Labels: each node's depth and byte.
        for (s, d) in [(&b"a"[..], 1), (b"ab", 2), (b"abc", 3), (b"b", 1), (b"ba", 2)] {
            let i = trie.find(s).unwrap();
            assert_eq!(trie.depth(i), d);
            assert_eq!(trie.nodes()[i][0] & 0xff, *s.last().unwrap() as u32);
            // The node's tokens, and its subtree's, from its one `Node`.
            let [_, end, first, last] = trie.nodes()[i];
            assert_eq!(trie.tokens_at(i), &trie.all_tokens()[first as usize..last as usize]);
            assert_eq!(trie.tokens_below(i).len(), (trie.nodes()[end as usize][2] - first) as usize);
        }
    }
}
