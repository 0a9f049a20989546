//! Public links: a token that opens one file or folder of its owner's space to anyone who has
//! it (the REST side in `api/links.rs`, the public side in `api/public_links.rs`).
//!
//! A link names its target by node id, so it follows renames and moves; a target in the trash
//! (itself or a folder above it) does not open, and purging it deletes the link (foreign key).
//! The public side reads the link from the database on every request, so a revocation, a
//! change or an expiry is effective at once on every gateway. Paths below a shared folder are
//! resolved by walking down from the folder's node, never from the space's root, so nothing
//! outside the folder can be named.

use nimbus_proto::RemotePath;
use nimbus_proto::names::name_key;

use super::engine::{Conn, scalar, sql};
use super::tree::{CHILD_SQL, NODE_SQL};
use super::{BlockEntry, Meta, MetaError, MetaResult, NodeRow, SpaceId, VersionRow, now_ms};

/// Folders a target may sit under at most (paths are at most 256 deep; this bounds the walk
/// up even over a damaged tree).
const MAX_WALK: usize = 1024;

/// A link as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct LinkRow {
    pub id: i64,
    pub space_id: i64,
    pub node_id: i64,
    pub token_hash: String,
    pub token_sealed: String,
    pub mode: String,
    pub password_hash: Option<String>,
    pub expires_at: Option<i64>,
    pub max_downloads: Option<i64>,
    pub downloads: i64,
    pub created_at: i64,
}

impl LinkRow {
    /// Expired, or its downloads used up: it opens no more.
    pub fn spent(&self, now: i64) -> bool {
        self.expires_at.is_some_and(|e| e <= now) || self.max_downloads.is_some_and(|m| self.downloads >= m)
    }
}

/// A link found by its token, with the space it opens (vouched for by this row).
#[derive(Debug, Clone)]
pub struct PublicLink {
    pub link: LinkRow,
    pub space: SpaceId,
    pub owner: String,
}

/// What a new link is.
#[derive(Debug, Clone)]
pub struct NewLink {
    pub node_id: i64,
    pub token_hash: String,
    pub token_sealed: String,
    pub mode: String,
    pub password_hash: Option<String>,
    pub expires_at: Option<i64>,
    pub max_downloads: Option<i64>,
}

/// A change to a link: `None` leaves a field as it is, `Some(None)` clears it.
#[derive(Debug, Clone, Default)]
pub struct LinkUpdate {
    pub mode: Option<String>,
    pub password_hash: Option<Option<String>>,
    pub expires_at: Option<Option<i64>>,
    pub max_downloads: Option<Option<i64>>,
}

macro_rules! link_cols {
    () => {
        "l.id, l.space_id, l.node_id, l.token_hash, l.token_sealed, l.mode, l.password_hash, l.expires_at, \
         l.max_downloads, l.downloads, l.created_at"
    };
}

#[derive(sqlx::FromRow)]
struct PublicRow {
    #[sqlx(flatten)]
    link: LinkRow,
    username: String,
}

/// The node `id` of `space` and its path from the space's root, and whether it is live (neither
/// it nor a folder above it is in the trash). NotFound if there is no such node in the space.
pub(super) async fn node_path(c: &mut impl Conn, space: i64, id: i64) -> MetaResult<(NodeRow, RemotePath, bool)> {
    let node: NodeRow = sql(NODE_SQL).bind(id).fetch_optional(c).await?.ok_or(MetaError::NotFound)?;
    if node.space_id != space {
        return Err(MetaError::NotFound);
    }
    let mut names = Vec::new();
    let mut live = true;
    let mut cur = Some(node.id);
    while let Some(at) = cur {
        if names.len() > MAX_WALK {
            return Err(MetaError::NotFound);
        }
        let (parent, name, trashed): (Option<i64>, String, Option<i64>) =
            sql("SELECT parent_id, name, trashed_at FROM nodes WHERE id = $1 AND space_id = $2")
                .bind(at)
                .bind(space)
                .fetch_optional(c)
                .await?
                .ok_or(MetaError::NotFound)?;
        live &= trashed.is_none();
        if parent.is_some() {
            names.push(name);
        }
        cur = parent;
    }
    let mut path = RemotePath::root();
    for n in names.iter().rev() {
        path = path.join(n)?;
    }
    Ok((node, path, live))
}

impl Meta {
    pub async fn insert_link(&self, space: SpaceId, l: &NewLink) -> MetaResult<i64> {
        let mut db = self.db();
        Ok(scalar::<i64>(
            "INSERT INTO links (space_id, node_id, token_hash, token_sealed, mode, password_hash, expires_at, \
             max_downloads, downloads, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 0, $9) RETURNING id",
        )
        .bind(space.get())
        .bind(l.node_id)
        .bind(&l.token_hash)
        .bind(&l.token_sealed)
        .bind(&l.mode)
        .bind(&l.password_hash)
        .bind(l.expires_at)
        .bind(l.max_downloads)
        .bind(now_ms())
        .fetch_one(&mut db)
        .await?)
    }

    /// The space's links, oldest first.
    pub async fn list_links(&self, space: SpaceId) -> MetaResult<Vec<LinkRow>> {
        let mut db = self.db();
        const Q: &str = concat!("SELECT ", link_cols!(), " FROM links l WHERE l.space_id = $1 ORDER BY l.id");
        Ok(sql(Q).bind(space.get()).fetch_all(&mut db).await?)
    }

    pub async fn count_links(&self, space: SpaceId) -> MetaResult<i64> {
        let mut db = self.db();
        Ok(scalar::<i64>("SELECT COUNT(*) FROM links WHERE space_id = $1").bind(space.get()).fetch_one(&mut db).await?)
    }

