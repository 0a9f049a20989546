//! Content operations that combine the metadata database and the block store: streaming a
//! whole file in (split, hash, upload missing blocks, commit) and streaming a byte range out
//! (fetch and verify the overlapping blocks, in order, a couple ahead).
//!
//! Memory stays bounded whatever the file size: a write holds at most `upload_parallelism + 1`
//! blocks, a read at most `READ_AHEAD + 1`.

use bytes::{Bytes, BytesMut};
use futures::stream::{self, FuturesUnordered, Stream, StreamExt, TryStreamExt};
use nimbus_proto::RemotePath;

use crate::blocks::{StoreError, put_verified};
use crate::cache::CacheMode;
use crate::error::{ApiError, ApiResult};
use crate::meta::{Base, BlockEntry, Claim, CommitSpec, LockTokens, NodeRow, SpaceId};
use crate::state::AppState;
use nimbus_blockcache::verify::Verified;

pub mod across;

/// Blocks fetched ahead of the one being sent.
const READ_AHEAD: usize = 2;

/// Stores one block for a space after checking its hash. Returns true if it was new.
/// The block counts against the quota as pending until a commit references it.
pub async fn put_block(state: &AppState, space: SpaceId, hash: &str, data: Bytes) -> ApiResult<bool> {
    if data.len() as u64 > state.settings.block_size {
        return Err(ApiError::PayloadTooLarge(format!("a block holds at most {} bytes", state.settings.block_size)));
    }
    // One pass: the hash check and the pieces' tags of the block's outboard.
    let (actual, block) = crate::blocks::hash_block(data).await;
    let actual = blake3::Hash::from_bytes(actual).to_hex();
    if actual.as_str() != hash {
        return Err(ApiError::HashMismatch(format!(
            "the uploaded bytes hash to {actual}, not {hash}; the block was not stored"
        )));
    }
    // No claim: a block sent alone is kept for the commit that follows (or collected).
    let (_, created) = store_block(state, space, hash.to_string(), block, 0, None).await?;
    Ok(created)
}

/// Writes a block to the store unless the space holds it already intact; true if it was new.
/// The claim comes first (charging the quota, with `allowance`, under the space lock), so
/// concurrent uploads through every door meet the quota one after the other.
///
/// A block the space holds is read back from the store (not the cache) and checked before it
/// is skipped; if its object is gone or damaged, the uploaded bytes replace it. Why on every
/// upload of a held block: an upload that carries the bytes is the one moment a damaged block
/// can be repaired without an operator, and the check costs one store read of what the client
/// has just sent, only for blocks the space already holds. The block protocol's clients (CLI,
/// drive) ask `/blocks/missing` first and never send those; door clients (WebDAV, S3,
/// `PUT /files`) re-sending content the space has pay a read instead of a write.
async fn store_block(
    state: &AppState,
    space: SpaceId,
    hash: String,
    block: Verified,
    allowance: u64,
    owner: Option<i64>,
) -> ApiResult<(BlockEntry, bool)> {
    let size = block.data().len() as i64;
    let allowance = i64::try_from(allowance).unwrap_or(i64::MAX);
    let claim = state.meta.claim_block(space, &hash, size, allowance, owner).await?;
    if claim == Claim::Held && !stored_intact(state, space, &hash, size).await {
        // Same bytes under the same name: readers see the damaged copy or this one, never a mix.
        put_verified(state.store.as_ref(), space.get(), &hash, &block).await?;
        metrics::counter!("nimbus_store_blocks_repaired_total").increment(1);
        metrics::counter!("nimbus_store_bytes_written_total").increment(size as u64);
        tracing::warn!(space = %space, hash = %hash, "a held block's object was missing or damaged; replaced it with the uploaded bytes");
    } else if claim == Claim::Write {
        put_verified(state.store.as_ref(), space.get(), &hash, &block).await?;
        metrics::counter!("nimbus_store_bytes_written_total").increment(size as u64);
        // Readable only once the store has it: a stored block is always readable.
        if !state.meta.block_stored(space, &hash).await? {
            // Garbage collection took the claim (and maybe the object) meanwhile: write it
            // again, then register it; without a row, collection cannot touch it.
            put_verified(state.store.as_ref(), space.get(), &hash, &block).await?;
            state.meta.register_block(space, &hash, size).await?;
        }
    }
    Ok((BlockEntry { hash, size }, claim == Claim::Write))
}

