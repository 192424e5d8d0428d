//! [`Matcher`]: the per-request side of a [`CompiledGrammar`] — a history of parser
//! states (commit pushes, rollback truncates), masks through the grammar's shared caches,
//! forced bytes and tokens, and counters ([`MatchStats`]).

use super::automaton::{StateId, DEAD, ENDED, OVERFLOW};
use super::compiled::{takes_negated, CompiledGrammar, MAX_FORCED};
use super::error::MatchError;
use formwork_vocab::{TokenId, TokenMask};
use std::sync::Arc;

mod completion;

/// Counters a matcher keeps (serializable, for logs and benchmarks).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct MatchStats {
    /// Tokens (and byte strings) committed.
    pub commits: u64,
    /// Masks computed.
    pub masks: u64,
    /// Masks served from the shared cache (including masks another thread was computing,
    /// waited for).
    pub mask_cache_hits: u64,
    /// Trie nodes walked on cache misses.
    pub trie_nodes_walked: u64,
    /// Parser states the shared automaton knows (all requests together).
    pub states: usize,
}

/// Per-request matching state: a history of parser states (one per committed step), so
/// rollback is a truncation. Small; cheap to create with [`CompiledGrammar::matcher`], and
/// cheap to clone (a fork: the copy shares the compiled grammar and goes on independently).
#[derive(Clone, Debug)]
pub struct Matcher {
    g: Arc<CompiledGrammar>,
    /// `states[0]` is the start; one more per commit.
    pub(super) states: Vec<StateId>,
    stats: MatchStats,
}

impl Matcher {
    /// A matcher of `g` at state `initial`.
    pub(super) fn new(g: Arc<CompiledGrammar>, initial: StateId) -> Matcher {
        Matcher { g, states: vec![initial], stats: MatchStats::default() }
    }

    pub(super) fn cur(&self) -> StateId {
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
        // A hit reads the shared mask in place: no lock, no reference count.
        if let Some(m) = self.g.masks.masks.get(s) {
            mask.words_mut().copy_from_slice(m.words());
            self.stats.mask_cache_hits += 1;
        } else {
            let (m, hit, walked) = self.g.mask_miss(s);
            self.stats.mask_cache_hits += hit as u64;
            self.stats.trie_nodes_walked += walked as u64;
            mask.words_mut().copy_from_slice(m.words());
        }
        self.stats.states = self.g.aut.n_states();
    }

    /// Is `t` allowed now? Cheaper than a full mask: one step per byte of the token.
    pub fn is_allowed(&mut self, t: TokenId) -> bool {
        let s = self.cur();
        if s == ENDED || t.index() >= self.g.index.vocab().len() {
            return false;
        }
        if let Some(m) = self.g.masks.masks.get(s) {
            return m.contains(t);
        }
        let vocab = self.g.index.vocab();
        let aut = &self.g.aut;
        if vocab.is_text(t) {
            let x = aut.steps(s, vocab.token_bytes(t));
            if x != DEAD && x != OVERFLOW {
                return true;
            }
        }
        let info = aut.info(s);
        info.tokens.contains(&t)
            || (takes_negated(vocab, t) && info.not_tokens.iter().any(|&n| n != t))
            || (info.accepting && vocab.eos_tokens().contains(&t))
    }

    /// Advances past token `t`. On error the state is unchanged. Committing an EOS token
    /// where the grammar accepts ends the matcher ([`is_finished`](Self::is_finished)).
    pub fn commit(&mut self, t: TokenId) -> Result<(), MatchError> {
        let s = self.cur();
        // Borrowed, not cloned: a clone would write the vocabulary's shared reference count
        // at every commit, and threads committing at once would fight over its cache line.
        let vocab = self.g.index.vocab();
        if t.index() >= vocab.len() {
            return Err(MatchError::TokenOutOfRange {
                token: t,
                len: vocab.len(),
            });
        }
        if s == ENDED {
            return Err(MatchError::Ended);
        }
        let aut = &self.g.aut;
        let mut next = self.g.after_token(s, t);
        if next == DEAD && aut.info(s).accepting && vocab.eos_tokens().contains(&t) {
            next = ENDED;
        }
        let capped = aut.states_capped();
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
        let aut = &self.g.aut;
        let mut x = s;
        for (i, &b) in bytes.iter().enumerate() {
            x = aut.step(x, b);
            if x == DEAD {
                return Err(MatchError::BytesRejected {
                    offset: i,
                    len: bytes.len(),
                });
            }
            if x == OVERFLOW {
                return Err(self.overflow(aut.states_capped()));
            }
        }
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
        s == ENDED || self.g.aut.info(s).accepting
    }

    /// Was an EOS token committed (where the grammar accepted)? Nothing can follow then;
    /// [`rollback`](Self::rollback) of that step undoes it.
    pub fn is_ended(&self) -> bool {
        self.cur() == ENDED
    }

    /// Accepting, and nothing can follow (or EOS was committed).
    pub fn is_finished(&self) -> bool {
        let s = self.cur();
        if s == ENDED {
            return true;
        }
        let i = self.g.aut.info(s);
        i.accepting && i.first.is_empty() && i.tokens.is_empty() && i.not_tokens.is_empty()
    }

    /// The bytes every continuation must start with (empty when there is a choice, when the
    /// input may end here, or when a token reference may come next). At most 4 KiB.
    pub fn forced_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut s = self.cur();
        if s == ENDED {
            return out;
        }
        let aut = &self.g.aut;
        while out.len() < MAX_FORCED {
            let i = aut.info(s);
            if i.accepting || !i.tokens.is_empty() || !i.not_tokens.is_empty() {
                break;
            }
            let Some(b) = i.first.only() else { break };
            let n = aut.step(s, b);
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

    /// The error for a step that came out [`OVERFLOW`] ([`MatchError::overflow`]).
    fn overflow(&self, capped: bool) -> MatchError {
        MatchError::overflow(&self.g.limits, capped)
    }

    /// Counters for this matcher.
    pub fn stats(&self) -> MatchStats {
        self.stats.clone()
    }

    /// For benchmarks: one plain trie walk from the current state into `mask` (text tokens
    /// only), bypassing every cache and shortcut; returns the trie nodes stepped. What a
    /// full walk costs per node is what this measures (`benches/masks.rs`, "full walk").
    #[doc(hidden)]
    pub fn full_walk(&self, mask: &mut TokenMask) -> usize {
        let n = self.g.index.vocab().len();
        if mask.len() != n {
            *mask = TokenMask::new(n);
        }
        mask.clear();
        let mut st = self.g.aut.stepper();
        super::mask::walk_from(&mut st, self.g.index.trie(), 0, self.cur(), mask)
    }
}

impl CompiledGrammar {
    /// A fresh matcher at the start of the grammar.
    pub fn matcher(self: &Arc<Self>) -> Matcher {
        Matcher::new(self.clone(), self.initial)
    }
}
