//! [`TokenIndex`]: per-vocabulary data shared by every grammar compiled against it — the
//! [`TokenTrie`], the self-loop class indexes ([`ClassIndex`]) and, for bounded
//! repetitions, the text tokens by length and the longest token below each trie node.
//!
//! Building a trie costs tens of milliseconds on a 128k vocabulary, so
//! [`TokenIndex::for_vocab`] keeps one per live vocabulary (keyed by the `Arc`'s address,
//! held weakly: an index lives as long as some compiled grammar uses it).

use super::lower::ByteSet;
use formwork_vocab::{TokenId, TokenMask, TokenTrie, Vocabulary};
use rustc_hash::FxHashMap;
use std::sync::{Arc, Mutex, Weak};

/// Most class indexes kept per vocabulary (each is a mask plus a small trie).
const MAX_CLASSES: usize = 64;

/// A byte class, and whether valid multi-byte UTF-8 characters count as inside it.
type ClassKey = (ByteSet, bool);

/// A vocabulary with its token trie and cached class indexes; shared by `Arc`.
#[derive(Debug)]
pub struct TokenIndex {
    vocab: Arc<Vocabulary>,
    trie: TokenTrie,
    /// `None` for a class not worth an index (see [`class_index`](Self::class_index)).
    classes: Mutex<FxHashMap<ClassKey, Option<Arc<ClassIndex>>>>,
    /// The same with counts, for chains (see [`counted_index`](Self::counted_index)).
    counted: Mutex<FxHashMap<ClassKey, Option<Arc<CountedIndex>>>>,
    /// Per byte `b`: the text tokens whose first byte is `b` (built with the index).
    first_byte: std::sync::OnceLock<Vec<TokenMask>>,
    /// Indexed by trie node: the length of the longest token in its subtree (saturated).
    subtree_max: Vec<u16>,
    /// Text tokens, longest first.
    by_len: Vec<TokenId>,
    /// Indexed by `k`: how many text tokens are longer than `k` bytes (a prefix of `by_len`).
    longer_than: Vec<u32>,
    /// The smallest `k` for which at most an eighth of the trie's nodes lead to tokens
    /// longer than `k` bytes (see [`split_min_budget`](Self::split_min_budget)).
    split_min: u32,
}

/// For a byte class `C`: the tokens made only of bytes in `C`, and a trie of the other
/// tokens' suffixes from their first byte outside `C`. Tokens whose first byte already
/// leaves `C` (most of the vocabulary for a small class) are not copied: they are the
/// main trie's subtrees under the first bytes not in `enters`, walked there.
#[derive(Debug)]
pub(crate) struct ClassIndex {
    /// Text tokens whose every byte is in `C`.
    pub all_in: TokenMask,
    /// Suffixes (from the first byte not in `C`) of the other text tokens that start with
    /// a byte in `enters`.
    pub exits: TokenTrie,
    /// First bytes whose tokens are in `all_in` or `exits`: the bytes of `C` (and, with
    /// UTF-8, every byte from 0x80, so that a character is never split).
    pub enters: ByteSet,
}

impl ClassIndex {
    pub(crate) fn memory_usage(&self) -> usize {
        self.all_in.memory_usage() + self.exits.memory_usage()
    }
}

/// A [`ClassIndex`] that also counts characters, for a chain (`mask::Chain`): a state that
/// does not loop on `C` but moves, on every character of `C`, to one next state, and so on
/// (a string body before its `minLength`; the first character of a length-bounded one).
/// A token's fate there depends on how many characters of `C` it starts with, so the
/// tokens are kept by that count.
#[derive(Debug)]
pub(crate) struct CountedIndex {
    /// Text tokens whose every character is in `C`.
    pub all_in: TokenMask,
    /// The same tokens with their character counts, most characters first.
    pub all_in_by_count: Vec<(u16, TokenId)>,
    /// The other text tokens that start with a byte in `enters`: the root's child `k`
    /// holds, below it, the suffixes (from the first byte outside `C`) of the tokens that
    /// have `k` characters of `C` before it.
    pub exits: TokenTrie,
    /// As [`ClassIndex::enters`].
    pub enters: ByteSet,
    /// The most characters of `C` any token starts with (the chain length needed).
    pub max_count: usize,
}