/// Whether the store still has the block intact (read directly: the cache may hold a good
/// copy of a damaged object). A read that fails for another reason counts as not intact: the
/// write that follows then either repairs the object or fails the upload, rather than letting
/// a commit reference a block nobody could read.
async fn stored_intact(state: &AppState, space: SpaceId, hash: &str, size: i64) -> bool {
    match crate::blocks::get_verified(state.store.as_ref(), space.get(), hash).await {
        Ok(data) => data.len() as i64 == size,
        Err(e) => {
            tracing::debug!(space = %space, hash, error = %e, "a held block did not read back intact");
            false
        }
    }
}

/// What a streaming upload knows up front.
pub struct PutOptions<'a> {
    pub base: Base,
    pub device: Option<&'a str>,
    pub content_length: Option<u64>,
    /// Runs once the whole body is in and before the commit: a door's own integrity check
    /// (S3's Content-MD5) can still refuse the upload and leave the old version.
    pub verify: Option<&'a (dyn Fn() -> ApiResult<()> + Send + Sync)>,
    /// Bytes the upload may take beyond the quota besides the file it replaces: what its
    /// success frees at once (the parts of an S3 multipart upload it re-splits).
    pub allowance: u64,
    /// Checks again, once the whole body is in and just before the commit, what let the upload
    /// in (see [`crate::access::StillAllowed`]): a share or link withdrawn, a token or key
    /// revoked or the user disabled while a long body was still arriving refuses the commit.
    pub still_allowed: Option<crate::access::StillAllowed>,
}

/// The blocks an upload in progress has claimed (see [`Meta::claim_block`]), under a claim of
/// its own. If the upload fails, or its request is dropped halfway, the blocks that still
/// carry its claim and that nothing uses are deleted at once ([`discard`]); the others stay
/// charged as pending until a commit uses them or garbage collection removes them. So bytes a
/// failed upload brought never sit in the store outside the quota.
///
/// [`Meta::claim_block`]: crate::meta::Meta::claim_block
pub struct Claims {
    state: AppState,
    space: SpaceId,
    hashes: Vec<String>,
    owner: i64,
    kept: bool,
}

impl Claims {
    /// A streaming upload's claims, under a random claim (positive, so never an S3 upload's).
    pub fn new(state: &AppState, space: SpaceId) -> Claims {
        Claims::owned_by(state, space, rand::random_range(1..i64::MAX))
    }

    /// The claims of one part of the S3 multipart upload whose row id is `upload`: every part
    /// claims under the upload's claim, so aborting it can discard what its parts stored.
    pub fn for_upload(state: &AppState, space: SpaceId, upload: i64) -> Claims {
        Claims::owned_by(state, space, upload_claim(upload))
    }

    fn owned_by(state: &AppState, space: SpaceId, owner: i64) -> Claims {
        Claims { state: state.clone(), space, hashes: Vec::new(), owner, kept: false }
    }

    /// Ends the upload whose outcome is `done`: on success its blocks are referenced (or
    /// listed by a multipart upload) and kept; on failure they are discarded before the caller
    /// answers, so a client told no (413, 403, ...) sees its pending bytes gone at once and can
    /// retry within its quota. The discard runs on a task of its own: a client that goes away
    /// meanwhile cannot cut it short.
    pub async fn settle<T, E>(mut self, done: Result<T, E>) -> Result<T, E> {
        self.kept = true;
        if done.is_err() && !self.hashes.is_empty() {
            let (state, space, hashes, owner) =
                (self.state.clone(), self.space, std::mem::take(&mut self.hashes), self.owner);
            let discarding = tokio::spawn(async move { discard(&state, space, &hashes, owner).await });
            // A failed discard is logged by `discard` (gc removes what stays); a panic there
            // must not turn this answer into one.
            let _ = discarding.await;
        }
        done
    }
}

/// The claim the parts of the S3 multipart upload with row id `upload` store their blocks under.
pub fn upload_claim(upload: i64) -> i64 {
    -upload
}

