//! One BLAKE3 pass per block: the pass that checks a block against its hash also yields the
//! chaining values of its 16 KiB pieces (BLAKE3 is a tree; a piece at a 16 KiB boundary is a
//! whole subtree of it). The SSD tier keeps those values as the pieces' tags, so a range read
//! verifies only the pieces it touches, with no second hash of the block at admission.
//!
//! Built on `blake3::hazmat` (the crate's own API for subtree hashing, as Bao uses it); the
//! tests check every shape against `blake3::hash`.

use std::sync::Arc;

use blake3::hazmat::{ChainingValue, HasherExt, Mode, merge_subtrees_non_root, merge_subtrees_root};
use bytes::Bytes;

/// The size of a piece: the unit a range read verifies. A power of two of BLAKE3 chunks, so
/// every piece is a subtree of the block's hash tree.
pub const PIECE: usize = 16 * 1024;

/// A piece's tag: its subtree's chaining value (for a block of one piece, the block's hash).
pub type Tag = [u8; 32];

/// A block whose bytes hash to its name, with its pieces' tags from that same pass. Only
/// [`Verified::check`] and [`Verified::hash_new`] make one, so whatever holds one holds bytes
/// that were checked.
#[derive(Debug, Clone)]
pub struct Verified {
    data: Bytes,
    tags: Arc<[Tag]>,
}

impl Verified {
    /// `data` if it hashes to `hash`.
    pub fn check(hash: &[u8; 32], data: Bytes) -> Option<Verified> {
        let (root, tags) = hash_pieces(&data);
        (root == *hash).then(|| Verified { data, tags: tags.into() })
    }

    /// New content (an upload): its hash, and the block verified by construction.
    pub fn hash_new(data: Bytes) -> ([u8; 32], Verified) {
        let (root, tags) = hash_pieces(&data);
        (root, Verified { data, tags: tags.into() })
    }

    pub fn data(&self) -> &Bytes {
        &self.data
    }

    pub fn into_data(self) -> Bytes {
        self.data
    }

    /// One tag per [`PIECE`] of the block, in order.
    pub fn tags(&self) -> &[Tag] {
        &self.tags
    }
}

/// Whether `piece`, the `index`th piece of a block of `total` bytes, matches its tag.
pub fn piece_matches(tag: &Tag, index: usize, piece: &[u8], total: usize) -> bool {
    piece_tag(index, piece, total) == *tag
}

fn piece_tag(index: usize, piece: &[u8], total: usize) -> Tag {
    if total <= PIECE {
        // One piece: no parent node above it; its "subtree" is the root.
        return *blake3::hash(piece).as_bytes();
    }
    let mut h = blake3::Hasher::new();
    h.set_input_offset((index * PIECE) as u64);
    h.update(piece);
    h.finalize_non_root()
}

/// The block's hash and its pieces' tags, hashing every byte once.
fn hash_pieces(data: &[u8]) -> ([u8; 32], Vec<Tag>) {
    if data.len() <= PIECE {
        let root = *blake3::hash(data).as_bytes();
        return (root, vec![root]);
    }
    let tags: Vec<Tag> = data.chunks(PIECE).enumerate().map(|(i, p)| piece_tag(i, p, data.len())).collect();
    let root = merge(&tags, data.len() as u64, true);
    (root, tags)
}

/// The chaining value (or, at the top, the hash) of the subtree made of `tags`, `len` bytes.
/// BLAKE3's tree: the left subtree is the largest power of two of chunks below `len`, which
/// for more than one piece is a whole number of pieces.
fn merge(tags: &[Tag], len: u64, root: bool) -> ChainingValue {
    if tags.len() == 1 {
        return tags[0];
    }
    let left_len = len.div_ceil(2).next_power_of_two();
    let left_pieces = (left_len / PIECE as u64) as usize;
    let left = merge(&tags[..left_pieces], left_len, false);
    let right = merge(&tags[left_pieces..], len - left_len, false);
    if root {
        *merge_subtrees_root(&left, &right, Mode::Hash).as_bytes()
    } else {
        merge_subtrees_non_root(&left, &right, Mode::Hash)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(len: usize) -> Bytes {
        (0..len).map(|i| (i.wrapping_mul(31) ^ (i >> 7)) as u8).collect::<Vec<u8>>().into()
    }

    #[test]
    fn the_root_is_blake3_for_every_shape() {
        let mut lens = vec![0, 1, 1023, 1024, 1025, PIECE - 1, PIECE, PIECE + 1, 2 * PIECE, 3 * PIECE + 5];
        lens.extend([5 * PIECE, 7 * PIECE - 1, 64 * PIECE, 100 * PIECE + 777, 256 * PIECE, 256 * PIECE - 3]);
        for len in lens {
            let d = data(len);
            let (root, v) = Verified::hash_new(d.clone());
            assert_eq!(root, *blake3::hash(&d).as_bytes(), "length {len}");
            assert_eq!(v.tags().len(), len.div_ceil(PIECE).max(1), "length {len}");
            assert!(Verified::check(&root, d.clone()).is_some());
            for (i, piece) in d.chunks(PIECE).enumerate() {
                assert!(piece_matches(&v.tags()[i], i, piece, len), "length {len}, piece {i}");
            }
        }
    }

    #[test]
    fn a_changed_byte_is_caught_in_its_piece_and_by_the_block() {
        let d = data(5 * PIECE + 100);
        let (root, v) = Verified::hash_new(d.clone());
        let mut bad = d.to_vec();
        bad[3 * PIECE + 7] ^= 1;
        assert!(Verified::check(&root, Bytes::from(bad.clone())).is_none());
        let piece = &bad[3 * PIECE..4 * PIECE];
        assert!(!piece_matches(&v.tags()[3], 3, piece, d.len()));
        // A piece is bound to its place: the right bytes at another index do not match.
        assert!(!piece_matches(&v.tags()[2], 2, &d[3 * PIECE..4 * PIECE], d.len()));
        assert!(Verified::check(&[0u8; 32], d).is_none());
    }
}
