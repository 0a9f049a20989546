//! Buckets and objects: ListBuckets, Head/Create bucket, location, ListObjects (v1 and v2),
//! Get/Head (ranges, conditionals), Put, Copy, Delete, DeleteObjects. Multipart lives in
//! `multipart.rs`; both are methods of the one `S3 for Door` impl here.

use std::time::{Duration, UNIX_EPOCH};

use bytes::Bytes;
use nimbus_proto::RemotePath;
use s3s::dto::*;
use s3s::{S3, S3Error, S3Request, S3Response, S3Result, s3_error};

use super::auth::S3User;
use super::digest::{Md5Stream, Wanted, check_body, finish_md5};
use super::error::{meta, s3};
use super::listing::{self, Listed};
use super::{Door, multipart};
use crate::access::{self, Place, Want};
use crate::cache::CacheMode;
use crate::meta::{Base, LockTokens, NodeRow, S3ObjectMeta, SpaceId};
use crate::space::across::{self, End};
use crate::space::{self, PutOptions};

/// Listings return at most this many lines per page (S3's own limit).
const MAX_KEYS: i32 = 1000;

/// The caller, as the access check bound it to the request.
pub(super) fn caller<T>(req: &S3Request<T>) -> S3Result<S3User> {
    req.extensions
        .get::<S3User>()
        .cloned()
        .ok_or_else(|| s3_error!(AccessDenied, "sign the request with an access key"))
}

/// The caller, after checking the bucket is theirs (the access check did too; this keeps
/// every operation safe on its own).
pub(super) fn owner<T>(req: &S3Request<T>, bucket: &str) -> S3Result<S3User> {
    let user = caller(req)?;
    if bucket != user.bucket {
        return Err(s3_error!(AccessDenied, "access denied: your bucket is `{}`", user.bucket));
    }
    Ok(user)
}

/// An object key as a path in the space, and whether it names a folder (`dir/`). The same
/// `RemotePath` rules as every other door: `..`, empty segments, Windows-invalid names fail.
pub(super) fn key_path(key: &str) -> S3Result<(RemotePath, bool)> {
    if key.is_empty() {
        return Err(s3_error!(InvalidArgument, "the object key is empty"));
    }
    let (body, folder) = match key.strip_suffix('/') {
        Some(b) => (b, true),
        None => (key, false),
    };
    // A leading `/` would be swallowed by the path parser; in S3 it is part of the key.
    if body.is_empty() || body.starts_with('/') {
        return Err(s3_error!(InvalidArgument, "object keys cannot start with `/` or be only `/`"));
    }
    let path = RemotePath::parse(body).map_err(|e| s3(e.into()))?;
    Ok((path, folder))
}

/// The key of a path in the space (no leading `/`).
fn path_key(path: &RemotePath) -> String {
    path.components().join("/")
}

fn timestamp(ms: i64) -> Timestamp {
    Timestamp::from(UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64))
}

/// The ETag of a version: the MD5 form the S3 door stored, or the REST version ETag.
fn etag_for(version: i64, stored: Option<&S3ObjectMeta>) -> String {
    stored.map_or_else(|| format!("\"{version}\""), |m| m.etag.clone())
}

fn parse_etag(quoted: &str) -> Option<ETag> {
    quoted.parse().ok()
}

/// How a listing shows keys: as they are, or URL-encoded when the request says
/// `encoding-type=url` (Key, Prefix, Delimiter, StartAfter, Marker and NextMarker).
#[derive(Clone, Copy)]
struct Encoding {
    url: bool,
}

impl Encoding {
    fn of(asked: Option<&EncodingType>) -> Encoding {
        Encoding { url: asked.is_some_and(|e| e.as_str() == EncodingType::URL) }
    }

    fn apply(self, s: String) -> String {
        if self.url { listing::url_encoded(&s) } else { s }
    }

    fn keys(self, contents: &mut [Object], prefixes: &mut [CommonPrefix]) {
        if !self.url {
            return;
        }
        for o in contents {
            o.key = o.key.take().map(|k| self.apply(k));
        }
        for p in prefixes {
            p.prefix = p.prefix.take().map(|k| self.apply(k));
        }
    }
}

/// `x-amz-meta-*` as stored JSON.
fn user_meta_json(m: Option<&Metadata>) -> Option<String> {
    m.filter(|m| !m.is_empty()).and_then(|m| serde_json::to_string(m).ok())
}

fn user_meta_of(stored: Option<&S3ObjectMeta>) -> Option<Metadata> {
    stored.and_then(|m| m.user_meta.as_deref()).and_then(|j| serde_json::from_str(j).ok())
}

