//! Buffers that blocks are received or read into: page-aligned, so a cache writing them around
//! the page cache (`O_DIRECT`, the drive's directory tier) writes them from where they are; and
//! reused, so a drive streaming a file does not fault in and zero a fresh 4 MiB for every block
//! (the allocator hands large freed blocks back to the kernel). The drive receives every
//! fetched block into one (`nimbus_client`) and reads whole blocks from its directory tier into
//! one ([`crate::disk::DiskStore::with_pooled_reads`]); the gateway, whose memory bound is tight,
//! allocates its own.
//!
//! Only large buffers are kept (room for `KEEP_FROM` bytes and up, at most `KEEP_UNTIL`),
//! the [`KEEP`] last freed, and one is reused only for a body close to its size: a cached
//! block's memory is counted by its length, so a small block must not pin a large buffer.

use std::collections::VecDeque;
use std::sync::Mutex;

use bytes::Bytes;

/// The alignment of a received block's first byte (a page: what `O_DIRECT` asks of memory).
pub const PAGE: usize = 4096;
/// Free buffers kept at most. A streaming reader frees a block about as often as it receives
/// one, so a few catch nearly every reuse; each kept one is a block (4 MiB by default) of
/// resident memory while the drive is idle.
const KEEP: usize = 4;
/// Buffers for smaller bodies are not kept: faulting them in costs little.
const KEEP_FROM: usize = 1 << 20;
/// Nor larger ones: blocks are 4 MiB (`nimbus_proto::DEFAULT_BLOCK_SIZE`), and a buffer that a
/// body without a length grew by doubling should not stay resident.
const KEEP_UNTIL: usize = 16 << 20;

/// The free buffers, the most recently freed last.
struct Pool(Mutex<VecDeque<Vec<u8>>>);

static POOL: Pool = Pool::new();

impl Pool {
    const fn new() -> Self {
        Self(Mutex::new(VecDeque::new()))
    }

    fn free(&self) -> std::sync::MutexGuard<'_, VecDeque<Vec<u8>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps `vec` if it can serve a later body; the oldest goes when there are too many, so
    /// buffers of an odd size (a file's last block) do not hold the places for good.
    fn give_back(&self, vec: Vec<u8>) {
        if !(KEEP_FROM + PAGE..=KEEP_UNTIL + PAGE).contains(&vec.capacity()) {
            return;
        }
        let mut free = self.free();
        free.push_back(vec);
        if free.len() > KEEP {
            free.pop_front();
        }
    }
}

/// A block being received or read: bytes from a page-aligned start (unless more bytes came
/// than the buffer was made for: it then grows where the allocator puts it).
pub struct BlockBuf {
    vec: Vec<u8>,
    start: usize,
    pool: &'static Pool,
}

impl BlockBuf {
    /// A buffer for a body of about `len` bytes (it grows if more come).
    pub fn with_capacity(len: usize) -> Self {
        Self::from_pool(&POOL, len)
    }

    fn from_pool(pool: &'static Pool, len: usize) -> Self {
        let want = len + PAGE;
        let reused = if len >= KEEP_FROM {
            let mut free = pool.free();
            // Not much larger than asked: a buffer's whole capacity stays held by the block.
            let fit = free.iter().rposition(|v| v.capacity() >= want && v.capacity() - want <= want / 8);
            fit.and_then(|i| free.remove(i))
        } else {
            None
        };
        let mut vec = reused.unwrap_or_else(|| Vec::with_capacity(want));
        vec.clear();
        let start = vec.as_ptr().align_offset(PAGE).min(PAGE);
        vec.resize(start, 0);
        Self { vec, start, pool }
    }

    /// `len` zero bytes, to read into ([`BlockBuf::as_mut_slice`]).
    pub fn zeroed(len: usize) -> Self {
        Self::zeroed_from(&POOL, len)
    }

    fn zeroed_from(pool: &'static Pool, len: usize) -> Self {
        let mut b = Self::from_pool(pool, len);
        b.vec.resize(b.start + len, 0);
        b
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.vec[self.start..]
    }

    pub fn len(&self) -> usize {
        self.vec.len() - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn extend_from_slice(&mut self, data: &[u8]) {
        self.vec.extend_from_slice(data);
    }

    /// The received bytes; the buffer goes back to be reused when the last copy is dropped.
    pub fn freeze(self) -> Bytes {
        Bytes::from_owner(self)
    }
}

impl AsRef<[u8]> for BlockBuf {
    fn as_ref(&self) -> &[u8] {
        &self.vec[self.start..]
    }
}

impl Drop for BlockBuf {
    fn drop(&mut self) {
        self.pool.give_back(std::mem::take(&mut self.vec));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned_and_reused_only_for_a_body_of_their_size() {
        // A pool of its own: other tests' blocks do not come and go in it.
        let pool: &'static Pool = Box::leak(Box::new(Pool::new()));
        let free_list = || pool.free();
        let take = |len| BlockBuf::from_pool(pool, len);
        let mib = 1 << 20;
        let mut a = take(4 * mib);
        assert_eq!(a.vec.as_ptr().wrapping_add(a.start).align_offset(PAGE), 0);
        a.extend_from_slice(&[5u8; 100]);
        let frozen = a.freeze();
        assert_eq!(frozen.as_ref(), &[5u8; 100][..]);
        assert_eq!(frozen.as_ptr().align_offset(PAGE), 0);
        let first = frozen.as_ptr();
        let copy = frozen.slice(10..20);
        drop(frozen);
        assert!(free_list().is_empty(), "still held by a slice");
        drop(copy);
        assert_eq!(free_list().len(), 1);
        // A small body never takes a block-sized buffer; a block-sized one does, aligned again.
        let small = take(100 * 1024);
        assert!(small.vec.capacity() < mib);
        assert_eq!(free_list().len(), 1);
        let mut b = take(4 * mib - 7);
        assert!(free_list().is_empty());
        assert_eq!(b.vec.as_ptr().wrapping_add(b.start), first, "the same buffer, the same aligned start");
        assert!(b.is_empty());
        b.extend_from_slice(&[1, 2, 3]);
        assert_eq!(b.freeze().as_ref(), &[1, 2, 3]);
        // Reused for a read: zeroed over what the last block left.
        let mut z = BlockBuf::zeroed_from(pool, 4 * mib);
        assert_eq!(z.as_mut_slice().as_ptr(), first);
        assert!(z.as_mut_slice().iter().all(|&b| b == 0) && z.len() == 4 * mib);
        drop(z);
        // A body of half its size does not take it.
        let half = take(2 * mib);
        assert_eq!(free_list().len(), 1, "a 2 MiB body took the 4 MiB buffer");
        drop(half);
        assert_eq!(free_list().len(), 2);
        // At most KEEP are kept, the last freed: the 4 MiB one, freed first, is gone.
        let many: Vec<_> = (0..KEEP + 3).map(|_| take(2 * mib)).collect();
        drop(many);
        assert_eq!(free_list().len(), KEEP);
        assert!(free_list().iter().all(|v| v.capacity() < 3 * mib));
        // Nor one that cannot serve a kept size: grown past the largest block, or made for a
        // body under the smallest kept one.
        free_list().clear();
        let mut grown = take(2 * mib);
        grown.extend_from_slice(&vec![1u8; 2 * KEEP_UNTIL]);
        drop(grown);
        drop(take(KEEP_FROM - 100));
        assert!(free_list().is_empty());
    }
}
