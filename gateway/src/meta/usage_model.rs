//! Property test of usage accounting: random sequences of every operation that changes what a
//! space holds (uploads, commits, overwrites, trash, restore, purge, version deletes and
//! restores, copies, moves, retention, failed uploads, announced garbage), run on an in-process
//! SQLite database, with and without a quota. After every step:
//! - the counted usage equals a recount from the tables (no drift, whatever the order);
//! - `used_bytes` is the sum of its parts and never passes the quota;
//! - a write refused for the quota changed nothing.

use nimbus_proto::RemotePath;
use proptest::prelude::*;

use super::retention::{Retention, VersionPolicy};
use super::usage::REFERENCED;
use super::{Base, BlockEntry, Claim, CommitSpec, LockTokens, Meta, MetaError, SpaceId, Usage};

#[derive(Debug, Clone)]
enum Op {
    /// A new version of file `f` of `kib` KiB: claim, store and commit its block.
    Put {
        f: usize,
        kib: i64,
    },
    /// A block uploaded and never committed.
    Upload {
        kib: i64,
    },
    /// An upload that failed: its claimed blocks are discarded.
    FailedUpload {
        kib: i64,
    },
    /// An upload of a block the space was given before (used, pending or garbage) that failed.
    FailedReupload {
        i: usize,
    },
    Trash {
        f: usize,
    },
    TrashDir {
        d: usize,
    },
    Restore,
    PurgeOldest,
    EmptyTrash,
    DeleteOldestVersion {
        f: usize,
    },
    RestoreFirstVersion {
        f: usize,
    },
    Copy {
        f: usize,
        to: usize,
    },
    Move {
        f: usize,
        to: usize,
    },
    Retention {
        keep_none: bool,
    },
    /// Announces every block the space ever stored (garbage included) as present.
    Announce,
    /// Garbage collection with no grace period.
    Gc,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..6usize, 1..400i64).prop_map(|(f, kib)| Op::Put { f, kib }),
        1 => (1..300i64).prop_map(|kib| Op::Upload { kib }),
        1 => (1..300i64).prop_map(|kib| Op::FailedUpload { kib }),
        1 => (0..64usize).prop_map(|i| Op::FailedReupload { i }),
        2 => (0..6usize).prop_map(|f| Op::Trash { f }),
        1 => (0..2usize).prop_map(|d| Op::TrashDir { d }),
        1 => Just(Op::Restore),
        1 => Just(Op::PurgeOldest),
        1 => Just(Op::EmptyTrash),
        1 => (0..6usize).prop_map(|f| Op::DeleteOldestVersion { f }),
        1 => (0..6usize).prop_map(|f| Op::RestoreFirstVersion { f }),
        1 => (0..6usize, 0..6usize).prop_map(|(f, to)| Op::Copy { f, to }),
        1 => (0..6usize, 0..6usize).prop_map(|(f, to)| Op::Move { f, to }),
        1 => any::<bool>().prop_map(|keep_none| Op::Retention { keep_none }),
        1 => Just(Op::Announce),
        1 => Just(Op::Gc),
    ]
}

fn file(f: usize) -> RemotePath {
    RemotePath::parse(&format!("/d{}/f{f}.bin", f % 2)).expect("valid path")
}

struct World {
    _dir: tempfile::TempDir,
    meta: Meta,
    space: SpaceId,
    quota: Option<i64>,
    /// Every block hash this space was given, with its size.
    blocks: Vec<BlockEntry>,
    /// The blocks some commit referenced: the only ones that may sit in the store uncharged
    /// (freed by a delete, awaiting collection).
    committed: std::collections::HashSet<String>,
    next: u64,
}

impl World {
    async fn new(quota: Option<i64>) -> World {
        let dir = tempfile::tempdir().expect("tempdir");
        let meta = Meta::connect(&format!("sqlite://{}", dir.path().join("m.db").display())).await.expect("connect");
        let space = SpaceId::stored(meta.create_user("u", "x", "user", quota).await.expect("user").id);
        World { _dir: dir, meta, space, quota, blocks: Vec::new(), committed: Default::default(), next: 0 }
    }