/// Checks a Content-MD5 header against what was received.
/// Evaluates If-Match / If-None-Match / If-(Un)Modified-Since against an object.
fn check_conditions(
    etag: &str,
    modified_ms: i64,
    if_match: Option<&ETagCondition>,
    if_none_match: Option<&ETagCondition>,
    if_modified_since: Option<&Timestamp>,
    if_unmodified_since: Option<&Timestamp>,
) -> S3Result<()> {
    let current = parse_etag(etag);
    let matches = |c: &ETagCondition| match (c, &current) {
        (ETagCondition::Any, _) => true,
        (ETagCondition::ETag(e), Some(cur)) => e.value() == cur.value(),
        _ => false,
    };
    // Seconds precision: HTTP dates carry no more.
    let modified = time::OffsetDateTime::from(timestamp(modified_ms / 1000 * 1000));
    if let Some(c) = if_match {
        if !matches(c) {
            return Err(s3_error!(PreconditionFailed, "the object's ETag is {etag}"));
        }
    } else if let Some(t) = if_unmodified_since
        && modified > time::OffsetDateTime::from(t.clone())
    {
        return Err(s3_error!(PreconditionFailed, "the object was modified since then"));
    }
    if let Some(c) = if_none_match {
        if matches(c) {
            return Err(S3Error::new(s3s::S3ErrorCode::NotModified));
        }
    } else if let Some(t) = if_modified_since
        && modified <= time::OffsetDateTime::from(t.clone())
    {
        return Err(S3Error::new(s3s::S3ErrorCode::NotModified));
    }
    Ok(())
}

/// The conditional headers of a read.
struct Conditions<'a> {
    if_match: Option<&'a ETagCondition>,
    if_none_match: Option<&'a ETagCondition>,
    if_modified_since: Option<&'a Timestamp>,
    if_unmodified_since: Option<&'a Timestamp>,
}

/// A folder the caller's listing walks: one of a space, or the virtual `Shared with me`.
#[derive(Debug, Clone)]
enum Dir {
    /// Node `node` of `space`; `top`: the caller's own root, where `Shared with me/` shows.
    Node { space: SpaceId, node: i64, top: bool },
    /// `Shared with me`: the caller's incoming shares, each walked into in its owner's space.
    Shares,
}

/// The caller's bucket as the listing walks it: their space, and under `Shared with me/` the
/// files and folders others shared with them (access.rs). Keys are built from names as the
/// walk goes, so nothing of an owner's space above a shared node is ever named.
struct CallerTree<'a> {
    meta: &'a crate::meta::Meta,
    caller: SpaceId,
    /// The caller's root row: the info of `Shared with me/`, a folder with no row of its own.
    root: Option<NodeRow>,
}

impl CallerTree<'_> {
    /// `Shared with me/` as a child of the caller's root, when they have a live share.
    async fn index_child(&self) -> Result<Option<listing::Child<NodeRow, Dir>>, crate::meta::MetaError> {
        let Some(root) = &self.root else { return Ok(None) };
        if !self.meta.has_incoming_shares(self.caller).await? {
            return Ok(None);
        }
        let name = nimbus_proto::names::SHARED_WITH_ME.to_string();
        Ok(Some(listing::Child { name, dir: Some(Dir::Shares), info: root.clone() }))
    }

    /// The caller's shares as children of `Shared with me/`, each its owner's node under the
    /// caller's name for it.
    async fn shares(&self) -> Result<Vec<listing::Child<NodeRow, Dir>>, crate::meta::MetaError> {
        let mut out = Vec::new();
        for s in self.meta.incoming_shares(self.caller).await? {
            let Some(g) = self.meta.shared_grant(self.caller, &s.row.name).await? else { continue };
            let dir = g.node.is_dir().then_some(Dir::Node { space: g.owner, node: g.node.id, top: false });
            out.push(listing::Child { name: g.name.clone(), dir, info: g.node });
        }
        Ok(out)
    }
}

/// Keeps the children whose piece is at or after `from` (after, unless `inclusive`), in
/// piece order, at most `limit`.
fn window<D>(
    mut all: Vec<listing::Child<NodeRow, D>>,
    from: &str,
    inclusive: bool,
    limit: usize,
) -> Vec<listing::Child<NodeRow, D>> {
    all.retain(|c| {
        let p = c.piece();
        p.as_str() > from || (inclusive && p == from)
    });
    all.sort_by_key(|c| c.piece());
    all.truncate(limit);
    all
}

impl listing::Tree for CallerTree<'_> {
    type Info = NodeRow;
    type Error = crate::meta::MetaError;
    type Dir = Dir;
    async fn children(
        &self,
        dir: Dir,
        from: &str,
        inclusive: bool,
        limit: usize,
    ) -> Result<Vec<listing::Child<NodeRow, Dir>>, Self::Error> {
        match dir {
            Dir::Shares => Ok(window(self.shares().await?, from, inclusive, limit)),
            Dir::Node { space, node, top } => {
                let rows = self.meta.s3_children(space, node, from, inclusive, limit as i64).await?;
                let mut out: Vec<_> = rows
                    .into_iter()
                    .map(|n| listing::Child {
                        name: n.name.clone(),
                        dir: n.is_dir().then_some(Dir::Node { space, node: n.id, top: false }),
                        info: n,
                    })
                    .collect();
                if top && let Some(index) = self.index_child().await? {
                    // `Shared with me` is reserved, so no stored child has its piece.
                    out.push(index);
                    out = window(out, from, inclusive, limit);
                }
                Ok(out)
            }
        }
    }
}

