//! Block upload: the resumable, deduplicating way to store a file.
//!
//! 1. Hash the file block by block (`block_size` from `/info`), reading it sequentially and
//!    holding one block in memory.
//! 2. Ask the server which of those blocks this space lacks (`POST /blocks/missing`).
//! 3. Upload only those, re-read from the file at `index * block_size`, a few in parallel.
//! 4. Commit the block list as the file's new version, based on the version the caller saw.
//!
//! The server keeps uploaded blocks even when no version references them yet, so running the
//! same upload again after an interruption sends only what is still missing: that is the
//! resume. A block re-read for upload must hash as it did in step 1 and the file's size and
//! mtime must not move, otherwise the upload stops before committing anything.

use std::collections::HashSet;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use nimbus_proto::RemotePath;
use nimbus_proto::block_hash;
use nimbus_proto::wire::{BlockRef, CommitRequest, Entry, ErrorCode};

use crate::client::{Client, with_retry};
use crate::error::{Error, Result};

/// Blocks uploaded (or downloaded) at the same time.
pub const PARALLEL_TRANSFERS: usize = 4;

/// Largest block size the client accepts from a server (it allocates buffers of this size).
pub const MAX_BLOCK_SIZE: u64 = 256 * 1024 * 1024;

/// Which step a transfer is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Reading and hashing the local file.
    Hashing,
    /// Sending missing blocks.
    Uploading,
    /// Fetching and verifying blocks.
    Downloading,
}

/// Reported after every block: `done` of `total` bytes in this phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub phase: Phase,
    pub done: u64,
    pub total: u64,
}

/// What [`Client::upload_file`] did.
#[derive(Debug, Clone)]
pub struct UploadSummary {
    /// The committed file.
    pub entry: Entry,
    /// Size of the file.
    pub size: u64,
    /// Blocks in the file.
    pub blocks: usize,
    /// Blocks actually sent (the others were already on the server).
    pub uploaded_blocks: usize,
    pub uploaded_bytes: u64,
}

/// Reads a file as blocks of `block_size` bytes (the last one shorter, none for an empty
/// file) and hashes each, holding one block in memory.
pub struct BlockReader<R> {
    inner: R,
    block_size: usize,
    buf: Vec<u8>,
}

impl<R: Read> BlockReader<R> {
    pub fn new(inner: R, block_size: u64) -> Result<Self> {
        let block_size = checked_block_size(block_size)?;
        Ok(Self { inner, block_size, buf: Vec::new() })
    }

    /// The next block's hash and size, or `None` at the end of the file.
    pub fn next_block(&mut self) -> io::Result<Option<BlockRef>> {
        let n = fill(&mut self.inner, &mut self.buf, self.block_size)?;
        if n == 0 {
            return Ok(None);
        }
        Ok(Some(BlockRef { hash: block_hash(&self.buf[..n]), size: n as u64 }))
    }

    pub fn into_inner(self) -> R {
        self.inner
    }
}

/// All blocks of `reader`, in order.
pub fn hash_blocks<R: Read>(reader: R, block_size: u64) -> Result<Vec<BlockRef>> {
    let mut r = BlockReader::new(reader, block_size)?;
    let mut blocks = Vec::new();
    while let Some(b) = r.next_block().map_err(|e| Error::io("cannot read", e))? {
        blocks.push(b);
    }
    Ok(blocks)
}

/// How many blocks a file of `size` bytes has.
pub fn block_count(size: u64, block_size: u64) -> u64 {
    if block_size == 0 { 0 } else { size.div_ceil(block_size) }
}

/// Reads into `buf` until it holds `want` bytes or the reader ends; returns the count.
fn fill<R: Read>(r: &mut R, buf: &mut Vec<u8>, want: usize) -> io::Result<usize> {
    buf.resize(want, 0);
    let mut filled = 0;
    while filled < want {
        match r.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

pub(crate) fn checked_block_size(block_size: u64) -> Result<usize> {
    if block_size == 0 || block_size > MAX_BLOCK_SIZE {
        return Err(Error::Protocol(format!("block size {block_size} is out of range (1 to {MAX_BLOCK_SIZE})")));
    }
    usize::try_from(block_size).map_err(|_| Error::Protocol(format!("block size {block_size} does not fit in memory")))
}

/// What identifies a version of a local file cheaply: size and modification time.
#[derive(Debug, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
}

impl Stamp {
    fn of(path: &Path) -> Result<Stamp> {
        let meta = std::fs::metadata(path).map_err(|e| Error::io(format!("cannot read `{}`", path.display()), e))?;
        Ok(Stamp { len: meta.len(), modified: meta.modified().ok() })
    }
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f).await.map_err(|e| Error::io("a background read failed", io::Error::other(e)))
}

