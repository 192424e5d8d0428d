//! How a mask is computed on a miss: the bounded-repetition shortcut through the canonical
//! state, else the truncated state's context-independent mask (accelerated by its loop or
//! a closed set, by first-byte dispatch, by chain, or walked) plus the checks of its
//! uncertain tokens from the state itself. See `mask` for each technique; this file decides
//! which one a state gets and caches the results.

use super::*;

/// Frames kept when truncating a state for its context-independent mask.
const TRUNCATE_DEPTH: usize = 4;
/// Fewest first bytes leading to one looping state for [`CompiledGrammar::dispatch_ci`].
const DISPATCH_MIN: usize = 16;
/// Bytes within which two states must become one for a first byte to join a dispatch group
/// (the rest of a UTF-8 character).
const SAME_DEPTH: u32 = 3;
/// Fewest trie nodes under a first byte for it to try joining a dispatch group.
const JOIN_MIN_NODES: usize = 128;
/// Frames below the top two of a stack are replaced by their loop equivalents only from
/// this budget on (see `Builder::canonical`).
const DEEP_MIN_BUDGET: u32 = 16;

impl CompiledGrammar {
    /// The full mask of state `s`, computed and published on a miss (unless the cache is
    /// full). Returns the mask, whether it was a hit, and the trie nodes walked. `busy`:
    /// canonical states whose masks this thread is computing (a dispatch target inside them
    /// must not come back to them).
    pub(super) fn mask_of(&self, st: &mut Stepper<'_>, s: StateId, busy: &mut Vec<StateId>) -> (Arc<TokenMask>, bool, usize) {
        if let Some(m) = self.masks.masks.get(s) {
            return (m.clone(), true, 0);
        }
        let vocab = self.index.vocab();
        let info = st.info(s);
        let (m, walked) = if !info.not_tokens.is_empty() {
            (self.negated_mask(st, s), 0)
        } else {
            match self.repeat_mask(st, s, busy) {
                Some(r) => r,
                None => self.context_independent_mask(st, s),
            }
        };
        let mut m = m;
        for &t in info.tokens.iter() {
            m.insert(t);
        }
        if info.accepting {
            for &t in vocab.eos_tokens() {
                m.insert(t);
            }
        }
        let m = Arc::new(m);
        if !self.masks.budget.reserve(m.memory_usage()) {
            return (m, false, walked);
        }
        // The first thread to publish wins; a mask computed at the same time is equal.
        (self.masks.masks.set(s, m).clone(), false, walked)
    }

    /// The mask of `s` but for its named tokens and EOS, in a state where negated token
    /// references may come next: every token they take (see [`takes_negated`]), and the
    /// others (the excluded one, EOS tokens that are text) when their bytes are a path from
    /// `s`. No trie walk: only those few tokens are in doubt.
    pub(super) fn negated_mask(&self, st: &mut Stepper<'_>, s: StateId) -> TokenMask {
        let vocab = self.index.vocab();
        let info = st.info(s);
        let mut m = TokenMask::new(vocab.len());
        for t in vocab.ids() {
            if takes_negated(vocab, t) && info.not_tokens.iter().any(|&n| n != t) {
                m.insert(t);
            } else if vocab.is_text(t) {
                let x = st.steps(s, vocab.token_bytes(t));
                if x != DEAD && x != OVERFLOW {
                    m.insert(t);
                }
            }
        }
        m
    }