/// Where a key leads: how it was found, and the space and path to act on.
pub(super) struct Reach {
    place: Place,
    space: SpaceId,
    path: RemotePath,
    /// The path as the caller named it (their own view).
    asked: RemotePath,
    /// The access key that reached it (checked again before an upload commits).
    access_key: String,
}

/// An object's current version, its ETag, its stored S3 metadata, and where it is.
type Head = (std::sync::Arc<crate::meta::Manifest>, String, Option<S3ObjectMeta>, Reach);

/// The ETag of an empty object (what an empty folder's `name/` marker carries).
const EMPTY_ETAG: &str = "\"d41d8cd98f00b204e9800998ecf8427e\"";

impl Door {
    /// One page of a listing. The walk starts in the folder the prefix points into (up to its
    /// last `/`) and reads about as much as the page holds (see `listing.rs`): with delimiter
    /// `/` that folder's children, otherwise its subtree in key order from where the page
    /// starts, empty folders as `name/` markers.
    async fn list(
        &self,
        user: &S3User,
        prefix: &str,
        delimiter: Option<&str>,
        after: Option<&str>,
        max_keys: Option<i32>,
    ) -> S3Result<(Vec<Object>, Vec<CommonPrefix>, Option<String>)> {
        let max = max_keys.unwrap_or(MAX_KEYS);
        if max < 0 {
            return Err(s3_error!(InvalidArgument, "max-keys cannot be negative"));
        }
        let dir_key = prefix.rfind('/').map_or("", |i| &prefix[..i]);
        let dir = if dir_key.is_empty() {
            Some(RemotePath::root())
        } else {
            // No valid folder has an invalid name, so nothing is under it.
            RemotePath::parse(dir_key).ok().filter(|_| !dir_key.starts_with('/'))
        };
        let mut tree = CallerTree { meta: &self.state.meta, caller: user.space, root: None };
        let root = match dir {
            Some(d) => match access::locate(&self.state.meta, user.space, &d).await {
                Ok(Place::SharedIndex) => Some((Dir::Shares, d)),
                Ok(place) => {
                    let (space, path) = place.target(Want::Read).map_err(s3)?;
                    match self.state.meta.stat(space, &path).await {
                        Ok((n, _)) if n.is_dir() => {
                            let top = !place.is_shared() && path.is_root();
                            if top {
                                tree.root = Some(n.clone());
                            }
                            Some((Dir::Node { space, node: n.id, top }, d))
                        }
                        Ok(_) | Err(crate::meta::MetaError::NotFound) => None,
                        Err(e) => return Err(meta(e)),
                    }
                }
                Err(crate::error::ApiError::NotFound(_)) => None,
                Err(e) => return Err(s3(e)),
            },
            None => None,
        };
        let Some((root, dir)) = root else { return Ok((Vec::new(), Vec::new(), None)) };
        let base = if dir.is_root() { String::new() } else { format!("{}/", path_key(&dir)) };
        let page = listing::page(&tree, root, &base, prefix, delimiter, after, max.min(MAX_KEYS) as usize)
            .await
            .map_err(meta)?;
        let versions: Vec<i64> = page
            .items
            .iter()
            .filter_map(|l| match l {
                Listed::Object { info, marker: false, .. } => info.version_id,
                _ => None,
            })
            .collect();
        let stored = self.state.meta.s3_object_meta(&versions).await.map_err(meta)?;
        let mut objects = Vec::new();
        let mut prefixes = Vec::new();
        for line in page.items {
            match line {
                Listed::Object { key, info, marker } => {
                    let (size, etag) = if marker {
                        (0, EMPTY_ETAG.to_string())
                    } else {
                        let v = info.version_id.unwrap_or(0);
                        (info.size, etag_for(v, stored.get(&v)))
                    };
                    objects.push(Object {
                        key: Some(key),
                        size: Some(size),
                        last_modified: Some(timestamp(info.modified_at)),
                        e_tag: parse_etag(&etag),
                        storage_class: Some(ObjectStorageClass::from_static(ObjectStorageClass::STANDARD)),
                        ..Default::default()
                    })
                }
                Listed::Prefix(p) => prefixes.push(CommonPrefix { prefix: Some(p) }),
            }
        }
        Ok((objects, prefixes, page.next))
    }

    /// Where a key's path leads for `want`: the caller's space, or through `Shared with me/`
    /// the owner's, with the share's permission (access.rs). `new`: the key is about to be
    /// created (a new name directly in `Shared with me/` is refused, not missing).
    async fn reach(&self, user: &S3User, path: &RemotePath, want: Want, new: bool) -> S3Result<Reach> {
        let meta = &self.state.meta;
        let place = if new {
            access::locate_new(meta, user.space, path).await
        } else {
            access::locate(meta, user.space, path).await
        }
        .map_err(s3)?;
        let (space, target) = place.target(want).map_err(s3)?;
        Ok(Reach { place, space, path: target, asked: path.clone(), access_key: user.access_key.clone() })
    }

