//! One BLAKE3 pass per block: the pass that checks a block against its hash also yields the
//! chaining values of its 16 KiB pieces (BLAKE3 is a tree; a piece at a 16 KiB boundary is a
//! whole subtree of it). The SSD tier keeps those values as the pieces' tags, so a range read
//! verifies only the pieces it touches, with no second hash of the block at admission.
//!
//! Built on `blake3::hazmat` (the crate's own API for subtree hashing, as Bao uses it); the
//! tests check every shape against `blake3::hash`.

use std::ops::Range;
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

    /// The block's outboard, if it has more than one piece (a smaller block is its own piece).
    pub fn outboard(&self) -> Option<Outboard> {
        (self.data.len() > PIECE).then(|| Outboard { tags: self.tags.clone(), len: self.data.len() })
    }
}

/// Bytes of the outboard of a block of `len` bytes: one [`Tag`] per piece, none for a block of
/// one piece (it is checked whole against its hash).
pub fn outboard_size(len: usize) -> usize {
    if len <= PIECE { 0 } else { len.div_ceil(PIECE) * size_of::<Tag>() }
}

/// The pieces' tags of a block of more than one piece, known to be its own: they merge to the
/// block's hash (checked once, when they are made or read). With them any piece, fetched on its
/// own, is checked against the hash through its tag: BLAKE3's verified streaming at 16 KiB
/// granularity. Stored as the plain concatenation of the tags ([`Outboard::encode`]).
#[derive(Debug, Clone)]
pub struct Outboard {
    tags: Arc<[Tag]>,
    len: usize,
}

impl Outboard {
    /// The outboard in `bytes` if it is the one of the block `hash` of `len` bytes; anything
    /// else (wrong length, wrong tags, a block of one piece) is `None`.
    pub fn check(hash: &[u8; 32], len: usize, bytes: &[u8]) -> Option<Outboard> {
        if len <= PIECE || bytes.len() != outboard_size(len) {
            return None;
        }
        let tags: Vec<Tag> = bytes.chunks_exact(size_of::<Tag>()).filter_map(|c| c.try_into().ok()).collect();
        (merge(&tags, len as u64, true) == *hash).then(|| Outboard { tags: tags.into(), len })
    }

    /// What the store keeps.
    pub fn encode(&self) -> Bytes {
        Bytes::from(self.tags.concat())
    }

    /// The block's length.
    pub fn block_len(&self) -> usize {
        self.len
    }

    pub fn tags(&self) -> &[Tag] {
        &self.tags
    }

    /// Whether `data`, the block's bytes from the start of piece `first` on (whole pieces; the
    /// block's last one may be short), is what the block holds there.
    pub fn check_pieces(&self, first: usize, data: &[u8]) -> bool {
        let start = first.saturating_mul(PIECE);
        let expected = self.len.saturating_sub(start).min(data.len().div_ceil(PIECE) * PIECE);
        !data.is_empty()
            && data.len() == expected
            && data.chunks(PIECE).enumerate().all(|(i, piece)| {
                self.tags.get(first + i).is_some_and(|tag| piece_matches(tag, first + i, piece, self.len))
            })
    }
}

/// Why a streamed part of a block was refused ([`PieceCheck`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StreamFault {
    #[error("piece {0} does not match the block's outboard")]
    Mismatch(usize),
    #[error("the origin sent fewer bytes than asked for")]
    Short,
    #[error("the origin sent more bytes than asked for")]
    Long,
}

/// `parts` with each run of neighbours that lie side by side in `whole`'s memory made one
/// slice of it. Bytes are immutable, so a slice over the same memory holds the same bytes: the
/// result reads exactly as `parts` in order, without a copy.
fn join_adjacent(whole: &Bytes, parts: Vec<Bytes>) -> Vec<Bytes> {
    if parts.len() < 2 {
        return parts;
    }
    let base = whole.as_ptr() as usize;
    let offset = |b: &Bytes| {
        let at = (b.as_ptr() as usize).checked_sub(base)?;
        (!b.is_empty() && at + b.len() <= whole.len()).then_some(at..at + b.len())
    };
    let mut out = Vec::with_capacity(parts.len());
    let mut run: Option<Range<usize>> = None;
    for part in parts {
        match (offset(&part), &mut run) {
            (Some(r), Some(cur)) if cur.end == r.start => cur.end = r.end,
            (r, _) => {
                if let Some(cur) = run.take() {
                    out.push(whole.slice(cur));
                }
                match r {
                    Some(r) => run = Some(r),
                    None => out.push(part),
                }
            }
        }
    }
    if let Some(cur) = run {
        out.push(whole.slice(cur));
    }
    out
}

