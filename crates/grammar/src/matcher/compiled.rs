//! [`CompiledGrammar`] (shared, immutable from the outside) and [`Matcher`] (per request).

use super::automaton::{Automaton, DEAD, OVERFLOW};
use super::error::{CompileError, MatchError};
use super::index::TokenIndex;
use super::lower::lower;
use super::lower::ByteSet;
use super::mask::{repeat_split, walk_from, Accel, CiMask, SubCi};
use crate::{Grammar, Limits};
use formwork_vocab::{TokenId, TokenMask, Vocabulary};
use rustc_hash::FxHashMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// The state after an end-of-sequence token was committed.
pub(super) const ENDED: u32 = u32::MAX - 2;
/// Cached masks kept per compiled grammar, in bytes (the whole cache is dropped when full).
const MASK_CACHE_BYTES: usize = 64 << 20;
/// Frames kept when truncating a state for its context-independent mask.
const TRUNCATE_DEPTH: usize = 4;
/// Fewest first bytes leading to one looping state for [`CompiledGrammar::dispatch_ci`].
const DISPATCH_MIN: usize = 16;
/// Frames below the top two of a stack are replaced by their loop equivalents only from
/// this budget on (see `Automaton::canonical`).
const DEEP_MIN_BUDGET: u32 = 16;
/// Longest run of forced bytes reported by [`Matcher::forced_bytes`].
const MAX_FORCED: usize = 4096;

/// A grammar compiled against a vocabulary: immutable from the outside, `Send + Sync`,
/// shared by `Arc` between all requests that use the same grammar and vocabulary.
///
/// Inside, a lazily built automaton and a cache of masks per parser state are shared
/// behind a mutex, so every request benefits from the work of earlier ones: after warm-up
/// a mask is a cache hit (a 16 KiB copy on a 128k vocabulary). A miss walks the token trie
/// under the lock (tens of µs typically; see the module docs for the worst case).
pub struct CompiledGrammar {
    index: Arc<TokenIndex>,
    initial: u32,
    shared: Mutex<Shared>,
    limits: Limits,
    /// Shortest-completion tables, built on first use (see `complete`).
    pub(super) completion: std::sync::OnceLock<super::complete::Completion>,
    /// Parser states built, as last seen by a mask or a commit (read by
    /// [`is_nearly_full`](Self::is_nearly_full) without taking the lock).
    states_seen: std::sync::atomic::AtomicUsize,
}

pub(super) struct Shared {
    pub(super) aut: Automaton,
    /// Indexed by state: its full mask, once computed.
    masks: FxHashMap<u32, Arc<TokenMask>>,
    mask_bytes: usize,
    /// Indexed by truncated state: its context-independent mask.
    ci: FxHashMap<u32, Arc<CiMask>>,
    /// Indexed by (state after a first byte, that byte): the subtree's context-independent
    /// part, for first-byte dispatch (counted in `ci_bytes`, dropped with `ci`).
    sub: FxHashMap<(u32, u8), Arc<SubCi>>,
    /// Indexed by (looping target, the first bytes leading to it): that group's part of a
    /// first-byte dispatch (counted in `ci_bytes`, dropped with `ci`).
    group: FxHashMap<(u32, ByteSet), Arc<CiMask>>,
    ci_bytes: usize,
    /// Indexed by state: its truncation.
    trunc: FxHashMap<u32, u32>,
    /// Masks inside bounded repetitions go through canonical states (see `mask`).
    repeat_shortcut: bool,
    /// Canonical states whose masks are being computed (a dispatch target inside them
    /// must not come back to them).
    repeat_busy: Vec<u32>,
}

impl std::fmt::Debug for CompiledGrammar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledGrammar")
            .field("vocab_len", &self.index.vocab().len())
            .finish_non_exhaustive()
    }
}

