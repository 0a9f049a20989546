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
//! Here too: the cache's [`Key`], and [`hash_from_hex`], the one parser of a block hash's hex
//! digits for the gateway, the drive and this crate.
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

/// The value of each hex digit (either case); `NOT_HEX` for any other byte.
const HEX_VALUE: [u8; 256] = {
    let mut t = [NOT_HEX; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        t[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};
const NOT_HEX: u8 = 0xff;

/// A block hash from its 64 hex digits, as `blake3::Hash::from_hex` reads it, by table:
/// that one branches on every digit, and on random digits the mispredictions cost a hot read
/// of the gateway 2.7 % of its CPU (every read parses its block's hash).
pub fn hash_from_hex(hex: &str) -> Option<[u8; 32]> {
    let digits: &[u8; 64] = hex.as_bytes().try_into().ok()?;
    let mut out = [0u8; 32];
    // Digits are below 16; one byte that is not a digit sets the high bits.
    let mut seen = 0u8;
    for (byte, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
        let (hi, lo) = (HEX_VALUE[usize::from(pair[0])], HEX_VALUE[usize::from(pair[1])]);
        seen |= hi | lo;
        *byte = (hi << 4) | lo;
    }
    (seen < 16).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::hash_from_hex;
    use proptest::prelude::*;

    fn blake3_reads(hex: &str) -> Option<[u8; 32]> {
        blake3::Hash::from_hex(hex).ok().map(|h| *h.as_bytes())
    }

    #[test]
    fn hashes_parse_as_blake3_parses_them() {
        let h = blake3::hash(b"a block");
        let lower = h.to_hex().to_string();
        assert_eq!(hash_from_hex(&lower), Some(*h.as_bytes()));
        assert_eq!(hash_from_hex(&lower.to_uppercase()), Some(*h.as_bytes()));
        for bad in ["", "0", &lower[1..], &format!("{lower}0"), &format!("{}g", &lower[1..])] {
            assert_eq!(hash_from_hex(bad), None, "{bad:?}");
        }
        // Every byte that is not a digit, at either place of a pair.
        for b in 0..=255u8 {
            for at in [0, 63] {
                let mut s = lower.clone().into_bytes();
                s[at] = b;
                let Ok(s) = String::from_utf8(s) else { continue };
                assert_eq!(hash_from_hex(&s), blake3_reads(&s), "byte {b} at {at}");
            }
        }
    }

    proptest! {
        #[test]
        fn any_string_parses_as_blake3_parses_it(s in "[0-9a-fA-F]{60,68}|[0-9a-fA-Fg-z/ .\\x00]{64}|.{0,70}") {
            prop_assert_eq!(hash_from_hex(&s), blake3_reads(&s));
        }
    }
}