impl Drop for Claims {
    fn drop(&mut self) {
        if self.kept || self.hashes.is_empty() {
            return;
        }
        let (state, space, hashes, owner) =
            (self.state.clone(), self.space, std::mem::take(&mut self.hashes), self.owner);
        // Also when the request's task is being dropped: the discard runs on its own task.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { discard(&state, space, &hashes, owner).await });
        }
    }
}

/// Deletes those of `hashes` that still carry the claim `owner` and that nothing uses, rows and
/// objects (see [`Meta::discard_claimed`]). Failures are logged: what stays is still charged
/// as pending, and garbage collection removes it after its grace period.
///
/// [`Meta::discard_claimed`]: crate::meta::Meta::discard_claimed
pub async fn discard(state: &AppState, space: SpaceId, hashes: &[String], owner: i64) {
    let store = state.store.clone();
    let delete = |hs: Vec<String>| {
        let store = store.clone();
        async move { store.delete_blocks(space.get(), &hs).await.map_err(|e| e.to_string()) }
    };
    match state.meta.discard_claimed(space, hashes, owner, delete).await {
        Ok((gone, failed)) => {
            if !gone.is_empty() {
                let bytes: i64 = gone.iter().map(|b| b.size).sum();
                metrics::counter!("nimbus_upload_blocks_discarded_total").increment(gone.len() as u64);
                tracing::debug!(space = %space, blocks = gone.len(), bytes, "deleted the blocks of an upload that did not commit");
            }
            if let Some(e) = failed {
                tracing::warn!(space = %space, error = %e, "deleted a failed upload's block rows but not all their objects; fsck reports them");
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, space = %space, "cannot discard a failed upload's blocks; they stay charged until gc");
        }
    }
}

/// Streams a request body into the space as the new content of `path`, for a caller
/// presenting the lock tokens `held` (see [`crate::meta::Meta::commit`]). A locked path is
/// refused before the body is read, and again at the commit.
pub async fn put_stream<S, E>(
    state: &AppState,
    space: SpaceId,
    path: &RemotePath,
    body: S,
    opts: PutOptions<'_>,
    held: LockTokens<'_>,
) -> ApiResult<(NodeRow, bool, RemotePath)>
where
    S: Stream<Item = Result<Bytes, E>> + Send + Unpin,
    E: std::fmt::Display,
{
    let mut room = check_put(state, space, path, opts.content_length, held).await?;
    room.bytes = room.bytes.map(|b| b.saturating_add(opts.allowance));
    room.allowance = room.allowance.saturating_add(opts.allowance);
    let mut claims = Claims::new(state, space);
    let done = async {
        let (blocks, _) = store_stream(state, space, body, room, &mut claims).await?;
        if let Some(verify) = opts.verify {
            verify()?;
        }
        if let Some(check) = opts.still_allowed {
            check.await?;
        }
        let block_size = state.settings.block_size as i64;
        let spec = CommitSpec { base: opts.base, blocks: &blocks, block_size, device: opts.device };
        Ok::<_, ApiError>(state.meta.commit(space, path, &spec, held).await?)
    }
    .await;
    claims.settle(done).await
}

