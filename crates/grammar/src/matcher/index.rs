//! [`TokenIndex`]: per-vocabulary data shared by every grammar compiled against it — the
//! [`TokenTrie`], the class indexes ([`ClassIndex`]) and, for bounded repetitions, the text
//! tokens by length and the longest token below each trie node.
//!
//! ## Class indexes, and what they cost
//! A mask through a byte class (a string body's self-loop, a closed set, a chain) allows the
//! class's tokens at once and steps only the others. Nothing about a class is sorted or scanned
//! token by token on a mask's path:
//! - its tokens come from bitset operations over per-byte token masks
//!   ([`ClassIndex::all_in`]; tens of µs on a 128k vocabulary);
//! - a walk passes over the trie subtrees that hold only its tokens ([`Pruner`]: per node,
//!   the ASCII bytes on the edges below and whether a token below is not valid UTF-8);
//! - the structures that make later masks cheaper, the exit-suffix trie of a self-loop and a
//!   chain's tokens by count (0.5–3 ms to sort on a 128k vocabulary), are built on a thread
//!   of their own after the first use ([`ClassBuilds`]).
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

/// A byte class, and the multi-byte UTF-8 characters that count as inside it.
type ClassKey = (ByteSet, Leads);

/// Which valid multi-byte UTF-8 characters count as inside a class, by lead byte (bit
/// `b - 0xC0` for lead byte `b`): [`Leads::ALL`] for every character (a JSON string body),
/// [`Leads::NONE`] for a class of bytes taken one by one. Per lead byte, because one
/// character may be all that keeps a state from looping on the rest: an ECMA-262 `.`
/// excludes U+2028 and U+2029 (lead byte 0xE2), so `.*` loops on every character but
/// those led by 0xE2, and the tokens holding such a character are the only multi-byte
/// ones a walk must step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Leads(u64);

impl Leads {
    /// No multi-byte character.
    pub(crate) const NONE: Leads = Leads(0);
    /// Every valid lead byte, 0xC2..=0xF4.
    pub(crate) const ALL: Leads = Leads(((1u64 << 51) - 1) << 2);
    /// Every valid lead byte but 0xE2: the multi-byte characters an ECMA-262 `.` takes
    /// (it leaves out U+2028 and U+2029).
    pub(crate) const ECMA_DOT: Leads = Leads(Leads::ALL.0 & !(1 << (0xE2 - 0xC0)));

    /// Whether the characters led by `b` count (never for a byte below 0xC0).
    #[inline(always)]
    pub(crate) fn contains(self, b: u8) -> bool {
        b >= 0xC0 && (self.0 >> (b - 0xC0)) & 1 == 1
    }

    /// Adds lead byte `b` (a valid one, 0xC2..=0xF4).
    pub(crate) fn insert(&mut self, b: u8) {
        debug_assert!(Leads::ALL.contains(b), "{b:#x} is not a lead byte");
        self.0 |= 1 << (b - 0xC0);
    }

    /// Whether some multi-byte character counts.
    #[inline(always)]
    pub(crate) fn any(self) -> bool {
        self.0 != 0
    }

    /// Whether every lead byte of `other` is here too.
    pub(crate) fn covers(self, other: Leads) -> bool {
        other.0 & !self.0 == 0
    }

    /// The lead bytes in both.
    pub(crate) fn and(self, other: Leads) -> Leads {
        Leads(self.0 & other.0)
    }

    /// The valid lead bytes that are not here, as bits of the high word of
    /// [`TokenIndex::below`].
    fn missing(self) -> u64 {
        Leads::ALL.0 & !self.0
    }
}

/// A vocabulary with its token trie and cached class indexes; shared by `Arc`.
#[derive(Debug)]
pub struct TokenIndex {
    vocab: Arc<Vocabulary>,
    trie: TokenTrie,
    /// `None` for a class not worth an index (see [`class_index`](Self::class_index)).
    classes: Mutex<FxHashMap<ClassKey, Option<Arc<ClassIndex>>>>,
    /// Per byte `b`: the text tokens whose first byte is `b` (built with the index).
    first_byte: std::sync::OnceLock<Vec<TokenMask>>,
    /// Indexed by trie node: the length of the longest token in its subtree (saturated).
    subtree_max: Vec<u16>,
    /// Indexed by trie node: the ASCII bytes on the edges below it (a 128-bit set), then
    /// the bytes from 0xC0 (bit `b - 0xC0`: lead bytes), so that a walk can pass over a
    /// subtree whose tokens all stay in a class ([`Pruner`]).
    below: Vec<[u64; 3]>,
    /// Indexed by trie node: the [`TokenFlags`] of the tokens in its subtree (itself
    /// included), or'ed.
    below_flags: Vec<u8>,
    /// Indexed by token id: its [`TokenFlags`] (0 for tokens not in the trie).
    token_flags: Vec<u8>,
    /// What a class index's tokens are found from with a few bitset operations
    /// ([`TokenIndex::class_by_masks`]): the tokens in the trie, and those among them
    /// holding each ASCII byte, some high byte, or bytes that are not valid UTF-8.
    masks: ClassMasks,
    /// Text tokens, longest first.
    by_len: Vec<TokenId>,
    /// Indexed by `k`: how many text tokens are longer than `k` bytes (a prefix of `by_len`).
    longer_than: Vec<u32>,
    /// When the suffix tries and counts of class indexes are built ([`ClassBuilds`], as a
    /// `u8`).
    class_builds: std::sync::atomic::AtomicU8,
    /// The smallest `k` for which at most an eighth of the trie's nodes lead to tokens
    /// longer than `k` bytes (see [`split_min_budget`](Self::split_min_budget)).
    split_min: u32,
}

