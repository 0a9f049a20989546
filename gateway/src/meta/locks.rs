//! Locks (taken through WebDAV, honoured by every door) and WebDAV dead properties.
//!
//! A lock guards a path of one space until it expires. The check lives here, inside the
//! transactions of `commit`, `trash`, `move_node` and `copy_node`, so no door can forget it:
//! a change to a locked path needs one of the lock's tokens (`held`). Lock creation takes the
//! same space lock as those transactions, so "check, then change" cannot interleave with a new
//! lock. A space holds few locks, so the live ones are read and matched in Rust.

use nimbus_proto::RemotePath;
use nimbus_proto::names::name_key;

use super::SpaceId;
use super::engine::{Conn, sql};
use super::{Meta, MetaError, MetaResult, now_ms};

#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct LockRow {
    pub token: String,
    pub space_id: i64,
    /// The locked path as the client spelled it (URL-encoded, below the door's prefix).
    pub path: String,
    /// [`lock_key`] of the path: what matching compares.
    pub path_key: String,
    pub principal: Option<String>,
    pub owner_xml: Option<String>,
    pub shared: bool,
    pub deep: bool,
    pub timeout_ms: i64,
    pub expires_at: i64,
    pub created_at: i64,
}

const LOCK_COLS: &str =
    "token, space_id, path, path_key, principal, owner_xml, shared, deep, timeout_ms, expires_at, created_at";

/// The key locks are matched by: the path with each component name-keyed (case-insensitive,
/// like names in a folder).
pub fn lock_key(path: &RemotePath) -> String {
    path.name_key()
}

/// True if `key` lies strictly below `dir`.
fn below(key: &str, dir: &str) -> bool {
    if dir == "/" {
        return key != "/";
    }
    key.len() > dir.len() && key.starts_with(dir) && key.as_bytes()[dir.len()] == b'/'
}

/// Does `lock` guard a change at `key` (and, with `subtree`, everything below `key`)?
fn covers(lock: &LockRow, key: &str, subtree: bool) -> bool {
    lock.path_key == key || (lock.deep && below(key, &lock.path_key)) || (subtree && below(&lock.path_key, key))
}

/// The lock tokens a caller presents with a change (WebDAV's `If` header, or the REST API's
/// `X-Nimbus-Lock-Token`): a change to a path a lock guards goes through only with one of the
/// lock's tokens. Every namespace change takes them, so no door can forget to pass them.
#[derive(Debug, Clone, Copy, Default)]
pub struct LockTokens<'a>(&'a [String]);

impl<'a> LockTokens<'a> {
    /// No tokens: a caller that took no lock (the drive, the S3 door, the server itself).
    pub const NONE: LockTokens<'static> = LockTokens(&[]);

    pub fn new(tokens: &'a [String]) -> LockTokens<'a> {
        LockTokens(tokens)
    }

    fn holds(&self, lock: &LockRow) -> bool {
        self.0.iter().any(|t| t == &lock.token)
    }
}

/// The lock that forbids changing `key` (with `subtree`: or anything below it) for a caller
/// holding the tokens `held`, if any. An exclusive lock must be held itself; of shared locks,
/// holding one is enough.
pub fn conflict<'a>(locks: &'a [LockRow], key: &str, subtree: bool, held: LockTokens<'_>) -> Option<&'a LockRow> {
    let covering: Vec<&LockRow> = locks.iter().filter(|l| covers(l, key, subtree)).collect();
    let holds = |l: &LockRow| held.holds(l);
    if let Some(l) = covering.iter().find(|l| !l.shared && !holds(l)) {
        return Some(l);
    }
    let any_held = covering.iter().any(|l| holds(l));
    covering.into_iter().find(|l| l.shared && !any_held)
}

/// A live lock on `key` (taken on it, or deep on a folder above it) whose token is among
/// `held`: what makes a state token in WebDAV's `If` header true (RFC 4918 §10.4).
pub fn held_on<'a>(locks: &'a [LockRow], key: &str, held: LockTokens<'_>) -> Option<&'a LockRow> {
    locks.iter().find(|l| covers(l, key, false) && held.holds(l))
}

/// The lock that prevents taking `new`, if any: an exclusive lock conflicts with every lock it
/// overlaps, a shared one only with exclusive ones.
pub fn lock_conflict<'a>(locks: &'a [LockRow], new: &LockRow) -> Option<&'a LockRow> {
    locks.iter().find(|l| covers(l, &new.path_key, new.deep) && (!new.shared || !l.shared))
}