    /// The text-token mask of `s` through its canonical state, when `s` has frames inside
    /// bounded repetitions (see `mask::repeat_split`); `None` otherwise.
    pub(super) fn repeat_mask(&self, st: &mut Stepper<'_>, s: StateId, busy: &mut Vec<StateId>) -> Option<(TokenMask, usize)> {
        if !self.repeat_shortcut.load(Ordering::Relaxed) {
            return None;
        }
        // Two tries. Every frame replaced: worth it when the canonical mask is already there
        // (a string being written) or the budget is large. Else only frames with a large
        // budget, so that the walk of the longer tokens stays short (below the vocabulary's
        // split budget it would visit more than an eighth of the trie).
        let split = self.index.split_min_budget();
        let deep = self.deep_min_budget();
        let (mut c, mut budget) = st.canonical(s, 0, deep);
        if c != s && budget < split && self.masks.masks.get(c).is_none() {
            (c, budget) = st.canonical(s, split, deep);
        }
        if c == s || busy.contains(&c) {
            return None;
        }
        // A small budget makes the walk of the longer tokens visit most of the trie's upper
        // levels (a string near its `maxLength`: every token longer than the characters
        // left). When the truncated state counts through a class to its end within about as
        // many characters (a short chain), its context-independent mask serves instead: the
        // class's tokens by count, and the few that leave the class walked from where they
        // leave it.
        if budget < split {
            let t = st.truncate(s, TRUNCATE_DEPTH);
            if self.short_chain_ci(st, t, split as usize) {
                return None;
            }
        }
        busy.push(c);
        let (mc, _, walked) = self.mask_of(st, c, busy);
        busy.pop();
        let (m, w) = repeat_split(st, &self.index, s, c, budget, &mc);
        Some((m, walked + w))
    }

    /// Whether the context-independent mask of `t` is cached, or `t` has a chain of at most
    /// `max_len` states (built and cached here). The cap bounds what a failed search costs:
    /// a search pattern's many stacks count through long chains, each state stepped on
    /// every byte.
    fn short_chain_ci(&self, st: &mut Stepper<'_>, t: StateId, max_len: usize) -> bool {
        let cache = &self.ci;
        if cache.ci.get(t).is_some() {
            return true;
        }
        let Some(ch) = Chain::for_state(st, &self.index, t, self.deep_min_budget(), max_len) else { return false };
        let c = Arc::new(ContextIndependentMask::build_chain(st, &self.index, t, &ch));
        if cache.budget.reserve(c.memory_usage()) {
            cache.ci.set(t, c);
        }
        true
    }

    /// The budget from which canonical states replace deep frames (see `canon`): one value
    /// per grammar, since deep frames are memoized.
    pub(super) fn deep_min_budget(&self) -> u32 {
        self.index.split_min_budget().max(DEEP_MIN_BUDGET)
    }

    /// The context-independent mask of state `t` (cached by state), and the trie nodes
    /// walked to build it (0 on a hit). A state that loops on enough bytes to allow half of
    /// the vocabulary is built with its accelerator; one that an earlier search already
    /// placed in a closed set allowing half of it, with that set's accelerator; one whose
    /// first bytes lead to a looping state, by first-byte dispatch
    /// ([`dispatch_ci`](Self::dispatch_ci)); one in a closed set (`mask::Closed`, see
    /// [`closed_of`](Self::closed_of)) with that set's accelerator; one that counts through
    /// a class to a loop by its chain (`mask::Chain`); any other by a plain walk. Unless
    /// `nested` (inside another one's computation), one that another thread is computing is
    /// waited for ([`claim`](Self::claim)).
    pub(super) fn ci_of(&self, st: &mut Stepper<'_>, t: StateId, nested: bool) -> (Arc<ContextIndependentMask>, usize) {
        self.ci_of_walk(st, t, nested, true).expect("a plain walk is allowed")
    }