/// For a byte class `C`: the tokens made only of bytes in `C` (with UTF-8, of bytes in `C`
/// and whole, valid multi-byte characters). A walk that allows them whatever it would find
/// passes over every trie subtree holding only such tokens ([`Pruner`]), so it steps only
/// the nodes on the way to the other tokens (those holding `"`, `\`, a control byte...).
#[derive(Debug)]
pub(crate) struct ClassIndex {
    /// Text tokens whose every byte is in `C` (with UTF-8: or in a valid character whose
    /// lead byte is in `leads`).
    pub all_in: TokenMask,
    /// The class and the multi-byte characters that count as inside it.
    class: ByteSet,
    leads: Leads,
    /// For a self-loop (`mask::Accel`): a trie of the suffixes, from their first byte
    /// outside `C`, of the tokens that start in `C` and leave it. From a state that loops on
    /// `C` a token's bytes before that point lead back to the state, so these suffixes are
    /// all a walk needs to step, and tokens that leave at the same place share nodes (a
    /// third to a sixth of the nodes of the pruned walk on the Llama 3.1 trie). Sorting them
    /// costs 0.5–3 ms on a 128k vocabulary, so it is built on a thread of its own after
    /// the first use ([`TokenIndex::class_suffixes`]); until then walks are pruned.
    suffixes: std::sync::OnceLock<TokenTrie>,
    /// Whether the suffix trie's build has started.
    building: std::sync::atomic::AtomicBool,
    /// At least the most characters of `C` a token starts with (a bound: the longest token
    /// starting with a byte that enters `C`): the longest chain a chain needs.
    pub max_prefix: usize,
    /// For a chain: see [`Counted`].
    counted: std::sync::OnceLock<Counted>,
    counting: std::sync::atomic::AtomicBool,
}

impl ClassIndex {
    pub(crate) fn memory_usage(&self) -> usize {
        self.all_in.memory_usage()
            + self.suffixes.get().map_or(0, |t| t.memory_usage())
            + self.counted.get().map_or(0, |c| c.all_in_by_count.len() * 8 + c.exits.memory_usage())
    }

    /// The first bytes of the tokens in `all_in` or in the suffix trie: the bytes of `C`
    /// (with UTF-8, and every byte from 0x80).
    pub(crate) fn enters(&self) -> ByteSet {
        enters_of(&self.class, self.leads)
    }

    /// The multi-byte characters that count as inside the class.
    pub(crate) fn leads(&self) -> Leads {
        self.leads
    }

    /// Whether byte `b` is in the class (taken as a byte).
    pub(crate) fn contains(&self, b: u8) -> bool {
        self.class.contains(b)
    }

    /// The skip test of a walk over `index`'s trie that allows [`all_in`](Self::all_in) on
    /// its own: see [`Pruner`].
    pub(crate) fn pruner<'a>(&self, index: &'a TokenIndex) -> Pruner<'a> {
        Pruner::new(index, &self.class, self.leads)
    }
}

/// See [`TokenIndex::masks`]: 182 token masks (2.8 MB on a 128k vocabulary).
#[derive(Debug)]
struct ClassMasks {
    text: TokenMask,
    /// Indexed by ASCII byte.
    has: Vec<TokenMask>,
    high: TokenMask,
    invalid: TokenMask,
    /// Indexed by lead byte less 0xC2: the tokens holding that lead byte (for classes
    /// that take some multi-byte characters but not all, [`Leads`]).
    lead: Vec<TokenMask>,
}