pub(crate) fn locked_error(path: &str, lock: &LockRow) -> MetaError {
    let what = if lock.path_key == name_key(path) { "it".to_string() } else { format!("`{}`", lock.path) };
    MetaError::Locked(format!(
        "`{path}` is locked ({what} is locked by a WebDAV client until the lock is released or expires); \
         send the lock token to change it"
    ))
}

/// Fails with [`MetaError::Locked`] if a live lock of `space` forbids changing `path` (with
/// `subtree`: or anything below it) for a caller presenting `held`.
pub(crate) async fn check_locks(
    c: &mut impl Conn,
    space: i64,
    path: &RemotePath,
    subtree: bool,
    held: LockTokens<'_>,
) -> MetaResult<()> {
    let locks: Vec<LockRow> = sql(LIVE_LOCKS_SQL).bind(space).bind(now_ms()).fetch_all(c).await?;
    match conflict(&locks, &lock_key(path), subtree, held) {
        Some(l) => Err(locked_error(&path.to_string(), l)),
        None => Ok(()),
    }
}

/// Removes the locks on `path` and below (after it was moved away or deleted: a lock guards a
/// path, and RFC 4918 does not let it follow the resource).
pub(crate) async fn drop_locks_under(c: &mut impl Conn, space: i64, path: &RemotePath) -> MetaResult<()> {
    let key = lock_key(path);
    let like = if key == "/" { "/%".to_string() } else { format!("{}/%", like_escape(&key)) };
    sql("DELETE FROM dav_locks WHERE space_id = $1 AND (path_key = $2 OR path_key LIKE $3 ESCAPE '\\')")
        .bind(space)
        .bind(&key)
        .bind(&like)
        .execute(c)
        .await?;
    Ok(())
}

/// [`drop_locks_under`] for the locks one user (`principal`) took: a recipient's locks on an
/// owner's files when the share they came through ends.
pub(crate) async fn drop_locks_of(c: &mut impl Conn, space: i64, path: &RemotePath, principal: &str) -> MetaResult<()> {
    let key = lock_key(path);
    let like = if key == "/" { "/%".to_string() } else { format!("{}/%", like_escape(&key)) };
    sql("DELETE FROM dav_locks WHERE space_id = $1 AND principal = $4 AND (path_key = $2 OR path_key LIKE $3 ESCAPE '\\')")
        .bind(space)
        .bind(&key)
        .bind(&like)
        .bind(principal)
        .execute(c)
        .await?;
    Ok(())
}

pub(crate) fn like_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_")
}

pub(crate) const LIVE_LOCKS_SQL: &str = "SELECT token, space_id, path, path_key, principal, owner_xml, shared, deep, \
     timeout_ms, expires_at, created_at FROM dav_locks WHERE space_id = $1 AND expires_at > $2";

/// One WebDAV dead property as stored.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct PropRow {
    pub ns: String,
    pub name: String,
    pub prefix: Option<String>,
    pub xml: String,
}

/// Bounds on one node's WebDAV dead properties: clients choose them, and every PROPFIND of
/// the node (or of its folder) reads them all.
#[derive(Debug, Clone, Copy)]
pub struct PropLimits {
    /// Properties per node.
    pub count: usize,
    /// Bytes of one property's value (its XML).
    pub value_bytes: usize,
    /// Bytes of all of a node's properties (namespaces, names, prefixes and values).
    pub total_bytes: usize,
}

impl PropLimits {
    pub const DEFAULT: PropLimits = PropLimits { count: 64, value_bytes: 16 * 1024, total_bytes: 64 * 1024 };

