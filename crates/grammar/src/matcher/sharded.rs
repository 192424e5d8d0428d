//! [`ShardedMap`]: the automaton builder's interning and memo maps, which only grow, without
//! the one large rehash that made single masks slow.
//!
//! A hash map doubles when it fills, and rehashes every entry into the new table inside the
//! insert that crossed the line. The builder's maps (stack nodes, states, closures by seed
//! set) reach hundreds of thousands of entries on a large schema, and their keys are boxed
//! slices, so a plain map's rehash also hashed every key again, one heap read each: in
//! `Github_ultra---o46322` (a 201-member object) one such rehash was a third of a 2 ms mask
//! that walked 261 trie nodes. Here the map is [`SHARDS`] tables chosen by bits of the key's
//! hash, and each entry keeps its hash: a table grows alone (a rehash moves a sixteenth of
//! the entries) and reads no key while it does. The total work of growing is the same; no
//! single insert pays for the whole map.
//!
//! The hash is FxHash, as the plain maps had (keys here are ids the builder made, never
//! chosen by a client; foldhash cost 1 % more instructions over all masks). The shard is
//! taken from bits 40.. of it, which the tables' own bucket index (low bits) and tag (top 7
//! bits) do not use. Against the plain maps this costs 0.8 % more instructions over all
//! masks of MaskBench (`bench/ENGINE_LOG.md`, stop 55).

use hashbrown::HashTable;
use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash};

/// Tables per map (a power of two).
const SHARDS: usize = 16;

/// An entry and the hash of its key.
struct Entry<K, V> {
    hash: u64,
    key: K,
    value: V,
}

/// A hash map split into [`SHARDS`] tables whose entries keep their hashes (see the module
/// docs). Only what the builder needs: lookups, inserts, a length and the keys.
pub(crate) struct ShardedMap<K, V> {
    shards: Box<[HashTable<Entry<K, V>>; SHARDS]>,
    len: usize,
}

impl<K, V> Default for ShardedMap<K, V> {
    fn default() -> Self {
        ShardedMap { shards: Box::new(std::array::from_fn(|_| HashTable::new())), len: 0 }
    }
}

impl<K, V> std::fmt::Debug for ShardedMap<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardedMap").field("len", &self.len).finish_non_exhaustive()
    }
}

#[inline]
fn hash_of<Q: Hash + ?Sized>(q: &Q) -> u64 {
    rustc_hash::FxBuildHasher.hash_one(q)
}

#[inline]
fn shard(hash: u64) -> usize {
    (hash >> 40) as usize & (SHARDS - 1)
}

impl<K: Hash + Eq, V> ShardedMap<K, V> {
    /// The value of `q`.
    #[inline]
    pub(crate) fn get<Q>(&self, q: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let h = hash_of(q);
        self.shards[shard(h)].find(h, |e| e.hash == h && e.key.borrow() == q).map(|e| &e.value)
    }

    /// Is `q` a key?
    #[inline]
    pub(crate) fn contains_key<Q>(&self, q: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.get(q).is_some()
    }

    /// Sets the value of `k` (replacing one that was there).
    pub(crate) fn insert(&mut self, k: K, v: V) {
        let h = hash_of(&k);
        match self.shards[shard(h)].entry(h, |e| e.hash == h && e.key == k, |e| e.hash) {
            hashbrown::hash_table::Entry::Occupied(mut o) => o.get_mut().value = v,
            hashbrown::hash_table::Entry::Vacant(e) => {
                e.insert(Entry { hash: h, key: k, value: v });
                self.len += 1;
            }
        }
    }

    /// The value of `k`, made by `make` and inserted when `k` is not a key yet.
    pub(crate) fn get_or_insert_with(&mut self, k: K, make: impl FnOnce() -> V) -> &V {
        let h = hash_of(&k);
        let table = &mut self.shards[shard(h)];
        match table.entry(h, |e| e.hash == h && e.key == k, |e| e.hash) {
            hashbrown::hash_table::Entry::Occupied(o) => &o.into_mut().value,
            hashbrown::hash_table::Entry::Vacant(v) => {
                self.len += 1;
                &v.insert(Entry { hash: h, key: k, value: make() }).into_mut().value
            }
        }
    }

    /// Entries.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Entries the tables have room for.
    pub(crate) fn capacity(&self) -> usize {
        self.shards.iter().map(HashTable::capacity).sum()
    }

    /// Heap bytes of the tables (not of what keys and values point to).
    pub(crate) fn table_bytes(&self) -> usize {
        self.capacity() * (std::mem::size_of::<Entry<K, V>>() + 1)
    }

    /// The keys, in no order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &K> {
        self.shards.iter().flat_map(|t| t.iter().map(|e| &e.key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaves_as_a_map_across_growth() {
        let mut m: ShardedMap<Box<[u32]>, u32> = ShardedMap::default();
        let mut reference = std::collections::HashMap::new();
        for i in 0..20_000u32 {
            let k: Box<[u32]> = vec![i % 977, i / 977, i].into();
            m.insert(k.clone(), i);
            reference.insert(k, i);
        }
        // Replacing keeps the length.
        m.insert(vec![0, 0, 0].into(), 7);
        reference.insert(vec![0, 0, 0].into(), 7);
        assert_eq!(m.len(), reference.len());
        assert!(m.capacity() >= m.len());
        for (k, v) in &reference {
            assert_eq!(m.get(&k[..]), Some(v), "looked up by a borrowed slice");
        }
        assert!(!m.contains_key(&[1u32, 2, 3][..]));
        assert_eq!(m.keys().count(), reference.len());
        // get_or_insert_with makes a value only for a new key.
        let mut n: ShardedMap<(u32, u32), u32> = ShardedMap::default();
        assert_eq!(*n.get_or_insert_with((1, 2), || 5), 5);
        assert_eq!(*n.get_or_insert_with((1, 2), || panic!("the key is there")), 5);
        assert_eq!(n.len(), 1);
    }

    #[test]
    fn every_shard_takes_entries() {
        let mut m: ShardedMap<(u32, u32), ()> = ShardedMap::default();
        for i in 0..4096 {
            m.insert((i, 1), ());
        }
        for t in m.shards.iter() {
            assert!(t.len() > 4096 / SHARDS / 2, "shards are unbalanced: {}", t.len());
        }
    }
}
