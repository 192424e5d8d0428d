//! The lowered grammar: byte sets, the symbols of alternatives, and [`ByteGrammar`] itself.

use super::{unordered, RepeatPos};
use formwork_vocab::TokenId;
use rustc_hash::FxHashMap;

/// A set of bytes, as a 256-bit bitmap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub(crate) struct ByteSet(pub [u64; 4]);

impl ByteSet {
    /// The set with one byte.
    pub fn single(b: u8) -> Self {
        let mut s = ByteSet::default();
        s.insert(b);
        s
    }
    /// Adds `b`.
    #[inline]
    pub fn insert(&mut self, b: u8) {
        self.0[(b >> 6) as usize] |= 1 << (b & 63);
    }
    /// Removes `b`.
    pub fn remove(&mut self, b: u8) {
        self.0[(b >> 6) as usize] &= !(1 << (b & 63));
    }
    /// Adds `lo..=hi` (nothing when `lo > hi`), a word at a time.
    pub fn insert_range(&mut self, lo: u8, hi: u8) {
        if lo > hi {
            return;
        }
        let (first, last) = ((lo >> 6) as usize, (hi >> 6) as usize);
        for w in first..=last {
            let from = if w == first { lo & 63 } else { 0 };
            let to = if w == last { hi & 63 } else { 63 };
            self.0[w] |= (u64::MAX >> (63 - to)) & (u64::MAX << from);
        }
    }
    /// Is `b` in the set?
    #[inline]
    pub fn contains(&self, b: u8) -> bool {
        (self.0[(b >> 6) as usize] >> (b & 63)) & 1 == 1
    }
    /// `self ∪ o`.
    #[inline]
    pub fn union(&mut self, o: &ByteSet) {
        for i in 0..4 {
            self.0[i] |= o.0[i];
        }
    }
    /// Number of bytes of `lo..=hi` in the set (0 when `lo > hi`), a word at a time.
    #[inline]
    pub fn count_range(&self, lo: u8, hi: u8) -> u32 {
        let mut r = ByteSet::default();
        r.insert_range(lo, hi);
        (0..4).map(|w| (self.0[w] & r.0[w]).count_ones()).sum()
    }
    /// Number of bytes in the set.
    pub fn len(&self) -> u32 {
        self.0.iter().map(|w| w.count_ones()).sum()
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.0 == [0; 4]
    }
    /// The single byte in the set, if it has exactly one.
    pub fn only(&self) -> Option<u8> {
        if self.len() != 1 {
            return None;
        }
        (0..=255u8).find(|&b| self.contains(b))
    }
}

/// One symbol of an alternative: a byte set, a rule, a special token, or the end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Symbol {
    /// One byte from `ByteGrammar::sets[i]`.
    Bytes(u32),
    /// A reference to rule `i`.
    Rule(u32),
    /// A special token, by id (`u32::MAX` when compiled without a vocabulary: never matches).
    Token(TokenId),
    /// Any one whole token but this one, except the EOS tokens and unused slots
    /// ([`Expr::NotToken`](crate::Expr::NotToken)). Without a vocabulary it lowers to a `Token(u32::MAX)` instead.
    NotToken(TokenId),
    /// End of an alternative.
    End,
}