impl ClassMasks {
    fn new(vocab: &Vocabulary, token_flags: &[u8]) -> ClassMasks {
        let n = vocab.len();
        let mut m = ClassMasks {
            text: TokenMask::new(n),
            has: vec![TokenMask::new(n); 128],
            high: TokenMask::new(n),
            invalid: TokenMask::new(n),
            lead: vec![TokenMask::new(n); 0xF5 - 0xC2],
        };
        for t in vocab.ids().filter(|&t| vocab.is_text(t)) {
            let b = vocab.token_bytes(t);
            if b.is_empty() {
                continue;
            }
            m.text.insert(t);
            let mut seen = [0u64; 2];
            for &x in b.iter().filter(|&&x| x < 0x80) {
                if seen[(x >> 6) as usize] & (1 << (x & 63)) == 0 {
                    seen[(x >> 6) as usize] |= 1 << (x & 63);
                    m.has[x as usize].insert(t);
                }
            }
            if token_flags[t.index()] & TokenFlags::HIGH != 0 {
                m.high.insert(t);
                for &x in b.iter().filter(|&&x| Leads::ALL.contains(x)) {
                    m.lead[(x - 0xC2) as usize].insert(t);
                }
            }
            if token_flags[t.index()] & TokenFlags::INVALID != 0 {
                m.invalid.insert(t);
            }
        }
        m
    }

    fn memory_usage(&self) -> usize {
        self.text.memory_usage() * (self.has.len() + self.lead.len() + 3)
    }
}

/// When a class index's suffix trie and counts (its tokens by character count, for chains)
/// are built: the first mask that uses a class walks the main trie pruned, and these make
/// later ones cheaper.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ClassBuilds {
    /// On a thread of their own, started by the first use (the default): no mask waits
    /// for them.
    Background = 0,
    /// On first use, in the mask that needs them.
    Now = 1,
    /// Never: every mask walks pruned (for tests and comparisons).
    Never = 2,
}

/// Bits of a token's [`TokenIndex::token_flags`] (and of a node's, or'ed over its subtree).
struct TokenFlags;

impl TokenFlags {
    /// Some byte from 0x80.
    const HIGH: u8 = 1;
    /// Not valid, complete UTF-8.
    const INVALID: u8 = 2;
}

/// Which trie subtrees a walk may pass over because all their tokens are in a class `C`
/// ([`ClassIndex::all_in`], which the walk's caller allows on its own): a node whose path
/// from the root stays in `C` (with UTF-8, high bytes count as in: the tokens' validity is
/// in the node's flags) and whose subtree has no ASCII byte outside `C` on its edges and,
/// with UTF-8, no token that is not valid UTF-8; without UTF-8, no high byte at all when
/// `C` holds some (a conservative test: it only walks more). Called once per node the walk
/// reaches, in depth-first order (so the path's state is kept by depth); O(1).
pub(crate) struct Pruner<'a> {
    below: &'a [[u64; 3]],
    flags: &'a [u8],
    nodes: &'a [formwork_vocab::Node],
    /// The ASCII bytes outside `C`, then (with UTF-8) the valid lead bytes outside it.
    out: [u64; 3],
    /// `C` itself, for high bytes without UTF-8.
    class: ByteSet,
    leads: Leads,
    /// Flags that keep a subtree from being passed over.
    stop: u8,
    /// By depth: does the path to the node at that depth stay in `C`?
    inside: Vec<bool>,
}

