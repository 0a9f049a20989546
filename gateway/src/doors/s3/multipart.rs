//! Multipart uploads. Each part is split into ordinary blocks of the space as it arrives
//! (bounded memory, deduplicated like any upload) and its block list waits in the database.
//! Completing commits the parts' blocks as one version when they already form the space's
//! uniform block layout (parts that are multiples of the block size: boto3's 8 MiB default);
//! otherwise the content is re-split once, read back through the cache. Abandoned uploads are
//! aborted by `nimbus-gateway gc` after `--upload-expiry`; until then their bytes count
//! against the quota's room.

use bytes::Bytes;
use md5::{Digest, Md5};
use s3s::dto::*;
use s3s::{S3Request, S3Response, S3Result, s3_error};

use super::Door;
use super::digest::{Md5Stream, Wanted, check_body, finish_md5};
use super::error::{meta, s3};
use super::objects::{key_path, owner};
use crate::cache::CacheMode;
use crate::meta::{Base, BlockEntry, CommitSpec, LockTokens, UploadRow};
use crate::space::{self, PutOptions};
use nimbus_proto::names::{SHARED_WITH_ME, is_shared_with_me};

const MAX_PART_NUMBER: i32 = 10_000;

/// A completion claim older than this is taken over: its gateway died halfway (a re-split
/// of the largest objects takes minutes, not an hour).
const COMPLETION_STALE_MS: i64 = 3_600_000;

/// A CompleteMultipartUpload in progress. If it fails or its request is dropped, the claim is
/// let go of (on a task of its own), so the client can try again at once.
struct Completing {
    state: crate::state::AppState,
    upload: i64,
    finished: bool,
}

impl Completing {
    fn finish(mut self) {
        self.finished = true;
    }
}

impl Drop for Completing {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let (meta, upload) = (self.state.meta.clone(), self.upload);
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                if let Err(e) = meta.end_complete(upload).await {
                    tracing::warn!(error = %e, upload, "cannot let go of a failed completion; it expires within the hour");
                }
            });
        }
    }
}

fn timestamp(ms: i64) -> Timestamp {
    Timestamp::from(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64))
}

/// The caller's upload with this id for this key; anything else is NoSuchUpload (another
/// user's upload id included).
async fn find(door: &Door, user_id: i64, upload_id: &str, key: &str) -> S3Result<UploadRow> {
    match door.state().meta.upload(user_id, upload_id).await.map_err(meta)? {
        Some(u) if u.object_key == key => Ok(u),
        _ => Err(s3_error!(NoSuchUpload, "no such upload (it was completed, aborted or never existed)")),
    }
}

pub async fn create(
    door: &Door,
    req: S3Request<CreateMultipartUploadInput>,
) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
    let user = owner(&req, &req.input.bucket)?;
    let i = req.input;
    let (path, folder) = key_path(&i.key)?;
    if folder {
        return Err(s3_error!(InvalidArgument, "a key ending in `/` is a folder and cannot hold data"));
    }
    // Parts are blocks of the uploader's own space, charged as they arrive; a share's files
    // are another space's, so they take single PUTs (up to 5 GiB each).
    if path.components().first().is_some_and(|c| is_shared_with_me(c)) {
        return Err(s3_error!(
            NotImplemented,
            "multipart uploads into `{SHARED_WITH_ME}/` are not supported; upload with a single PUT"
        ));
    }
    let upload_id = uuid::Uuid::new_v4().simple().to_string();
    let row = UploadRow {
        id: 0,
        upload_id: upload_id.clone(),
        user_id: user.id,
        object_key: i.key.clone(),
        content_type: i.content_type.map(|c| c.to_string()),
        user_meta: i.metadata.filter(|m| !m.is_empty()).and_then(|m| serde_json::to_string(&m).ok()),
        created_at: 0,
    };
    door.state().meta.create_upload(&row).await.map_err(meta)?;
    Ok(S3Response::new(CreateMultipartUploadOutput {
        bucket: Some(user.bucket),
        key: Some(i.key),
        upload_id: Some(upload_id),
        ..Default::default()
    }))
}