    /// Whether `ops` applied to the node's `stored` properties stay within the limits. A value
    /// over `value_bytes` never fits; a node over a limit may still shrink (props stored before
    /// the limits existed), it cannot grow. `Err`: the indexes of the set operations that do
    /// not fit (those that add a property or a larger value).
    pub fn check(&self, stored: &[PropRow], ops: &[PropPatch]) -> Result<(), Vec<usize>> {
        use std::collections::BTreeMap;
        let size = |r: &PropRow| r.ns.len() + r.name.len() + r.prefix.as_deref().map_or(0, str::len) + r.xml.len();
        let before: BTreeMap<(&str, &str), usize> =
            stored.iter().map(|r| ((r.ns.as_str(), r.name.as_str()), size(r))).collect();
        let mut after = before.clone();
        for op in ops {
            match op {
                PropPatch::Set(r) => after.insert((r.ns.as_str(), r.name.as_str()), size(r)),
                PropPatch::Remove { ns, name } => after.remove(&(ns.as_str(), name.as_str())),
            };
        }
        let (count, total) = (after.len(), after.values().sum::<usize>());
        let grows = (count > self.count && count > before.len())
            || (total > self.total_bytes && total > before.values().sum::<usize>());
        let offending: Vec<usize> = ops
            .iter()
            .enumerate()
            .filter_map(|(i, op)| match op {
                PropPatch::Set(r) if r.xml.len() > self.value_bytes => Some(i),
                PropPatch::Set(r) if grows => {
                    let old = before.get(&(r.ns.as_str(), r.name.as_str()));
                    old.is_none_or(|old| size(r) > *old).then_some(i)
                }
                _ => None,
            })
            .collect();
        if offending.is_empty() && !grows { Ok(()) } else { Err(offending) }
    }
}

/// One step of a PROPPATCH.
#[derive(Debug, Clone)]
pub enum PropPatch {
    Set(PropRow),
    Remove { ns: String, name: String },
}

impl Meta {
    /// The live locks of a space.
    pub async fn live_locks(&self, space: SpaceId) -> MetaResult<Vec<LockRow>> {
        let space = space.get();
        {
            let mut db = self.db();
            Ok(sql(LIVE_LOCKS_SQL).bind(space).bind(now_ms()).fetch_all(&mut db).await?)
        }
    }

    /// Fails with [`MetaError::Locked`] if a live lock not in `held` guards `path` (with
    /// `subtree`: or anything below it). For changes outside the namespace transactions (an
    /// upload before its body is read, metadata-only writes); those check again inside.
    pub async fn check_unlocked(
        &self,
        space: SpaceId,
        path: &RemotePath,
        subtree: bool,
        held: LockTokens<'_>,
    ) -> MetaResult<()> {
        let space = space.get();
        let locks = self.live_locks(SpaceId::stored(space)).await?;
        match conflict(&locks, &lock_key(path), subtree, held) {
            Some(l) => Err(locked_error(&path.to_string(), l)),
            None => Ok(()),
        }
    }

    /// Takes a lock unless a live one conflicts (returned as `Err(Some(lock))`). Expired locks
    /// of the space are cleared on the way.
    pub async fn insert_lock(&self, lock: &LockRow) -> MetaResult<Result<(), LockRow>> {
        let now = now_ms();
        {
            let mut tx = self.begin_space(lock.space_id).await?;
            sql("DELETE FROM dav_locks WHERE space_id = $1 AND expires_at <= $2")
                .bind(lock.space_id)
                .bind(now)
                .execute(&mut tx)
                .await?;
            let live: Vec<LockRow> = sql(LIVE_LOCKS_SQL).bind(lock.space_id).bind(now).fetch_all(&mut tx).await?;
            if let Some(c) = lock_conflict(&live, lock) {
                return Ok(Err(c.clone()));
            }
            let text =
                format!("INSERT INTO dav_locks ({LOCK_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)");
            sql(sqlx::AssertSqlSafe(text))
                .bind(&lock.token)
                .bind(lock.space_id)
                .bind(&lock.path)
                .bind(&lock.path_key)
                .bind(&lock.principal)
                .bind(&lock.owner_xml)
                .bind(lock.shared)
                .bind(lock.deep)
                .bind(lock.timeout_ms)
                .bind(lock.expires_at)
                .bind(lock.created_at)
                .execute(&mut tx)
                .await?;
            tx.commit().await?;
            Ok(Ok(()))
        }
    }