impl CompiledGrammar {
    /// Compiles `g` for `vocab`: lowers it to bytes, checks it (left recursion, nothing
    /// matched, sizes) and computes the start state. The vocabulary's token trie is built
    /// once per vocabulary and shared (see [`TokenIndex::for_vocab`]).
    pub fn new(
        g: &Grammar,
        vocab: Arc<Vocabulary>,
        limits: &Limits,
    ) -> Result<Arc<Self>, CompileError> {
        Self::with_index(g, TokenIndex::for_vocab(&vocab), limits)
    }

    /// Compiles `g` against a prebuilt [`TokenIndex`].
    pub fn with_index(
        g: &Grammar,
        index: Arc<TokenIndex>,
        limits: &Limits,
    ) -> Result<Arc<Self>, CompileError> {
        let flat = lower(g, Some(index.vocab()), limits)?;
        let (aut, initial) = Automaton::new(flat, limits.max_stacks, limits.max_states)
            .map_err(|limit| CompileError::TooManyStacks { limit })?;
        tracing::debug!(
            rules = aut.flat.alts.len(),
            elems = aut.flat.elems.len(),
            "compiled grammar"
        );
        Ok(Arc::new(CompiledGrammar {
            index,
            initial,
            shared: Mutex::new(Shared {
                aut,
                masks: FxHashMap::default(),
                mask_bytes: 0,
                ci: FxHashMap::default(),
                sub: FxHashMap::default(),
                group: FxHashMap::default(),
                ci_bytes: 0,
                trunc: FxHashMap::default(),
                repeat_shortcut: true,
                repeat_busy: Vec::new(),
            }),
            limits: limits.clone(),
            completion: std::sync::OnceLock::new(),
            states_seen: std::sync::atomic::AtomicUsize::new(0),
        }))
    }

    /// A fresh matcher at the start of the grammar.
    pub fn matcher(self: &Arc<Self>) -> Matcher {
        Matcher {
            g: self.clone(),
            states: vec![self.initial],
            stats: MatchStats::default(),
        }
    }

    /// The vocabulary.
    pub fn vocab(&self) -> &Arc<Vocabulary> {
        self.index.vocab()
    }

    /// The shared token index (trie) of the vocabulary.
    pub fn index(&self) -> &Arc<TokenIndex> {
        &self.index
    }

    /// The limits it was compiled with.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Heap bytes used by this grammar (automaton, transition tables, cached masks), not
    /// counting the shared vocabulary index.
    pub fn memory_usage(&self) -> usize {
        let sh = self.lock();
        sh.aut.memory_usage()
            + sh.mask_bytes
            + sh.masks.capacity() * 16
            + sh.ci_bytes
            + sh.trunc.capacity() * 8
    }

    /// Has this grammar built 80 % of the parser states `Limits::max_states` allows? Caches
    /// then compile it afresh for new requests (requests already using it keep it, with the
    /// rest of the room), so a long-lived shared grammar never reaches the limit.
    /// Lock-free (a cache asks on every hit): it reads the count of states as of the last
    /// mask or commit of any request.
    pub fn is_nearly_full(&self) -> bool {
        let n = self.states_seen.load(std::sync::atomic::Ordering::Relaxed);
        n.saturating_mul(5) >= self.limits.max_states.saturating_mul(4)
    }