    /// [`ci_of`](Self::ci_of); unless `plain`, `None` (and nothing cached) when only a
    /// plain walk of the trie would do.
    pub(super) fn ci_of_walk(&self, st: &mut Stepper<'_>, t: StateId, nested: bool, plain: bool) -> Option<(Arc<ContextIndependentMask>, usize)> {
        let cache = &self.ci;
        if let Some(c) = cache.ci.get(t) {
            return Some((c.clone(), 0));
        }
        if !plain && locked(&cache.plain).contains_key(&t) {
            return None;
        }
        let _mark = if nested {
            None
        } else {
            match self.claim(Work::Ci, t, || cache.ci.get(t).cloned(), || st.release()) {
                Claim::Done(c) => return Some((c, 0)),
                Claim::Mine(mark) => Some(mark),
            }
        };
        st.step_all(t);
        st.take_ctx_seen();
        let loops = Accel::for_state(st, &self.index, t);
        let looped = loops.as_ref().map_or(0, |a| a.covers());
        let c = if looped >= self.index.vocab().len() / 2 {
            // A closed set, if the loop misses characters of a string body and the set
            // allows more.
            let first = st.info(t).first;
            let closed = match &loops {
                Some(a) if a.misses_string_chars(first) => self.closed_of(st, t, MAX_CLOSED_INSTEAD).filter(|c| c.covers() > looped),
                _ => None,
            };
            ContextIndependentMask::build(st, &self.index, t, closed.as_deref().or(loops.as_deref()))
        } else if let Some(a) = self.known_closed(t).filter(|a| a.covers() >= self.index.vocab().len() / 2) {
            // A state a closed set found from an earlier position holds: its accelerator
            // is already built and serves every state of the set (the positions after an
            // unanchored `[a-f0-9]{40}`'s first character walk 4,943 of Llama 3.1's trie
            // nodes this way against 13,555 by dispatch).
            ContextIndependentMask::build(st, &self.index, t, Some(&a))
        } else {
            match self.dispatch_ci(st, t) {
                Some(c) => c,
                // A closed set, if one allows more than the loop does.
                None => match self.closed_of(st, t, MAX_CLOSED).filter(|c| c.covers() > looped).or(loops) {
                    Some(a) => ContextIndependentMask::build(st, &self.index, t, Some(&a)),
                    None => match Chain::for_state(st, &self.index, t, self.deep_min_budget(), MAX_CHAIN) {
                        Some(ch) => ContextIndependentMask::build_chain(st, &self.index, t, &ch),
                        None => match SetChain::for_state(st, &self.index, t) {
                            Some(ch) => ContextIndependentMask::build_set_chain(st, &self.index, t, &ch),
                            None if !plain => {
                                let met = st.take_ctx_seen();
                                locked(&cache.plain).insert(t, met);
                                return None;
                            }
                            None => ContextIndependentMask::build(st, &self.index, t, None),
                        },
                    },
                },
            }
        };
        let walked = c.walked;
        let c = Arc::new(c);
        if !cache.budget.reserve(c.memory_usage()) {
            return Some((c, walked));
        }
        Some((cache.ci.set(t, c).clone(), walked))
    }

    /// The accelerator of the closed set `t` belongs to (see [`Closed`]), when one was
    /// found; searched for at most once per state (and remembered for every state of the
    /// set found: the next positions of the same stretch), and only when the trie's
    /// subtrees under `t`'s first bytes hold a quarter of its nodes or more: a search steps
    /// every state of the set on every byte of the class (tens of µs), which only a large
    /// walk repays. A search gives up past `max` states (and `t` is then remembered as
    /// having no set, whatever `max` a later call asks).
    fn closed_of(&self, st: &mut Stepper<'_>, t: StateId, max: usize) -> Option<Arc<Accel>> {
        if let Some(known) = locked(&self.ci.closed).get(&t) {
            return known.clone();
        }
        let trie = self.index.trie();
        let first = st.info(t).first;
        let (mut under, mut i, n) = (0, 1, trie.end(0));
        while i < n {
            let end = trie.end(i);
            if first.contains(trie.byte(i)) {
                under += end - i;
            }
            i = end;
        }
        if under < trie.len() / 4 {
            return None;
        }
        let found = Closed::for_state(st, &self.index, t, max);
        let mut map = locked(&self.ci.closed);
        match found {
            Some((a, set)) => {
                for k in set {
                    let slot = map.entry(k).or_insert(None);
                    if slot.is_none() {
                        *slot = Some(a.clone());
                    }
                }
                Some(a)
            }
            None => {
                map.entry(t).or_insert(None);
                None
            }
        }
    }

    /// The accelerator of a closed set that an earlier search found `t` in, without a search.
    fn known_closed(&self, t: StateId) -> Option<Arc<Accel>> {
        locked(&self.ci.closed).get(&t).cloned().flatten()
    }