pub async fn upload_part(door: &Door, req: S3Request<UploadPartInput>) -> S3Result<S3Response<UploadPartOutput>> {
    let user = owner(&req, &req.input.bucket)?;
    let wanted = Wanted::of(&req.headers, req.trailing_headers.clone());
    let i = req.input;
    if !(1..=MAX_PART_NUMBER).contains(&i.part_number) {
        return Err(s3_error!(InvalidArgument, "part numbers run from 1 to {MAX_PART_NUMBER}"));
    }
    let upload = find(door, user.id, &i.upload_id, &i.key).await?;
    let st = door.state();
    // Parts count as pending uploads from the moment their blocks are stored: concurrent
    // parts (and other uploads) meet the quota one block after the other.
    let (path, _) = key_path(&i.key)?;
    let room = space::quota_room(st, user.space, &path).await.map_err(s3)?;
    if let (Some(left), Some(len)) = (room.bytes, i.content_length.and_then(|l| u64::try_from(l).ok()))
        && len > left
    {
        return Err(s3(space::quota_error(len, left)));
    }
    let body = i.body.unwrap_or_else(|| StreamingBlob::wrap(futures::stream::empty::<Result<Bytes, std::io::Error>>()));
    let (stream, hasher) = Md5Stream::new(body, &wanted);
    let mut claims = space::Claims::for_upload(st, user.space, upload.id);
    let done = async {
        let (blocks, _) = space::store_stream(st, user.space, stream, room, &mut claims).await.map_err(s3)?;
        // Length, Content-MD5 and flexible checksums; a part that fails is not recorded (the
        // claims let go of its blocks).
        check_body(&hasher, i.content_length, i.content_md5.as_deref(), &wanted).map_err(s3)?;
        let etag = format!("\"{}\"", hex::encode(finish_md5(&hasher)));
        let replaced = st.meta.put_part(upload.id, i64::from(i.part_number), &etag, &blocks).await.map_err(meta)?;
        Ok::<_, s3s::S3Error>((etag, replaced))
    }
    .await;
    let (etag, replaced) = claims.settle(done).await?;
    // A part sent again replaces the one before: that one's blocks go unless something else
    // (this part too) uses them.
    if !replaced.is_empty() {
        space::discard(st, user.space, &replaced, space::upload_claim(upload.id)).await;
    }
    Ok(S3Response::new(UploadPartOutput { e_tag: etag.parse().ok(), ..Default::default() }))
}

pub async fn list_parts(door: &Door, req: S3Request<ListPartsInput>) -> S3Result<S3Response<ListPartsOutput>> {
    let user = owner(&req, &req.input.bucket)?;
    let i = req.input;
    let upload = find(door, user.id, &i.upload_id, &i.key).await?;
    let max = i.max_parts.unwrap_or(1000).clamp(0, 1000) as usize;
    let after = i64::from(i.part_number_marker.unwrap_or(0));
    let all = door.state().meta.list_parts(upload.id).await.map_err(meta)?;
    let rest: Vec<_> = all.into_iter().filter(|p| p.part_number > after).collect();
    let truncated = rest.len() > max;
    let parts: Vec<Part> = rest
        .into_iter()
        .take(max)
        .map(|p| Part {
            part_number: i32::try_from(p.part_number).ok(),
            e_tag: p.etag.parse().ok(),
            size: Some(p.size),
            last_modified: Some(timestamp(p.created_at)),
            ..Default::default()
        })
        .collect();
    let next = if truncated { parts.last().and_then(|p| p.part_number) } else { None };
    Ok(S3Response::new(ListPartsOutput {
        bucket: Some(user.bucket),
        key: Some(i.key),
        upload_id: Some(i.upload_id),
        max_parts: Some(max as i32),
        part_number_marker: i.part_number_marker,
        is_truncated: Some(truncated),
        next_part_number_marker: next,
        parts: Some(parts),
        ..Default::default()
    }))
}