    /// Records the state count for [`is_nearly_full`](Self::is_nearly_full).
    fn saw_states(&self, n: usize) {
        self.states_seen.store(n, std::sync::atomic::Ordering::Relaxed);
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Shared> {
        // A panic while holding the lock leaves caches that are still consistent (every
        // write is a complete insert), so poisoning is ignored.
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The full mask of state `s` (cached). Returns the mask, whether it was a hit, and the
    /// trie nodes walked.
    fn mask_of(&self, sh: &mut Shared, s: u32) -> (Arc<TokenMask>, bool, usize) {
        if let Some(m) = sh.masks.get(&s) {
            return (m.clone(), true, 0);
        }
        let vocab = self.index.vocab();
        let (m, walked) = match self.repeat_mask(sh, s) {
            Some(r) => r,
            None => self.ci_mask(sh, s),
        };
        let mut m = m;
        let info = sh.aut.info(s);
        for &t in info.tokens.iter() {
            m.insert(t);
        }
        if info.accepting {
            for &t in vocab.eos_tokens() {
                m.insert(t);
            }
        }
        let m = Arc::new(m);
        if sh.mask_bytes + m.memory_usage() > MASK_CACHE_BYTES {
            sh.masks.clear();
            sh.mask_bytes = 0;
        }
        sh.mask_bytes += m.memory_usage();
        sh.masks.insert(s, m.clone());
        (m, false, walked)
    }

    /// Turns the bounded-repetition shortcut on (the default) or off. Off, a state inside
    /// `e{m,n}` has its mask walked from the state itself instead of taken from its
    /// canonical (looping) state: the same masks, slower. For tests and diagnosis.
    pub fn set_repeat_shortcut(&self, on: bool) {
        self.lock().repeat_shortcut = on;
    }

    /// The text-token mask of `s` through its canonical state, when `s` has frames inside
    /// bounded repetitions (see `mask::repeat_split`); `None` otherwise.
    fn repeat_mask(&self, sh: &mut Shared, s: u32) -> Option<(TokenMask, usize)> {
        if !sh.repeat_shortcut {
            return None;
        }
        // Two tries. Every frame replaced: worth it when the canonical mask is already there
        // (a string being written) or the budget is large. Else only frames with a large
        // budget, so that the walk of the longer tokens stays short (below the vocabulary's
        // split budget it would visit more than an eighth of the trie).
        let split = self.index.split_min_budget();
        let deep = split.max(DEEP_MIN_BUDGET);
        let (mut c, mut budget) = sh.aut.canonical(s, 0, deep);
        if c != s && budget < split && !sh.masks.contains_key(&c) {
            (c, budget) = sh.aut.canonical(s, split, deep);
        }
        if c == s || sh.repeat_busy.contains(&c) {
            return None;
        }
        sh.repeat_busy.push(c);
        let (mc, _, walked) = self.mask_of(sh, c);
        sh.repeat_busy.pop();
        let (m, w) = repeat_split(&mut sh.aut, &self.index, s, c, budget, &mc);
        Some((m, walked + w))
    }

    /// The context-independent mask of state `t` (cached by state), and the trie nodes
    /// walked to build it (0 on a hit). A state that loops on many bytes is built with its
    /// accelerator; one that does not, but whose first bytes lead to a looping state, by
    /// first-byte dispatch ([`dispatch_ci`](Self::dispatch_ci)); any other by a plain walk.
    fn ci_of(&self, sh: &mut Shared, t: u32) -> (Arc<CiMask>, usize) {
        if let Some(c) = sh.ci.get(&t) {
            return (c.clone(), 0);
        }
        sh.aut.step_all(t);
        let c = match Accel::for_state(&mut sh.aut, &self.index, t) {
            Some(a) => CiMask::build(&mut sh.aut, &self.index, t, Some(&a)),
            None => match self.dispatch_ci(sh, t) {
                Some(c) => c,
                None => CiMask::build(&mut sh.aut, &self.index, t, None),
            },
        };
        let c = Arc::new(c);
        if sh.ci_bytes + c.memory_usage() > MASK_CACHE_BYTES {
            sh.ci.clear();
            sh.sub.clear();
            sh.group.clear();
            sh.ci_bytes = 0;
        }
        sh.ci_bytes += c.memory_usage();
        sh.ci.insert(t, c.clone());
        let walked = c.walked;
        (c, walked)
    }

    /// The context-independent mask of `t` by first-byte dispatch, when `t` is not a loop
    /// itself but many of its first bytes lead to one state `x` that loops on them (a partial
    /// object key that may still become a listed key or already is an unlisted one; a
    /// bounded counter). For such a byte `b`, a token `b·w` is consumed from `t` exactly as
    /// `w` is from `x = δ(t, b)`, and since `δ(x, b) = x`, exactly as `b·w` is from `x`: that
    /// part of the mask (and of the uncertain subtrees) is `x`'s, restricted to first byte
    /// `b`, taken from `x`'s cached (usually accelerated) mask. The other first bytes walk
    /// their subtrees. `None` when no such group exists.
    fn dispatch_ci(&self, sh: &mut Shared, t: u32) -> Option<CiMask> {
        let trie = self.index.trie();
        // The root's children: (node, byte, state after the byte).
        let mut kids: Vec<(usize, u8, u32)> = Vec::with_capacity(256);
        let mut self_loops = 0;
        let (mut i, n) = (1, trie.end(0));
        while i < n {
            let b = trie.byte(i);
            let x = sh.aut.step(t, b);
            if x == t {
                self_loops += 1;
            }
            kids.push((i, b, x));
            i = trie.end(i);
        }
        // A state that loops on many bytes has its own accelerator; a target of a group
        // below loops on at least `DISPATCH_MIN` bytes, so it never dispatches in turn.
        if self_loops >= DISPATCH_MIN {
            return None;
        }
        let mut groups: Vec<(u32, ByteSet)> = Vec::new();
        for &(_, b, x) in &kids {
            if x == DEAD || x == OVERFLOW || x == t || sh.aut.is_ctx(x) || sh.aut.step(x, b) != x {
                continue;
            }
            match groups.iter_mut().find(|g| g.0 == x) {
                Some(g) => g.1.insert(b),
                None => {
                    let mut set = ByteSet::default();
                    set.insert(b);
                    groups.push((x, set));
                }
            }
        }
        groups.retain(|g| g.1.len() >= DISPATCH_MIN as u32);
        if groups.is_empty() {
            return None;
        }
        let vocab = self.index.vocab();
        let mut ci = CiMask::empty(vocab.len());
        let fb = self.index.first_byte_masks();
        let mut grouped = ByteSet::default();
        for (x, bytes) in &groups {
            grouped.union(bytes);
            let part = match sh.group.get(&(*x, *bytes)) {
                Some(p) => p.clone(),
                None => {
                    let (cx, w) = self.ci_of(sh, *x);
                    ci.walked += w;
                    let mut part = CiMask::empty(vocab.len());
                    let out = part.mask.words_mut();
                    for b in (0..=255u8).filter(|&b| bytes.contains(b)) {
                        for ((o, a), f) in out.iter_mut().zip(cx.mask.words()).zip(fb[b as usize].words()) {
                            *o |= a & f;
                        }
                    }
                    part.nodes.extend(cx.nodes.iter().filter(|(_, p)| bytes.contains(p[0])).cloned());
                    part.tokens.extend(cx.tokens.iter().filter(|&&tok| vocab.token_bytes(tok).first().is_some_and(|&b| bytes.contains(b))));
                    let part = Arc::new(part);
                    sh.ci_bytes += part.memory_usage();
                    sh.group.insert((*x, *bytes), part.clone());
                    part
                }
            };
            for (o, a) in ci.mask.words_mut().iter_mut().zip(part.mask.words()) {
                *o |= a;
            }
            ci.nodes.extend(part.nodes.iter().cloned());
            ci.tokens.extend_from_slice(&part.tokens);
        }
        // The other first bytes: their subtrees, kept by the state after the byte.
        for &(node, b, x) in &kids {
            if grouped.contains(b) || x == DEAD || x == OVERFLOW {
                continue;
            }
            let sub = match sh.sub.get(&(x, b)) {
                Some(sub) => sub.clone(),
                None => {
                    let sub = Arc::new(SubCi::build(&mut sh.aut, trie, vocab.len(), node, x));
                    ci.walked += sub.walked;
                    sh.ci_bytes += sub.memory_usage();
                    sh.sub.insert((x, b), sub.clone());
                    sub
                }
            };
            sub.allow_into(&mut ci.mask);
            ci.nodes.extend(sub.nodes.iter().cloned());
        }
        Some(ci)
    }

    /// The text-token mask of `s` through its truncation's context-independent mask.
    fn ci_mask(&self, sh: &mut Shared, s: u32) -> (TokenMask, usize) {
        let vocab = self.index.vocab();
        let trie = self.index.trie();
        let t = match sh.trunc.get(&s) {
            Some(&t) => t,
            None => {
                let t = sh.aut.truncate(s, TRUNCATE_DEPTH);
                sh.trunc.insert(s, t);
                t
            }
        };
        let (ci, mut walked) = self.ci_of(sh, t);
        let mut m = ci.mask.clone();
        for (node, prefix) in &ci.nodes {
            let mut x = s;
            for &b in prefix.iter() {
                x = sh.aut.step(x, b);
                if x == DEAD || x == OVERFLOW {
                    break;
                }
            }
            if x == DEAD || x == OVERFLOW {
                continue;
            }
            let node = *node as usize;
            for &tok in trie.tokens_at(node) {
                m.insert(tok);
            }
            walked += 1 + walk_from(&mut sh.aut, trie, node, x, &mut m);
        }
        for &tok in &ci.tokens {
            let mut x = s;
            for &b in vocab.token_bytes(tok) {
                x = sh.aut.step(x, b);
                if x == DEAD || x == OVERFLOW {
                    break;
                }
            }
            walked += 1;
            if x != DEAD && x != OVERFLOW {
                m.insert(tok);
            }
        }
        (m, walked)
    }
}

/// Counters a matcher keeps (serializable, for logs and benchmarks).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct MatchStats {
    /// Tokens (and byte strings) committed.
    pub commits: u64,
    /// Masks computed.
    pub masks: u64,
    /// Masks served from the shared cache.
    pub mask_cache_hits: u64,
    /// Trie nodes walked on cache misses.
    pub trie_nodes_walked: u64,
    /// Parser states the shared automaton knows (all requests together).
    pub states: usize,
}

/// Per-request matching state: a history of parser states (one per committed step), so
/// rollback is a truncation. Small; cheap to create with [`CompiledGrammar::matcher`].
#[derive(Debug)]
pub struct Matcher {
    g: Arc<CompiledGrammar>,
    /// `states[0]` is the start; one more per commit.
    pub(super) states: Vec<u32>,
    stats: MatchStats,
}

impl Matcher {
    pub(super) fn cur(&self) -> u32 {
        *self.states.last().expect("history never empty")
    }