    /// A block never seen before.
    fn block(&mut self, kib: i64) -> BlockEntry {
        self.next += 1;
        let b = BlockEntry { hash: blake3::hash(&self.next.to_le_bytes()).to_hex().to_string(), size: kib * 1024 };
        self.blocks.push(b.clone());
        b
    }

    /// Claims and "stores" a new block (there is no store here: the registry is what counts).
    async fn upload(&mut self, kib: i64, owner: Option<i64>) -> Result<BlockEntry, MetaError> {
        let b = self.block(kib);
        self.store(&b, owner).await?;
        Ok(b)
    }

    async fn store(&self, b: &BlockEntry, owner: Option<i64>) -> Result<(), MetaError> {
        if self.meta.claim_block(self.space, &b.hash, b.size, 0, owner).await? == Claim::Write
            && !self.meta.block_stored(self.space, &b.hash).await?
        {
            self.meta.register_block(self.space, &b.hash, b.size).await?;
        }
        Ok(())
    }

    /// A failed upload's end: what still carries its claim goes.
    async fn discard(&self, hash: &str, owner: i64) -> Result<(), MetaError> {
        let hashes = [hash.to_string()];
        self.meta.discard_claimed(self.space, &hashes, owner, |_| async { Ok(()) }).await.map(|_| ())
    }

    /// Blocks in the registry that no version uses and that are not charged as pending.
    async fn uncharged_garbage(&self) -> Vec<String> {
        let text = format!("SELECT b.hash FROM blocks b WHERE b.space_id = $1 AND NOT b.pending AND NOT {REFERENCED}");
        let mut db = self.meta.db();
        super::engine::scalar::<String>(sqlx::AssertSqlSafe(text))
            .bind(self.space.get())
            .fetch_all(&mut db)
            .await
            .expect("garbage query")
    }

    async fn usage(&self) -> Usage {
        self.meta.usage(self.space).await.expect("usage")
    }

    async fn apply(&mut self, op: &Op) -> Result<(), MetaError> {
        let (m, s) = (self.meta.clone(), self.space);
        match *op {
            Op::Put { f, kib } => {
                let owner = rand::random_range(1..i64::MAX);
                let b = self.upload(kib, Some(owner)).await?;
                let spec =
                    CommitSpec { base: Base::Any, blocks: std::slice::from_ref(&b), block_size: 1 << 22, device: None };
                m.commit(s, &file(f), &spec, LockTokens::NONE).await?;
                self.committed.insert(b.hash);
                Ok(())
            }
            Op::Upload { kib } => self.upload(kib, None).await.map(|_| ()),
            Op::FailedUpload { kib } => {
                let owner = rand::random_range(1..i64::MAX);
                let b = self.upload(kib, Some(owner)).await?;
                self.discard(&b.hash, owner).await
            }
            Op::FailedReupload { i } => {
                let Some(b) = self.blocks.get(i % self.blocks.len().max(1)).cloned() else { return Ok(()) };
                let owner = rand::random_range(1..i64::MAX);
                self.store(&b, Some(owner)).await?;
                self.discard(&b.hash, owner).await
            }
            Op::Trash { f } => m.trash(s, &file(f), LockTokens::NONE).await.map(|_| ()),
            Op::TrashDir { d } => {
                m.trash(s, &RemotePath::parse(&format!("/d{d}")).expect("path"), LockTokens::NONE).await.map(|_| ())
            }
            Op::Restore => match m.list_trash(s, None, 1).await?.first() {
                Some(item) => m.restore_trash(s, item.id, None, LockTokens::NONE).await.map(|_| ()),
                None => Ok(()),
            },
            Op::PurgeOldest => match m.list_trash(s, None, 1000).await?.last() {
                Some(item) => m.purge_trash(s, Some(item.id)).await.map(|_| ()),
                None => Ok(()),
            },
            Op::EmptyTrash => m.purge_trash(s, None).await.map(|_| ()),
            Op::DeleteOldestVersion { f } => {
                let (_, versions) = m.versions(s, &file(f)).await?;
                match versions.last() {
                    Some(v) => m.delete_version(s, &file(f), v.id).await.map(|_| ()),
                    None => Ok(()),
                }
            }
            Op::RestoreFirstVersion { f } => {
                let (_, versions) = m.versions(s, &file(f)).await?;
                match versions.last() {
                    Some(v) => m.restore_version(s, &file(f), v.id, None).await.map(|_| ()),
                    None => Ok(()),
                }
            }
            Op::Copy { f, to } => m.copy_node(s, &file(f), &file(to), true, None, LockTokens::NONE).await.map(|_| ()),
            Op::Move { f, to } => m.move_node(s, &file(f), &file(to), true, LockTokens::NONE).await.map(|_| ()),
            Op::Retention { keep_none } => {
                let versions = if keep_none { VersionPolicy::Rules(Vec::new()) } else { VersionPolicy::Forever };
                let r = Retention { versions, trash: Some(std::time::Duration::from_millis(1)) };
                m.apply_retention(s, &r).await.map(|_| ())
            }
            Op::Announce => {
                let hashes: Vec<String> = self.blocks.iter().map(|b| b.hash.clone()).collect();
                m.missing_blocks(s, &hashes).await.map(|_| ())
            }
            Op::Gc => {
                let cutoff = super::now_ms() + 1;
                let hashes: Vec<String> = m.gc_candidates(cutoff, 10_000).await?.into_iter().map(|b| b.hash).collect();
                if !hashes.is_empty() {
                    m.gc_remove(s, &hashes, cutoff, |_| async { Ok(()) }).await?;
                }
                Ok(())
            }
        }
    }
}

