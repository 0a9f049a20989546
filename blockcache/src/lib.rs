//! Building blocks of a block cache keyed by `(namespace, BLAKE3 hash)`, shared by the gateway's
//! SSD tier and the mount's local cache so both keep one on-disk format and one policy:
//!
//! - [`disk`]: one checksummed, versioned file per block, range reads that verify only the
//!   chunks they touch, an exclusive directory lock;
//! - [`policy`]: S3-FIFO admission and eviction, weighted by bytes, with a strict size bound;
//! - [`coalesce`]: one fetch per block however many readers miss on it, under a bound on
//!   fetches in flight, that outlives any one reader and leaves nothing behind;
//! - [`verify`]: one BLAKE3 pass checks a block and yields its 16 KiB pieces' tags (subtree
//!   chaining values), which the SSD entries keep and which, as a block's outboard checked
//!   against its hash, verify pieces fetched alone;
//! - [`tiered`]: the cache itself, built from the above: memory and SSD tiers, coalesced
//!   loads, reads of parts of blocks from their pieces alone, background admission, budgets,
//!   counters and purge; its user supplies only how a block (and, if it can, a range of one and
//!   its outboard) is fetched ([`tiered::Fetcher`]) and its budgets.
//!
//! - [`buf`]: page-aligned, reused buffers that the drive receives blocks into and reads whole
//!   blocks back into.
//!
//! Blocks are immutable, so nothing here ever invalidates; callers decide what to admit.

pub mod buf;
pub mod coalesce;
pub mod disk;
pub mod pio; // positional reads and writes on a shared file, on Unix and Windows
pub mod policy;
pub mod tiered;
pub mod verify;

/// `(namespace, block hash)`: the gateway uses the space id as namespace (a hit must never
/// reveal another user's content), the mount a constant.
pub type Key = (i64, [u8; 32]);