/// A lowered grammar. Positions index `elems`; each alternative is a run of elements ended
/// by [`Symbol::End`].
#[derive(Clone, Debug)]
pub(crate) struct ByteGrammar {
    /// All alternatives, back to back, each ended by `End`.
    pub elems: Vec<Symbol>,
    /// Byte sets, indexed by `Symbol::Bytes`.
    pub sets: Vec<ByteSet>,
    /// Indexed by rule: the start position of each alternative.
    pub alts: Vec<Vec<u32>>,
    /// Indexed by rule: its name (helpers: `parent/what`).
    pub names: RuleNames,
    /// The start rule.
    pub root: u32,
    /// Frame positions inside bounded repetitions, with their loop equivalents (see
    /// [`RepeatPos`]); only positions with a budget of at least `repeats::MIN_BUDGET`.
    pub repeats: FxHashMap<u32, RepeatPos>,
    /// Unordered groups, whose rules are built on first use (module `unordered`).
    pub lazy: unordered::Lazy,
    /// Rules without alternatives yet that the checks take as matching something, by
    /// whether they match the empty string: rules built on first use and, in a part
    /// lowered on its own, the live grammar's rules it refers to (module `deferred`).
    pub opaque: FxHashMap<u32, bool>,
    /// By rule: its index in `dispatches` when it is a dispatch rule, else `NO_DISPATCH`
    /// (rules added after lowering are past the end: none is).
    pub dispatch_of: Vec<u32>,
    /// The dispatch rules' tables (see [`Dispatch`]).
    pub dispatches: Vec<Dispatch>,
    /// What the lowering itself made, as `Limits::max_rules` and `max_elements` bound it:
    /// (rules, elements). The rules added after it (dispatch tables, unordered families
    /// built as inputs reach them, loop rules) are not counted, so a deferred part appended
    /// later is bounded as the whole grammar lowered at once would have been, however many
    /// family rules the inputs so far have built.
    pub lowered: (usize, usize),
}

/// `ByteGrammar::dispatch_of` for a rule that is not a dispatch rule.
pub(crate) const NO_DISPATCH: u32 = u32::MAX;

/// A rule whose alternatives are not empty and start on pairwise disjoint byte sets: a
/// Unicode class's UTF-8 sequences (`[\x20-\x7F] | [\xC2-\xDF][\x80-\xBF] | …`, eight of
/// them for "any character"). The automaton keeps a reference to it as one stack, as if it
/// were a terminal, instead of one stack per alternative: every byte picks at most one
/// alternative, so the rule is entered only when a byte is taken. A string body's state
/// then holds three stacks (character, escape, closing quote) instead of ten, and every
/// closure and step through it is that much cheaper.
#[derive(Clone, Debug)]
pub(crate) struct Dispatch {
    /// The bytes some alternative starts with.
    pub first: ByteSet,
    /// By byte: the start of the alternative that begins with it, `NO_DISPATCH` for none.
    pub alt_at: Box<[u32; 256]>,
    /// Each alternative's start and first byte set.
    pub alts: Box<[(u32, ByteSet)]>,
}

impl ByteGrammar {
    /// Makes dispatch rules of `rules` where they qualify (see [`Dispatch`]).
    pub fn add_dispatches(&mut self, rules: &[u32]) {
        self.dispatch_of = vec![NO_DISPATCH; self.alts.len()];
        'rules: for &r in rules {
            let mut first = ByteSet::default();
            let mut alt_at = Box::new([NO_DISPATCH; 256]);
            let mut alts = Vec::new();
            for &a in &self.alts[r as usize] {
                let Symbol::Bytes(k) = self.elems[a as usize] else { continue 'rules };
                let set = self.sets[k as usize];
                for b in 0..=255u8 {
                    if set.contains(b) {
                        if alt_at[b as usize] != NO_DISPATCH {
                            continue 'rules;
                        }
                        alt_at[b as usize] = a;
                    }
                }
                first.union(&set);
                alts.push((a, set));
            }
            self.dispatch_of[r as usize] = self.dispatches.len() as u32;
            self.dispatches.push(Dispatch { first, alt_at, alts: alts.into_boxed_slice() });
        }
    }

    /// The start of the alternative of dispatch rule `r` that takes byte `b`; `None` when
    /// `r` is not a dispatch rule or no alternative takes `b`.
    #[inline]
    pub fn dispatch_alt(&self, r: u32, b: u8) -> Option<u32> {
        self.dispatch(r).map(|d| d.alt_at[b as usize]).filter(|&a| a != NO_DISPATCH)
    }

    /// The dispatch table of rule `r`, if it is a dispatch rule.
    #[inline]
    pub fn dispatch(&self, r: u32) -> Option<&Dispatch> {
        match self.dispatch_of.get(r as usize) {
            Some(&i) if i != NO_DISPATCH => Some(&self.dispatches[i as usize]),
            _ => None,
        }
    }
}

