//! [`GrammarCache`]: compiled grammars shared across requests, keyed by grammar and
//! vocabulary, so that every request with the same grammar (the built-in JSON grammar above
//! all) reuses one [`CompiledGrammar`] and its warm mask cache.

use super::{CompileError, CompiledGrammar, TokenIndex};
use crate::{Grammar, Limits};
use formwork_vocab::Vocabulary;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A bounded cache of compiled grammars, keyed by the grammar's
/// [`fingerprint`](Grammar::fingerprint) (checked by equality), the vocabulary (by `Arc`
/// identity) and the limits. When full, the least recently used entry is dropped; a grammar
/// that has built most of the parser states its limits allow
/// ([`CompiledGrammar::is_nearly_full`]) is compiled afresh on its next use. Cheap to share:
/// put one in the server state.
#[derive(Debug)]
pub struct GrammarCache {
    capacity: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    tick: u64,
    map: HashMap<(u64, usize), Vec<Entry>>,
    len: usize,
}

#[derive(Debug)]
struct Entry {
    grammar: Identity,
    limits: Limits,
    compiled: Arc<CompiledGrammar>,
    used: u64,
}

/// What a cached grammar is, checked by equality on a hit.
#[derive(Debug, PartialEq)]
enum Identity {
    /// The grammar itself.
    Grammar(Grammar),
    /// A key that says everything the grammar depends on (see
    /// [`GrammarCache::get_or_compile_keyed`]).
    Key(String),
}

impl GrammarCache {
    /// A cache holding at most `capacity` compiled grammars.
    pub fn new(capacity: usize) -> Self {
        GrammarCache {
            capacity: capacity.max(1),
            inner: Mutex::new(Inner::default()),
        }
    }

    /// The compiled form of `g` for `vocab`, compiling it on a miss.
    pub fn get_or_compile(
        &self,
        g: &Grammar,
        vocab: &Arc<Vocabulary>,
        limits: &Limits,
    ) -> Result<Arc<CompiledGrammar>, CompileError> {
        let id = Identity::Grammar(g.clone());
        self.get_or_insert(id, g.fingerprint(), vocab, limits, |index| CompiledGrammar::with_index(g, index, limits))
    }

    /// The compiled grammar stored under `key` for `vocab`, made by `compile` (given the
    /// vocabulary's token index) on a miss: for grammars whose identity is not their IR, as
    /// a lazily compiled schema ([`CompiledGrammar::lazy`]), keyed by the schema's text and
    /// options. `key` must say everything the grammar depends on.
    pub fn get_or_compile_keyed<E>(
        &self,
        key: &str,
        vocab: &Arc<Vocabulary>,
        limits: &Limits,
        compile: impl FnOnce(Arc<TokenIndex>) -> Result<Arc<CompiledGrammar>, E>,
    ) -> Result<Arc<CompiledGrammar>, E> {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        std::hash::Hash::hash(key, &mut h);
        self.get_or_insert(Identity::Key(key.to_string()), std::hash::Hasher::finish(&h), vocab, limits, compile)
    }

    fn get_or_insert<E>(
        &self,
        id: Identity,
        hash: u64,
        vocab: &Arc<Vocabulary>,
        limits: &Limits,
        compile: impl FnOnce(Arc<TokenIndex>) -> Result<Arc<CompiledGrammar>, E>,
    ) -> Result<Arc<CompiledGrammar>, E> {
        let key = (hash, Arc::as_ptr(vocab) as usize);
        {
            let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            inner.tick += 1;
            let tick = inner.tick;
            let mut full = false;
            if let Some(v) = inner.map.get_mut(&key) {
                if let Some(i) = v.iter().position(|e| {
                    e.grammar == id && e.limits == *limits && Arc::ptr_eq(e.compiled.vocab(), vocab)
                }) {
                    if !v[i].compiled.is_nearly_full() {
                        v[i].used = tick;
                        return Ok(v[i].compiled.clone());
                    }
                    // Nearly out of parser states: dropped here, compiled afresh below.
                    v.swap_remove(i);
                    full = true;
                }
            }
            if full {
                inner.len -= 1;
                if inner.map.get(&key).is_some_and(Vec::is_empty) {
                    inner.map.remove(&key);
                }
            }
        }
        // Compile outside the lock.
        let compiled = compile(TokenIndex::for_vocab(vocab))?;
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.tick += 1;
        let used = inner.tick;
        if inner.len >= self.capacity {
            let oldest = inner
                .map
                .iter()
                .flat_map(|(k, v)| v.iter().enumerate().map(move |(i, e)| (e.used, *k, i)))
                .min();
            if let Some((_, k, i)) = oldest {
                let v = inner.map.get_mut(&k).unwrap();
                v.swap_remove(i);
                if v.is_empty() {
                    inner.map.remove(&k);
                }
                inner.len -= 1;
            }
        }
        inner.map.entry(key).or_default().push(Entry {
            grammar: id,
            limits: limits.clone(),
            compiled: compiled.clone(),
            used,
        });
        inner.len += 1;
        Ok(compiled)
    }