/// Splits a body into blocks and stores the ones the space lacks, a few at a time; returns
/// the block list and the byte count. Fails once more than `room.bytes` arrive; every block is
/// claimed against the quota with `room.allowance` (see [`Room`]) and recorded in `claims`.
pub async fn store_stream<S, E>(
    state: &AppState,
    space: SpaceId,
    body: S,
    room: Room,
    claims: &mut Claims,
) -> ApiResult<(Vec<BlockEntry>, u64)>
where
    S: Stream<Item = Result<Bytes, E>> + Send + Unpin,
    E: std::fmt::Display,
{
    let bs = state.settings.block_size as usize;
    let mut body = body;
    let mut buf = BytesMut::with_capacity(bs);
    let mut blocks: Vec<Option<BlockEntry>> = Vec::new();
    let mut in_flight = FuturesUnordered::new();
    let mut total: u64 = 0;
    let mut done = false;
    while !done {
        let next = tokio::select! {
            // Blocks in flight keep going while the body trickles in: a claim holds the space's
            // lock (on SQLite the database's write lock) until its transaction ends, so it must
            // never wait for the client to send more.
            Some(r) = in_flight.next(), if !in_flight.is_empty() => {
                let (i, b) = r?;
                blocks[i] = Some(b);
                continue;
            }
            next = body.next() => next,
        };
        match next {
            Some(Ok(chunk)) => {
                total += chunk.len() as u64;
                if let Some(left) = room.bytes
                    && total > left
                {
                    return Err(quota_error(total, left));
                }
                buf.extend_from_slice(&chunk);
            }
            Some(Err(e)) => return Err(ApiError::BadRequest(format!("the upload was interrupted: {e}"))),
            None => done = true,
        }
        while buf.len() >= bs || (done && !buf.is_empty()) {
            let take = buf.len().min(bs);
            let block = buf.split_to(take).freeze();
            let idx = blocks.len();
            blocks.push(None);
            let st = state.clone();
            let allowance = room.allowance;
            // One pass: the block's name and its outboard's tags.
            let (hash, block) = crate::blocks::hash_block(block).await;
            let hash = blake3::Hash::from_bytes(hash).to_hex().to_string();
            claims.hashes.push(hash.clone());
            let owner = Some(claims.owner);
            in_flight.push(async move {
                store_block(&st, space, hash, block, allowance, owner).await.map(|(b, _)| (idx, b))
            });
            // Backpressure: stop reading the body while enough uploads are running.
            while in_flight.len() >= state.settings.upload_parallelism {
                if let Some(r) = in_flight.next().await {
                    let (i, b) = r?;
                    blocks[i] = Some(b);
                }
            }
        }
    }
    while let Some(r) = in_flight.next().await {
        let (i, b) = r?;
        blocks[i] = Some(b);
    }
    let blocks = blocks
        .into_iter()
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| ApiError::internal(anyhow::anyhow!("a block upload did not finish")))?;
    Ok((blocks, total))
}

/// Room for an upload, as known before its first byte.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Room {
    /// The most it can bring (None: no quota): the quota less current data and pending uploads,
    /// plus what it replaces. Older versions and trash do not count: they make room.
    pub bytes: Option<u64>,
    /// The size of the file it replaces. Its blocks may take that much beyond the quota, since
    /// the replaced content becomes an older version (expirable) once the upload commits.
    pub allowance: u64,
}

/// What can be known before an upload's first byte is read: the path is not locked by a lock
/// not in `held`, and a known length fits the quota.
pub async fn check_put(
    state: &AppState,
    space: SpaceId,
    path: &RemotePath,
    content_length: Option<u64>,
    held: LockTokens<'_>,
) -> ApiResult<Room> {
    state.meta.check_unlocked(space, path, false, held).await?;
    let room = quota_room(state, space, path).await?;
    if let (Some(left), Some(len)) = (room.bytes, content_length)
        && len > left
    {
        return Err(quota_error(len, left));
    }
    Ok(room)
}

/// The room an upload replacing `path` has (see [`Room`]).
pub async fn quota_room(state: &AppState, space: SpaceId, path: &RemotePath) -> ApiResult<Room> {
    let user = state.meta.user(space.get()).await?.ok_or(ApiError::Unauthorized)?;
    let replaced = match state.meta.stat(space, path).await {
        Ok((n, _)) if !n.is_dir() => n.size.max(0) as u64,
        _ => 0,
    };
    let Some(quota) = user.quota_bytes else { return Ok(Room { bytes: None, allowance: replaced }) };
    let left = (quota - user.current_bytes - user.pending_bytes).max(0) as u64 + replaced;
    Ok(Room { bytes: Some(left), allowance: replaced })
}

pub fn quota_error(needed: u64, room: u64) -> ApiError {
    ApiError::QuotaExceeded(format!(
        "quota exceeded: this upload needs at least {needed} bytes but only {room} bytes are left \
         once older versions and the trash are freed; delete files, or ask an administrator for more space"
    ))
}