/// Checks a part of a block as it streams in, piece by piece against the block's outboard,
/// and passes on only bytes whose piece matched: nothing unchecked ever leaves it, and no
/// piece is copied (what it passes on are slices of what it was given). The streaming twin of
/// [`Outboard::check_pieces`]: a piece costs its hash and at most its own bytes held back.
pub struct PieceCheck {
    outboard: Outboard,
    /// The piece being received, and the one after the last wanted.
    piece: usize,
    end_piece: usize,
    hasher: blake3::Hasher,
    /// Bytes of the current piece received (and held in `held`).
    got: usize,
    held: Vec<Bytes>,
    /// Bytes still to drop before the wanted range, and still to pass on after that.
    skip: usize,
    left: usize,
}

impl PieceCheck {
    /// A check of `range` of `outboard`'s block, and the span to ask the origin for (the
    /// whole pieces that hold it); `None` for an empty range or one past the block's end.
    pub fn new(outboard: Outboard, range: Range<usize>) -> Option<(PieceCheck, Range<usize>)> {
        let len = outboard.block_len();
        if range.start >= range.end || range.end > len {
            return None;
        }
        let (first, span) = covering(&range, len);
        let check = PieceCheck {
            end_piece: span.end.div_ceil(PIECE),
            piece: first,
            hasher: piece_hasher(first),
            got: 0,
            held: Vec::new(),
            skip: range.start - span.start,
            left: range.len(),
            outboard,
        };
        Some((check, span))
    }

    /// Takes the next bytes from the origin; gives back those of the wanted range whose pieces
    /// are now complete and checked (in order, possibly none). The checked pieces of one chunk
    /// come back as one slice of it: downstream, a few large writes instead of one per piece.
    pub fn push(&mut self, chunk: Bytes) -> Result<Vec<Bytes>, StreamFault> {
        let whole = chunk.clone();
        self.push_pieces(chunk).map(|out| join_adjacent(&whole, out))
    }

    fn push_pieces(&mut self, mut chunk: Bytes) -> Result<Vec<Bytes>, StreamFault> {
        let mut out = Vec::new();
        while !chunk.is_empty() {
            if self.piece >= self.end_piece {
                return Err(StreamFault::Long);
            }
            let piece_len = PIECE.min(self.outboard.len - self.piece * PIECE);
            let part = chunk.split_to((piece_len - self.got).min(chunk.len()));
            self.hasher.update(&part);
            self.got += part.len();
            self.held.push(part);
            if self.got == piece_len {
                self.piece_done(&mut out)?;
            }
        }
        Ok(out)
    }

    /// The origin is done: an error unless every wanted piece came whole.
    pub fn finish(&self) -> Result<(), StreamFault> {
        if self.piece == self.end_piece && self.got == 0 { Ok(()) } else { Err(StreamFault::Short) }
    }

    fn piece_done(&mut self, out: &mut Vec<Bytes>) -> Result<(), StreamFault> {
        let tag = self.hasher.finalize_non_root();
        if self.outboard.tags.get(self.piece) != Some(&tag) {
            return Err(StreamFault::Mismatch(self.piece));
        }
        for mut part in self.held.drain(..) {
            let drop = self.skip.min(part.len());
            self.skip -= drop;
            let _ = part.split_to(drop);
            part.truncate(self.left);
            self.left -= part.len();
            if !part.is_empty() {
                out.push(part);
            }
        }
        self.piece += 1;
        self.got = 0;
        self.hasher = piece_hasher(self.piece);
        Ok(())
    }
}