    /// Extends a live lock of the space; None if there is no such lock.
    pub async fn refresh_lock(&self, space: SpaceId, token: &str, timeout_ms: i64) -> MetaResult<Option<LockRow>> {
        let space = space.get();
        let now = now_ms();
        {
            let mut db = self.db();
            let n = sql("UPDATE dav_locks SET timeout_ms = $3, expires_at = $4 WHERE space_id = $1 AND token = $2 AND expires_at > $5")
                .bind(space).bind(token).bind(timeout_ms).bind(now.saturating_add(timeout_ms)).bind(now)
                .execute(&mut db).await?;
            if n == 0 {
                return Ok(None);
            }
            let text = format!("SELECT {LOCK_COLS} FROM dav_locks WHERE space_id = $1 AND token = $2");
            Ok(sql(sqlx::AssertSqlSafe(text)).bind(space).bind(token).fetch_optional(&mut db).await?)
        }
    }

    /// Releases a lock of the space; false if the space has no such live lock.
    pub async fn delete_lock(&self, space: SpaceId, token: &str) -> MetaResult<bool> {
        let space = space.get();
        {
            let mut db = self.db();
            let n = sql("DELETE FROM dav_locks WHERE space_id = $1 AND token = $2 AND expires_at > $3")
                .bind(space)
                .bind(token)
                .bind(now_ms())
                .execute(&mut db)
                .await?;
            Ok(n > 0)
        }
    }

    /// Releases every lock on `path` and below.
    pub async fn delete_locks_under(&self, space: SpaceId, path: &RemotePath) -> MetaResult<()> {
        let space = space.get();
        {
            let mut db = self.db();
            drop_locks_under(&mut db, space, path).await?;
        };
        Ok(())
    }

    /// The dead properties of the node at `path`.
    pub async fn dav_props(&self, space: SpaceId, path: &RemotePath) -> MetaResult<Vec<PropRow>> {
        let space = space.get();
        let (node, _) = self.stat(SpaceId::stored(space), path).await?;
        {
            let mut db = self.db();
            Ok(sql("SELECT ns, name, prefix, xml FROM dav_props WHERE node_id = $1 ORDER BY ns, name")
                .bind(node.id)
                .fetch_all(&mut db)
                .await?)
        }
    }

    /// The dead properties of the node with id `node` of `space` (a listing knows the id).
    pub async fn dav_props_of(&self, space: SpaceId, node: i64) -> MetaResult<Vec<PropRow>> {
        let space = space.get();
        {
            let mut db = self.db();
            Ok(sql("SELECT d.ns, d.name, d.prefix, d.xml FROM dav_props d JOIN nodes n ON n.id = d.node_id \
             WHERE d.node_id = $1 AND n.space_id = $2 ORDER BY d.ns, d.name")
            .bind(node)
            .bind(space)
            .fetch_all(&mut db)
            .await?)
        }
    }

