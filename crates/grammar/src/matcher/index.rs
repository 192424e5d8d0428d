//! [`TokenIndex`]: per-vocabulary data shared by every grammar compiled against it — the
//! [`TokenTrie`] and the self-loop class indexes ([`ClassIndex`]).
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

/// A vocabulary with its token trie and cached class indexes; shared by `Arc`.
#[derive(Debug)]
pub struct TokenIndex {
    vocab: Arc<Vocabulary>,
    trie: TokenTrie,
    classes: Mutex<FxHashMap<(ByteSet, bool), Arc<ClassIndex>>>,
    /// Per byte `b`: the text tokens whose first byte is `b` (built on first use).
    first_byte: std::sync::OnceLock<Vec<TokenMask>>,
}

/// For a byte class `C`: the tokens made only of bytes in `C`, and a trie of the other
/// tokens' suffixes from their first byte outside `C`.
#[derive(Debug)]
pub(crate) struct ClassIndex {
    /// Text tokens whose every byte is in `C`.
    pub all_in: TokenMask,
    /// Suffixes (from the first byte not in `C`) of the other text tokens.
    pub exits: TokenTrie,
}

impl ClassIndex {
    pub(crate) fn memory_usage(&self) -> usize {
        self.all_in.memory_usage() + self.exits.memory_usage()
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
        Arc::new(TokenIndex {
            vocab,
            trie,
            classes: Mutex::new(FxHashMap::default()),
            first_byte: std::sync::OnceLock::new(),
        })
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

    /// Per byte `b`: the text tokens whose first byte is `b` (256 masks, built on first
    /// use and shared by every grammar on this vocabulary).
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

    /// Heap bytes used (vocabulary excluded).
    pub fn memory_usage(&self) -> usize {
        self.trie.memory_usage()
            + self
                .first_byte
                .get()
                .map(|m| m.iter().map(|x| x.memory_usage()).sum::<usize>())
                .unwrap_or(0)
            + self
                .classes
                .lock()
                .map(|c| c.values().map(|x| x.memory_usage()).sum::<usize>())
                .unwrap_or(0)
    }

    /// The class index of `c` (built on first use, then shared). With `utf8`, every
    /// complete, valid multi-byte UTF-8 character also counts as inside the class.
    pub(crate) fn class_index(&self, c: ByteSet, utf8: bool) -> Arc<ClassIndex> {
        if let Some(x) = self
            .classes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(c, utf8))
        {
            return x.clone();
        }
        let v = &self.vocab;
        let mut all_in = TokenMask::new(v.len());
        let mut items: Vec<(&[u8], TokenId)> = Vec::new();
        for t in v.ids() {
            if !v.is_text(t) {
                continue;
            }
            let b = v.token_bytes(t);
            match first_exit(b, &c, utf8) {
                None => all_in.insert(t),
                Some(k) => items.push((&b[k..], t)),
            }
        }
        let exits = TokenTrie::from_items(&mut items, v.len());
        let x = Arc::new(ClassIndex { all_in, exits });
        let mut classes = self.classes.lock().unwrap_or_else(|e| e.into_inner());
        if classes.len() >= MAX_CLASSES {
            classes.clear();
        }
        classes.insert((c, utf8), x.clone());
        x
    }
}

/// The index of the first byte of `b` outside the class: a byte not in `c`, or (with
/// `utf8`) the start of an invalid or incomplete multi-byte character.
fn first_exit(b: &[u8], c: &ByteSet, utf8: bool) -> Option<usize> {
    let mut i = 0;
    while i < b.len() {
        let x = b[i];
        if x < 0x80 || !utf8 {
            if !c.contains(x) {
                return Some(i);
            }
            i += 1;
            continue;
        }
        let len = match x {
            0xC2..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF4 => 4,
            _ => return Some(i),
        };
        if i + len > b.len() || std::str::from_utf8(&b[i..i + len]).is_err() {
            return Some(i);
        }
        i += len;
    }
    None
}