    /// The compiled grammar.
    pub fn grammar(&self) -> &Arc<CompiledGrammar> {
        &self.g
    }

    /// Fills `mask` with the tokens allowed now: text tokens whose bytes keep the input on a
    /// valid path (including tokens that cross rule boundaries), special tokens the grammar
    /// names here, and the EOS tokens exactly when the input so far is a complete match.
    /// `mask` is resized to the vocabulary if needed.
    pub fn compute_mask(&mut self, mask: &mut TokenMask) {
        let n = self.g.index.vocab().len();
        if mask.len() != n {
            *mask = TokenMask::new(n);
        }
        self.stats.masks += 1;
        let s = self.cur();
        if s == ENDED {
            mask.clear();
            return;
        }
        let (m, hit, walked) = {
            let mut sh = self.g.lock();
            let r = self.g.mask_of(&mut sh, s);
            self.stats.states = sh.aut.n_states();
            self.g.saw_states(self.stats.states);
            r
        };
        if hit {
            self.stats.mask_cache_hits += 1;
        }
        self.stats.trie_nodes_walked += walked as u64;
        mask.words_mut().copy_from_slice(m.words());
    }

    /// Is `t` allowed now? Cheaper than a full mask: one step per byte of the token.
    pub fn is_allowed(&mut self, t: TokenId) -> bool {
        let s = self.cur();
        let vocab = self.g.index.vocab();
        if s == ENDED || t.index() >= vocab.len() {
            return false;
        }
        let mut sh = self.g.lock();
        if let Some(m) = sh.masks.get(&s) {
            return m.contains(t);
        }
        if vocab.is_text(t) {
            let mut x = s;
            for &b in vocab.token_bytes(t) {
                x = sh.aut.step(x, b);
                if x == DEAD || x == OVERFLOW {
                    break;
                }
            }
            if x != DEAD && x != OVERFLOW {
                return true;
            }
        }
        let info = sh.aut.info(s);
        info.tokens.contains(&t) || (info.accepting && vocab.eos_tokens().contains(&t))
    }

