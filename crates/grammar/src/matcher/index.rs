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
    /// The same with whole tokens, for closed sets (see [`closed_index`](Self::closed_index)).
    closed: Mutex<FxHashMap<ClassKey, Option<Arc<ClassIndex>>>>,
    /// Per byte `b`: the text tokens whose first byte is `b` (built with the index).
    first_byte: std::sync::OnceLock<Vec<TokenMask>>,
    /// Indexed by trie node: the length of the longest token in its subtree (saturated).
    subtree_max: Vec<u16>,
    /// Text tokens, longest first.
    by_len: Vec<TokenId>,
    /// What a class scan needs to know of each text token without reading its bytes, by
    /// first byte (then by id): the tokens starting with byte `b` are
    /// `sigs[sig_groups[b]..sig_groups[b + 1]]`, so a scan reads the groups of the bytes
    /// entering its class, in order.
    sigs: Vec<TokenSig>,
    sig_groups: [u32; 257],
    /// Indexed by `k`: how many text tokens are longer than `k` bytes (a prefix of `by_len`).
    longer_than: Vec<u32>,
    /// The smallest `k` for which at most an eighth of the trie's nodes lead to tokens
    /// longer than `k` bytes (see [`split_min_budget`](Self::split_min_budget)).
    split_min: u32,
}