    /// Records what the caller did through a share (access.rs); nothing in their own space.
    async fn audit_access(&self, user: &S3User, at: &Reach, what: &str) -> S3Result<()> {
        let actor = access::Actor { id: user.id, name: &user.username, ip: None };
        let shown = at.place.show(&at.path).map_err(s3)?;
        at.place.audit_access(&self.state.meta, &actor, what, &shown).await.map_err(s3)
    }

    /// The current version of an object with its stored S3 metadata, and the space it is in.
    async fn head(&self, user: &S3User, key: &str) -> S3Result<Head> {
        let (path, folder) = key_path(key)?;
        if folder {
            // Folders are not objects (they list as common prefixes).
            return Err(s3_error!(NoSuchKey, "`{key}` names a folder, not an object"));
        }
        let r = self.reach(user, &path, Want::Read, false).await?;
        let m = self.state.meta.manifest(r.space, &r.path, None).await.map_err(|e| s3(r.place.scrub(e)))?;
        let stored = self.state.meta.s3_object_meta(&[m.version.id]).await.map_err(meta)?.remove(&m.version.id);
        let etag = etag_for(m.version.id, stored.as_ref());
        Ok((m, etag, stored, r))
    }

    /// The object a GET or HEAD reads, after its conditions passed (one path for both).
    async fn readable(&self, user: &S3User, key: &str, versioned: bool, c: Conditions<'_>) -> S3Result<Head> {
        if versioned {
            return Err(s3_error!(NotImplemented, "partNumber and versionId are not supported"));
        }
        let (m, etag, stored, r) = self.head(user, key).await?;
        check_conditions(
            &etag,
            m.version.created_at,
            c.if_match,
            c.if_none_match,
            c.if_modified_since,
            c.if_unmodified_since,
        )?;
        Ok((m, etag, stored, r))
    }

    /// Streams a body into the space as the new version of `path`, computing its MD5; the
    /// commit happens only after the body checked out (Content-MD5, SigV4 payload hash).
    pub(super) async fn put_body(
        &self,
        to: &Reach,
        body: Option<StreamingBlob>,
        content_length: Option<i64>,
        content_md5: Option<&str>,
        wanted: Wanted,
        base: Base,
    ) -> S3Result<(NodeRow, String)> {
        let body =
            body.unwrap_or_else(|| StreamingBlob::wrap(futures::stream::empty::<Result<Bytes, std::io::Error>>()));
        let (stream, hasher) = Md5Stream::new(body, &wanted);
        let verify = {
            let hasher = hasher.clone();
            let content_md5 = content_md5.map(str::to_string);
            move || check_body(&hasher, content_length, content_md5.as_deref(), &wanted)
        };
        let opts = PutOptions {
            base,
            device: Some("S3"),
            content_length: content_length.and_then(|l| u64::try_from(l).ok()),
            verify: Some(&verify),
            allowance: 0,
            still_allowed: Some(access::still_writable(
                self.state.meta.clone(),
                super::auth::again(&self.state, &to.access_key),
                to.asked.clone(),
                (to.space, to.path.clone()),
            )),
        };
        let (node, _, _) = match space::put_stream(&self.state, to.space, &to.path, stream, opts, LockTokens::NONE)
            .await
        {
            Err(crate::error::ApiError::Conflict(m)) if base != Base::Any => {
                return Err(s3_error!(PreconditionFailed, "{}", to.place.scrub(crate::error::ApiError::Conflict(m))));
            }
            other => other.map_err(|e| super::error::write(to.place.scrub(e)))?,
        };
        Ok((node, format!("\"{}\"", hex::encode(finish_md5(&hasher)))))
    }

    pub(super) async fn save_meta(
        &self,
        node: &NodeRow,
        etag: String,
        content_type: Option<String>,
        user_meta: Option<String>,
    ) -> S3Result<()> {
        let Some(version_id) = node.version_id else { return Ok(()) };
        self.state
            .meta
            .set_s3_object_meta(&S3ObjectMeta { version_id, etag, content_type, user_meta })
            .await
            .map_err(meta)
    }

    /// The base a conditional write expects (If-None-Match: *, If-Match: ETag).
    async fn write_base(
        &self,
        user: &S3User,
        key: &str,
        if_match: Option<&ETagCondition>,
        if_none_match: Option<&ETagCondition>,
    ) -> S3Result<Base> {
        if let Some(c) = if_none_match {
            return match c {
                ETagCondition::Any => Ok(Base::Expect(None)),
                _ => Err(s3_error!(NotImplemented, "If-None-Match on writes supports only `*`")),
            };
        }
        let Some(c) = if_match else { return Ok(Base::Any) };
        match self.head(user, key).await {
            Ok((m, etag, _, _)) => {
                let ok = match c {
                    ETagCondition::Any => true,
                    ETagCondition::ETag(e) => parse_etag(&etag).is_some_and(|cur| cur.value() == e.value()),
                };
                if ok {
                    Ok(Base::Expect(Some(m.version.id)))
                } else {
                    Err(s3_error!(PreconditionFailed, "the object's ETag is {etag}"))
                }
            }
            Err(e) if *e.code() == s3s::S3ErrorCode::NoSuchKey => {
                Err(s3_error!(PreconditionFailed, "there is no such object to match"))
            }
            Err(e) => Err(e),
        }
    }
}