    /// Advances past token `t`. On error the state is unchanged. Committing an EOS token
    /// where the grammar accepts ends the matcher ([`is_finished`](Self::is_finished)).
    pub fn commit(&mut self, t: TokenId) -> Result<(), MatchError> {
        let s = self.cur();
        let vocab = self.g.index.vocab().clone();
        if t.index() >= vocab.len() {
            return Err(MatchError::TokenOutOfRange {
                token: t,
                len: vocab.len(),
            });
        }
        if s == ENDED {
            return Err(MatchError::Ended);
        }
        let mut sh = self.g.lock();
        let mut next = DEAD;
        if vocab.is_text(t) {
            next = s;
            for &b in vocab.token_bytes(t) {
                next = sh.aut.step(next, b);
                if next == DEAD || next == OVERFLOW {
                    break;
                }
            }
        }
        if next == DEAD && sh.aut.info(s).tokens.contains(&t) {
            next = sh.aut.step_token(s, t);
        }
        if next == DEAD && sh.aut.info(s).accepting && vocab.eos_tokens().contains(&t) {
            next = ENDED;
        }
        let capped = sh.aut.states_capped();
        self.g.saw_states(sh.aut.n_states());
        drop(sh);
        match next {
            DEAD => Err(MatchError::TokenRejected {
                token: t,
                text: String::from_utf8_lossy(vocab.token_bytes(t)).into_owned(),
            }),
            OVERFLOW => Err(self.overflow(capped)),
            n => {
                self.states.push(n);
                self.stats.commits += 1;
                Ok(())
            }
        }
    }