impl CountedIndex {
    pub(crate) fn memory_usage(&self) -> usize {
        self.all_in.memory_usage() + self.all_in_by_count.len() * 8 + self.exits.memory_usage()
    }
}

fn registry() -> &'static Mutex<Vec<Weak<TokenIndex>>> {
    static R: std::sync::OnceLock<Mutex<Vec<Weak<TokenIndex>>>> = std::sync::OnceLock::new();
    R.get_or_init(|| Mutex::new(Vec::new()))
}

impl TokenIndex {
    /// Builds the index of `vocab` (no sharing; see [`for_vocab`](Self::for_vocab)).
    pub fn new(vocab: Arc<Vocabulary>) -> Arc<Self> {
        let trie = TokenTrie::new(&vocab);
        let subtree_max = subtree_max(&trie);
        // Nodes with a token longer than `k` below them, by `k`: a histogram of
        // `subtree_max`, summed from the top.
        let mut hist = vec![0usize; u16::MAX as usize + 2];
        for &m in &subtree_max {
            hist[m as usize] += 1;
        }
        let mut split_min = u16::MAX as u32;
        let mut above = 0;
        for k in (0..hist.len() - 1).rev() {
            above += hist[k + 1];
            if above > trie.len() / 8 {
                break;
            }
            split_min = k as u32;
        }
        let mut by_len: Vec<TokenId> = vocab.ids().filter(|&t| vocab.is_text(t)).collect();
        by_len.sort_by_key(|&t| std::cmp::Reverse(vocab.token_bytes(t).len()));
        let mut longer_than = vec![0u32; trie.max_depth() + 1];
        for &t in &by_len {
            for n in &mut longer_than[..vocab.token_bytes(t).len()] {
                *n += 1;
            }
        }
        let ix = Arc::new(TokenIndex {
            vocab,
            trie,
            classes: Mutex::new(FxHashMap::default()),
            counted: Mutex::new(FxHashMap::default()),
            first_byte: std::sync::OnceLock::new(),
            subtree_max,
            by_len,
            longer_than,
            split_min,
        });
        // Built here rather than on a request's first mask (a few ms on a 128k vocabulary).
        ix.first_byte_masks();
        ix
    }

    /// The index of `vocab`, shared with every other live user of the same `Arc`.
    pub fn for_vocab(vocab: &Arc<Vocabulary>) -> Arc<Self> {
        let mut reg = registry().lock().unwrap_or_else(|e| e.into_inner());
        reg.retain(|w| w.strong_count() > 0);
        if let Some(ix) = reg
            .iter()
            .filter_map(|w| w.upgrade())
            .find(|ix| Arc::ptr_eq(&ix.vocab, vocab))
        {
            return ix;
        }
        let ix = Self::new(vocab.clone());
        reg.push(Arc::downgrade(&ix));
        ix
    }