impl ByteGrammar {
    /// Heap bytes used.
    pub fn memory_usage(&self) -> usize {
        self.elems.capacity() * std::mem::size_of::<Symbol>()
            + self.sets.capacity() * 32
            + self
                .alts
                .iter()
                .map(|a| a.capacity() * 4 + 24)
                .sum::<usize>()
            + self.names.memory_usage()
            + self.repeats.capacity() * 16
            + self.lazy.memory_usage()
            + self.dispatch_of.capacity() * 4
            + self.dispatches.iter().map(|d| 1024 + d.alts.len() * 36 + 48).sum::<usize>()
    }
}

/// Rule names: a user rule's own, a helper rule's made on demand from the rule it was made
/// for (`parent/what` and its number). Helpers are most rules (one per bounded-repetition
/// step, alternative, class), and their names are only read in errors.
#[derive(Clone, Debug, Default)]
pub(crate) struct RuleNames {
    user: Vec<String>,
    /// Rules from `user.len()` on: (parent rule, what the helper is); `(u32::MAX, "")` for a
    /// rule named in `named`.
    helpers: Vec<(u32, &'static str)>,
    /// Names of user rules added after lowering (module `deferred`), by rule.
    named: FxHashMap<u32, Box<str>>,
}

impl RuleNames {
    /// The names of the user rules `0..user.len()`.
    pub fn new(user: Vec<String>) -> RuleNames {
        RuleNames { user, helpers: Vec::new(), named: FxHashMap::default() }
    }

    /// Names the next rule: a user rule added after lowering.
    pub fn push_named(&mut self, name: &str) {
        self.named.insert((self.user.len() + self.helpers.len()) as u32, name.into());
        self.helpers.push((u32::MAX, ""));
    }

    /// Rule `r` as a helper: (parent rule, what it is); `None` for a user rule.
    pub fn helper(&self, r: u32) -> Option<(u32, &'static str)> {
        let h = (r as usize).checked_sub(self.user.len())?;
        Some(self.helpers[h]).filter(|&(p, _)| p != u32::MAX)
    }

    /// Names the next rule: a helper made for `parent`.
    pub fn push_helper(&mut self, parent: u32, what: &'static str) {
        self.helpers.push((parent, what));
    }

    /// The name of rule `r`.
    pub fn get(&self, r: u32) -> String {
        match (r as usize).checked_sub(self.user.len()) {
            None => self.user[r as usize].clone(),
            Some(_) if self.named.contains_key(&r) => self.named[&r].to_string(),
            Some(h) => {
                let (parent, what) = self.helpers[h];
                format!("{}/{what}{r}", self.get(parent))
            }
        }
    }

    /// Heap bytes used.
    pub fn memory_usage(&self) -> usize {
        self.user.iter().map(|n| n.capacity() + 24).sum::<usize>()
            + self.helpers.capacity() * 24
            + self.named.values().map(|n| n.len() + 24).sum::<usize>()
    }
}

#[cfg(test)]
mod byte_set_tests {
    use super::ByteSet;

    #[test]
    fn insert_range_sets_exactly_the_range() {
        for (lo, hi) in [(0u8, 0u8), (0, 255), (3, 70), (63, 64), (64, 127), (100, 200), (200, 100), (255, 255), (60, 190)] {
            let mut a = ByteSet::default();
            a.insert_range(lo, hi);
            let mut b = ByteSet::default();
            for x in lo..=hi {
                b.insert(x);
            }
            assert_eq!(a, b, "{lo}..={hi}");
        }
    }

    #[test]
    fn count_range_counts_the_bytes_of_the_range_in_the_set() {
        let mut set = ByteSet::default();
        for b in [0u8, 5, 63, 64, 65, 127, 128, 0x80, 0xA0, 0xBF, 0xC0, 255] {
            set.insert(b);
        }
        for (lo, hi) in [(0u8, 255u8), (0, 0), (1, 4), (5, 64), (63, 64), (0x80, 0xBF), (0x90, 0xBF), (0xC0, 0xFF), (200, 100)] {
            let brute = if lo > hi { 0 } else { (lo..=hi).filter(|&x| set.contains(x)).count() as u32 };
            assert_eq!(set.count_range(lo, hi), brute, "{lo}..={hi}");
        }
    }
}