/// For a byte class `C`: the tokens made only of bytes in `C`, and a trie of the other
/// tokens' suffixes from their first byte outside `C` (for a closed set, `mask::Closed`:
/// the other tokens whole, see [`TokenIndex::closed_index`]). Tokens whose first byte already
/// leaves `C` (most of the vocabulary for a small class) are not copied: they are the
/// main trie's subtrees under the first bytes not in `enters`, walked there.
#[derive(Debug)]
pub(crate) struct ClassIndex {
    /// Text tokens whose every byte is in `C`.
    pub all_in: TokenMask,
    /// Suffixes (from the first byte not in `C`) of the other text tokens that start with
    /// a byte in `enters` (in a closed index: those tokens whole).
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
        let mut sigs: Vec<TokenSig> = vocab.ids().filter_map(|t| TokenSig::of(&vocab, t)).collect();
        sigs.sort_by_key(|s| (s.first, s.token));
        let mut sig_groups = [0u32; 257];
        for s in &sigs {
            sig_groups[s.first as usize + 1] += 1;
        }
        for b in 0..256 {
            sig_groups[b + 1] += sig_groups[b];
        }
        let ix = Arc::new(TokenIndex {
            vocab,
            trie,
            classes: Mutex::new(FxHashMap::default()),
            counted: Mutex::new(FxHashMap::default()),
            closed: Mutex::new(FxHashMap::default()),
            first_byte: std::sync::OnceLock::new(),
            subtree_max,
            sigs,
            sig_groups,
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
            + self.sigs.capacity() * std::mem::size_of::<TokenSig>()
            + [&self.classes, &self.closed]
                .iter()
                .map(|m| m.lock().map(|c| c.values().flatten().map(|x| x.memory_usage()).sum::<usize>()).unwrap_or(0))
                .sum::<usize>()
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
            // The exit keys (a count byte, then the suffix) end to end in one buffer.
            let mut keys: Vec<u8> = Vec::new();
            let mut keyed: Vec<(u32, u32, TokenId)> = Vec::new();
            let mut max_count = 0;
            let fits = self.scan_class(&c, utf8, |t, s| match s {
                Scanned::In { count } => {
                    max_count = max_count.max(count);
                    all_in.insert(t);
                    all_in_by_count.push((count.min(u16::MAX as usize) as u16, t));
                }
                Scanned::Exit { suffix, count } => {
                    max_count = max_count.max(count);
                    let start = keys.len() as u32;
                    keys.push(count.min(255) as u8);
                    keys.extend_from_slice(suffix);
                    keyed.push((start, keys.len() as u32, t));
                }
            });
            (fits && max_count <= 255).then(|| {
                let mut items: Vec<(&[u8], TokenId)> = keyed.iter().map(|&(a, b, t)| (&keys[a as usize..b as usize], t)).collect();
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
        memo(&self.classes, (c, utf8), || self.build_class_index(&c, utf8, false))
    }

    /// The closed index of `c` (built on first use, then shared), on the terms of
    /// [`class_index`](Self::class_index): a [`ClassIndex`] whose `exits` trie holds the
    /// tokens that leave the class whole, not their suffixes, since from a closed set of
    /// states (`mask::Closed`) the state where a token leaves the class depends on all of
    /// its bytes before.
    pub(crate) fn closed_index(&self, c: ByteSet, utf8: bool) -> Option<Arc<ClassIndex>> {
        memo(&self.closed, (c, utf8), || self.build_class_index(&c, utf8, true))
    }

    /// A class index of `c`, its exits trie holding suffixes or, with `whole`, whole tokens.
    fn build_class_index(&self, c: &ByteSet, utf8: bool, whole: bool) -> Option<Arc<ClassIndex>> {
        let v = &self.vocab;
        let mut all_in = TokenMask::new(v.len());
        let mut items: Vec<(&[u8], TokenId)> = Vec::new();
        let fits = self.scan_class(c, utf8, |t, s| match s {
            Scanned::In { .. } => all_in.insert(t),
            Scanned::Exit { suffix, .. } => items.push((if whole { v.token_bytes(t) } else { suffix }, t)),
        });
        fits.then(|| {
            let exits = TokenTrie::from_items(&mut items, v.len());
            Arc::new(ClassIndex { all_in, exits, enters: enters_of(c, utf8) })
        })
    }

    /// Hands `f` every text token whose first byte enters class `c` (see [`enters_of`]),
    /// as [`Scanned`]: inside the class, or leaving it (where: [`first_exit_counted`]).
    /// Returns false, early, once more than a quarter of the text tokens have left the
    /// class (an index not worth building).
    ///
    /// Most tokens are answered by their [`TokenSig`] alone (a subset test each, over the
    /// contiguous groups of the bytes that enter the class, so a small class reads few);
    /// only the tokens that leave the class, or whose bytes the signature does not settle,
    /// have their bytes read. Best of 10 on this machine (`class_index_build_times` below),
    /// before → after: the JSON string body 0.56 → 0.08–0.13 ms on SmolLM2, 2.2 → 0.7 ms on
    /// Llama 3.1; a word class 0.38 → 0.05 and 1.45 → 0.17 ms; a class refused as not worth
    /// an index 0.62 → 0.14 and 2.0 → 0.36 ms.
    fn scan_class<'v>(&'v self, c: &ByteSet, utf8: bool, mut f: impl FnMut(TokenId, Scanned<'v>)) -> bool {
        let v = &self.vocab;
        let max_exits = self.by_len.len() / 4;
        let (out0, out1) = (!c.0[0], !c.0[1]);
        let enters = enters_of(c, utf8);
        let groups = || {
            (0..=255u8)
                .filter(|&b| enters.contains(b))
                .flat_map(|b| &self.sigs[self.sig_groups[b as usize] as usize..self.sig_groups[b as usize + 1] as usize])
        };
        // First the tokens that surely leave (an ASCII byte outside, or with UTF-8 a byte
        // that starts no valid character): a class that loses too many is refused without
        // reading any token's bytes.
        let sure = groups().filter(|s| !s.inside(out0, out1) || (utf8 && s.kind == SigKind::Other)).count();
        if sure > max_exits {
            return false;
        }
        let mut exits = 0usize;
        for sig in groups() {
            if sig.inside(out0, out1) && (sig.kind == SigKind::Ascii || (utf8 && sig.kind == SigKind::Utf8)) {
                f(sig.token, Scanned::In { count: sig.chars as usize });
                continue;
            }
            let bytes = v.token_bytes(sig.token);
            match first_exit_counted(bytes, c, utf8) {
                (None, count) => f(sig.token, Scanned::In { count }),
                (Some(k), count) => {
                    f(sig.token, Scanned::Exit { suffix: &bytes[k..], count });
                    exits += 1;
                    if exits > max_exits {
                        return false;
                    }
                }
            }
        }
        true
    }
}

/// A token as [`TokenIndex::scan_class`] sees it.
enum Scanned<'v> {
    /// Every character of the token is in the class; `count` characters.
    In { count: usize },
    /// The token leaves the class: `suffix` is its bytes from the first one outside (see
    /// [`first_exit_counted`]), after `count` characters of the class.
    Exit { suffix: &'v [u8], count: usize },
}

/// What a class scan needs to know of a text token without reading its bytes: the ASCII
/// bytes it holds (a 128-bit set) and what else it holds.
#[derive(Clone, Copy, Debug)]
struct TokenSig {
    ascii: [u64; 2],
    token: TokenId,
    /// Characters (bytes, when ASCII), saturated; for [`SigKind::Ascii`] and
    /// [`SigKind::Utf8`] only.
    chars: u16,
    kind: SigKind,
    first: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SigKind {
    /// ASCII bytes only.
    Ascii,
    /// Valid UTF-8 with some multi-byte characters.
    Utf8,
    /// Some byte starts no valid, complete character.
    Other,
}

impl TokenSig {
    /// Are all of the token's ASCII bytes in the class whose complement is `out0`, `out1`?
    #[inline]
    fn inside(&self, out0: u64, out1: u64) -> bool {
        self.ascii[0] & out0 == 0 && self.ascii[1] & out1 == 0
    }

    /// `None` for a token that is not text, or is empty.
    fn of(v: &Vocabulary, token: TokenId) -> Option<TokenSig> {
        let b = v.token_bytes(token);
        let &first = b.first().filter(|_| v.is_text(token))?;
        let mut ascii = [0u64; 2];
        for &x in b.iter().filter(|&&x| x < 0x80) {
            ascii[(x >> 6) as usize] |= 1 << (x & 63);
        }
        let (kind, chars) = if b.is_ascii() {
            (SigKind::Ascii, b.len())
        } else {
            match std::str::from_utf8(b) {
                Ok(s) => (SigKind::Utf8, s.chars().count()),
                Err(_) => (SigKind::Other, 0),
            }
        };
        Some(TokenSig { ascii, token, chars: chars.min(u16::MAX as usize) as u16, kind, first })
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

#[cfg(test)]
mod tests {
    use super::*;
    use formwork_testkit::SharedTokenizer;

    /// Classes of several kinds: the JSON string body, digits, a word class, one ASCII
    /// letter short of the string body (more than a quarter of the tokens leave it), and
    /// a class with high bytes taken as bytes.
    fn classes() -> Vec<(ByteSet, bool)> {
        let mut string = ByteSet::default();
        string.insert_range(0x20, 0x7f);
        let mut without = ByteSet::default();
        for b in 0..=255u8 {
            if string.contains(b) && b != b'"' && b != b'\\' {
                without.insert(b);
            }
        }
        let mut digits = ByteSet::default();
        digits.insert_range(b'0', b'9');
        let mut word = digits;
        word.insert_range(b'a', b'z');
        word.insert_range(b'A', b'Z');
        word.insert(b'_');
        let mut no_e = ByteSet::default();
        for b in 0..=255u8 {
            if without.contains(b) && b != b'e' {
                no_e.insert(b);
            }
        }
        let mut high = ByteSet::default();
        high.insert_range(b'a', b'z');
        high.insert_range(0xC3, 0xC3);
        high.insert_range(0x80, 0xBF);
        vec![(without, true), (without, false), (digits, false), (word, true), (no_e, true), (high, false), (high, true)]
    }

    /// The signature scan hands over exactly what reading each token's bytes gives, and
    /// gives up exactly when more than a quarter of the text tokens leave the class.
    #[test]
    fn scan_class_agrees_with_reading_each_token() {
        for tok in [SharedTokenizer::Smollm2, SharedTokenizer::Llama3] {
            let ix = TokenIndex::new(tok.vocab());
            let v = ix.vocab().clone();
            for (c, utf8) in classes() {
                let enters = enters_of(&c, utf8);
                let mut want: Vec<(TokenId, Option<Vec<u8>>, usize)> = Vec::new();
                let mut n_text = 0;
                for t in v.ids().filter(|&t| v.is_text(t)) {
                    n_text += 1;
                    let b = v.token_bytes(t);
                    if b.first().is_some_and(|&x| enters.contains(x)) {
                        let (exit, count) = first_exit_counted(b, &c, utf8);
                        want.push((t, exit.map(|k| b[k..].to_vec()), count));
                    }
                }
                let mut got = Vec::new();
                let fits = ix.scan_class(&c, utf8, |t, s| match s {
                    Scanned::In { count } => got.push((t, None, count)),
                    Scanned::Exit { suffix, count } => got.push((t, Some(suffix.to_vec()), count)),
                });
                let exits = want.iter().filter(|w| w.1.is_some()).count();
                assert_eq!(fits, exits * 4 <= n_text, "{tok:?} {c:?} {utf8}");
                if fits {
                    want.sort();
                    got.sort();
                    assert_eq!(got, want, "{tok:?} {c:?} {utf8}");
                }
            }
        }
    }

    /// Build times of the class indexes, best of 10 each: a measurement, not a check, so
    /// it runs only when asked (`cargo test --release -p formwork-grammar --lib
    /// class_index_build_times -- --ignored --nocapture`).
    #[test]
    #[ignore]
    fn class_index_build_times() {
        for tok in [SharedTokenizer::Smollm2, SharedTokenizer::Llama3] {
            let ix = TokenIndex::new(tok.vocab());
            for (i, (c, utf8)) in classes().into_iter().enumerate() {
                let best = |f: &dyn Fn() -> bool| {
                    let mut best = f64::MAX;
                    let mut built = false;
                    for _ in 0..10 {
                        ix.classes.lock().unwrap().clear();
                        ix.counted.lock().unwrap().clear();
                        let t = std::time::Instant::now();
                        built = f();
                        best = best.min(t.elapsed().as_secs_f64() * 1e3);
                    }
                    (built, best)
                };
                let (plain, a) = best(&|| ix.class_index(c, utf8).is_some());
                let (counted, b) = best(&|| ix.counted_index(c, utf8).is_some());
                println!("{tok:?} class {i} utf8={utf8:<5} index {plain:<5} {a:>7.3} ms  counted {counted:<5} {b:>7.3} ms (best of 10)");
            }
        }
    }
}