fn run(quota: Option<i64>, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async move {
        let mut w = World::new(quota).await;
        for (i, op) in ops.iter().enumerate() {
            let before = w.usage().await;
            let result = w.apply(op).await;
            let after = w.usage().await;
            match &result {
                Ok(()) | Err(MetaError::NotFound | MetaError::AlreadyExists(_) | MetaError::Invalid(_)) => {}
                Err(MetaError::Conflict(_) | MetaError::IsADirectory(_) | MetaError::NotADirectory(_)) => {}
                Err(MetaError::QuotaExceeded(_)) => {
                    // A refusal leaves what counts alone (an upload's earlier steps aside: none here
                    // refuse after changing anything).
                    prop_assert_eq!(before, after, "step {} {:?} was refused but changed usage", i, op);
                    let q = w.quota.unwrap_or(i64::MAX);
                    prop_assert!(
                        before.current + before.pending > q - 400 * 1024,
                        "step {i} {op:?}: refused with room: {before:?}"
                    );
                }
                Err(e) => return Err(TestCaseError::fail(format!("step {i} {op:?}: {e}"))),
            }
            // Every stored byte is accounted for: only what a commit once used (and a delete
            // freed) may sit uncharged until collection; a failed upload leaves nothing so.
            for h in w.uncharged_garbage().await {
                prop_assert!(
                    w.committed.contains(&h),
                    "step {i} {op:?}: block {h} of an upload never committed is stored uncharged"
                );
            }
            let (counted, truth) = w.meta.recount_usage(w.space).await.expect("recount");
            prop_assert_eq!(counted, truth, "step {} {:?}: the counts drifted", i, op);
            let user = w.meta.user(w.space.get()).await.expect("user").expect("exists");
            prop_assert_eq!(user.used_bytes, truth.total(), "step {}: used_bytes is not the sum", i);
            if let Some(q) = w.quota {
                prop_assert!(user.used_bytes <= q, "step {i} {op:?}: {} over the quota {q}", user.used_bytes);
            }
        }
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn usage_never_drifts(ops in prop::collection::vec(op(), 1..40)) {
        run(None, ops)?;
    }

    #[test]
    fn usage_never_drifts_nor_passes_the_quota(ops in prop::collection::vec(op(), 1..40), quota_kib in 300..1500i64) {
        run(Some(quota_kib * 1024), ops)?;
    }
}
