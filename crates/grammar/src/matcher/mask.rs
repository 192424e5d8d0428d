//! Token-mask computation: walking a [`TokenTrie`] through the automaton.
//!
//! [`walk_from`] visits the trie depth-first from a state; a node whose byte kills every stack
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
//! checked from `S` itself. `T`'s result ([`ContextIndependentMask`]) is shared by every
//! state with the same top frames, so a new nesting context costs only the uncertain checks
//! (tokens that close the current rule, typically a few hundred).
//!
//! ## Closed sets
//! A state that does not loop, but from which every character of a large class leads to a
//! state of a small set `K` that again takes every such character into `K` (the search of an
//! unanchored `pattern`: partial matches come and go, but no character kills the string),
//! allows every token made of that class whatever path it takes through `K`; only the
//! other tokens (holding a quote, a backslash, a control byte or a piece of a character)
//! are walked, whole, from the state ([`Closed`]): the main trie, passing over the subtrees
//! of the class's tokens (`index::Pruner`). The set is found once and remembered for each of
//! its states, which are the states of the string's next positions; such a state takes the
//! set's accelerator before trying a first-byte dispatch (below), which would walk the
//! subtrees of its counted class's first bytes again at every position.
//!
//! A closed set also serves two states that have another accelerator, when it allows more:
//! - a state that loops, but not on some character a string body may hold (`.*?` before
//!   the `.` a URL pattern waits for loops on everything but `.`, and the tokens holding a
//!   `.` are most of a large vocabulary's trie), when the loop and the states after the
//!   missing characters make a closed set;
//! - a state that would dispatch on its first bytes (below), when the first bytes no group
//!   takes lead to an eighth of the trie or more (an unanchored `[^\s]+` before its first
//!   non-space character: the space starts most of a vocabulary's words).
//!
//! ## Multi-byte characters, by lead byte
//! A class counts multi-byte UTF-8 characters in by lead byte (`index::Leads`): a state
//! whose loop takes every character but a few (ECMA-262 `.` leaves out U+2028 and U+2029,
//! led by 0xE2) keeps the others in its class, and only the tokens holding a character led
//! by a missing lead byte are stepped. Before, one such character took every multi-byte
//! character out of the class, and a `.*` walked a third of Llama 3.1's trie.
//!
//! ## First-byte dispatch
//! A state that does not loop itself, but whose first bytes mostly lead to one state that
//! loops on them (just after an object key's opening quote: any letter but the first letters
//! of the listed keys leads to "some other key"), builds its context-independent mask from
//! that looping state's (cached, accelerated) one, restricted to those first bytes; the
//! other first bytes' subtrees are walked and kept by the state after the byte
//! ([`ContextIndependentSubtree`]).
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
//! The results (`ContextIndependentMask`, `ContextIndependentSubtree`, full masks) are
//! immutable once built and cached by the compiled grammar, which any thread then reads in
//! place.

use super::automaton::{StateId, Stepper, DEAD, MEMO, OVERFLOW, UTF8_SEQUENCES};
use super::index::Leads;
use formwork_vocab::TokenId;
use formwork_vocab::{TokenMask, TokenTrie};

/// Sets in `mask` every token in the subtree of trie node `root` whose bytes (after the
/// node's prefix, which led to state `s0`) can be fully consumed. Returns nodes visited.
pub(crate) fn walk_from(
    aut: &mut Stepper<'_>,
    trie: &TokenTrie,
    root: usize,
    s0: StateId,
    mask: &mut TokenMask,
) -> usize {
    let words = mask.words_mut();
    // From a full state nothing pops into `CTX`, so nothing is uncertain.
    let mut none = Vec::new();
    let visited = walk_below(aut, trie, root, &[], s0, |_, _| false, Words(words), &mut none);
    debug_assert!(none.is_empty(), "a walk from a full state reached CTX");
    visited
}

/// The text-token mask of `s` from `canon`, the mask of its canonical state `c` whose
/// budget is `budget` (see module docs): `canon`'s tokens of at most `budget` bytes, plus the
/// longer tokens walked from `s`. Returns the mask and the trie nodes walked.
pub(crate) fn repeat_split(
    aut: &mut Stepper<'_>,
    index: &super::index::TokenIndex,
    s: StateId,
    c: StateId,
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
    s0: StateId,
    k: u32,
    mask: &mut TokenMask,
) -> usize {
    let words = mask.words_mut();
    let mut none = Vec::new();
    // A node's depth is its token length.
    let visited = walk_below(
        aut,
        trie,
        0,
        &[],
        s0,
        |i, _| subtree_max[i] as u32 <= k,
        |t: TokenId, depth: usize| {
            if depth as u32 > k {
                words[t.index() / 64] |= 1 << (t.index() % 64)
            }
        },
        &mut none,
    );
    debug_assert!(none.is_empty(), "a walk from a full state reached CTX");
    visited
}

/// Smallest self-loop class worth an accelerator.
const MIN_CLASS: u32 = 16;