/// Opens `path` for upload if it is a regular file. Its type is checked before the open:
/// opening a FIFO blocks until a writer comes (forever, for `nimbus put`), and a device or
/// socket has no content to upload. Checked again on the open file in case it was swapped.
pub(crate) fn open_regular(path: &Path) -> Result<(File, std::fs::Metadata)> {
    let not_regular = || Error::Invalid(format!("`{}` is not a regular file", path.display()));
    let meta = std::fs::metadata(path).map_err(|e| Error::io(format!("cannot read `{}`", path.display()), e))?;
    if !meta.is_file() {
        return Err(not_regular());
    }
    let file = File::open(path).map_err(|e| Error::io(format!("cannot open `{}`", path.display()), e))?;
    let meta = file.metadata().map_err(|e| Error::io(format!("cannot read `{}`", path.display()), e))?;
    if !meta.is_file() {
        return Err(not_regular());
    }
    Ok((file, meta))
}

/// Reads block `index` again and checks it still hashes as in the first pass.
async fn reread_block(path: PathBuf, offset: u64, block: BlockRef) -> Result<Bytes> {
    blocking(move || {
        let changed = || Error::LocalFileChanged { path: path.clone() };
        let mut f = File::open(&path).map_err(|e| Error::io(format!("cannot open `{}`", path.display()), e))?;
        f.seek(SeekFrom::Start(offset)).map_err(|e| Error::io(format!("cannot read `{}`", path.display()), e))?;
        let mut buf = Vec::new();
        let n = fill(&mut f, &mut buf, block.size as usize)
            .map_err(|e| Error::io(format!("cannot read `{}`", path.display()), e))?;
        if n as u64 != block.size || block_hash(&buf) != block.hash {
            return Err(changed());
        }
        Ok(Bytes::from(buf))
    })
    .await?
}