    /// Number of compiled grammars held.
    pub fn len(&self) -> usize {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Expr, GrammarBuilder};

    fn g(lit: &str) -> Grammar {
        let mut b = GrammarBuilder::new();
        b.define("root", Expr::lit(lit));
        b.build("root").unwrap()
    }

    #[test]
    fn shares_and_evicts_least_recently_used() {
        let v = Arc::new(Vocabulary::from_strings(&["a", "b"], &["</s>"]));
        let c = GrammarCache::new(2);
        let l = Limits::default();
        let a1 = c.get_or_compile(&g("a"), &v, &l).unwrap();
        let a2 = c.get_or_compile(&g("a"), &v, &l).unwrap();
        assert!(Arc::ptr_eq(&a1, &a2));
        c.get_or_compile(&g("b"), &v, &l).unwrap();
        c.get_or_compile(&g("a"), &v, &l).unwrap(); // `a` is now the most recent
        c.get_or_compile(&g("ab"), &v, &l).unwrap(); // evicts `b`
        assert_eq!(c.len(), 2);
        assert!(Arc::ptr_eq(
            &a1,
            &c.get_or_compile(&g("a"), &v, &l).unwrap()
        ));
        let other = Arc::new(Vocabulary::from_strings(&["a", "b"], &["</s>"]));
        assert!(!Arc::ptr_eq(
            &a1,
            &c.get_or_compile(&g("a"), &other, &l).unwrap()
        ));
    }

    #[test]
    fn keyed_entries_are_compiled_once_per_key_and_never_match_a_grammar() {
        let v = Arc::new(Vocabulary::from_strings(&["a", "b"], &["</s>"]));
        let c = GrammarCache::new(4);
        let l = Limits::default();
        let mut made = 0;
        let mut get = |key: &str, lit: &str| {
            c.get_or_compile_keyed(key, &v, &l, |index| {
                made += 1;
                CompiledGrammar::with_index(&g(lit), index, &l)
            })
            .unwrap()
        };
        let k1 = get("k1", "a");
        assert!(Arc::ptr_eq(&k1, &get("k1", "b")), "a hit does not compile");
        assert!(!Arc::ptr_eq(&k1, &get("k2", "a")));
        assert_eq!(made, 2);
        assert!(!Arc::ptr_eq(&k1, &c.get_or_compile(&g("a"), &v, &l).unwrap()));
        assert_eq!(c.len(), 3);
    }

    #[test]
    fn a_grammar_nearly_out_of_states_is_compiled_afresh() {
        let v = Arc::new(Vocabulary::from_strings(&["a"], &["</s>"]));
        let mut b = GrammarBuilder::new();
        b.define("root", Expr::repeat(Expr::lit("a"), 0, Some(500)));
        let gr = b.build("root").unwrap();
        let l = Limits { max_states: 50, ..Limits::default() };
        let c = GrammarCache::new(4);
        let first = c.get_or_compile(&gr, &v, &l).unwrap();
        assert!(Arc::ptr_eq(&first, &c.get_or_compile(&gr, &v, &l).unwrap()));
        // Walk it until 80 % of its states are built.
        let mut m = first.matcher();
        while !first.is_nearly_full() {
            m.commit(formwork_vocab::TokenId(0)).unwrap();
        }
        let fresh = c.get_or_compile(&gr, &v, &l).unwrap();
        assert!(!Arc::ptr_eq(&first, &fresh));
        assert!(!fresh.is_nearly_full());
        assert_eq!(c.len(), 1);
        // The request already on the old grammar goes on with the room that is left.
        assert!(m.commit(formwork_vocab::TokenId(0)).is_ok());
    }
}