#[async_trait::async_trait]
impl S3 for Door {
    async fn list_buckets(&self, req: S3Request<ListBucketsInput>) -> S3Result<S3Response<ListBucketsOutput>> {
        let user = caller(&req)?;
        let row = self.state.meta.user(user.id).await.map_err(meta)?;
        let created = row.map_or(0, |u| u.created_at);
        Ok(S3Response::new(ListBucketsOutput {
            buckets: Some(vec![Bucket {
                name: Some(user.bucket.clone()),
                creation_date: Some(timestamp(created)),
                ..Default::default()
            }]),
            owner: Some(Owner { display_name: Some(user.username.clone()), id: Some(user.id.to_string()) }),
            ..Default::default()
        }))
    }

    async fn head_bucket(&self, req: S3Request<HeadBucketInput>) -> S3Result<S3Response<HeadBucketOutput>> {
        owner(&req, &req.input.bucket)?;
        Ok(S3Response::new(HeadBucketOutput::default()))
    }

    async fn create_bucket(&self, req: S3Request<CreateBucketInput>) -> S3Result<S3Response<CreateBucketOutput>> {
        // Every user has exactly one bucket, which always exists.
        owner(&req, &req.input.bucket)?;
        Err(s3_error!(BucketAlreadyOwnedByYou, "this is your bucket; it always exists"))
    }

    async fn delete_bucket(&self, req: S3Request<DeleteBucketInput>) -> S3Result<S3Response<DeleteBucketOutput>> {
        owner(&req, &req.input.bucket)?;
        Err(s3_error!(AccessDenied, "your bucket is your space and cannot be deleted"))
    }

    async fn get_bucket_location(
        &self,
        req: S3Request<GetBucketLocationInput>,
    ) -> S3Result<S3Response<GetBucketLocationOutput>> {
        owner(&req, &req.input.bucket)?;
        Ok(S3Response::new(GetBucketLocationOutput::default()))
    }

    async fn list_objects_v2(&self, req: S3Request<ListObjectsV2Input>) -> S3Result<S3Response<ListObjectsV2Output>> {
        let user = owner(&req, &req.input.bucket)?;
        let i = &req.input;
        let token = match &i.continuation_token {
            Some(t) => Some(
                listing::decode_token(t)
                    .ok_or_else(|| s3_error!(InvalidArgument, "invalid continuation token; list again without one"))?,
            ),
            None => None,
        };
        // The later of start-after and the token is where this page starts.
        let after = match (token, i.start_after.clone()) {
            (Some(t), Some(s)) => Some(t.max(s)),
            (t, s) => t.or(s),
        };
        let prefix = i.prefix.clone().unwrap_or_default();
        let (mut contents, mut prefixes, next) =
            self.list(&user, &prefix, i.delimiter.as_deref(), after.as_deref(), i.max_keys).await?;
        let enc = Encoding::of(i.encoding_type.as_ref());
        enc.keys(&mut contents, &mut prefixes);
        Ok(S3Response::new(ListObjectsV2Output {
            name: Some(user.bucket.clone()),
            prefix: Some(enc.apply(prefix)),
            delimiter: i.delimiter.clone().map(|d| enc.apply(d)),
            max_keys: Some(i.max_keys.unwrap_or(MAX_KEYS)),
            key_count: Some((contents.len() + prefixes.len()) as i32),
            continuation_token: i.continuation_token.clone(),
            start_after: i.start_after.clone().map(|s| enc.apply(s)),
            is_truncated: Some(next.is_some()),
            next_continuation_token: next.as_deref().map(listing::encode_token),
            contents: Some(contents),
            common_prefixes: Some(prefixes),
            encoding_type: i.encoding_type.clone(),
            ..Default::default()
        }))
    }

    async fn list_objects(&self, req: S3Request<ListObjectsInput>) -> S3Result<S3Response<ListObjectsOutput>> {
        let user = owner(&req, &req.input.bucket)?;
        let i = &req.input;
        let prefix = i.prefix.clone().unwrap_or_default();
        let (mut contents, mut prefixes, next) =
            self.list(&user, &prefix, i.delimiter.as_deref(), i.marker.as_deref(), i.max_keys).await?;
        let enc = Encoding::of(i.encoding_type.as_ref());
        enc.keys(&mut contents, &mut prefixes);
        // V1 returns NextMarker only with a delimiter; without one the client uses the last key.
        let next_marker = next.clone().filter(|_| i.delimiter.is_some()).map(|m| enc.apply(m));
        Ok(S3Response::new(ListObjectsOutput {
            name: Some(user.bucket.clone()),
            prefix: Some(enc.apply(prefix)),
            delimiter: i.delimiter.clone().map(|d| enc.apply(d)),
            marker: i.marker.clone().map(|m| enc.apply(m)),
            max_keys: Some(i.max_keys.unwrap_or(MAX_KEYS)),
            is_truncated: Some(next.is_some()),
            next_marker,
            contents: Some(contents),
            common_prefixes: Some(prefixes),
            encoding_type: i.encoding_type.clone(),
            ..Default::default()
        }))
    }