pub async fn list_uploads(
    door: &Door,
    req: S3Request<ListMultipartUploadsInput>,
) -> S3Result<S3Response<ListMultipartUploadsOutput>> {
    let user = owner(&req, &req.input.bucket)?;
    let i = req.input;
    if i.delimiter.is_some() || i.key_marker.is_some() || i.upload_id_marker.is_some() {
        return Err(s3_error!(NotImplemented, "delimiter and markers are not supported when listing uploads"));
    }
    let max = i.max_uploads.unwrap_or(1000).clamp(0, 1000) as usize;
    let prefix = i.prefix.clone().unwrap_or_default();
    let rows = door.state().meta.list_uploads(user.id, 100_000).await.map_err(meta)?;
    let matching: Vec<_> = rows.into_iter().filter(|u| u.object_key.starts_with(&prefix)).collect();
    let truncated = matching.len() > max;
    let uploads = matching
        .into_iter()
        .take(max)
        .map(|u| MultipartUpload {
            key: Some(u.object_key),
            upload_id: Some(u.upload_id),
            initiated: Some(timestamp(u.created_at)),
            ..Default::default()
        })
        .collect();
    Ok(S3Response::new(ListMultipartUploadsOutput {
        bucket: Some(user.bucket),
        prefix: i.prefix,
        max_uploads: Some(max as i32),
        is_truncated: Some(truncated),
        uploads: Some(uploads),
        ..Default::default()
    }))
}

pub async fn abort(
    door: &Door,
    req: S3Request<AbortMultipartUploadInput>,
) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
    let user = owner(&req, &req.input.bucket)?;
    let upload = find(door, user.id, &req.input.upload_id, &req.input.key).await?;
    // The parts' blocks go at once, but for those something else uses or was told of.
    let st = door.state();
    let hashes = st.meta.delete_upload(upload.id).await.map_err(meta)?;
    space::discard(st, user.space, &hashes, space::upload_claim(upload.id)).await;
    Ok(S3Response::with_status(AbortMultipartUploadOutput::default(), axum::http::StatusCode::NO_CONTENT))
}

/// True if the blocks have the layout every version has: all full-size but the last.
fn uniform(blocks: &[BlockEntry], block_size: i64) -> bool {
    blocks.split_last().is_none_or(|(last, rest)| rest.iter().all(|b| b.size == block_size) && last.size <= block_size)
}