/// The self-loop accelerator of a state `S` whose loop class `C = {b : δ(S, b) = S}` is
/// large (a JSON string body): `mask(S) = all_in(C) ∪ walk(exit suffixes, S)`, because a
/// token's bytes up to its first byte outside `C` lead from `S` back to `S`. Until the
/// suffix trie is built (on a thread, see `index`), the main trie is walked from `S`,
/// passing over the subtrees of `C`'s tokens.
#[derive(Debug)]
pub(crate) struct Accel {
    class: std::sync::Arc<super::index::ClassIndex>,
    /// Whether the state loops on the class (else it is a closed set's, [`Closed`], whose
    /// tokens are walked whole).
    looping: bool,
}

impl Accel {
    /// The tokens it allows without a walk.
    pub(crate) fn covers(&self) -> usize {
        self.class.all_in.count_ones()
    }

    /// Whether some character a JSON string body may hold starts a token from a state
    /// whose first bytes are `first` but is not in the class: a raw ASCII character of the
    /// string class (`index::json_string_class`) in `first`, or a multi-byte character.
    /// Then a closed set around the state may allow more than its loop (the loop of `.*?`
    /// before the `.` that `^https?://.*?\..*$` waits for misses only that `.`).
    pub(crate) fn misses_string_chars(&self, first: super::lower::ByteSet) -> bool {
        let string = super::index::json_string_class();
        self.class.leads() != Leads::ALL || (0..0x80u8).any(|b| string.contains(b) && first.contains(b) && !self.class.contains(b))
    }

    /// The accelerator for state `s`, when its loop class is large enough.
    pub(crate) fn for_state(
        aut: &mut Stepper<'_>,
        index: &super::index::TokenIndex,
        s: StateId,
    ) -> Option<std::sync::Arc<Accel>> {
        let c = Self::loop_class(aut, s);
        Self::with_class(aut, index, s, c)
    }

    /// The loop class of `s`: `{b : δ(s, b) = s}`.
    pub(crate) fn loop_class(aut: &mut Stepper<'_>, s: StateId) -> super::lower::ByteSet {
        let (info, entry) = (aut.info(s), aut.entry(s));
        let mut c = super::lower::ByteSet::default();
        if info.first.len() < MIN_CLASS {
            return c;
        }
        for b in 0..=255u8 {
            if info.first.contains(b) && aut.step_from(entry, s, b) == s {
                c.insert(b);
            }
        }
        c
    }

    /// The accelerator for state `s` on its loop class `c`, when `c` is large enough.
    pub(crate) fn with_class(
        aut: &mut Stepper<'_>,
        index: &super::index::TokenIndex,
        s: StateId,
        c: super::lower::ByteSet,
    ) -> Option<std::sync::Arc<Accel>> {
        if c.len() < MIN_CLASS {
            return None;
        }
        let leads = utf8_loops(aut, s);
        Some(std::sync::Arc::new(Accel {
            class: index.class_index(c, leads)?,
            looping: true,
        }))
    }
}

/// Most states a closed set may hold (see [`Closed`]).
pub(crate) const MAX_CLOSED: usize = 64;
/// Most states of a closed set tried for a state that has another accelerator (a loop
/// that misses a few string characters, a first-byte dispatch): the searches that fail
/// (an object's key states, where the listed keys' prefixes make the set) cost every
/// state that has no set, so they stop early.
pub(crate) const MAX_CLOSED_INSTEAD: usize = 8;
/// First states of a closed-set search that, each moving on the whole class to one next
/// state, make it a counter and end the search (see [`Closed::for_state`]).
const CHAIN_PROBE: usize = 3;

/// The closed-set accelerator of a state `S` that does not loop on a class `C`, but whose
/// steps on `C` never leave a set `K` of live states: every state of `K` takes every byte
/// of `C` to a state of `K` (none rejected, none in the context), and, with UTF-8, every
/// valid multi-byte character too. A string body under an unanchored `pattern` is the
/// common case: before the match is found the search moves between partial-match states,
/// but any character keeps it alive. Then every token made only of `C` (and, with UTF-8,
/// of whole characters) is allowed, whatever its path through `K`, and only the others
/// need stepping: `mask(S) = all_in(C) ∪ walk(the other tokens, whole, from S)` — a trie of
/// a few thousand tokens (those holding `"`, `\`, a control byte or a piece of a
/// character) instead of the whole vocabulary. Unlike [`Accel`], the state where a token
/// leaves `C` depends on its bytes before, so the other tokens are walked whole
/// ([`TokenIndex::closed_index`](super::index::TokenIndex::closed_index)).
///
/// Finding `K` steps every state of it on every byte of `C`: bounded by `max` states (at
/// most [`MAX_CLOSED`]), and given up as soon as `C` falls under [`MIN_CLASS`] bytes. A
/// byte found to leave `K` from some state is dropped from `C` (the states already reached
/// through it stay in `K`: a larger `K` only makes the condition stricter, never wrong);
/// so is a lead byte whose characters leave it.
#[derive(Debug)]
pub(crate) struct Closed;