    /// Advances past raw bytes (one step in the history, for [`rollback`](Self::rollback)).
    /// On error the state is unchanged.
    pub fn commit_bytes(&mut self, bytes: &[u8]) -> Result<(), MatchError> {
        let s = self.cur();
        if s == ENDED {
            return Err(MatchError::Ended);
        }
        let mut sh = self.g.lock();
        let mut x = s;
        for (i, &b) in bytes.iter().enumerate() {
            x = sh.aut.step(x, b);
            if x == DEAD {
                return Err(MatchError::BytesRejected {
                    offset: i,
                    len: bytes.len(),
                });
            }
            if x == OVERFLOW {
                return Err(self.overflow(sh.aut.states_capped()));
            }
        }
        self.g.saw_states(sh.aut.n_states());
        drop(sh);
        self.states.push(x);
        self.stats.commits += 1;
        Ok(())
    }

    /// Undoes the last `n` commits.
    pub fn rollback(&mut self, n: usize) -> Result<(), MatchError> {
        let available = self.states.len() - 1;
        if n > available {
            return Err(MatchError::RollbackTooFar {
                requested: n,
                available,
            });
        }
        self.states.truncate(self.states.len() - n);
        Ok(())
    }

    /// Back to the start of the grammar.
    pub fn reset(&mut self) {
        self.states.truncate(1);
    }

    /// Number of commits that can be rolled back.
    pub fn committed(&self) -> usize {
        self.states.len() - 1
    }

    /// Is the input so far a complete match (EOS allowed)?
    pub fn is_accepting(&self) -> bool {
        let s = self.cur();
        s == ENDED || self.g.lock().aut.info(s).accepting
    }