    /// The vocabulary.
    pub fn vocab(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    /// The token trie.
    pub fn trie(&self) -> &TokenTrie {
        &self.trie
    }

    /// Per byte `b`: the text tokens whose first byte is `b` (256 masks, built with the
    /// index and shared by every grammar on this vocabulary).
    pub(crate) fn first_byte_masks(&self) -> &[TokenMask] {
        self.first_byte.get_or_init(|| {
            let v = &self.vocab;
            let mut m = vec![TokenMask::new(v.len()); 256];
            for t in v.ids() {
                if let (true, Some(&b)) = (v.is_text(t), v.token_bytes(t).first()) {
                    m[b as usize].insert(t);
                }
            }
            m
        })
    }

    /// Length in bytes of the longest text token.
    pub(crate) fn max_token_len(&self) -> usize {
        self.trie.max_depth()
    }

    /// The text tokens longer than `k` bytes.
    pub(crate) fn tokens_longer_than(&self, k: u32) -> &[TokenId] {
        let n = self.longer_than.get(k as usize).copied().unwrap_or(0);
        &self.by_len[..n as usize]
    }

    /// The smallest budget worth splitting a mask on (`mask::repeat_split`): below it the
    /// walk of the longer tokens would visit more than an eighth of the trie (12 bytes on
    /// SmolLM2), and the state is better walked the ordinary way.
    pub(crate) fn split_min_budget(&self) -> u32 {
        self.split_min
    }

    /// Indexed by trie node: the length of the longest token in its subtree, saturated at
    /// `u16::MAX`.
    pub(crate) fn subtree_max(&self) -> &[u16] {
        &self.subtree_max
    }

    /// Heap bytes used (vocabulary excluded).
    pub fn memory_usage(&self) -> usize {
        self.trie.memory_usage()
            + self
                .first_byte
                .get()
                .map(|m| m.iter().map(|x| x.memory_usage()).sum::<usize>())
                .unwrap_or(0)
            + self.subtree_max.capacity() * 2
            + (self.by_len.capacity() + self.longer_than.capacity()) * 4
            + self
                .classes
                .lock()
                .map(|c| {
                    c.values()
                        .flatten()
                        .map(|x| x.memory_usage())
                        .sum::<usize>()
                })
                .unwrap_or(0)
            + self
                .counted
                .lock()
                .map(|c| c.values().flatten().map(|x| x.memory_usage()).sum::<usize>())
                .unwrap_or(0)
    }

    /// The counted class index of `c` (built on first use, then shared; see
    /// [`CountedIndex`]), on the terms of [`class_index`](Self::class_index): `None` when
    /// more than a quarter of the text tokens enter the class and leave it again, or when a
    /// token starts with more than 255 characters of it.
    pub(crate) fn counted_index(&self, c: ByteSet, utf8: bool) -> Option<Arc<CountedIndex>> {
        memo(&self.counted, (c, utf8), || {
            let n = self.vocab.len();
            let mut all_in = TokenMask::new(n);
            let mut all_in_by_count = Vec::new();
            let mut keyed: Vec<(Vec<u8>, TokenId)> = Vec::new();
            let mut max_count = 0;
            let n_text = self.scan_class(&c, utf8, |t, b, exit, count| {
                max_count = max_count.max(count);
                match exit {
                    None => {
                        all_in.insert(t);
                        all_in_by_count.push((count.min(u16::MAX as usize) as u16, t));
                    }
                    Some(k) => {
                        let mut key = Vec::with_capacity(b.len() - k + 1);
                        key.push(count.min(255) as u8);
                        key.extend_from_slice(&b[k..]);
                        keyed.push((key, t));
                    }
                }
            });
            (keyed.len() * 4 <= n_text && max_count <= 255).then(|| {
                let mut items: Vec<(&[u8], TokenId)> = keyed.iter().map(|(k, t)| (k.as_slice(), *t)).collect();
                let exits = TokenTrie::from_items(&mut items, n);
                all_in_by_count.sort_unstable_by_key(|&(n, _)| std::cmp::Reverse(n));
                Arc::new(CountedIndex { all_in, all_in_by_count, exits, enters: enters_of(&c, utf8), max_count })
            })
        })
    }

    /// The class index of `c` (built on first use, then shared). With `utf8`, every
    /// complete, valid multi-byte UTF-8 character also counts as inside the class.
    ///
    /// `None` when more than a quarter of the text tokens enter the class and leave it
    /// again: their exit trie would cost several ms to build (sorting tens of thousands of
    /// suffixes) and save little over walking the main trie.
    pub(crate) fn class_index(&self, c: ByteSet, utf8: bool) -> Option<Arc<ClassIndex>> {
        memo(&self.classes, (c, utf8), || {
            let v = &self.vocab;
            let mut all_in = TokenMask::new(v.len());
            let mut items: Vec<(&[u8], TokenId)> = Vec::new();
            let n_text = self.scan_class(&c, utf8, |t, b, exit, _| match exit {
                None => all_in.insert(t),
                Some(k) => items.push((&b[k..], t)),
            });
            (items.len() * 4 <= n_text).then(|| {
                let exits = TokenTrie::from_items(&mut items, v.len());
                Arc::new(ClassIndex { all_in, exits, enters: enters_of(&c, utf8) })
            })
        })
    }

    /// Hands `f` every text token whose first byte enters class `c` (see
    /// [`enters_of`]): its id, bytes, first exit (see [`first_exit_counted`]) and the
    /// characters before it. Returns how many text tokens there are in all.
    fn scan_class<'v>(&'v self, c: &ByteSet, utf8: bool, mut f: impl FnMut(TokenId, &'v [u8], Option<usize>, usize)) -> usize {
        let v = &self.vocab;
        let enters = enters_of(c, utf8);
        let mut n_text = 0;
        for t in v.ids() {
            if !v.is_text(t) {
                continue;
            }
            n_text += 1;
            let b = v.token_bytes(t);
            if b.first().is_none_or(|&x| !enters.contains(x)) {
                continue;
            }
            let (exit, count) = first_exit_counted(b, c, utf8);
            f(t, b, exit, count);
        }
        n_text
    }
}

/// The value of `key` in `map`, built by `build` on first use; a map of
/// [`MAX_CLASSES`] entries is emptied before it takes another.
fn memo<V: Clone>(map: &Mutex<FxHashMap<ClassKey, V>>, key: ClassKey, build: impl FnOnce() -> V) -> V {
    if let Some(x) = map.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return x.clone();
    }
    let x = build();
    let mut m = map.lock().unwrap_or_else(|e| e.into_inner());
    if m.len() >= MAX_CLASSES {
        m.clear();
    }
    m.insert(key, x.clone());
    x
}