impl Client {
    /// Uploads `local` to `remote` with the block protocol and commits it as a new version
    /// based on `base_version` (`None`: the file must not exist yet). `force` replaces
    /// whatever is there. A stale base fails with 409 `conflict` ([`Error::is_stale_base`])
    /// and changes nothing. Running it again after an interruption sends only the blocks the
    /// server still lacks.
    pub async fn upload_file(
        &self,
        local: &Path,
        remote: &RemotePath,
        base_version: Option<i64>,
        force: bool,
        progress: &(dyn Fn(Progress) + Send + Sync),
    ) -> Result<UploadSummary> {
        if remote.is_root() {
            return Err(Error::Invalid("give a file path to upload to, not `/`".into()));
        }
        let path = local.to_path_buf();
        // Before anything else: a FIFO would block the open below, and for nothing.
        let (file, meta) = open_regular(&path)?;
        let block_size = self.info().await?.block_size;
        let bs = checked_block_size(block_size)?;

        // 1. Hash pass: sequential, one block in memory, on the blocking pool.
        let stamp = Stamp { len: meta.len(), modified: meta.modified().ok() };
        let size = stamp.len;
        let mut reader = BlockReader::new(file, block_size)?;
        let mut blocks = Vec::with_capacity(block_count(size, block_size) as usize);
        let mut hashed = 0u64;
        progress(Progress { phase: Phase::Hashing, done: 0, total: size });
        loop {
            let (r, next) = blocking(move || {
                let next = reader.next_block();
                (reader, next)
            })
            .await?;
            reader = r;
            match next.map_err(|e| Error::io(format!("cannot read `{}`", path.display()), e))? {
                Some(b) => {
                    hashed += b.size;
                    blocks.push(b);
                    progress(Progress { phase: Phase::Hashing, done: hashed.min(size), total: size });
                }
                None => break,
            }
        }
        drop(reader);
        if hashed != size || Stamp::of(&path)? != stamp {
            return Err(Error::LocalFileChanged { path });
        }

        // 2.–4. Upload what is missing and commit; if blocks vanished in between (collected
        // by the server), one more round sends them.
        let mut uploaded_blocks = 0;
        let mut uploaded_bytes = 0;
        let mut round = 0;
        loop {
            let (n, bytes) = self.upload_missing(&path, bs as u64, &blocks, progress).await?;
            uploaded_blocks += n;
            uploaded_bytes += bytes;
            if Stamp::of(&path)? != stamp {
                return Err(Error::LocalFileChanged { path });
            }
            let commit = CommitRequest { base_version, blocks: blocks.clone(), force };
            match self.commit_manifest(remote, &commit).await {
                Ok(entry) => {
                    return Ok(UploadSummary { entry, size, blocks: blocks.len(), uploaded_blocks, uploaded_bytes });
                }
                Err(e) if e.has_code(ErrorCode::MissingBlocks) && round == 0 => {
                    tracing::debug!("commit reported missing blocks; uploading them again");
                    round += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Steps 2 and 3: asks which blocks are missing and uploads each distinct one once.
    /// Returns the number of blocks and bytes sent.
    async fn upload_missing(
        &self,
        path: &Path,
        block_size: u64,
        blocks: &[BlockRef],
        progress: &(dyn Fn(Progress) + Send + Sync),
    ) -> Result<(usize, u64)> {
        // Distinct hashes, each with the first index it appears at.
        let mut seen = HashSet::new();
        let mut distinct: Vec<(usize, &BlockRef)> = Vec::new();
        for (i, b) in blocks.iter().enumerate() {
            if seen.insert(b.hash.as_str()) {
                distinct.push((i, b));
            }
        }
        let hashes: Vec<String> = distinct.iter().map(|(_, b)| b.hash.clone()).collect();
        let missing: HashSet<String> = self.missing_blocks(&hashes).await?.into_iter().collect();
        if let Some(h) = missing.iter().find(|h| !seen.contains(h.as_str())) {
            return Err(Error::Protocol(format!("the server asked for block {h}, which this file does not have")));
        }
        let todo: Vec<(u64, BlockRef)> = distinct
            .into_iter()
            .filter(|(_, b)| missing.contains(&b.hash))
            .map(|(i, b)| (i as u64 * block_size, b.clone()))
            .collect();
        let total: u64 = todo.iter().map(|(_, b)| b.size).sum();
        progress(Progress { phase: Phase::Uploading, done: 0, total });

        let mut sent = futures::stream::iter(todo)
            .map(|(offset, block)| {
                let path = path.to_path_buf();
                async move {
                    let data = reread_block(path, offset, block.clone()).await?;
                    with_retry(|| self.put_block(&block.hash, data.clone())).await?;
                    Ok::<u64, Error>(block.size)
                }
            })
            .buffer_unordered(PARALLEL_TRANSFERS);
        let (mut n, mut done) = (0usize, 0u64);
        while let Some(size) = sent.try_next().await? {
            n += 1;
            done += size;
            progress(Progress { phase: Phase::Uploading, done, total });
        }
        Ok((n, done))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Cursor, Write};

    fn blocks_of(data: &[u8], bs: u64) -> Vec<BlockRef> {
        hash_blocks(Cursor::new(data), bs).unwrap_or_default()
    }

    fn assert_send<T: Send>(_: &T) {}

    /// The mount and the desktop app run transfers on spawned tasks: the futures must be Send.
    #[allow(dead_code)]
    fn transfer_futures_are_send(c: &Client, local: &Path, remote: &RemotePath, cb: &(dyn Fn(Progress) + Send + Sync)) {
        assert_send(&c.upload_file(local, remote, None, false, cb));
        assert_send(&c.download_file(remote, local, cb));
        assert_send(&c.put_file(local, remote, crate::PutCondition::Any));
        let mut sink = Vec::new();
        assert_send(&c.get_to(remote, &mut sink, crate::GetOptions::default()));
    }

    #[test]
    fn empty_input_has_no_blocks() {
        assert!(blocks_of(b"", 4).is_empty());
        assert_eq!(block_count(0, 4), 0);
    }

    #[test]
    fn last_block_is_shorter() {
        let data: Vec<u8> = (0..10u8).collect();
        let blocks = blocks_of(&data, 4);
        assert_eq!(blocks.iter().map(|b| b.size).collect::<Vec<_>>(), vec![4, 4, 2]);
        assert_eq!(blocks[0].hash, block_hash(&data[0..4]));
        assert_eq!(blocks[2].hash, block_hash(&data[8..10]));
        assert_eq!(block_count(10, 4), 3);
    }

    #[test]
    fn exact_multiple_has_no_empty_tail() {
        let data = vec![7u8; 8];
        let blocks = blocks_of(&data, 4);
        assert_eq!(blocks.len(), 2);
        assert!(blocks.iter().all(|b| b.size == 4));
        // Same content, same address.
        assert_eq!(blocks[0].hash, blocks[1].hash);
        assert_eq!(block_count(8, 4), 2);
    }

    /// A reader that returns at most 3 bytes per call, as pipes and sockets may.
    struct Trickle<'a>(&'a [u8]);
    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = buf.len().min(3).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn short_reads_still_make_full_blocks() {
        let data: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let blocks = hash_blocks(Trickle(&data), 64).unwrap_or_default();
        assert_eq!(blocks, blocks_of(&data, 64));
        assert_eq!(blocks.len(), 16);
        assert_eq!(blocks.last().map(|b| b.size), Some(1000 - 15 * 64));
    }

    #[test]
    fn zero_block_size_is_refused() {
        assert!(hash_blocks(Cursor::new(b"x"), 0).is_err());
    }

    #[test]
    fn hashes_a_temp_file() -> std::result::Result<(), Box<dyn std::error::Error>> {
        let mut f = tempfile::NamedTempFile::new()?;
        let data: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        f.write_all(&data)?;
        f.flush()?;
        let blocks = hash_blocks(File::open(f.path())?, 1024)?;
        assert_eq!(blocks.iter().map(|b| b.size).collect::<Vec<_>>(), vec![1024, 1024, 1024, 1024, 904]);
        for (i, b) in blocks.iter().enumerate() {
            let start = i * 1024;
            let end = (start + 1024).min(data.len());
            assert_eq!(b.hash, block_hash(&data[start..end]));
        }
        Ok(())
    }

    /// A FIFO is refused before it is opened (the open would wait for a writer forever).
    #[cfg(unix)]
    #[test]
    fn a_fifo_is_not_opened_for_upload() -> std::result::Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let fifo = dir.path().join("pipe");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status()?;
        assert!(made.success(), "mkfifo failed");
        let err = open_regular(&fifo).err();
        assert!(matches!(&err, Some(Error::Invalid(m)) if m.contains("not a regular file")), "{err:?}");
        let err = open_regular(Path::new("/dev/null")).err();
        assert!(matches!(&err, Some(Error::Invalid(m)) if m.contains("not a regular file")), "{err:?}");
        assert!(matches!(open_regular(dir.path()), Err(Error::Invalid(_))));
        let file = dir.path().join("f");
        std::fs::write(&file, b"abc")?;
        assert_eq!(open_regular(&file)?.1.len(), 3);
        Ok(())
    }

    #[tokio::test]
    async fn reread_detects_a_changed_block() -> std::result::Result<(), Box<dyn std::error::Error>> {
        let mut f = tempfile::NamedTempFile::new()?;
        f.write_all(b"aaaabbbbcc")?;
        f.flush()?;
        let blocks = hash_blocks(File::open(f.path())?, 4)?;
        let data = reread_block(f.path().to_path_buf(), 4, blocks[1].clone()).await?;
        assert_eq!(&data[..], b"bbbb");
        std::fs::write(f.path(), b"aaaaXbbbcc")?;
        let err = reread_block(f.path().to_path_buf(), 4, blocks[1].clone()).await.err();
        assert!(matches!(err, Some(Error::LocalFileChanged { .. })));
        std::fs::write(f.path(), b"aaaab")?;
        let err = reread_block(f.path().to_path_buf(), 4, blocks[1].clone()).await.err();
        assert!(matches!(err, Some(Error::LocalFileChanged { .. })));
        Ok(())
    }
}