/// A hasher for the `index`th piece of a block of more than one piece.
fn piece_hasher(index: usize) -> blake3::Hasher {
    let mut h = blake3::Hasher::new();
    h.set_input_offset((index * PIECE) as u64);
    h
}

/// The whole pieces that hold `range` of a block of `len` bytes: the first piece's index and
/// the byte span to fetch.
pub fn covering(range: &Range<usize>, len: usize) -> (usize, Range<usize>) {
    let first = range.start / PIECE;
    let end = (range.end.div_ceil(PIECE) * PIECE).min(len);
    (first, first * PIECE..end.max(first * PIECE))
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
    let mut h = piece_hasher(index);
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

    /// Feeds `data` (the span) to `check` in chunks of the sizes `cuts` cycles through.
    fn stream(mut check: PieceCheck, data: &[u8], cuts: &[usize]) -> Result<Vec<u8>, StreamFault> {
        let mut out = Vec::new();
        let (mut at, mut i) = (0, 0);
        while at < data.len() {
            let n = cuts[i % cuts.len()].clamp(1, data.len() - at);
            i += 1;
            for b in check.push(Bytes::copy_from_slice(&data[at..at + n]))? {
                out.extend_from_slice(&b);
            }
            at += n;
        }
        check.finish()?;
        Ok(out)
    }

    #[test]
    fn a_streamed_part_passes_only_checked_bytes_whatever_the_chunking() {
        for len in [PIECE + 1, 2 * PIECE, 5 * PIECE + 100, 64 * PIECE, 256 * PIECE - 3] {
            let d = data(len);
            let (_, v) = Verified::hash_new(d.clone());
            let o = v.outboard().expect("more than one piece");
            for (start, end) in [(0, len), (0, 1), (PIECE - 1, PIECE + 1), (len - 1, len), (len / 3, len / 2 + 7)] {
                for cuts in [&[len][..], &[1, 7, 4096], &[PIECE], &[PIECE + 1, 3], &[65536]] {
                    let (check, span) = PieceCheck::new(o.clone(), start..end).expect("a range inside");
                    let got = stream(check, &d[span.clone()], cuts).expect("its own bytes pass");
                    assert_eq!(got, &d[start..end], "length {len}, {start}..{end}, cuts {cuts:?}");
                }
                let (check, span) = PieceCheck::new(o.clone(), start..end).expect("a range inside");
                // One changed byte anywhere in the span: refused, and nothing of its piece passed.
                let mut bad = d[span.clone()].to_vec();
                let at = bad.len() / 2;
                bad[at] ^= 0x10;
                let piece = (span.start + at) / PIECE;
                assert_eq!(stream(check, &bad, &[5000]), Err(StreamFault::Mismatch(piece)), "length {len}");
                let (check, span) = PieceCheck::new(o.clone(), start..end).expect("a range inside");
                assert_eq!(stream(check, &d[span.start..span.end - 1], &[4096]), Err(StreamFault::Short));
                let (check, span) = PieceCheck::new(o.clone(), start..end).expect("a range inside");
                let mut long = d[span.clone()].to_vec();
                long.push(0);
                assert_eq!(stream(check, &long, &[4096]), Err(StreamFault::Long));
            }
            // A changed piece holds back its bytes: what came out before is the pieces before it.
            let (mut check, _) = PieceCheck::new(o.clone(), 0..len).expect("whole block");
            let mut bad = d.to_vec();
            bad[PIECE] ^= 1;
            assert_eq!(check.push(Bytes::copy_from_slice(&bad[..PIECE])).map(|v| v.concat()), Ok(d[..PIECE].to_vec()));
            assert_eq!(check.push(Bytes::copy_from_slice(&bad[PIECE..])), Err(StreamFault::Mismatch(1)));
            assert!(PieceCheck::new(o.clone(), 0..len + 1).is_none(), "past the end");
            assert!(PieceCheck::new(o.clone(), 5..5).is_none(), "empty");
        }
    }

    #[test]
    fn the_checked_pieces_of_one_chunk_come_back_as_one_slice_of_it() {
        let len = 10 * PIECE + 5;
        let d = data(len);
        let (_, v) = Verified::hash_new(d.clone());
        let o = v.outboard().expect("more than one piece");
        // The first chunk ends inside piece 3: pieces 0-2 come back as one slice; the second
        // gives piece 3 (its head held from the first chunk) and then the rest as one slice.
        let (mut check, span) = PieceCheck::new(o.clone(), 100..len - 1).expect("a range inside");
        let first = Bytes::copy_from_slice(&d[span.start..3 * PIECE + 10]);
        let out = check.push(first.clone()).expect("checked");
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].as_ptr(), first[100..].as_ptr(), "a slice of the chunk, not a copy");
        assert_eq!(&out[0][..], &d[100..3 * PIECE]);
        let out = check.push(Bytes::copy_from_slice(&d[3 * PIECE + 10..span.end])).expect("checked");
        assert_eq!(out.len(), 2, "the head of piece 3 held from the first chunk; its tail and pieces 4-10 as one");
        assert_eq!(out.concat(), &d[3 * PIECE..len - 1]);
        check.finish().expect("whole");
        // Parts from elsewhere stay apart and in order; side by side ones are joined.
        let whole = Bytes::from(d[..4 * PIECE].to_vec());
        let other = Bytes::from(vec![7u8; 10]);
        let parts = vec![whole.slice(0..5), whole.slice(5..9), other.clone(), whole.slice(9..20), whole.slice(30..40)];
        let joined = join_adjacent(&whole, parts.clone());
        assert_eq!(joined.len(), 4);
        assert_eq!(joined.concat(), parts.concat());
    }

    #[test]
    fn an_outboard_checks_pieces_fetched_on_their_own() {
        for len in [PIECE + 1, 2 * PIECE, 5 * PIECE + 100, 64 * PIECE, 256 * PIECE - 3] {
            let d = data(len);
            let (root, v) = Verified::hash_new(d.clone());
            let o = v.outboard().expect("more than one piece");
            assert_eq!(o.encode().len(), outboard_size(len));
            let o = Outboard::check(&root, len, &o.encode()).expect("its own outboard checks");
            let pieces = len.div_ceil(PIECE);
            for (start, end) in [(0, 1), (PIECE - 1, PIECE + 1), (len - 1, len), (len / 2, len), (0, len)] {
                let (first, span) = covering(&(start..end), len);
                assert!(span.start <= start && end <= span.end && span.end <= len, "length {len}");
                assert!(o.check_pieces(first, &d[span.clone()]), "length {len}, span {span:?}");
                if span.len() > 1 {
                    // Cut short inside a piece, or one byte changed: refused. (Cut at a piece's
                    // end, what is left is whole pieces, rightly accepted: callers compare lengths.)
                    if (span.len() - 1) % PIECE != 0 {
                        assert!(!o.check_pieces(first, &d[span.start..span.end - 1]), "length {len}, {span:?}");
                    }
                    let mut bad = d[span.clone()].to_vec();
                    bad[span.len() / 2] ^= 0x40;
                    assert!(!o.check_pieces(first, &bad), "length {len}, {span:?}");
                }
            }
            assert!(!o.check_pieces(pieces, &[0u8; 1]), "a piece past the end");
            assert!(!o.check_pieces(0, &[]), "nothing is not a piece");
            // Another length, another hash, a changed tag or a cut outboard: not this block's.
            // (A length with as many pieces merges alike, but no piece of that length matches.)
            assert!(Outboard::check(&root, len + PIECE, &o.encode()).is_none());
            assert!(Outboard::check(&[7u8; 32], len, &o.encode()).is_none());
            let mut bad = o.encode().to_vec();
            bad[5] ^= 1;
            assert!(Outboard::check(&root, len, &bad).is_none());
            assert!(Outboard::check(&root, len, &bad[..bad.len() - 32]).is_none());
        }
        // A block of one piece has no outboard: it is checked whole.
        let (root, v) = Verified::hash_new(data(PIECE));
        assert!(v.outboard().is_none());
        assert_eq!(outboard_size(PIECE), 0);
        assert!(Outboard::check(&root, PIECE, &root).is_none());
    }
}