/// First bytes of the tokens a class index holds: the bytes of `c` and, with `utf8`,
/// every byte from 0x80 (so that a character is never split).
fn enters_of(c: &ByteSet, utf8: bool) -> ByteSet {
    let mut enters = ByteSet::default();
    for b in 0..=255u8 {
        if (utf8 && b >= 0x80) || c.contains(b) {
            enters.insert(b);
        }
    }
    enters
}

/// The index of the first byte of `b` outside the class — a byte not in `c`, or (with
/// `utf8`) the start of an invalid or incomplete multi-byte character — and the number of
/// characters before it.
fn first_exit_counted(b: &[u8], c: &ByteSet, utf8: bool) -> (Option<usize>, usize) {
    let (mut i, mut count) = (0, 0);
    while i < b.len() {
        let x = b[i];
        if x < 0x80 || !utf8 {
            if !c.contains(x) {
                return (Some(i), count);
            }
            i += 1;
            count += 1;
            continue;
        }
        let len = match x {
            0xC2..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF4 => 4,
            _ => return (Some(i), count),
        };
        if i + len > b.len() || std::str::from_utf8(&b[i..i + len]).is_err() {
            return (Some(i), count);
        }
        i += len;
        count += 1;
    }
    (None, count)
}

/// Indexed by node of `t`: the length of the longest token in its subtree (saturated).
fn subtree_max(t: &TokenTrie) -> Vec<u16> {
    let n = t.len();
    let mut parent = vec![0u32; n];
    let mut depth = vec![0u16; n];
    let mut max = vec![0u16; n];
    // DFS order: the nodes whose subtree still contains `i` are on the stack.
    let mut stack: Vec<usize> = vec![0];
    for i in 1..n {
        while t.end(*stack.last().expect("the root spans every node")) <= i {
            stack.pop();
        }
        let p = *stack.last().expect("the root spans every node");
        parent[i] = p as u32;
        depth[i] = depth[p].saturating_add(1);
        if !t.tokens_at(i).is_empty() {
            max[i] = depth[i];
        }
        stack.push(i);
    }
    // Children come after their parent: fold maxima upwards in reverse order.
    for i in (1..n).rev() {
        let p = parent[i] as usize;
        max[p] = max[p].max(max[i]);
    }
    max
}