    /// Accepting, and nothing can follow (or EOS was committed).
    pub fn is_finished(&self) -> bool {
        let s = self.cur();
        if s == ENDED {
            return true;
        }
        let sh = self.g.lock();
        let i = sh.aut.info(s);
        i.accepting && i.first.is_empty() && i.tokens.is_empty()
    }

    /// The bytes every continuation must start with (empty when there is a choice, when the
    /// input may end here, or when a special token may come next). At most 4 KiB.
    pub fn forced_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut s = self.cur();
        if s == ENDED {
            return out;
        }
        let mut sh = self.g.lock();
        while out.len() < MAX_FORCED {
            let i = sh.aut.info(s);
            if i.accepting || !i.tokens.is_empty() {
                break;
            }
            let Some(b) = i.first.only() else { break };
            let n = sh.aut.step(s, b);
            if n == DEAD || n == OVERFLOW {
                break;
            }
            out.push(b);
            s = n;
        }
        out
    }

    /// Tokens that spell a prefix of [`forced_bytes`](Self::forced_bytes) and are safe to
    /// append without sampling.
    ///
    /// Tokenization here is greedy longest-match, made conservative: a token is emitted only
    /// when no vocabulary token starting at its position could run past the forced bytes
    /// (so later text cannot change the choice). This is the canonical tokenization for
    /// longest-match tokenizers; BPE tokenizers usually agree on such short forced strings
    /// (`": "`, `"}`), but not always — callers that need exact canonical BPE tokens should
    /// tokenize `forced_bytes()` with the model's tokenizer instead.
    pub fn forced_tokens(&self) -> Vec<TokenId> {
        let f = self.forced_bytes();
        let trie = self.g.index.trie();
        let vocab = self.g.index.vocab();
        let mut out = Vec::new();
        let mut i = 0;
        while i < f.len() {
            let mut node = 0;
            let mut best: Option<(usize, TokenId)> = None;
            let mut j = i;
            while j < f.len() {
                match trie.child(node, f[j]) {
                    Some(c) => {
                        node = c;
                        j += 1;
                        let toks = trie.tokens_at(c);
                        let pick = toks
                            .iter()
                            .find(|&&t| vocab.kind(t) == formwork_vocab::TokenKind::Normal)
                            .or(toks.first());
                        if let Some(&t) = pick {
                            best = Some((j, t));
                        }
                    }
                    None => break,
                }
            }
            // The whole rest was a trie path: a longer token could extend past the forced bytes.
            if j == f.len() && trie.end(node) > node + 1 {
                break;
            }
            match best {
                Some((end, t)) => {
                    out.push(t);
                    i = end;
                }
                None => break,
            }
        }
        out
    }

    /// The error for a step that came out [`OVERFLOW`]: too many states in the grammar
    /// (`capped`) or too many stacks at once.
    fn overflow(&self, capped: bool) -> MatchError {
        if capped {
            MatchError::TooManyStates { limit: self.g.limits.max_states }
        } else {
            MatchError::TooManyStacks { limit: self.g.limits.max_stacks }
        }
    }

    /// Counters for this matcher.
    pub fn stats(&self) -> MatchStats {
        self.stats.clone()
    }
}

/// Byte-level check with no vocabulary: does `g` accept exactly `input`? Special tokens
/// named by the grammar never match here.
pub fn accepts(g: &Grammar, input: &[u8], limits: &Limits) -> Result<bool, CompileError> {
    let flat = lower(g, None, limits)?;
    let (mut aut, mut s) = Automaton::new(flat, limits.max_stacks, limits.max_states)
        .map_err(|limit| CompileError::TooManyStacks { limit })?;
    for &b in input {
        s = aut.step(s, b);
        if s == DEAD || s == OVERFLOW {
            return Ok(false);
        }
    }
    Ok(aut.info(s).accepting)
}