impl<'a> Pruner<'a> {
    fn new(index: &'a TokenIndex, c: &ByteSet, leads: Leads) -> Pruner<'a> {
        // Without UTF-8 a high byte below stops, whether or not `C` holds it (conservative
        // when it does: the walk steps what it could have passed over).
        let stop = if leads.any() { TokenFlags::INVALID } else { TokenFlags::HIGH };
        let mut inside = vec![false; index.trie.max_depth() + 2];
        inside[0] = true;
        Pruner {
            below: &index.below,
            flags: &index.below_flags,
            nodes: index.trie.nodes(),
            out: [!c.0[0], !c.0[1], if leads.any() { leads.missing() } else { 0 }],
            class: *c,
            leads,
            stop,
            inside,
        }
    }

    /// Does the path to node `i` at `depth` stay in `C`? Records it for `i`'s children.
    #[inline(always)]
    fn enter(&mut self, i: usize, depth: usize) -> bool {
        let b = self.nodes[i][0] as u8;
        // With UTF-8, a continuation byte is inside when its lead byte was (a token that is
        // not valid UTF-8 is never passed over: `stop`).
        let in_b = if b >= 0x80 && self.leads.any() { b < 0xC0 || self.leads.contains(b) } else { self.class.contains(b) };
        let inside = self.inside[depth - 1] && in_b;
        self.inside[depth] = inside;
        inside
    }

    /// Is every token in the subtree of node `i` (at `depth` below the root) in `C`, so
    /// that the walk may pass over it?
    #[inline(always)]
    pub(crate) fn skip(&mut self, i: usize, depth: usize) -> bool {
        self.enter(i, depth)
            && self.below[i][0] & self.out[0] == 0
            && self.below[i][1] & self.out[1] == 0
            && self.below[i][2] & self.out[2] == 0
            && self.flags[i] & self.stop == 0
    }
}

/// What a chain (`mask::Chain`) needs of a [`ClassIndex`] besides its tokens: a state
/// that does not loop on `C` but moves, on every character of `C`, to one next state, and so
/// on (a string body before its `minLength`; the first character of a length-bounded one).
/// A token's fate there depends on how many characters of `C` it starts with, so the tokens
/// are kept by that count. Built on a thread of its own after the class index's first use
/// in a chain ([`TokenIndex::class_counted`]); until then chains walk the main trie pruned.
#[derive(Debug)]
pub(crate) struct Counted {
    /// The tokens of [`ClassIndex::all_in`] with their character counts, most first.
    pub all_in_by_count: Vec<(u16, TokenId)>,
    /// The other text tokens that start with a byte the class enters: the root's child `k`
    /// holds, below it, the suffixes (from the first byte outside `C`) of the tokens that
    /// have `k` characters of `C` before it.
    pub exits: TokenTrie,
}

/// A JSON string's raw ASCII characters: printable ASCII but `"` and `\` (with UTF-8, whole
/// multi-byte characters join it).
pub(crate) fn json_string_class() -> ByteSet {
    let mut c = ByteSet::default();
    for b in 0x20..=0x7fu8 {
        if b != b'"' && b != b'\\' {
            c.insert(b);
        }
    }
    c
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
        let mut token_flags = vec![0u8; vocab.len()];
        for t in vocab.ids().filter(|&t| vocab.is_text(t)) {
            let b = vocab.token_bytes(t);
            if !b.is_ascii() {
                token_flags[t.index()] |= TokenFlags::HIGH;
                if std::str::from_utf8(b).is_err() {
                    token_flags[t.index()] |= TokenFlags::INVALID;
                }
            }
        }
        let (below, below_flags) = below_of(&trie, &token_flags);
        let masks = ClassMasks::new(&vocab, &token_flags);
        let ix = Arc::new(TokenIndex {
            vocab,
            trie,
            below,
            below_flags,
            token_flags,
            masks,
            classes: Mutex::new(FxHashMap::default()),
            first_byte: std::sync::OnceLock::new(),
            subtree_max,
            class_builds: std::sync::atomic::AtomicU8::new(ClassBuilds::Background as u8),
            by_len,
            longer_than,
            split_min,
        });
        // Built here rather than on a request's first mask (a few ms on a 128k vocabulary).
        ix.first_byte_masks();
        ix.start_string_class();
        ix
    }