pub async fn complete(
    door: &Door,
    req: S3Request<CompleteMultipartUploadInput>,
) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
    let user = owner(&req, &req.input.bucket)?;
    let i = req.input;
    if i.if_match.is_some() || i.if_none_match.is_some() {
        return Err(s3_error!(NotImplemented, "conditional CompleteMultipartUpload is not supported"));
    }
    let upload = find(door, user.id, &i.upload_id, &i.key).await?;
    let (path, _) = key_path(&i.key)?;
    let asked = i.multipart_upload.and_then(|m| m.parts).unwrap_or_default();
    if asked.is_empty() {
        return Err(s3_error!(MalformedXML, "list at least one part to complete an upload"));
    }
    let st = door.state();
    let stored = st.meta.list_parts(upload.id).await.map_err(meta)?;
    let mut blocks: Vec<BlockEntry> = Vec::new();
    let mut md5s = Md5::new();
    let mut last = 0i64;
    for p in &asked {
        let n = i64::from(p.part_number.ok_or_else(|| s3_error!(InvalidPart, "a part has no part number"))?);
        if n <= last {
            return Err(s3_error!(InvalidPartOrder, "parts must be listed in ascending order"));
        }
        last = n;
        let Some(have) = stored.iter().find(|s| s.part_number == n) else {
            return Err(s3_error!(InvalidPart, "part {n} was not uploaded"));
        };
        let same = p.e_tag.as_ref().is_none_or(|e| have.etag.trim_matches('"') == e.value());
        if !same {
            return Err(s3_error!(InvalidPart, "part {n} has ETag {}, not the one given", have.etag));
        }
        let raw = hex::decode(have.etag.trim_matches('"')).map_err(super::error::internal)?;
        md5s.update(&raw);
        blocks.extend(st.meta.part_blocks(upload.id, n).await.map_err(meta)?);
    }
    let etag = format!("\"{}-{}\"", hex::encode(md5s.finalize()), asked.len());
    // One completion at a time: a second one meanwhile (a client retrying early, or two
    // clients) would make a second version of the same upload.
    let stale = crate::meta::now_ms() - COMPLETION_STALE_MS;
    if !st.meta.begin_complete(upload.id, stale).await.map_err(meta)? {
        return Err(s3_error!(
            OperationAborted,
            "another request is completing this upload; try again in a moment (it then answers NoSuchUpload once done)"
        ));
    }
    let in_hand = Completing { state: st.clone(), upload: upload.id, finished: false };
    let block_size = st.settings.block_size as i64;
    let node = if uniform(&blocks, block_size) {
        let spec = CommitSpec { base: Base::Any, blocks: &blocks, block_size, device: Some("S3") };
        st.meta.commit(user.space, &path, &spec, LockTokens::NONE).await.map_err(|e| super::error::write(e.into()))?.0
    } else {
        // Parts that are not multiples of the block size leave short blocks in the middle;
        // re-split the content so the version has the layout the drive and sync rely on.
        let total: u64 = blocks.iter().map(|b| b.size.max(0) as u64).sum();
        // Its own parts (pending until the upload is deleted below) must not stand in its way.
        let opts = PutOptions {
            base: Base::Any,
            device: Some("S3"),
            content_length: Some(total),
            verify: None,
            allowance: total,
            // The re-split of a big object takes a while: a key revoked (or its user
            // disabled) meanwhile stops it before the commit, as it stops a PutObject.
            still_allowed: Some(crate::access::still_writable(
                st.meta.clone(),
                super::auth::again(st, &user.access_key),
                path.clone(),
                (user.space, path.clone()),
            )),
        };
        if total == 0 {
            let empty = futures::stream::empty::<Result<Bytes, std::io::Error>>();
            space::put_stream(st, user.space, &path, empty, opts, LockTokens::NONE)
                .await
                .map_err(super::error::write)?
                .0
        } else {
            let stream =
                space::open_range(st, user.space, &blocks, (0, total - 1), CacheMode::Normal).await.map_err(s3)?;
            space::put_stream(st, user.space, &path, Box::pin(stream), opts, LockTokens::NONE)
                .await
                .map_err(super::error::write)?
                .0
        }
    };
    door.save_meta(&node, etag.clone(), upload.content_type.clone(), upload.user_meta.clone()).await?;
    // Parts left out of the object, and parts re-split above, go now.
    let hashes = st.meta.delete_upload(upload.id).await.map_err(meta)?;
    in_hand.finish();
    space::discard(st, user.space, &hashes, space::upload_claim(upload.id)).await;
    Ok(S3Response::new(CompleteMultipartUploadOutput {
        bucket: Some(user.bucket),
        key: Some(i.key),
        e_tag: etag.parse().ok(),
        ..Default::default()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(size: i64) -> BlockEntry {
        BlockEntry { hash: String::new(), size }
    }

    #[test]
    fn uniform_layout_is_full_blocks_then_one_short() {
        assert!(uniform(&[], 4));
        assert!(uniform(&[b(4), b(4), b(1)], 4));
        assert!(uniform(&[b(3)], 4));
        assert!(!uniform(&[b(4), b(1), b(4)], 4), "a short block in the middle");
        assert!(!uniform(&[b(5)], 4));
    }
}