impl Closed {
    /// The closed index for state `s` as an accelerator, when `s` has a closed set on a
    /// class of at least [`MIN_CLASS`] ASCII bytes.
    /// Returns the accelerator with the states of `K` (each of which it serves as well:
    /// from a state of `K` every step on the class stays in `K`); `None` past `max` states.
    pub(crate) fn for_state(
        aut: &mut Stepper<'_>,
        index: &super::index::TokenIndex,
        s: StateId,
        max: usize,
    ) -> Option<(std::sync::Arc<Accel>, Vec<StateId>)> {
        let max = max.min(MAX_CLOSED);
        let info = aut.info(s);
        if info.first.len() < MIN_CLASS {
            return None;
        }
        let mut c = super::lower::ByteSet::default();
        for b in 0..0x80u8 {
            if info.first.contains(b) {
                c.insert(b);
            }
        }
        if c.len() < MIN_CLASS {
            return None;
        }
        let mut leads = Leads::ALL;
        let mut counting = 0;
        let mut set = vec![s];
        let mut seen: rustc_hash::FxHashSet<StateId> = std::iter::once(s).collect();
        let mut i = 0;
        while i < set.len() {
            let k = set[i];
            i += 1;
            aut.step_all(k);
            let e = aut.entry(k);
            // The successors of `k` on the class: one state (not `k`) for each of the first
            // states makes a counter, which a chain ([`Chain`]) serves without this search.
            let (mut only, mut many) = (None, false);
            for b in 0..0x80u8 {
                if !c.contains(b) {
                    continue;
                }
                let x = aut.step_from(e, k, b);
                if x == DEAD
                    || x == OVERFLOW
                    || aut.is_ctx(x)
                    || (!seen.contains(&x) && narrow(aut.info(x).first, &c))
                {
                    c.remove(b);
                    continue;
                }
                match only {
                    None => only = Some(x),
                    Some(y) if y != x => many = true,
                    _ => {}
                }
                if seen.insert(x) {
                    set.push(x);
                }
            }
            if i <= CHAIN_PROBE && !many && only != Some(k) {
                counting += 1;
                if counting == CHAIN_PROBE {
                    return None;
                }
            }
            if c.len() < MIN_CLASS || set.len() > max {
                return None;
            }
            if leads.any() {
                leads = leads.and(utf8_into(aut, k, leads, &mut seen, &mut set));
            }
            if set.len() > max {
                return None;
            }
        }
        Some((std::sync::Arc::new(Accel { class: index.class_index(c, leads)?, looping: false }), set))
    }
}

/// Does a state whose first bytes are `first` take less than half of class `c`? Such a
/// state (an escape after `\\`, the end of a string) would shrink the class for all of `K`,
/// so [`Closed::for_state`] drops the byte leading to it instead.
fn narrow(first: super::lower::ByteSet, c: &super::lower::ByteSet) -> bool {
    let both: u32 = first.0.iter().zip(&c.0).map(|(a, b)| (a & b).count_ones()).sum();
    both * 2 < c.len()
}

/// The lead bytes of `of` whose every valid multi-byte UTF-8 character leads from `s` to a
/// live state outside the context, one state per lead byte and continuation range. Those
/// states are added to `set` (when not `seen`).
fn utf8_into(
    aut: &mut Stepper<'_>,
    s: StateId,
    of: Leads,
    seen: &mut rustc_hash::FxHashSet<StateId>,
    set: &mut Vec<StateId>,
) -> Leads {
    let mut stepped = false;
    let first = aut.info(s).first;
    let mut into = Leads::NONE;
    for &((lo, hi), rest) in UTF8_SEQUENCES {
        for lead in (lo..=hi).filter(|&b| of.contains(b) && first.contains(b)) {
            let Some(x) = char_target(aut, s, lead, rest, &mut stepped) else { continue };
            if x == DEAD || x == OVERFLOW || aut.is_ctx(x) {
                continue;
            }
            into.insert(lead);
            if seen.insert(x) {
                set.push(x);
            }
        }
    }
    into
}

/// The lead bytes whose every valid multi-byte UTF-8 character leads from `s` back to `s`.
fn utf8_loops(aut: &mut Stepper<'_>, s: StateId) -> Leads {
    utf8_to(aut, s, s)
}

/// The lead bytes whose every valid multi-byte UTF-8 character leads from `s` to `to`
/// (with `to` = [`DEAD`]: is rejected). Checked exactly: per lead byte, every continuation
/// byte of its valid range must give one same state, level by level. A lead byte that does
/// not start `s` is rejected without a step.
fn utf8_to(aut: &mut Stepper<'_>, s: StateId, to: StateId) -> Leads {
    let mut stepped = false;
    let first = aut.info(s).first;
    let mut leads = Leads::NONE;
    for &((lo, hi), rest) in UTF8_SEQUENCES {
        for lead in lo..=hi {
            let x = if first.contains(lead) { char_target(aut, s, lead, rest, &mut stepped) } else { Some(DEAD) };
            if x == Some(to) {
                leads.insert(lead);
            }
        }
    }
    leads
}

/// The state to which every valid character with lead byte `lead` (continuation byte
/// ranges `rest`) leads from `s`, or `None` when two of them lead to different states. A
/// character rejected part way gives [`DEAD`] (or [`OVERFLOW`]). Most characters are
/// decided from the grammar's elements, with no state built in the middle of one; the
/// others are stepped level by level, after `s`'s transitions are built at once
/// (`stepped`: already done), since bytes taken by the same stacks share a closure.
#[inline(always)]
fn char_target(aut: &mut Stepper<'_>, s: StateId, lead: u8, rest: &[(u8, u8)], stepped: &mut bool) -> Option<StateId> {
    if let Some(x) = aut.char_step(s, lead, rest) {
        return Some(x);
    }
    if !*stepped {
        aut.step_all(s);
        *stepped = true;
    }
    let mut x = aut.step(s, lead);
    for &(a, b) in rest {
        if x == DEAD || x == OVERFLOW {
            break;
        }
        aut.step_all(x);
        let next = aut.step(x, a);
        if (a..=b).any(|byte| aut.step(x, byte) != next) {
            return None;
        }
        x = next;
    }
    Some(x)
}