    /// Applies set and remove operations to the dead properties of the node at `path`, in
    /// order (RFC 4918 §9.2: a set then a remove of one property removes it), all or nothing.
    /// A patch that would pass [`PropLimits`] changes nothing and yields the indexes of the
    /// set operations that did not fit (`Ok(Err(..))`).
    pub async fn patch_dav_props(
        &self,
        space: SpaceId,
        path: &RemotePath,
        ops: &[PropPatch],
    ) -> MetaResult<Result<(), Vec<usize>>> {
        let space = space.get();
        let (node, _) = self.stat(SpaceId::stored(space), path).await?;
        {
            // The space lock serialises PROPPATCHes, so two cannot pass the limits together.
            let mut tx = self.begin_space(space).await?;
            let stored: Vec<PropRow> = sql("SELECT ns, name, prefix, xml FROM dav_props WHERE node_id = $1")
                .bind(node.id)
                .fetch_all(&mut tx)
                .await?;
            if let Err(offending) = PropLimits::DEFAULT.check(&stored, ops) {
                return Ok(Err(offending));
            }
            for op in ops {
                match op {
                    PropPatch::Remove { ns, name } => {
                        sql("DELETE FROM dav_props WHERE node_id = $1 AND ns = $2 AND name = $3")
                            .bind(node.id)
                            .bind(ns)
                            .bind(name)
                            .execute(&mut tx)
                            .await?;
                    }
                    PropPatch::Set(r) => {
                        sql(
                            "INSERT INTO dav_props (node_id, ns, name, prefix, xml) VALUES ($1, $2, $3, $4, $5) \
                             ON CONFLICT (node_id, ns, name) DO UPDATE SET prefix = EXCLUDED.prefix, xml = EXCLUDED.xml",
                        )
                        .bind(node.id).bind(&r.ns).bind(&r.name).bind(&r.prefix).bind(&r.xml)
                        .execute(&mut tx).await?;
                    }
                }
            }
            tx.commit().await?;
        };
        Ok(Ok(()))
    }