    /// The context-independent mask of `t` by first-byte dispatch, when `t` is not a loop
    /// itself but many of its first bytes lead to one state `x` that loops on them (a partial
    /// object key that may still become a listed key or already is an unlisted one; a
    /// bounded counter). For such a byte `b`, a token `b·w` is consumed from `t` exactly as
    /// `w` is from `x = δ(t, b)`, and since `δ(x, b) = x`, exactly as `b·w` is from `x`: that
    /// part of the mask (and of the uncertain subtrees) is `x`'s, restricted to first byte
    /// `b`, taken from `x`'s cached (usually accelerated) mask. The other first bytes walk
    /// their subtrees. `None` when no such group exists.
    pub(super) fn dispatch_ci(&self, aut: &mut Stepper<'_>, t: StateId) -> Option<ContextIndependentMask> {
        let cache = &self.ci;
        let trie = self.index.trie();
        // The root's children: (node, byte, state after the byte).
        let mut kids: Vec<(usize, u8, StateId)> = Vec::with_capacity(256);
        let mut self_loops = 0;
        let (mut i, n) = (1, trie.end(0));
        while i < n {
            let b = trie.byte(i);
            let x = aut.step(t, b);
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
        let mut groups: Vec<(StateId, ByteSet)> = Vec::new();
        for &(_, b, x) in &kids {
            if x == DEAD || x == OVERFLOW || x == t || aut.is_ctx(x) || aut.step(x, b) != x {
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
        // Other first bytes (the lead bytes of multi-byte characters, mostly) join a group
        // when the state after them is, for the rest of any token, the state after them
        // from the group's target: then their subtrees are the target's too. Without this
        // a 128k vocabulary walks ~30,000 nodes of non-ASCII tokens on every dispatch.
        let mut proven = Vec::new();
        for &(node, b, x) in &kids {
            // A small subtree is cheaper to walk than to prove the same.
            if trie.end(node) - node < JOIN_MIN_NODES || x == DEAD || x == OVERFLOW || groups.iter().any(|g| g.1.contains(b)) {
                continue;
            }
            for g in groups.iter_mut() {
                let y = aut.step(g.0, b);
                if same_within(aut, x, y, SAME_DEPTH, &mut proven) {
                    g.1.insert(b);
                    break;
                }
            }
        }
        // When the first bytes no group takes hold an eighth of the trie or more (the
        // space before words, under an unanchored `[^\s]+` still waiting for its first
        // character), their walks would cost more than the dispatch saves: a closed set
        // around `t` that allows half of the vocabulary serves instead (see `ci_of_walk`).
        let ungrouped: usize = kids
            .iter()
            .filter(|&&(_, b, x)| x != DEAD && x != OVERFLOW && !groups.iter().any(|g| g.1.contains(b)))
            .map(|&(node, _, _)| trie.end(node) - node)
            .sum();
        if ungrouped >= trie.len() / 8
            && self.closed_of(aut, t, MAX_CLOSED_INSTEAD).is_some_and(|a| a.covers() >= self.index.vocab().len() / 2)
        {
            return None;
        }
        let vocab = self.index.vocab();
        let mut ci = ContextIndependentMask::empty(vocab.len());
        let fb = self.index.first_byte_masks();
        let mut grouped = ByteSet::default();
        for (x, bytes) in &groups {
            grouped.union(bytes);
            let known = locked(&cache.group).get(&(*x, *bytes)).cloned();
            let part = match known {
                Some(p) => p,
                None => {
                    let (cx, w) = self.ci_of(aut, *x, true);
                    ci.walked += w;
                    let mut part = ContextIndependentMask::empty(vocab.len());
                    // `x`'s tokens restricted to these first bytes: its mask minus the
                    // tokens under the other first bytes, or the union of its mask and each
                    // byte's first-byte mask, whichever touches less memory.
                    let others: usize = kids.iter().filter(|k| !bytes.contains(k.1)).map(|k| trie.tokens_below(k.0).len()).sum();
                    if others < bytes.len() as usize * part.mask.words().len() {
                        part.mask.words_mut().copy_from_slice(cx.mask.words());
                        for &(node, b, _) in kids.iter().filter(|k| !bytes.contains(k.1)) {
                            debug_assert!(!bytes.contains(b));
                            for &tok in trie.tokens_below(node) {
                                part.mask.remove(tok);
                            }
                        }
                    } else {
                        let out = part.mask.words_mut();
                        for b in (0..=255u8).filter(|&b| bytes.contains(b)) {
                            for ((o, a), f) in out.iter_mut().zip(cx.mask.words()).zip(fb[b as usize].words()) {
                                *o |= a & f;
                            }
                        }
                    }
                    part.nodes.extend(cx.nodes.iter().filter(|(_, p)| bytes.contains(p[0])).cloned());
                    part.tokens.extend(cx.tokens.iter().filter(|&&tok| vocab.token_bytes(tok).first().is_some_and(|&b| bytes.contains(b))));
                    let part = Arc::new(part);
                    if cache.budget.reserve(part.memory_usage()) {
                        locked(&cache.group).entry((*x, *bytes)).or_insert(part).clone()
                    } else {
                        part
                    }
                }
            };
            for (o, a) in ci.mask.words_mut().iter_mut().zip(part.mask.words()) {
                *o |= a;
            }
            ci.nodes.extend(part.nodes.iter().cloned());
            ci.tokens.extend_from_slice(&part.tokens);
        }
        // The other first bytes: their subtrees, kept by the state after the byte. The map
        // is locked once to look them all up and once to add the new ones.
        let wanted: Vec<(usize, u8, StateId)> = kids
            .into_iter()
            .filter(|&(_, b, x)| !grouped.contains(b) && x != DEAD && x != OVERFLOW)
            .collect();
        let mut subs: Vec<Option<Arc<ContextIndependentSubtree>>> = {
            let map = locked(&cache.sub);
            wanted.iter().map(|&(_, b, x)| map.get(&(x, b)).cloned()).collect()
        };
        let mut fresh = Vec::new();
        for (slot, &(node, b, x)) in subs.iter_mut().zip(&wanted) {
            if slot.is_none() {
                let sub = Arc::new(ContextIndependentSubtree::build(aut, trie, vocab.len(), node, x));
                ci.walked += sub.walked;
                if cache.budget.reserve(sub.memory_usage()) {
                    fresh.push(((x, b), sub.clone()));
                }
                *slot = Some(sub);
            }
        }
        if !fresh.is_empty() {
            let mut map = locked(&cache.sub);
            for (key, sub) in fresh {
                map.entry(key).or_insert(sub);
            }
        }
        for sub in subs.iter().flatten() {
            sub.allow_into(&mut ci.mask);
            ci.nodes.extend(sub.nodes.iter().cloned());
        }
        Some(ci)
    }

    /// The text-token mask of `s` through its truncation's context-independent mask.
    pub(super) fn context_independent_mask(&self, aut: &mut Stepper<'_>, s: StateId) -> (TokenMask, usize) {
        let vocab = self.index.vocab();
        let trie = self.index.trie();
        let t = aut.truncate(s, TRUNCATE_DEPTH);
        let (ci, mut walked) = match self.ci_of_walk(aut, t, false, false) {
            Some(r) => r,
            // The truncated state would be walked whole: its loop or chain may run into
            // the context, which the full state has. Try the full state's own (cached by
            // the full state; nothing in it is uncertain), else walk the truncated one.
            // When the truncated state's search met no state that depends on context, it
            // saw only what the full state's would (the steps above the cut are the same),
            // so that search is skipped.
            None => {
                let met = locked(&self.ci.plain).get(&t).copied().unwrap_or(true);
                match if t != s && met { self.ci_of_walk(aut, s, false, false) } else { None } {
                    Some(r) => r,
                    None => self.ci_of(aut, t, false),
                }
            }
        };
        let mut m = ci.mask.clone();
        for (node, prefix) in &ci.nodes {
            let x = aut.steps(s, prefix);
            if x == DEAD || x == OVERFLOW {
                continue;
            }
            let node = *node as usize;
            for &tok in trie.tokens_at(node) {
                m.insert(tok);
            }
            walked += 1 + walk_from(aut, trie, node, x, &mut m);
        }
        for &tok in &ci.tokens {
            let x = aut.steps(s, vocab.token_bytes(tok));
            walked += 1;
            if x != DEAD && x != OVERFLOW {
                m.insert(tok);
            }
        }
        (m, walked)
    }
}