/// The body of bytes `start..=end` of a version made of `blocks` when they lie in one block
/// (None when they span blocks). Through the cache it is one whole body, read at once: hyper
/// then writes head and content together and knows the end, where a stream costs more polls
/// and wake-ups per request (hot 4 KiB reads). Bypassing the cache, a block of several pieces
/// streams from the store piece by piece, each passed on once checked: no block-sized buffer
/// and no copy of it. Either way the first bytes are read before this returns, so a store that
/// cannot be reached is a clean error, not a response that starts and breaks.
pub async fn read_within_block(
    state: &AppState,
    space: SpaceId,
    blocks: &[BlockEntry],
    (start, end): (u64, u64),
    mode: CacheMode,
) -> ApiResult<Option<axum::body::Body>> {
    let mut offset = 0u64;
    for b in blocks {
        let (b_start, b_end) = (offset, offset + b.size as u64);
        offset = b_end;
        if start >= b_start && end < b_end {
            let range = (start - b_start) as usize..(end + 1 - b_start) as usize;
            let len = b.size as usize;
            // Boxed: the streamed read's future is about 10 KiB, which every hot read's future
            // would otherwise carry (and its box be copied) without ever using it.
            if mode == CacheMode::Bypass
                && let Some(body) = Box::pin(bypass_within_block(state, space, b, range.clone())).await?
            {
                return Ok(Some(body));
            }
            let bytes = state.cache.read(space.get(), &b.hash, range, len, mode).await?;
            return Ok(Some(axum::body::Body::from(bytes)));
        }
        if b_end > start {
            break;
        }
    }
    Ok(None)
}

/// Bytes `range` of block `b`, bypassing the cache, streamed piece by piece from the store;
/// `None` when the block cannot be read so (see `BlockCache::bypass_stream`).
async fn bypass_within_block(
    state: &AppState,
    space: SpaceId,
    b: &BlockEntry,
    range: std::ops::Range<usize>,
) -> ApiResult<Option<axum::body::Body>> {
    match state.cache.bypass_stream(space.get(), &b.hash, range, b.size as usize).await? {
        Some(pieces) => Ok(Some(axum::body::Body::from_stream(started(pieces).await?))),
        None => Ok(None),
    }
}

/// `pieces` with its first item already read (an error there is the caller's, as a status);
/// a later error ends the stream with an error, so the HTTP response is aborted rather than
/// completed short.
async fn started(
    pieces: impl Stream<Item = Result<Bytes, StoreError>> + Send + 'static,
) -> ApiResult<impl Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static> {
    let mut pieces = Box::pin(pieces);
    let first = match pieces.next().await {
        Some(Ok(b)) => Some(b),
        Some(Err(e)) => return Err(e.into()),
        None => None,
    };
    let rest = pieces.map_err(|e| {
        tracing::error!(error = %e, "aborting a download");
        std::io::Error::other(e)
    });
    Ok(stream::iter(first.map(Ok)).chain(rest))
}

/// Streams bytes `start..=end` of a version made of `blocks`, verifying every block.
/// The first piece is fetched before this returns, so an unreachable store is a clean error
/// (503) instead of a response that starts and breaks. An error after that ends the stream
/// with an error, so the HTTP response is aborted rather than completed short.
pub async fn open_range(
    state: &AppState,
    space: SpaceId,
    blocks: &[BlockEntry],
    (start, end): (u64, u64),
    mode: CacheMode,
) -> ApiResult<impl Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static> {
    started(read_range(state, space, blocks, start, end, mode)).await
}

fn read_range(
    state: &AppState,
    space: SpaceId,
    blocks: &[BlockEntry],
    start: u64,
    end: u64,
    mode: CacheMode,
) -> impl Stream<Item = Result<Bytes, StoreError>> + Send + 'static {
    let mut offset = 0u64;
    let mut wanted = Vec::new();
    for b in blocks {
        let (b_start, b_end) = (offset, offset + b.size as u64);
        offset = b_end;
        if b_end <= start || b_start > end {
            continue;
        }
        let from = start.saturating_sub(b_start) as usize;
        let to = ((end + 1).min(b_end) - b_start) as usize;
        wanted.push((b.hash.clone(), from, to, b.size.max(0) as usize));
    }
    let cache = state.cache.clone();
    stream::iter(wanted)
        .map(move |(hash, from, to, len)| {
            let cache = cache.clone();
            async move { cache.read(space.get(), &hash, from..to, len, mode).await }
        })
        .buffered(READ_AHEAD)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quota_error_says_what_is_left() {
        let e = quota_error(100, 40);
        assert_eq!(e.code(), nimbus_proto::wire::ErrorCode::QuotaExceeded);
        assert!(e.to_string().contains("40 bytes are left"));
    }
}