    async fn head_object(&self, req: S3Request<HeadObjectInput>) -> S3Result<S3Response<HeadObjectOutput>> {
        let user = owner(&req, &req.input.bucket)?;
        let i = &req.input;
        let conds = Conditions {
            if_match: i.if_match.as_ref(),
            if_none_match: i.if_none_match.as_ref(),
            if_modified_since: i.if_modified_since.as_ref(),
            if_unmodified_since: i.if_unmodified_since.as_ref(),
        };
        let (m, etag, stored, _) =
            self.readable(&user, &i.key, i.part_number.is_some() || i.version_id.is_some(), conds).await?;
        Ok(S3Response::new(HeadObjectOutput {
            content_length: Some(m.version.size),
            e_tag: parse_etag(&etag),
            last_modified: Some(timestamp(m.version.created_at)),
            accept_ranges: Some("bytes".into()),
            content_type: stored.as_ref().and_then(|s| s.content_type.clone()),
            metadata: user_meta_of(stored.as_ref()),
            ..Default::default()
        }))
    }

    async fn get_object(&self, req: S3Request<GetObjectInput>) -> S3Result<S3Response<GetObjectOutput>> {
        let user = owner(&req, &req.input.bucket)?;
        let i = &req.input;
        let conds = Conditions {
            if_match: i.if_match.as_ref(),
            if_none_match: i.if_none_match.as_ref(),
            if_modified_since: i.if_modified_since.as_ref(),
            if_unmodified_since: i.if_unmodified_since.as_ref(),
        };
        let (m, etag, stored, at) =
            self.readable(&user, &i.key, i.part_number.is_some() || i.version_id.is_some(), conds).await?;
        self.audit_access(&user, &at, "read").await?;
        let size = m.version.size.max(0) as u64;
        let (start, end, content_range) = match &i.range {
            Some(r) => {
                let range = r
                    .check(size)
                    .map_err(|_| s3_error!(InvalidRange, "the range is not satisfiable for {size} bytes"))?;
                (range.start, range.end, Some(format!("bytes {}-{}/{size}", range.start, range.end - 1)))
            }
            None => (0, size, None),
        };
        let len = end - start;
        let body = if len == 0 {
            StreamingBlob::wrap(futures::stream::empty::<Result<Bytes, std::io::Error>>())
        } else {
            let stream = space::open_range(&self.state, at.space, &m.blocks, (start, end - 1), CacheMode::Normal)
                .await
                .map_err(s3)?;
            StreamingBlob::wrap(sync_wrapper::SyncStream::new(stream))
        };
        let mut out = GetObjectOutput {
            body: Some(body),
            content_length: Some(len as i64),
            content_range,
            e_tag: parse_etag(&etag),
            last_modified: Some(timestamp(m.version.created_at)),
            accept_ranges: Some("bytes".into()),
            content_type: stored.as_ref().and_then(|s| s.content_type.clone()),
            metadata: user_meta_of(stored.as_ref()),
            ..Default::default()
        };
        if let Some(ct) = &i.response_content_type {
            out.content_type = Some(ct.clone());
        }
        if let Some(cd) = &i.response_content_disposition {
            out.content_disposition = Some(cd.clone());
        }
        let mut resp = S3Response::new(out);
        if i.range.is_some() {
            resp.status = Some(axum::http::StatusCode::PARTIAL_CONTENT);
        }
        Ok(resp)
    }

    async fn put_object(&self, req: S3Request<PutObjectInput>) -> S3Result<S3Response<PutObjectOutput>> {
        let user = owner(&req, &req.input.bucket)?;
        let wanted = Wanted::of(&req.headers, req.trailing_headers.clone());
        let i = req.input;
        if i.write_offset_bytes.is_some() {
            return Err(s3_error!(NotImplemented, "appends (x-amz-write-offset-bytes) are not supported"));
        }
        let (path, folder) = key_path(&i.key)?;
        if folder {
            if i.content_length.unwrap_or(0) > 0 {
                return Err(s3_error!(InvalidArgument, "a key ending in `/` is a folder and cannot hold data"));
            }
            let to = self.reach(&user, &path, Want::Write, true).await?;
            let (_, created, _) =
                self.state.meta.mkdir(to.space, &to.path, LockTokens::NONE).await.map_err(|e| s3(to.place.scrub(e)))?;
            if created {
                self.audit_access(&user, &to, "create folder").await?;
            }
            return Ok(S3Response::new(PutObjectOutput {
                e_tag: parse_etag("\"d41d8cd98f00b204e9800998ecf8427e\""),
                ..Default::default()
            }));
        }
        let to = self.reach(&user, &path, Want::Write, true).await?;
        let base = self.write_base(&user, &i.key, i.if_match.as_ref(), i.if_none_match.as_ref()).await?;
        let (node, etag) = self.put_body(&to, i.body, i.content_length, i.content_md5.as_deref(), wanted, base).await?;
        self.audit_access(&user, &to, "write").await?;
        let content_type = i.content_type.map(|c| c.to_string());
        self.save_meta(&node, etag.clone(), content_type, user_meta_json(i.metadata.as_ref())).await?;
        Ok(S3Response::new(PutObjectOutput { e_tag: parse_etag(&etag), size: Some(node.size), ..Default::default() }))
    }