    /// Starts building, each on a thread of its own, the suffix trie and the counts of the
    /// class nearly every schema's strings loop and count through: a JSON string's raw
    /// characters (printable ASCII but `"` and `\`, whole UTF-8 characters). Otherwise the
    /// first length-bounded string a process meets asks for them and walks the trie while
    /// they are built (3.5 ms for Llama 3.1's counts): `o10009`'s masks after `"012` and
    /// `"012345` took 2.6 ms each that way, against 0.2 ms once the counts exist. A server
    /// loads its vocabulary well before the first request; the threads cost that much CPU
    /// once per vocabulary, and the memory of the two structures, which the first such
    /// string would build anyway.
    ///
    /// The same for the characters an ECMA-262 `.` takes inside a string (every one but
    /// U+2028 and U+2029, so every lead byte but 0xE2): the class of `.*`'s loop, and of a
    /// chain counting `.` characters (`^.{8,}`).
    fn start_string_class(&self) {
        for leads in [Leads::ALL, Leads::ECMA_DOT] {
            if let Some(ix) = self.class_index(json_string_class(), leads) {
                let _ = self.class_suffixes(&ix, false);
                let _ = self.class_counted(&ix, false);
            }
        }
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

    /// Sets when the suffix tries and counts of class indexes are built (see
    /// [`ClassBuilds`]); the masks are the same either way.
    pub fn set_class_builds(&self, mode: ClassBuilds) {
        self.class_builds.store(mode as u8, std::sync::atomic::Ordering::Relaxed);
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
            + self.below.capacity() * 24
            + self.below_flags.capacity()
            + self.token_flags.capacity()
            + self.masks.memory_usage()
            + self
                .classes
                .lock()
                .map(|c| c.values().flatten().map(|x| x.memory_usage()).sum::<usize>())
                .unwrap_or(0)
    }

    /// The class index of `c` (built on first use, then shared). Every complete, valid
    /// multi-byte UTF-8 character whose lead byte is in `leads` also counts as inside the
    /// class.
    ///
    /// `None` when more than a quarter of the text tokens enter the class and leave it
    /// again: a walk would then pass over little.
    pub(crate) fn class_index(&self, c: ByteSet, leads: Leads) -> Option<Arc<ClassIndex>> {
        memo(&self.classes, (c, leads), || self.build_class_index(&c, leads))
    }

    /// The suffix trie of `ix` (see [`ClassIndex::suffixes`]) when it is built; otherwise
    /// `None`, and its build is started on a thread of its own (once), or, with `now`,
    /// done here.
    pub(crate) fn class_suffixes<'i>(&self, ix: &'i Arc<ClassIndex>, now: bool) -> Option<&'i TokenTrie> {
        self.in_background(ix, now, |ix| &ix.suffixes, |ix| &ix.building, suffix_trie)
    }

    /// The [`Counted`] part of `ix`, on the terms of [`class_suffixes`](Self::class_suffixes).
    pub(crate) fn class_counted<'i>(&self, ix: &'i Arc<ClassIndex>, now: bool) -> Option<&'i Counted> {
        self.in_background(ix, now, |ix| &ix.counted, |ix| &ix.counting, counted_of)
    }

    /// The value of the cell `slot(ix)` if built; else `None`, after starting its build
    /// by `build` on a thread of its own unless `started(ix)` says one was; with `now`,
    /// built here instead.
    fn in_background<'i, T: Send + Sync + 'static>(
        &self,
        ix: &'i Arc<ClassIndex>,
        now: bool,
        slot: fn(&ClassIndex) -> &std::sync::OnceLock<T>,
        started: fn(&ClassIndex) -> &std::sync::atomic::AtomicBool,
        build: fn(&Vocabulary, &ClassIndex) -> T,
    ) -> Option<&'i T> {
        use std::sync::atomic::Ordering;
        if let Some(t) = slot(ix).get() {
            return Some(t);
        }
        let mode = self.class_builds.load(Ordering::Relaxed);
        if mode == ClassBuilds::Never as u8 && !now {
            return None;
        }
        if now || mode == ClassBuilds::Now as u8 {
            let _ = slot(ix).set(build(&self.vocab, ix));
            return slot(ix).get();
        }
        if !started(ix).swap(true, Ordering::AcqRel) {
            let (vocab, ix) = (self.vocab.clone(), ix.clone());
            let spawned = std::thread::Builder::new().name("formwork-class-index".into()).spawn(move || {
                let _ = slot(&ix).set(build(&vocab, &ix));
            });
            if spawned.is_err() {
                // No thread to be had: walks stay pruned.
                tracing::debug!("could not start a thread for a class index");
            }
        }
        None
    }

    /// Finds the tokens of `c` by the same pruned walk a mask makes ([`Pruner`]), without
    /// an automaton: a subtree passed over gives all its tokens (one slice), and a node
    /// reached gives its own when its path stays in `c` (and, with UTF-8, they are valid).
    /// The rest (every token below a node whose path leaves `c`, or not valid) is counted
    /// as leaving. O(nodes on the way to the tokens that leave, plus tokens in `c`).
    fn build_class_index(&self, c: &ByteSet, leads: Leads) -> Option<Arc<ClassIndex>> {
        // The walk reads only the subtrees of the bytes entering the class, so it is the
        // cheaper for a small class; without UTF-8, high bytes of the class are bytes like
        // any other, which only the walk handles.
        let enters = enters_of(c, leads);
        let entering = self.entering(&enters);
        let by_masks = entering * 8 > self.by_len.len() && (leads.any() || c.0[2] | c.0[3] == 0);
        let (all_in, max_prefix) = if by_masks { self.class_by_masks(c, leads)? } else { self.class_by_walk(c, leads)? };
        Some(Arc::new(ClassIndex {
            all_in,
            class: *c,
            leads,
            suffixes: Default::default(),
            building: Default::default(),
            max_prefix,
            counted: Default::default(),
            counting: Default::default(),
        }))
    }

    /// The tokens of class `c` (every ASCII byte in `c`; with `leads` no invalid byte and no
    /// lead byte outside `leads`, else no high byte) by bitset operations: the tokens in the
    /// trie less those holding an ASCII byte outside `c` and, with `leads`, those not valid
    /// UTF-8 and those holding a lead byte outside `leads`, else those with a high byte.
    /// O(vocabulary / 64 × bytes outside `c`): 15–75 µs on a 128k vocabulary for classes
    /// that most tokens enter (`class_index_build_times`). The most characters of `c` a
    /// token starts with is bounded by the longest token starting with a byte that enters
    /// `c`. `None` as for [`class_index`](Self::class_index).
    fn class_by_masks(&self, c: &ByteSet, leads: Leads) -> Option<(TokenMask, usize)> {
        let m = &self.masks;
        let mut all_in = m.text.clone();
        let out = |w: &mut [u64], drop: &TokenMask| w.iter_mut().zip(drop.words()).for_each(|(x, d)| *x &= !d);
        for b in 0..0x80u8 {
            if !c.contains(b) {
                out(all_in.words_mut(), &m.has[b as usize]);
            }
        }
        out(all_in.words_mut(), if leads.any() { &m.invalid } else { &m.high });
        if leads.any() {
            for b in (0xC2..=0xF4u8).filter(|&b| !leads.contains(b)) {
                out(all_in.words_mut(), &m.lead[(b - 0xC2) as usize]);
            }
        }
        let enters = enters_of(c, leads);
        let entering = self.entering(&enters);
        if entering - all_in.count_ones() > self.by_len.len() / 4 {
            return None;
        }
        // Every token of the class starts with a byte entering it, so the longest token
        // under those first bytes bounds both.
        let t = &self.trie;
        let (mut longest, mut i) = (0usize, 1);
        while i < t.len() {
            if enters.contains(t.byte(i)) {
                longest = longest.max(self.subtree_max[i] as usize);
            }
            i = t.end(i);
        }
        Some((all_in, longest))
    }

    /// How many tokens start with a byte of `enters` (the root's subtrees under them).
    fn entering(&self, enters: &ByteSet) -> usize {
        let t = &self.trie;
        let (mut n, mut i) = (0, 1);
        while i < t.len() {
            if enters.contains(t.byte(i)) {
                n += t.tokens_below(i).len();
            }
            i = t.end(i);
        }
        n
    }

    /// [`class_by_masks`](Self::class_by_masks) by a pruned walk of the trie, for any class.
    fn class_by_walk(&self, c: &ByteSet, leads: Leads) -> Option<(TokenMask, usize)> {
        let t = &self.trie;
        let enters = enters_of(c, leads);
        let mut all_in = TokenMask::new(self.vocab.len());
        let words = all_in.words_mut();
        let mut set = |tok: TokenId| words[tok.index() / 64] |= 1 << (tok.index() % 64);
        let mut p = Pruner::new(self, c, leads);
        let (mut leave, most) = (0usize, self.by_len.len() / 4);
        let mut max_prefix = 0usize;
        let n = t.len();
        let mut i = 1;
        while i < n {
            let depth = t.depth(i);
            if depth == 1 && !enters.contains(t.byte(i)) {
                i = t.end(i);
                continue;
            }
            if p.skip(i, depth) {
                for &tok in t.tokens_below(i) {
                    set(tok);
                }
                max_prefix = max_prefix.max(self.subtree_max[i] as usize);
                i = t.end(i);
                continue;
            }
            if !p.inside[depth] {
                leave += t.tokens_below(i).len();
                if leave > most {
                    return None;
                }
                max_prefix = max_prefix.max(depth - 1);
                i = t.end(i);
                continue;
            }
            max_prefix = max_prefix.max(depth);
            for &tok in t.tokens_at(i) {
                if leads.any() && self.token_flags[tok.index()] & TokenFlags::INVALID != 0 {
                    leave += 1;
                } else {
                    set(tok);
                }
            }
            i += 1;
        }
        (leave <= most).then_some((all_in, max_prefix))
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

/// First bytes of the tokens a class index holds: the bytes of `c` and, with `leads`,
/// every byte from 0x80 but the valid lead bytes outside `leads` (so that a character is
/// never split).
fn enters_of(c: &ByteSet, leads: Leads) -> ByteSet {
    let mut enters = ByteSet::default();
    for b in 0..=255u8 {
        if (leads.any() && b >= 0x80 && (leads.contains(b) || !Leads::ALL.contains(b))) || c.contains(b) {
            enters.insert(b);
        }
    }
    enters
}

/// The index of the first byte of `b` outside the class — a byte not in `c`, or (with
/// `leads`) the start of an invalid or incomplete multi-byte character or of one whose lead
/// byte is not in `leads` — and the number of characters before it.
fn first_exit_counted(b: &[u8], c: &ByteSet, leads: Leads) -> (Option<usize>, usize) {
    let (mut i, mut count) = (0, 0);
    while i < b.len() {
        let x = b[i];
        if x < 0x80 || !leads.any() {
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
        if !leads.contains(x) {
            return (Some(i), count);
        }
        if i + len > b.len() || std::str::from_utf8(&b[i..i + len]).is_err() {
            return (Some(i), count);
        }
        i += len;
        count += 1;
    }
    (None, count)
}

/// The suffix trie of class index `ix` (see [`ClassIndex::suffixes`]): every text token
/// whose first byte enters the class and that is not in `all_in`, from its first byte
/// outside the class.
fn suffix_trie(vocab: &Vocabulary, ix: &ClassIndex) -> TokenTrie {
    let enters = ix.enters();
    let mut items: Vec<(&[u8], TokenId)> = Vec::new();
    for t in vocab.ids().filter(|&t| vocab.is_text(t) && !ix.all_in.contains(t)) {
        let b = vocab.token_bytes(t);
        if b.first().is_some_and(|&x| enters.contains(x)) {
            if let (Some(k), _) = first_exit_counted(b, &ix.class, ix.leads) {
                items.push((&b[k..], t));
            }
        }
    }
    TokenTrie::from_items(&mut items, vocab.len())
}

/// The [`Counted`] part of class index `ix`: every text token whose first byte enters the
/// class, by the characters of the class it starts with.
fn counted_of(vocab: &Vocabulary, ix: &ClassIndex) -> Counted {
    let enters = ix.enters();
    let mut all_in_by_count = Vec::new();
    // The exit keys (a count byte, then the suffix) end to end in one buffer.
    let mut keys: Vec<u8> = Vec::new();
    let mut keyed: Vec<(u32, u32, TokenId)> = Vec::new();
    for t in vocab.ids().filter(|&t| vocab.is_text(t)) {
        let b = vocab.token_bytes(t);
        if !b.first().is_some_and(|&x| enters.contains(x)) {
            continue;
        }
        match first_exit_counted(b, &ix.class, ix.leads) {
            (None, count) => all_in_by_count.push((count.min(u16::MAX as usize) as u16, t)),
            (Some(k), count) => {
                let start = keys.len() as u32;
                keys.push(count.min(255) as u8);
                keys.extend_from_slice(&b[k..]);
                keyed.push((start, keys.len() as u32, t));
            }
        }
    }
    let mut items: Vec<(&[u8], TokenId)> = keyed.iter().map(|&(a, b, t)| (&keys[a as usize..b as usize], t)).collect();
    let exits = TokenTrie::from_items(&mut items, vocab.len());
    all_in_by_count.sort_unstable_by_key(|&(n, _)| std::cmp::Reverse(n));
    Counted { all_in_by_count, exits }
}

/// Indexed by node of `t`: the ASCII bytes on the edges strictly below it, and the flags of
/// the tokens in its subtree (itself included), or'ed (see [`Pruner`]).
fn below_of(t: &TokenTrie, token_flags: &[u8]) -> (Vec<[u64; 3]>, Vec<u8>) {
    let n = t.len();
    let mut below = vec![[0u64; 3]; n];
    let mut flags = vec![0u8; n];
    for (i, f) in flags.iter_mut().enumerate() {
        *f = t.tokens_at(i).iter().fold(0, |a, tok| a | token_flags[tok.index()]);
    }
    // Children come after their parent, whose index is the last node one level up.
    let mut last = vec![0usize; t.max_depth() + 2];
    let mut parent = vec![0u32; n];
    for (i, p) in parent.iter_mut().enumerate().skip(1) {
        let d = t.depth(i);
        *p = last[d - 1] as u32;
        last[d] = i;
    }
    for i in (1..n).rev() {
        let p = parent[i] as usize;
        let b = t.byte(i);
        let mut x = below[i];
        if b < 0x80 {
            x[(b >> 6) as usize] |= 1 << (b & 63);
        } else if b >= 0xC0 {
            x[2] |= 1 << (b - 0xC0);
        }
        below[p][0] |= x[0];
        below[p][1] |= x[1];
        below[p][2] |= x[2];
        flags[p] |= flags[i];
    }
    (below, flags)
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
    fn classes() -> Vec<(ByteSet, Leads)> {
        let without = json_string_class();
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
        // An ECMA-262 `.` inside a string: every character but those led by 0xE2 (U+2028
        // and U+2029 are line terminators); and a word class with two lead bytes.
        let no_e2 = Leads::ECMA_DOT;
        let mut two = Leads::NONE;
        two.insert(0xC3);
        two.insert(0xD0);
        vec![
            (without, Leads::ALL),
            (without, Leads::NONE),
            (digits, Leads::NONE),
            (word, Leads::ALL),
            (no_e, Leads::ALL),
            (high, Leads::NONE),
            (high, Leads::ALL),
            (without, no_e2),
            (word, two),
        ]
    }

    /// A class index holds exactly the tokens every byte (or, with UTF-8, character) of
    /// which is in the class, and is refused exactly when more than a quarter of the text
    /// tokens enter the class and leave it; its suffix trie holds the others from where
    /// they leave; and the pruned walk passes over no subtree with a token outside.
    #[test]
    fn class_index_agrees_with_reading_each_token() {
        for tok in [SharedTokenizer::Smollm2, SharedTokenizer::Llama3] {
            let ix = TokenIndex::new(tok.vocab());
            let v = ix.vocab().clone();
            for (c, utf8) in classes() {
                let enters = enters_of(&c, utf8);
                let (mut inside, mut leave, mut n_text) = (Vec::new(), Vec::new(), 0);
                let (mut by_count, mut keyed) = (Vec::new(), Vec::new());
                for t in v.ids().filter(|&t| v.is_text(t)) {
                    n_text += 1;
                    let b = v.token_bytes(t);
                    if b.first().is_some_and(|&x| enters.contains(x)) {
                        match first_exit_counted(b, &c, utf8) {
                            (None, n) => {
                                inside.push(t);
                                by_count.push((n as u16, t));
                            }
                            (Some(k), n) => {
                                leave.push((b[k..].to_vec(), t));
                                keyed.push(([&[n as u8][..], &b[k..]].concat(), t));
                            }
                        }
                    }
                }
                let got = ix.class_index(c, utf8);
                assert_eq!(got.is_some(), leave.len() * 4 <= n_text, "{tok:?} {c:?} {utf8:?}");
                let Some(got) = got else { continue };
                let all: Vec<TokenId> = v.ids().filter(|&t| got.all_in.contains(t)).collect();
                assert_eq!(all, inside, "{tok:?} {c:?} {utf8:?}");
                // The same, read character by character from the token's text.
                for t in v.ids().filter(|&t| v.is_text(t)) {
                    let b = v.token_bytes(t);
                    let expected = !b.is_empty()
                        && if utf8.any() {
                            std::str::from_utf8(b).is_ok_and(|s| {
                                s.chars().all(|ch| {
                                    let mut buf = [0u8; 4];
                                    let e = ch.encode_utf8(&mut buf).as_bytes();
                                    if e.len() == 1 { c.contains(e[0]) } else { utf8.contains(e[0]) }
                                })
                            })
                        } else {
                            b.iter().all(|&x| c.contains(x))
                        };
                    assert_eq!(got.all_in.contains(t), expected, "{tok:?} {c:?} {utf8:?} {b:?}");
                }
                // The walk, for any class, finds the same tokens (and a bound as good).
                let (walked, walked_max) = ix.class_by_walk(&c, utf8).unwrap();
                assert_eq!(walked.words(), got.all_in.words(), "{tok:?} {c:?} {utf8:?}");
                assert!(by_count.iter().all(|&(n, _)| n as usize <= walked_max), "{tok:?} {c:?} {utf8:?}");
                assert!(by_count.iter().all(|&(n, _)| n as usize <= got.max_prefix), "{tok:?} {c:?} {utf8:?}");
                let items = |trie: &TokenTrie| {
                    let mut out: Vec<(Vec<u8>, TokenId)> = Vec::new();
                    let mut path: Vec<u8> = Vec::new();
                    for i in 1..trie.len() {
                        path.truncate(trie.depth(i) - 1);
                        path.push(trie.byte(i));
                        out.extend(trie.tokens_at(i).iter().map(|&t| (path.clone(), t)));
                    }
                    out.sort();
                    out
                };
                leave.sort();
                assert_eq!(items(ix.class_suffixes(&got, true).unwrap()), leave, "{tok:?} {c:?} {utf8:?}");
                let counted = ix.class_counted(&got, true).unwrap();
                keyed.sort();
                assert_eq!(items(&counted.exits), keyed, "{tok:?} {c:?} {utf8:?}");
                let mut got_by_count = counted.all_in_by_count.clone();
                assert!(got_by_count.windows(2).all(|w| w[0].0 >= w[1].0), "most characters first");
                got_by_count.sort();
                by_count.sort();
                assert_eq!(got_by_count, by_count, "{tok:?} {c:?} {utf8:?}");
                // Every subtree the pruned walk passes over holds only tokens of the class.
                let mut p = got.pruner(&ix);
                let t = ix.trie();
                let mut i = 1;
                while i < t.len() {
                    if p.skip(i, t.depth(i)) {
                        assert!(t.tokens_below(i).iter().all(|&x| got.all_in.contains(x)), "{tok:?} {c:?} {utf8:?} node {i}");
                        i = t.end(i);
                    } else {
                        i += 1;
                    }
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
                        let t = std::time::Instant::now();
                        built = f();
                        best = best.min(t.elapsed().as_secs_f64() * 1e3);
                    }
                    (built, best)
                };
                let (plain, a) = best(&|| ix.class_index(c, utf8).is_some());
                let (_, b) = best(&|| ix.class_index(c, utf8).is_some_and(|x| ix.class_suffixes(&x, true).is_some()));
                let (_, d) = best(&|| ix.class_index(c, utf8).is_some_and(|x| ix.class_counted(&x, true).is_some()));
                println!("{tok:?} class {i} utf8={:<5} index {plain:<5} {a:>7.3} ms, with suffixes {b:>7.3} ms, with counts {d:>7.3} ms (best of 10)", format!("{utf8:?}"));
            }
        }
    }
}