    /// One of the space's links; None for another space's link or no link at all.
    pub async fn link(&self, space: SpaceId, id: i64) -> MetaResult<Option<LinkRow>> {
        let mut db = self.db();
        const Q: &str = concat!("SELECT ", link_cols!(), " FROM links l WHERE l.id = $1 AND l.space_id = $2");
        Ok(sql(Q).bind(id).bind(space.get()).fetch_optional(&mut db).await?)
    }

    /// Changes one of the space's links; false if it has no such link.
    pub async fn update_link(&self, space: SpaceId, id: i64, u: &LinkUpdate) -> MetaResult<bool> {
        let mut db = self.db();
        // Each field: `$k` says whether to set it, `$k+1` is the value (possibly null).
        let n = sql("UPDATE links SET \
             mode = CASE WHEN $3 THEN $4 ELSE mode END, \
             password_hash = CASE WHEN $5 THEN $6 ELSE password_hash END, \
             expires_at = CASE WHEN $7 THEN $8 ELSE expires_at END, \
             max_downloads = CASE WHEN $9 THEN $10 ELSE max_downloads END \
             WHERE id = $1 AND space_id = $2")
        .bind(id)
        .bind(space.get())
        .bind(u.mode.is_some())
        .bind(u.mode.clone())
        .bind(u.password_hash.is_some())
        .bind(u.password_hash.clone().flatten())
        .bind(u.expires_at.is_some())
        .bind(u.expires_at.flatten())
        .bind(u.max_downloads.is_some())
        .bind(u.max_downloads.flatten())
        .execute(&mut db)
        .await?;
        Ok(n > 0)
    }

    /// Deletes one of the space's links; false if it has no such link.
    pub async fn delete_link(&self, space: SpaceId, id: i64) -> MetaResult<bool> {
        let mut db = self.db();
        let n = sql("DELETE FROM links WHERE id = $1 AND space_id = $2")
            .bind(id)
            .bind(space.get())
            .execute(&mut db)
            .await?;
        Ok(n > 0)
    }

    /// The link a token opens (by the token's hash), if its owner's account is enabled and
    /// may make links. Read
    /// from the database every time: no cache can outlive a revocation.
    pub async fn link_by_token(&self, token_hash: &str) -> MetaResult<Option<PublicLink>> {
        let mut db = self.db();
        const Q: &str = concat!(
            "SELECT ",
            link_cols!(),
            ", u.username FROM links l JOIN users u ON u.id = l.space_id WHERE l.token_hash = $1 AND NOT u.disabled AND u.links"
        );
        let row: Option<PublicRow> = sql(Q).bind(token_hash).fetch_optional(&mut db).await?;
        Ok(row.map(|r| PublicLink { space: SpaceId::stored(r.link.space_id), owner: r.username, link: r.link }))
    }

    /// Counts one download of a link, atomically against its limit and expiry: false when the
    /// link is gone, expired or used up (then nothing is counted).
    pub async fn count_link_download(&self, id: i64) -> MetaResult<bool> {
        let mut db = self.db();
        let n = sql("UPDATE links SET downloads = downloads + 1 WHERE id = $1 \
             AND (max_downloads IS NULL OR downloads < max_downloads) AND (expires_at IS NULL OR expires_at > $2)")
        .bind(id)
        .bind(now_ms())
        .execute(&mut db)
        .await?;
        Ok(n > 0)
    }

    /// The node `id` of `space`, its current path, and whether it is live (not in the trash,
    /// nor under a folder in the trash).
    pub async fn node_path(&self, space: SpaceId, id: i64) -> MetaResult<(NodeRow, RemotePath, bool)> {
        let mut db = self.db();
        node_path(&mut db, space.get(), id).await
    }

    /// The live node at `rel` below the folder `dir` of `space`, walked down from `dir` one
    /// name at a time (so `rel` can only reach inside it).
    pub async fn resolve_below(&self, space: SpaceId, dir: i64, rel: &RemotePath) -> MetaResult<NodeRow> {
        let mut db = self.db();
        let mut cur: NodeRow = sql(NODE_SQL).bind(dir).fetch_optional(&mut db).await?.ok_or(MetaError::NotFound)?;
        if cur.space_id != space.get() {
            return Err(MetaError::NotFound);
        }
        for comp in rel.components() {
            if !cur.is_dir() {
                return Err(MetaError::NotFound);
            }
            cur = sql(CHILD_SQL)
                .bind(cur.id)
                .bind(name_key(comp))
                .fetch_optional(&mut db)
                .await?
                .ok_or(MetaError::NotFound)?;
        }
        Ok(cur)
    }

    /// The current version of the file `node` of `space` and its blocks.
    pub async fn file_content(&self, space: SpaceId, node: i64) -> MetaResult<(NodeRow, VersionRow, Vec<BlockEntry>)> {
        let mut db = self.db();
        let n: NodeRow = sql(NODE_SQL).bind(node).fetch_optional(&mut db).await?.ok_or(MetaError::NotFound)?;
        if n.space_id != space.get() {
            return Err(MetaError::NotFound);
        }
        if n.is_dir() {
            return Err(MetaError::IsADirectory(format!("`{}` is a folder", n.name)));
        }
        let vid = n.version_id.ok_or(MetaError::NotFound)?;
        let v: VersionRow = sql(
            "SELECT id, node_id, size, block_size, device, created_at FROM versions WHERE id = $1 AND node_id = $2",
        )
        .bind(vid)
        .bind(n.id)
        .fetch_optional(&mut db)
        .await?
        .ok_or(MetaError::NotFound)?;
        let blocks: Vec<BlockEntry> = sql("SELECT hash, size FROM version_blocks WHERE version_id = $1 ORDER BY idx")
            .bind(vid)
            .fetch_all(&mut db)
            .await?;
        Ok((n, v, blocks))
    }
}