    async fn copy_object(&self, req: S3Request<CopyObjectInput>) -> S3Result<S3Response<CopyObjectOutput>> {
        let user = owner(&req, &req.input.bucket)?;
        let i = &req.input;
        let CopySource::Bucket { bucket, key, version_id } = &i.copy_source else {
            return Err(s3_error!(NotImplemented, "copies from access points are not supported"));
        };
        if version_id.is_some() {
            return Err(s3_error!(NotImplemented, "copying a specific version is not supported"));
        }
        // The source must be the caller's own bucket too: no door reaches another space.
        if **bucket != *user.bucket {
            return Err(s3_error!(AccessDenied, "access denied: your bucket is `{}`", user.bucket));
        }
        let (src_m, src_etag, src_meta, src) = self.head(&user, key).await?;
        check_conditions(
            &src_etag,
            src_m.version.created_at,
            i.copy_source_if_match.as_ref(),
            i.copy_source_if_none_match.as_ref(),
            i.copy_source_if_modified_since.as_ref(),
            i.copy_source_if_unmodified_since.as_ref(),
        )
        .map_err(|e| {
            if *e.code() == s3s::S3ErrorCode::NotModified {
                s3_error!(PreconditionFailed, "the copy source condition failed")
            } else {
                e
            }
        })?;
        let (dst, folder) = key_path(&i.key)?;
        if folder {
            return Err(s3_error!(InvalidArgument, "the copy destination cannot be a folder key"));
        }
        let replace = i.metadata_directive.as_ref().is_some_and(|d| d.as_str() == MetadataDirective::REPLACE);
        let to = self.reach(&user, &dst, Want::Write, true).await?;
        let (src_path, dst) = (src.path.clone(), to.path.clone());
        let node = if src.space == to.space && src_path == dst {
            // Copying an object onto itself only changes its metadata (how clients such as
            // rclone update a modification time); S3 refuses it without REPLACE.
            if !replace {
                return Err(s3_error!(
                    InvalidRequest,
                    "copying an object onto itself needs x-amz-metadata-directive: REPLACE"
                ));
            }
            // A metadata-only write still changes a locked object.
            self.state
                .meta
                .check_unlocked(to.space, &dst, false, LockTokens::NONE)
                .await
                .map_err(|e| s3(to.place.scrub(e)))?;
            src_m.node.clone()
        } else if src.space == to.space {
            let (node, _) = self
                .state
                .meta
                .copy_node(to.space, &src_path, &dst, true, Some("S3"), LockTokens::NONE)
                .await
                .map_err(|e| super::error::write(to.place.scrub(e)))?;
            node
        } else {
            // Across a share's edge the content is copied into the other owner's space, charged
            // to them, as over REST and WebDAV (space/across.rs).
            let from = End { space: src.space, path: src_path.clone() };
            let into = End { space: to.space, path: dst.clone() };
            let (node, _) = across::copy(&self.state, &from, &into, true, Some("S3"), LockTokens::NONE)
                .await
                .map_err(|e| super::error::write(access::scrub_across(&src.place, &to.place, e)))?;
            node
        };
        let (content_type, user_meta) = if replace {
            (i.content_type.clone().map(|c| c.to_string()), user_meta_json(i.metadata.as_ref()))
        } else {
            (
                src_meta.as_ref().and_then(|m| m.content_type.clone()),
                src_meta.as_ref().and_then(|m| m.user_meta.clone()),
            )
        };
        // A copy is a new version with the same content, so the same ETag.
        self.save_meta(&node, src_etag.clone(), content_type, user_meta).await?;
        let actor = access::Actor { id: user.id, name: &user.username, ip: None };
        let (from_shown, to_shown) = (src.place.show(&src_path).map_err(s3)?, to.place.show(&dst).map_err(s3)?);
        access::audit_transfer(&self.state.meta, &actor, "copy", (&src.place, &from_shown), (&to.place, &to_shown))
            .await
            .map_err(s3)?;
        Ok(S3Response::new(CopyObjectOutput {
            copy_object_result: Some(CopyObjectResult {
                e_tag: parse_etag(&src_etag),
                last_modified: Some(timestamp(node.modified_at)),
                ..Default::default()
            }),
            ..Default::default()
        }))
    }