    /// Copies the dead properties of the node at `from` to the node at `to` (after a copy).
    pub async fn copy_dav_props(&self, space: SpaceId, from: &RemotePath, to: &RemotePath) -> MetaResult<()> {
        let space = space.get();
        let (src, _) = self.stat(SpaceId::stored(space), from).await?;
        let (dst, _) = self.stat(SpaceId::stored(space), to).await?;
        {
            let mut db = self.db();
            sql(
                "INSERT INTO dav_props (node_id, ns, name, prefix, xml) SELECT $2, ns, name, prefix, xml FROM dav_props WHERE node_id = $1 \
                 ON CONFLICT (node_id, ns, name) DO NOTHING",
            )
            .bind(src.id).bind(dst.id)
            .execute(&mut db).await?;
        };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(token: &str, path: &str, shared: bool, deep: bool) -> LockRow {
        LockRow {
            token: token.into(),
            space_id: 1,
            path: path.into(),
            path_key: name_key(path),
            principal: None,
            owner_xml: None,
            shared,
            deep,
            timeout_ms: 1000,
            expires_at: i64::MAX,
            created_at: 0,
        }
    }

    #[test]
    fn exclusive_lock_guards_its_path_and_depth() {
        let locks = vec![lock("t1", "/Docs/A.txt", false, false), lock("t2", "/Tree", false, true)];
        assert!(conflict(&locks, "/docs/a.txt", false, LockTokens::NONE).is_some(), "case-insensitive");
        assert!(conflict(&locks, "/docs/a.txt", false, LockTokens::new(&["t1".into()])).is_none());
        assert!(conflict(&locks, "/docs/a.txt2", false, LockTokens::NONE).is_none(), "whole components only");
        assert!(conflict(&locks, "/docs", false, LockTokens::NONE).is_none(), "the folder itself is free");
        assert!(conflict(&locks, "/docs", true, LockTokens::NONE).is_some(), "but not its subtree");
        assert!(conflict(&locks, "/tree/x/y", false, LockTokens::NONE).is_some(), "deep lock covers descendants");
        assert!(conflict(&locks, "/tree/x/y", false, LockTokens::new(&["t2".into()])).is_none());
        assert!(conflict(&locks, "/", true, LockTokens::new(&["t1".into()])).is_some(), "deleting / touches t2 too");
        assert!(conflict(&locks, "/", true, LockTokens::new(&["t1".into(), "t2".into()])).is_none());
    }

    #[test]
    fn a_token_is_held_on_what_its_lock_covers_only() {
        let locks = vec![lock("t1", "/Docs/A.txt", false, false), lock("t2", "/Tree", false, true)];
        let t = |s: &str| vec![s.to_string()];
        assert!(held_on(&locks, "/docs/a.txt", LockTokens::new(&t("t1"))).is_some());
        assert!(held_on(&locks, "/tree/x/y", LockTokens::new(&t("t2"))).is_some(), "a deep lock covers what is below");
        // Whatever conflicts or not: a token of another path, of no lock, or a depth-0 lock
        // on a folder does not make the condition true.
        assert!(held_on(&locks, "/docs/b.txt", LockTokens::new(&t("t1"))).is_none(), "unlocked file");
        assert!(held_on(&locks, "/docs/a.txt", LockTokens::new(&t("t2"))).is_none(), "another lock's token");
        assert!(held_on(&locks, "/docs/a.txt", LockTokens::new(&t("made-up"))).is_none());
        assert!(held_on(&locks, "/docs/a.txt", LockTokens::NONE).is_none());
        assert!(held_on(&[lock("t3", "/D", false, false)], "/d/x", LockTokens::new(&t("t3"))).is_none(), "depth 0");
        assert!(held_on(&locks, "/tree", LockTokens::new(&t("t2"))).is_some(), "the locked folder itself");
    }

    fn prop(name: &str, xml: &str) -> PropRow {
        PropRow { ns: "urn:x".into(), name: name.into(), prefix: None, xml: xml.into() }
    }

    #[test]
    fn dead_property_limits() {
        let l = PropLimits { count: 3, value_bytes: 10, total_bytes: 30 };
        let set = |n: &str, x: &str| PropPatch::Set(prop(n, x));
        let rm = |n: &str| PropPatch::Remove { ns: "urn:x".into(), name: n.into() };
        assert!(l.check(&[], &[set("a", "1"), set("b", "2"), set("c", "3")]).is_ok());
        // A fourth property: the new one does not fit; replacing one in place does.
        let full = [prop("a", "1"), prop("b", "2"), prop("c", "3")];
        assert_eq!(l.check(&full, &[set("a", "x"), set("d", "4")]), Err(vec![1]));
        assert!(l.check(&full, &[set("a", "x")]).is_ok());
        assert!(l.check(&full, &[rm("a"), set("d", "4")]).is_ok(), "a removal makes room in the same patch");
        // One value over its limit never fits, even alone.
        assert_eq!(l.check(&[], &[set("a", &"v".repeat(11))]), Err(vec![0]));
        // Total bytes: names and namespaces count too (urn:x + a + value = 6 + value).
        assert!(l.check(&[], &[set("a", "123456789"), set("b", "1234")]).is_ok());
        assert_eq!(l.check(&[], &[set("a", "1234567890"), set("b", "1234567890")]), Err(vec![0, 1]));
        // A node already over the limits (stored before them) may shrink, not grow.
        let over = [prop("a", "1"), prop("b", "2"), prop("c", "3"), prop("d", "4")];
        assert!(l.check(&over, &[rm("d")]).is_ok());
        assert!(l.check(&over, &[set("a", "0")]).is_ok());
        assert_eq!(l.check(&over, &[set("e", "5")]), Err(vec![0]));
        assert!(PropLimits::DEFAULT.check(&[], &[set("a", &"v".repeat(16 * 1024))]).is_ok());
    }

    #[test]
    fn shared_locks_need_one_held_and_block_exclusive() {
        let locks = vec![lock("s1", "/f", true, false), lock("s2", "/f", true, false)];
        assert!(conflict(&locks, "/f", false, LockTokens::NONE).is_some());
        assert!(conflict(&locks, "/f", false, LockTokens::new(&["s2".into()])).is_none());
        assert!(lock_conflict(&locks, &lock("s3", "/f", true, false)).is_none());
        assert!(lock_conflict(&locks, &lock("x", "/f", false, false)).is_some());
        assert!(lock_conflict(&locks, &lock("x", "/", false, true)).is_some(), "deep lock above");
        assert!(lock_conflict(&locks, &lock("x", "/", false, false)).is_none(), "depth 0 above");
        assert!(like_escape("a_b%c") == "a\\_b\\%c");
    }
}