/// Are states `a` and `b` the same for a walk: within `depth` bytes, every byte either
/// leads both to one state, or both to states that are again the same within one byte less
/// (neither rejected, both or neither in the context)? Then any token is consumed from `a`
/// exactly as from `b`, with the same uncertain nodes. `proven` memoizes pairs found the
/// same with at least the depth they were asked for.
pub(crate) fn same_within(aut: &mut Stepper<'_>, a: StateId, b: StateId, depth: u32, proven: &mut Vec<(StateId, StateId, u32)>) -> bool {
    if a == b {
        return true;
    }
    if depth == 0 || a == DEAD || b == DEAD || a == OVERFLOW || b == OVERFLOW || aut.is_ctx(a) != aut.is_ctx(b) {
        return false;
    }
    if proven.iter().any(|&(x, y, d)| x == a && y == b && d >= depth) {
        return true;
    }
    aut.step_all(a);
    aut.step_all(b);
    let (ea, eb) = (aut.entry(a), aut.entry(b));
    for y in 0..=255u8 {
        let p = aut.step_from(ea, a, y);
        let q = aut.step_from(eb, b, y);
        if p != q && !same_within(aut, p, q, depth - 1, proven) {
            return false;
        }
    }
    proven.push((a, b, depth));
    true
}

/// Longest chain worth following (states built along it).
pub(crate) const MAX_CHAIN: usize = 64;

/// The chain accelerator of a state `t` that does not loop on a class `C` but moves, on
/// every character of `C`, to one next state, and from there on every character of `C` to
/// one next state again, until a state that loops on `C` (or rejects all of it):
/// `t = S₀ → S₁ → … → Sₙ`. A string body before its `minLength`, the first characters of
/// one under a large `maxLength` (nested repetitions), a pattern's counted class. A token
/// that starts with `k` characters of `C` and then leaves it at byte `i` is consumed from
/// `t` exactly as its suffix from `i` is from `S_min(k,n)`; so `mask(t)` = the tokens all in
/// `C` (whose end state is some live `Sₖ`) ∪ the exit suffixes walked from `Sₖ`, by count
/// ([`Counted`](super::index::Counted)) ∪ the main trie's subtrees under the bytes that do
/// not enter `C` — a few thousand trie steps instead of the whole trie. Until the counted
/// index is built (on a thread of its own, after the class's first chain), the main trie is
/// walked from `t`, passing over the subtrees whose tokens are all in `C` and short enough.
///
/// A bounded repetition's states never repeat (`Sₖ` counts), so the chain goes through
/// canonical states (see `canon`): `Sₖ` is replaced by its canonical state when the
/// canonical state's budget covers every byte a token can still have after `k`
/// characters, and a canonical state loops.
#[derive(Debug)]
pub(crate) struct Chain {
    class: std::sync::Arc<super::index::ClassIndex>,
    /// `states[k]`: the state after `k` characters of `C` (`states[0] = t`); the last one
    /// stands for every larger count, unless `dead`.
    states: Vec<StateId>,
    /// Counts from `states.len()` on are rejected.
    dead: bool,
}

impl Chain {
    /// The chain of `t`, when its first bytes have one large group leading to one state and
    /// the chain from there closes within `max_len` states (at most [`MAX_CHAIN`]).
    /// `deep_min` is the budget from which canonical states replace deep frames (the same
    /// on every call).
    pub(crate) fn for_state(
        aut: &mut Stepper<'_>,
        index: &super::index::TokenIndex,
        t: StateId,
        deep_min: u32,
        max_len: usize,
    ) -> Option<Chain> {
        let max_len = max_len.min(MAX_CHAIN);
        let info = aut.info(t);
        if info.first.len() < MIN_CLASS {
            return None;
        }
        aut.step_all(t);
        let entry = aut.entry(t);
        // ASCII first bytes by the state they lead to (a lead byte completes no character).
        let mut groups: Vec<(StateId, super::lower::ByteSet)> = Vec::new();
        for b in 0..0x80u8 {
            if !info.first.contains(b) {
                continue;
            }
            let x = aut.step_from(entry, t, b);
            if x == DEAD || x == OVERFLOW || x == t {
                continue;
            }
            match groups.iter_mut().find(|g| g.0 == x) {
                Some(g) => g.1.insert(b),
                None => groups.push((x, super::lower::ByteSet::single(b))),
            }
        }
        let (x1, class) = groups.into_iter().max_by_key(|g| g.1.len())?;
        if class.len() < MIN_CLASS || aut.is_ctx(x1) {
            return None;
        }
        let leads = utf8_to(aut, t, x1);
        let counted = index.class_index(class, leads)?;
        if counted.max_prefix > 255 {
            return None;
        }
        let longest = index.max_token_len();
        let mut states = vec![t, x1];
        let mut dead = false;
        loop {
            let j = states.len() - 1;
            if j >= counted.max_prefix {
                break;
            }
            // Every token has at most `longest - j` bytes left after `j` characters.
            let need = longest.saturating_sub(j) as u32;
            let (c, budget) = aut.canonical(states[j], need, deep_min);
            if c != states[j] && budget >= need && !aut.is_ctx(c) {
                states[j] = c;
            }
            let cur = states[j];
            aut.step_all(cur);
            let e = aut.entry(cur);
            let mut next = None;
            for b in (0..0x80u8).filter(|&b| class.contains(b)) {
                let x = aut.step_from(e, cur, b);
                match next {
                    None => next = Some(x),
                    Some(y) if y != x => return None,
                    _ => {}
                }
            }
            let next = next?;
            if next == OVERFLOW || (next != DEAD && aut.is_ctx(next)) {
                return None;
            }
            if leads.any() && !utf8_to(aut, cur, next).covers(leads) {
                return None;
            }
            if next == cur {
                break;
            }
            if next == DEAD {
                dead = true;
                break;
            }
            if states.len() >= max_len {
                return None;
            }
            states.push(next);
        }
        Some(Chain { class: counted, states, dead })
    }