    async fn delete_object(&self, req: S3Request<DeleteObjectInput>) -> S3Result<S3Response<DeleteObjectOutput>> {
        let user = owner(&req, &req.input.bucket)?;
        if req.input.version_id.is_some() {
            return Err(s3_error!(NotImplemented, "deleting a specific version is not supported"));
        }
        self.delete_key(&user, &req.input.key).await?;
        Ok(S3Response::with_status(DeleteObjectOutput::default(), axum::http::StatusCode::NO_CONTENT))
    }

    async fn delete_objects(&self, req: S3Request<DeleteObjectsInput>) -> S3Result<S3Response<DeleteObjectsOutput>> {
        let user = owner(&req, &req.input.bucket)?;
        let quiet = req.input.delete.quiet.unwrap_or(false);
        if req.input.delete.objects.len() > 1000 {
            return Err(s3_error!(MalformedXML, "at most 1000 keys per DeleteObjects request"));
        }
        let mut deleted = Vec::new();
        let mut errors = Vec::new();
        for o in &req.input.delete.objects {
            if o.version_id.is_some() {
                errors.push(Error {
                    key: Some(o.key.clone()),
                    code: Some("NotImplemented".into()),
                    message: Some("deleting a specific version is not supported".into()),
                    ..Default::default()
                });
                continue;
            }
            match self.delete_key(&user, &o.key).await {
                Ok(()) => {
                    if !quiet {
                        deleted.push(DeletedObject { key: Some(o.key.clone()), ..Default::default() });
                    }
                }
                Err(e) => errors.push(Error {
                    key: Some(o.key.clone()),
                    code: Some(e.code().as_str().to_string()),
                    message: e.message().map(str::to_string),
                    ..Default::default()
                }),
            }
        }
        Ok(S3Response::new(DeleteObjectsOutput { deleted: Some(deleted), errors: Some(errors), ..Default::default() }))
    }

    async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        multipart::create(self, req).await
    }

    async fn upload_part(&self, req: S3Request<UploadPartInput>) -> S3Result<S3Response<UploadPartOutput>> {
        multipart::upload_part(self, req).await
    }

    async fn list_parts(&self, req: S3Request<ListPartsInput>) -> S3Result<S3Response<ListPartsOutput>> {
        multipart::list_parts(self, req).await
    }

    async fn list_multipart_uploads(
        &self,
        req: S3Request<ListMultipartUploadsInput>,
    ) -> S3Result<S3Response<ListMultipartUploadsOutput>> {
        multipart::list_uploads(self, req).await
    }

    async fn complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        multipart::complete(self, req).await
    }

    async fn abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        multipart::abort(self, req).await
    }
}

impl Door {
    pub(super) fn state(&self) -> &crate::state::AppState {
        &self.state
    }

    /// Deletes one key (to the trash, like every door). S3 deletes are idempotent: a key
    /// that is not there is a success. A folder key deletes only an empty folder.
    async fn delete_key(&self, user: &S3User, key: &str) -> S3Result<()> {
        let (path, folder) = key_path(key)?;
        let at = match self.reach(user, &path, Want::Read, false).await {
            Ok(at) => at,
            // Idempotent as for a missing key in the caller's own space.
            Err(e) if *e.code() == s3s::S3ErrorCode::NoSuchKey => return Ok(()),
            Err(e) => return Err(e),
        };
        if at.place.is_share_entry() {
            return Err(s3_error!(
                AccessDenied,
                "`{key}` is what another user shared with you; leave the share (DELETE /api/v1/shares/{{id}}) instead"
            ));
        }
        let at = Reach { space: at.place.target(Want::Write).map_err(s3)?.0, ..at };
        let (space, path) = (at.space, at.path.clone());
        match self.state.meta.stat(space, &path).await {
            Ok((node, _)) => {
                if node.is_dir() != folder {
                    // `a` names a folder or `a/` names a file: no such object.
                    return Ok(());
                }
                if folder {
                    let (children, _) = self.state.meta.list_dir(space, &path, None, 1).await.map_err(meta)?;
                    if !children.is_empty() {
                        return Ok(());
                    }
                }
            }
            Err(crate::meta::MetaError::NotFound) => return Ok(()),
            Err(e) => return Err(meta(e)),
        }
        match self.state.meta.trash(space, &path, LockTokens::NONE).await {
            Ok(_) | Err(crate::meta::MetaError::NotFound) => {}
            Err(e) => return Err(s3(at.place.scrub(e))),
        }
        let audit = crate::meta::NewAudit {
            actor_id: Some(user.id),
            actor: Some(user.username.clone()),
            action: "delete".into(),
            target: Some(at.place.show(&path).map_err(s3)?.to_string()),
            ..Default::default()
        };
        self.state.meta.audit(audit).await.map_err(meta)?;
        self.audit_access(user, &at, "delete").await?;
        Ok(())
    }
}
