//! [`TokenMask`]: a dense bitset over the vocabulary.
//!
//! One bit per token, packed in `u64` words (bit `i % 64` of word `i / 64` is token `i`).
//! 128,256 tokens take 2,004 words (16 KiB). Set/get are O(1); `clear`, `set_all`,
//! `union_with`, `count_ones` are O(n/64) and auto-vectorise; `iter_ones` is O(n/64 + ones).
//! Bits at positions `>= len` in the last word are always zero (an invariant every method keeps).

use crate::TokenId;

/// A set of allowed tokens, as a bitset over a vocabulary of `len` tokens.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct TokenMask {
    words: Vec<u64>,
    len: usize,
}

impl TokenMask {
    /// An empty mask (no token allowed) over `len` tokens.
    pub fn new(len: usize) -> Self {
        TokenMask { words: vec![0; len.div_ceil(64)], len }
    }

    /// A full mask (every token allowed) over `len` tokens.
    pub fn full(len: usize) -> Self {
        let mut m = Self::new(len);
        m.set_all();
        m
    }

    /// Number of tokens the mask ranges over (the vocabulary size), not the number allowed.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the mask ranges over zero tokens.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Is `t` allowed? Tokens outside the vocabulary are never allowed.
    #[inline]
    pub fn contains(&self, t: TokenId) -> bool {
        let i = t.index();
        i < self.len && (self.words[i / 64] >> (i % 64)) & 1 == 1
    }

    /// Allow `t`. Panics if `t` is outside the vocabulary.
    #[inline]
    pub fn insert(&mut self, t: TokenId) {
        let i = t.index();
        assert!(i < self.len, "token {i} outside a vocabulary of {}", self.len);
        self.words[i / 64] |= 1 << (i % 64);
    }

    /// Disallow `t` (no-op outside the vocabulary).
    #[inline]
    pub fn remove(&mut self, t: TokenId) {
        let i = t.index();
        if i < self.len {
            self.words[i / 64] &= !(1 << (i % 64));
        }
    }

    /// Disallow every token.
    pub fn clear(&mut self) {
        self.words.fill(0);
    }

    /// Allow every token.
    pub fn set_all(&mut self) {
        self.words.fill(!0);
        self.trim();
    }

    /// `self |= other`. Both masks must range over the same vocabulary size.
    pub fn union_with(&mut self, other: &TokenMask) {
        assert_eq!(self.len, other.len);
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= *b;
        }
    }

    /// `self &= other`. Both masks must range over the same vocabulary size.
    pub fn intersect_with(&mut self, other: &TokenMask) {
        assert_eq!(self.len, other.len);
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a &= *b;
        }
    }

    /// `self &= !other`.
    pub fn subtract(&mut self, other: &TokenMask) {
        assert_eq!(self.len, other.len);
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a &= !*b;
        }
    }

    /// Number of allowed tokens.
    pub fn count_ones(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// True when no token is allowed.
    pub fn is_none(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// The allowed tokens in increasing order.
    pub fn iter_ones(&self) -> impl Iterator<Item = TokenId> + '_ {
        self.words.iter().enumerate().flat_map(|(wi, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let b = w.trailing_zeros() as usize;
                w &= w - 1;
                Some(TokenId((wi * 64 + b) as u32))
            })
        })
    }

    /// The packed words (bit `i % 64` of word `i / 64` is token `i`).
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// Mutable access to the packed words. Callers must keep bits `>= len` zero.
    pub fn words_mut(&mut self) -> &mut [u64] {
        &mut self.words
    }

    /// Heap bytes used.
    pub fn memory_usage(&self) -> usize {
        self.words.capacity() * 8
    }

    fn trim(&mut self) {
        let r = self.len % 64;
        if r != 0 {
            if let Some(last) = self.words.last_mut() {
                *last &= (1u64 << r) - 1;
            }
        }
    }
}

impl std::fmt::Debug for TokenMask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TokenMask({} of {} allowed)", self.count_ones(), self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_get_count_and_trailing_bits() {
        let mut m = TokenMask::new(130);
        assert!(m.is_none());
        m.insert(TokenId(0));
        m.insert(TokenId(64));
        m.insert(TokenId(129));
        assert!(m.contains(TokenId(64)) && !m.contains(TokenId(65)));
        assert!(!m.contains(TokenId(500)));
        assert_eq!(m.iter_ones().collect::<Vec<_>>(), vec![TokenId(0), TokenId(64), TokenId(129)]);
        m.set_all();
        assert_eq!(m.count_ones(), 130);
        m.remove(TokenId(3));
        assert_eq!(m.count_ones(), 129);
        let mut n = TokenMask::new(130);
        n.insert(TokenId(3));
        m.union_with(&n);
        assert_eq!(m.count_ones(), 130);
        m.subtract(&n);
        assert!(!m.contains(TokenId(3)));
        m.intersect_with(&n);
        assert!(m.is_none());
    }
}