    /// The state after `k` characters of the class; `None` when they are rejected.
    fn state(&self, k: usize) -> Option<StateId> {
        match self.states.get(k) {
            Some(&s) => Some(s),
            None if self.dead => None,
            None => self.states.last().copied(),
        }
    }
}

/// The context-independent part of a truncated state's mask (see module docs).
#[derive(Debug)]
pub(crate) struct ContextIndependentMask {
    /// Tokens allowed whatever the context.
    pub mask: TokenMask,
    /// Subtrees of the main trie whose fate depends on context: (node, bytes from the root).
    pub nodes: Vec<(u32, Box<[u8]>)>,
    /// Single tokens whose fate depends on context.
    pub tokens: Vec<TokenId>,
    /// Trie nodes walked to build it.
    pub walked: usize,
}

impl ContextIndependentMask {
    /// Nothing allowed, nothing uncertain, over a vocabulary of `n` tokens.
    pub(crate) fn empty(n: usize) -> ContextIndependentMask {
        ContextIndependentMask { mask: TokenMask::new(n), nodes: Vec::new(), tokens: Vec::new(), walked: 0 }
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
        t: StateId,
        accel: Option<&Accel>,
    ) -> ContextIndependentMask {
        let mut ci = ContextIndependentMask::empty(index.vocab().len());
        match accel {
            Some(a) => {
                ci.mask.words_mut().copy_from_slice(a.class.all_in.words());
                match a.looping.then(|| index.class_suffixes(&a.class, false)).flatten() {
                    Some(exits) => {
                        // Tokens leaving the class at their first byte: the main trie.
                        ci.walked = walk_ci(aut, index.trie(), t, Some(&a.class.enters()), &mut ci.mask, &mut ci.nodes);
                        // The others from where they leave it, which `t`'s loop leads back to.
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
                        // The walk passes over the subtrees that hold only the class's
                        // tokens, and steps the rest from `t`.
                        let mut p = a.class.pruner(index);
                        let words = ci.mask.words_mut();
                        ci.walked = walk_below(aut, index.trie(), 0, &[], t, |i, d| p.skip(i, d), Words(words), &mut ci.nodes);
                    }
                }
            }
            None => {
                ci.walked = walk_ci(aut, index.trie(), t, None, &mut ci.mask, &mut ci.nodes);
            }
        }
        ci
    }

