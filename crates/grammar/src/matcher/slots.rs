//! [`Slots`]: an append-only table indexed by a dense `u32` id, whose entries are written
//! once and then read by any thread without a lock.
//!
//! The shared parts of a compiled grammar (parser states and their transitions, masks by
//! state) are read by every request at every token and written only on a miss. A lock
//! around them, even a read-write lock, makes every reader write to one shared cache line
//! (the lock word), so threads on different cores slow each other down although they never
//! conflict. Here a read is two acquire loads, which on x86 and ARM are plain loads: no
//! reader ever writes shared memory.
//!
//! ## Layout
//! Chunk `c` holds ids `BASE·(2^c − 1) .. BASE·(2^(c+1) − 1)` (`BASE << c` entries), so
//! the table never moves an entry (no reallocation under readers) and at most half of it is
//! unused. A chunk is allocated by the first write into it ([`OnceLock`]); every entry is a
//! [`OnceLock`] too, set once.
//!
//! ## Cost
//! `get`: a few arithmetic steps (a leading-zero count) and two dependent loads. `set`: the
//! same, plus the chunk's allocation on its first write (`size_of::<OnceLock<T>>()` bytes
//! per entry). Entries are never removed: a cache that
//! must forget is replaced whole (see `compiled`).

use std::sync::OnceLock;

/// Entries in chunk 0 (small: a small grammar's tables stay small).
const BASE: usize = 16;
/// Chunks: enough for every `u32` id.
const CHUNKS: usize = 29;

/// An append-only, set-once table readable without a lock (see the module docs).
pub(crate) struct Slots<T> {
    chunks: [OnceLock<Box<[OnceLock<T>]>>; CHUNKS],
}

impl<T> Default for Slots<T> {
    fn default() -> Self {
        Slots { chunks: std::array::from_fn(|_| OnceLock::new()) }
    }
}

impl<T> std::fmt::Debug for Slots<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slots").field("capacity", &self.capacity()).finish_non_exhaustive()
    }
}

/// What indexes slots: a plain id, or a typed one (which implements this where it is
/// declared, so the table knows none of its users).
pub(crate) trait SlotIndex: Copy {
    /// The slot's number.
    fn slot(self) -> u32;
}

impl SlotIndex for u32 {
    #[inline(always)]
    fn slot(self) -> u32 {
        self
    }
}

/// The chunk and the offset in it of id `i`.
#[inline]
fn locate(i: u32) -> (usize, usize) {
    let j = i as u64 / BASE as u64 + 1;
    let c = 63 - j.leading_zeros() as usize;
    (c, i as usize - BASE * ((1usize << c) - 1))
}

impl<T> Slots<T> {
    /// The entry of `i`, once set.
    #[inline]
    pub(crate) fn get(&self, i: impl SlotIndex) -> Option<&T> {
        let (c, k) = locate(i.slot());
        self.chunks[c].get()?[k].get()
    }

    /// The entry of `i`: the one already there (another thread may have been first), else
    /// `v`.
    pub(crate) fn set(&self, i: impl SlotIndex, v: T) -> &T {
        let (c, k) = locate(i.slot());
        let chunk = self.chunks[c].get_or_init(|| (0..BASE << c).map(|_| OnceLock::new()).collect());
        let slot = &chunk[k];
        let _ = slot.set(v);
        slot.get().expect("set just above")
    }

    /// Entries allocated (set or not).
    pub(crate) fn capacity(&self) -> usize {
        self.chunks.iter().enumerate().filter(|(_, x)| x.get().is_some()).map(|(c, _)| BASE << c).sum()
    }

    /// Heap bytes of the table itself (not of what its entries point to).
    pub(crate) fn memory_usage(&self) -> usize {
        self.capacity() * std::mem::size_of::<OnceLock<T>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_tile_the_ids() {
        let mut next = 0u64;
        for c in 0..CHUNKS {
            let first = next as u32;
            assert_eq!(locate(first), (c, 0));
            next += (BASE << c) as u64;
            if next - 1 <= u32::MAX as u64 {
                assert_eq!(locate((next - 1) as u32), (c, (BASE << c) - 1));
            }
        }
        assert!(next > u32::MAX as u64);
        assert_eq!(locate(u32::MAX).0, CHUNKS - 1);
    }

    #[test]
    fn set_once_then_read() {
        let s: Slots<u32> = Slots::default();
        for i in [0u32, 1, 15, 16, 47, 48, 1000, 70_000, 5_000_000] {
            assert_eq!(s.get(i), None);
            assert_eq!(*s.set(i, i + 1), i + 1);
            assert_eq!(*s.set(i, 7), i + 1, "the first value stays");
            assert_eq!(s.get(i), Some(&(i + 1)));
        }
        assert_eq!(s.get(2), None);
    }
}