    /// Computes the context-independent mask of truncated state `t` through its chain
    /// (see [`Chain`]).
    pub(crate) fn build_chain(aut: &mut Stepper<'_>, index: &super::index::TokenIndex, t: StateId, ch: &Chain) -> ContextIndependentMask {
        let mut ci = ContextIndependentMask::empty(index.vocab().len());
        let ix = &ch.class;
        let Some(counted) = index.class_counted(ix, false) else {
            // Not built yet: the main trie from `t`, passing over the subtrees whose tokens
            // are all in the class and (when the chain ends) shorter than it, which are
            // allowed whatever their path.
            let (sub, trie, limit) = (index.subtree_max(), index.trie(), ch.states.len());
            if !ch.dead {
                ci.mask.words_mut().copy_from_slice(ix.all_in.words());
            }
            let mut p = ix.pruner(index);
            let mut passed = Vec::new();
            let words = ci.mask.words_mut();
            let skip = |i: usize, d: usize| {
                let all_in = p.skip(i, d) && (!ch.dead || (sub[i] as usize) < limit);
                if all_in && ch.dead {
                    passed.push(i);
                }
                all_in
            };
            ci.walked = walk_below(aut, trie, 0, &[], t, skip, Words(words), &mut ci.nodes);
            for i in passed {
                for &tok in trie.tokens_below(i) {
                    ci.mask.insert(tok);
                }
            }
            return ci;
        };
        ci.mask.words_mut().copy_from_slice(ix.all_in.words());
        if ch.dead {
            for &(n, tok) in &counted.all_in_by_count {
                if (n as usize) < ch.states.len() {
                    break;
                }
                ci.mask.remove(tok);
            }
        }
        // Tokens whose first byte does not enter the class: the main trie, from `t`.
        ci.walked = walk_ci(aut, index.trie(), t, Some(&ix.enters()), &mut ci.mask, &mut ci.nodes);
        // The others by count: each root child's subtree from the state after that count.
        let exits = &counted.exits;
        let mut nodes = Vec::new();
        let mut i = 1;
        while i < exits.len() {
            if let Some(s) = ch.state(exits.byte(i) as usize) {
                let words = ci.mask.words_mut();
                ci.walked += 1 + walk_below(aut, exits, i, &[], s, |_, _| false, Words(words), &mut nodes);
            }
            i = exits.end(i);
        }
        for (node, _) in nodes {
            let node = node as usize;
            for j in node..exits.end(node) {
                ci.tokens.extend_from_slice(exits.tokens_at(j));
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
    s0: StateId,
    skip_first: Option<&super::lower::ByteSet>,
    mask: &mut TokenMask,
    uncertain: &mut Vec<(u32, Box<[u8]>)>,
) -> usize {
    let words = mask.words_mut();
    walk_below(
        aut,
        trie,
        0,
        &[],
        s0,
        |i, depth| depth == 1 && skip_first.is_some_and(|k| k.contains(trie.byte(i))),
        Words(words),
        uncertain,
    )
}

/// Most states after one count of characters in a [`SetChain`].
const MAX_SET: usize = 4;

/// Most tokens a [`SetChain`] steps one by one (those whose count may meet a dead end).
const MAX_SET_STEPPED: usize = 4096;

/// The set chain of a state `t` inside a JSON string whose characters do not all lead to
/// one next state, so that [`Chain`] does not apply, but to a few: a pattern intersected
/// with length bounds (`[0-9a-f]+` searched in a 12-character string: a hexadecimal digit
/// and any other letter lead to "seen one" and "not yet", each with a count). `S₀ = {t}`
/// and `Sₖ₊₁` is the set of live states that a character of `C` (the JSON string class)
/// leads to from a state of `Sₖ`, each of at most [`MAX_SET`] states, none depending on
/// context, at most [`MAX_CHAIN`] of them; a character that kills a path from `Sₖ` marks
/// count `k + 1` *partial*.
/// A token made of `k` characters of `C` ends in `Sₖ` or dies: below the first partial
/// count it is allowed whatever its characters (the counted class index lists the tokens by
/// count), from there it is stepped from `t` (at most [`MAX_SET_STEPPED`] of them), and past
/// a count where the sets end empty none is allowed. The tokens that leave `C` are walked
/// from `t` on the main trie, passing over the subtrees whose tokens are all in `C`.
#[derive(Debug)]
pub(crate) struct SetChain {
    class: std::sync::Arc<super::index::ClassIndex>,
    /// Counts up to it have live states (`S₀..=S_last`).
    last: usize,
    /// Counts above `last` are rejected (the sets ended empty); else they are as `last`
    /// (the sets closed into a loop, or no token has more characters).
    dead_after: bool,
    /// The first count at which some path dies, if any.
    partial: Option<usize>,
}

impl SetChain {
    /// The set chain of `t` (see [`SetChain`]); `None` when `t` does not take every
    /// character of the class, a set grows past [`MAX_SET`], a state depends on context,
    /// too many tokens would be stepped one by one, or the class's counts are not built yet
    /// (they are started when the index is made).
    pub(crate) fn for_state(aut: &mut Stepper<'_>, index: &super::index::TokenIndex, t: StateId) -> Option<SetChain> {
        let class = super::index::json_string_class();
        let first = aut.info(t).first;
        if (0..0x80u8).any(|b| class.contains(b) && !first.contains(b)) {
            return None;
        }
        let ix = index.class_index(class, Leads::ALL)?;
        let counted = index.class_counted(&ix, false)?;
        let mut level: Vec<StateId> = vec![t];
        let mut last = 0;
        let mut partial = None;
        let mut dead_after = false;
        loop {
            if last >= ix.max_prefix {
                break;
            }
            let mut next: Vec<StateId> = Vec::new();
            let mut dies = false;
            for &x in &level {
                aut.step_all(x);
                let e = aut.entry(x);
                let mut targets: Vec<StateId> = Vec::new();
                for b in (0..0x80u8).filter(|&b| class.contains(b)) {
                    let y = aut.step_from(e, x, b);
                    if !targets.contains(&y) {
                        targets.push(y);
                    }
                }
                // Every multi-byte character must go where one of the ASCII ones goes.
                if !targets.iter().any(|&y| utf8_to(aut, x, y) == Leads::ALL) {
                    return None;
                }
                for y in targets {
                    if y == DEAD {
                        dies = true;
                    } else if y == OVERFLOW || aut.is_ctx(y) {
                        return None;
                    } else if !next.contains(&y) {
                        next.push(y);
                    }
                }
            }
            if dies && partial.is_none() {
                partial = Some(last + 1);
            }
            if next.is_empty() {
                dead_after = true;
                break;
            }
            if next.len() > MAX_SET {
                return None;
            }
            // Both sorted (`level` is `[t]` or an earlier `next`): a set that repeats loops.
            next.sort_unstable();
            if next == level {
                break;
            }
            level = next;
            last += 1;
            if last >= MAX_CHAIN {
                // As long a chain as [`Chain`] refuses: each level is built whole.
                return None;
            }
        }
        let ch = SetChain { class: ix.clone(), last, dead_after, partial };
        let stepped = counted.all_in_by_count.iter().filter(|&&(n, _)| ch.stepped(n as usize)).count();
        (stepped <= MAX_SET_STEPPED).then_some(ch)
    }

    /// Is every token of `n` characters of the class rejected (the sets ended empty)?
    fn rejected(&self, n: usize) -> bool {
        self.dead_after && n > self.last
    }

    /// Is a token of `n` characters of the class stepped one by one?
    fn stepped(&self, n: usize) -> bool {
        self.partial.is_some_and(|p| n >= p) && !self.rejected(n)
    }

    /// Is every token of `n` characters of the class allowed?
    fn sure(&self, n: usize) -> bool {
        self.partial.is_none_or(|p| n < p) && !self.rejected(n)
    }
}

impl ContextIndependentMask {
    /// The context-independent mask of `t` through its set chain (see [`SetChain`]).
    pub(crate) fn build_set_chain(aut: &mut Stepper<'_>, index: &super::index::TokenIndex, t: StateId, ch: &SetChain) -> ContextIndependentMask {
        let mut ci = ContextIndependentMask::empty(index.vocab().len());
        let counted = index.class_counted(&ch.class, false).expect("checked by SetChain::for_state");
        ci.mask.words_mut().copy_from_slice(ch.class.all_in.words());
        for &(n, tok) in &counted.all_in_by_count {
            let n = n as usize;
            if ch.sure(n) {
                continue;
            }
            ci.mask.remove(tok);
            if ch.stepped(n) {
                let x = aut.steps(t, index.vocab().token_bytes(tok));
                ci.walked += 1;
                if x != DEAD && x != OVERFLOW {
                    ci.mask.insert(tok);
                }
            }
        }
        // The tokens that leave the class: the main trie from `t`, passing over the
        // subtrees whose tokens are all in it (decided above by count).
        let mut p = ch.class.pruner(index);
        let words = ci.mask.words_mut();
        ci.walked += walk_below(aut, index.trie(), 0, &[], t, |i, d| p.skip(i, d), Words(words), &mut ci.nodes);
        ci
    }
}

/// The context-independent part of one subtree of the trie below the root (the tokens that
/// start with one byte), walked from the state after that byte. A first-byte dispatch
/// keeps these per state, since the state after a byte changes less often than the state
/// before it (an object's key: one unseen key fewer changes the subtree of its first letter).
#[derive(Debug)]
pub(crate) struct ContextIndependentSubtree {
    /// Tokens allowed whatever the context: a list, or a mask when that is smaller.
    tokens: Box<[TokenId]>,
    mask: Option<TokenMask>,
    /// Subtrees whose fate depends on context: (node, bytes from the root).
    pub nodes: Vec<(u32, Box<[u8]>)>,
    /// Trie nodes walked to build it.
    pub walked: usize,
}

impl ContextIndependentSubtree {
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
    pub(crate) fn build(aut: &mut Stepper<'_>, trie: &TokenTrie, vocab_len: usize, node: usize, x: StateId) -> ContextIndependentSubtree {
        let b = trie.byte(node);
        let mut nodes = Vec::new();
        if aut.is_ctx(x) {
            nodes.push((node as u32, Box::from([b])));
            return ContextIndependentSubtree { tokens: Box::default(), mask: None, nodes, walked: 1 };
        }
        let mut tokens = trie.tokens_at(node).to_vec();
        let walked = 1 + walk_below(aut, trie, node, &[b], x, |_, _| false, |t, _| tokens.push(t), &mut nodes);
        // A list of more than a sixteenth of the vocabulary is longer than its mask's words.
        if tokens.len() > vocab_len / 16 {
            let mut m = TokenMask::new(vocab_len);
            for &t in &tokens {
                m.insert(t);
            }
            return ContextIndependentSubtree { tokens: Box::default(), mask: Some(m), nodes, walked };
        }
        ContextIndependentSubtree { tokens: tokens.into_boxed_slice(), mask: None, nodes, walked }
    }
}

/// Where [`walk_below`] puts the tokens it allows: a closure given each token and its
/// depth, or a mask's words ([`Words`]).
trait Sink {
    fn token(&mut self, t: TokenId, depth: usize);

    /// The tokens of one live node, `all[first..last]` (nearly always none or one).
    #[inline(always)]
    fn node(&mut self, all: &[TokenId], first: usize, last: usize, depth: usize) {
        for &t in &all[first..last] {
            self.token(t, depth);
        }
    }
}

impl<F: FnMut(TokenId, usize)> Sink for F {
    #[inline(always)]
    fn token(&mut self, t: TokenId, depth: usize) {
        self(t, depth)
    }
}

/// A mask's words as a [`Sink`]. A node holds a token about half the time, in no order a
/// branch predictor can learn, so a node of at most one token sets its bit without a
/// branch (an empty node ORs in nothing).
struct Words<'a>(&'a mut [u64]);

impl Sink for Words<'_> {
    #[inline(always)]
    fn token(&mut self, t: TokenId, _: usize) {
        self.0[t.index() / 64] |= 1 << (t.index() % 64);
    }

    #[inline(always)]
    fn node(&mut self, all: &[TokenId], first: usize, last: usize, depth: usize) {
        if last - first <= 1 {
            let t = all[first.min(all.len() - 1)].index();
            let bit = ((last != first) as u64) << (t % 64);
            self.0[t / 64] |= bit;
        } else {
            for &t in &all[first..last] {
                self.token(t, depth);
            }
        }
    }
}

/// The one trie walk every mask technique uses: depth-first over the subtree of `root`
/// (reached by `prefix`, in state `s0`), one automaton step per node whose prefix is still
/// viable. A node for which `skip(node, depth)` holds is passed over with its subtree (not
/// stepped, not counted); a node whose state popped into `CTX` is recorded in `uncertain`
/// with its path, and its subtree skipped; every token of every other live node goes to
/// `allow(token, depth)`. Depths count from `root` (its children are at depth 1; a node's
/// depth below the trie's root is its bytes' length). Returns the nodes stepped.
///
/// Cost: O(nodes stepped); `skip` and `allow` are inlined (generic), so a walk that skips
/// nothing pays nothing for them. The states along the current path sit in an array indexed
/// by depth (the trie's labels carry each node's depth), so a node's parent state is one
/// load and leaving a subtree costs nothing; a node reads its [`Node`](formwork_vocab::Node)
/// (label, subtree end and token range in one load), its parent's transition and, when
/// live, its tokens. The table of the state it reaches comes from the stepper's memo (a
/// direct-mapped array by state id, one load and a check that predicts well: a walk meets
/// few states); the path keeps each state's table, so a step is one load; a node's token
/// bit is set without a branch ([`Words`]). `benches/masks.rs`, "full walk", measures the
/// cost per node, warm. Earlier: 9.3 → 5.4–5.5 ns on SmolLM2's trie and 9.5 → 5.7–5.8 on
/// Llama 3.1's (the path array, the last state per depth). At stop 39, on a slower day
/// for this machine, the memo and the branch-free bit took the string-body case from 8.1
/// to 6.5 ns (SmolLM2) and 8.6 to 6.7 ns (Llama 3.1), and MaskBench's `o10009` (a
/// 12-character string with a pattern: a hexadecimal digit or another letter lead to
/// different states at every depth) from 2.9 to 2.2 ms for Llama 3.1's 260,000 nodes.
/// What is left is the chain of loads from a node to its child (the path entry, the
/// transition, the memo); the memo's load would go if a state's table were found from its
/// id by arithmetic, which needs one contiguous table region, and this crate forbids the
/// unsafe code that would take.
#[allow(clippy::too_many_arguments)]
fn walk_below(
    aut: &mut Stepper<'_>,
    trie: &TokenTrie,
    root: usize,
    prefix: &[u8],
    s0: StateId,
    mut skip: impl FnMut(usize, usize) -> bool,
    mut allow: impl Sink,
    uncertain: &mut Vec<(u32, Box<[u8]>)>,
) -> usize {
    let nodes = trie.nodes();
    let all = trie.all_tokens();
    let base = trie.depth(root);
    let levels = trie.max_depth() + 1 - base;
    // By depth below `root`: the state after the node on the current path at that depth
    // (with its entry and transition table), and that node's byte (the stepper's buffer,
    // reused).
    let mut at = std::mem::take(&mut aut.path);
    at.clear();
    let e0 = aut.entry(s0);
    at.resize(levels, (s0, Stepper::transitions(e0), 0));
    let mut memo = std::mem::take(&mut aut.memo);
    if memo.is_empty() {
        let d = aut.entry(DEAD);
        memo.resize(MEMO, (DEAD, Stepper::transitions(d), d.is_ctx()));
    }
    let mut visited = 0usize;
    let n = trie.end(root);
    let mut i = root + 1;
    while i < n {
        let [label, end, first, last] = nodes[i];
        let depth = (label >> 8) as usize - base;
        if skip(i, depth) {
            i = end as usize;
            continue;
        }
        let (parent, table, _) = at[depth - 1];
        visited += 1;
        let byte = label as u8;
        let s = aut.step_in(table, parent, byte);
        if s == DEAD || s == OVERFLOW {
            i = end as usize;
            continue;
        }
        // The state's table and context flag from the memo, which nearly always has them
        // (a walk meets few states): a check that predicts well, where comparing with the
        // state of the last node at this depth did not (a hexadecimal digit or another
        // letter).
        let m = &mut memo[s.0 as usize % MEMO];
        if m.0 != s {
            let e = aut.entry(s);
            *m = (s, Stepper::transitions(e), e.is_ctx());
        }
        let (table, ctx) = (m.1, m.2);
        if ctx {
            let mut p = prefix.to_vec();
            p.extend(at[1..depth].iter().map(|x| x.2));
            p.push(byte);
            uncertain.push((i as u32, p.into_boxed_slice()));
            i = end as usize;
            continue;
        }
        allow.node(all, first as usize, last as usize, depth);
        at[depth] = (s, table, byte);
        i += 1;
    }
    aut.path = at;
    aut.memo = memo;
    visited
}
