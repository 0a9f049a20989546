//! Verified block download: fetch the manifest, fetch each block by hash, check its BLAKE3
//! hash and size against the manifest, write it to a temporary file next to the target, and
//! rename that over the target only when every byte checked out. A failed or interrupted
//! download never leaves a half-written file under the target's name.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use nimbus_proto::wire::{BlockRef, Manifest};
use nimbus_proto::{RemotePath, block_hash, is_block_hash};
use tokio::io::AsyncWriteExt;

use crate::client::{Client, with_retry};
use crate::error::{Error, Result};
use crate::upload::{PARALLEL_TRANSFERS, Phase, Progress};

/// What [`Client::download_file`] fetched.
#[derive(Debug, Clone)]
pub struct DownloadSummary {
    pub path: String,
    pub version: i64,
    pub size: u64,
    pub blocks: usize,
    /// Where the content was written.
    pub local: PathBuf,
}

/// Checks what a manifest promises before anything is fetched: valid hashes, no empty or
/// oversized block, sizes that add up.
pub fn check_manifest(m: &Manifest) -> Result<()> {
    let mut sum = 0u64;
    for (i, b) in m.blocks.iter().enumerate() {
        if !is_block_hash(&b.hash) {
            return Err(Error::Protocol(format!("block {i} of `{}` has an invalid hash", m.path)));
        }
        if b.size == 0 || (m.block_size > 0 && b.size > m.block_size) {
            return Err(Error::Protocol(format!("block {i} of `{}` has an invalid size {}", m.path, b.size)));
        }
        sum = sum.saturating_add(b.size);
    }
    if sum != m.size {
        return Err(Error::Protocol(format!("the blocks of `{}` add up to {sum} bytes, not {}", m.path, m.size)));
    }
    Ok(())
}

/// Checks one fetched block against its manifest entry.
pub fn verify_block(path: &str, index: usize, expected: &BlockRef, data: &[u8]) -> Result<()> {
    if data.len() as u64 != expected.size {
        return Err(Error::Integrity {
            path: path.into(),
            index,
            expected: format!("{} bytes", expected.size),
            actual: format!("{} bytes", data.len()),
        });
    }
    let actual = block_hash(data);
    if actual != expected.hash {
        return Err(Error::Integrity {
            path: path.into(),
            index,
            expected: format!("hash {}", expected.hash),
            actual: format!("hash {actual}"),
        });
    }
    Ok(())
}

/// Removes the temporary file unless the download completed.
struct TempGuard {
    path: PathBuf,
    armed: bool,
}

impl Drop for TempGuard {
    fn drop(&mut self) {
        if self.armed {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// `.name.nimbus-<pid>-<nanos>.part` in the target's directory (same filesystem: the final
/// rename is atomic).
fn temp_path_for(target: &Path) -> PathBuf {
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "download".into());
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    let tmp = format!(".{name}.nimbus-{}-{nanos}.part", std::process::id());
    match target.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.join(tmp),
        _ => PathBuf::from(tmp),
    }
}

impl Client {
    /// Downloads the current version of `remote` to `local`, verifying every block.
    pub async fn download_file(
        &self,
        remote: &RemotePath,
        local: &Path,
        progress: &(dyn Fn(Progress) + Send + Sync),
    ) -> Result<DownloadSummary> {
        self.download_version(remote, None, local, progress).await
    }

    /// [`Client::download_file`] of an older version (`None`: the current one).
    pub async fn download_version(
        &self,
        remote: &RemotePath,
        version: Option<i64>,
        local: &Path,
        progress: &(dyn Fn(Progress) + Send + Sync),
    ) -> Result<DownloadSummary> {
        let manifest = self.get_manifest(remote, version).await?;
        check_manifest(&manifest)?;
        let total = manifest.size;
        let shown = manifest.path.clone();

        let tmp = temp_path_for(local);
        let mut guard = TempGuard { path: tmp.clone(), armed: true };
        let mut out = tokio::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .await
            .map_err(|e| Error::io(format!("cannot create `{}`", tmp.display()), e))?;

        progress(Progress { phase: Phase::Downloading, done: 0, total });
        // `buffered` keeps the manifest's order, so the file is written sequentially while up
        // to PARALLEL_TRANSFERS blocks are in flight.
        // Owned items: a stream over borrowed ones would make this future not `Send`.
        let mut fetched = futures::stream::iter(manifest.blocks.clone().into_iter().enumerate())
            .map(|(i, expected)| {
                let shown = shown.clone();
                async move {
                    let data = with_retry(|| self.get_block_checked(&expected.hash, None)).await?;
                    let data: Bytes =
                        tokio::task::spawn_blocking(move || verify_block(&shown, i, &expected, &data).map(|()| data))
                            .await
                            .map_err(|e| Error::io("a background check failed", std::io::Error::other(e)))??;
                    Ok::<Bytes, Error>(data)
                }
            })
            .buffered(PARALLEL_TRANSFERS);
        let mut done = 0u64;
        while let Some(data) = fetched.try_next().await? {
            out.write_all(&data).await.map_err(|e| Error::io(format!("cannot write `{}`", tmp.display()), e))?;
            done += data.len() as u64;
            progress(Progress { phase: Phase::Downloading, done, total });
        }
        drop(fetched);
        out.flush().await.map_err(|e| Error::io(format!("cannot write `{}`", tmp.display()), e))?;
        out.sync_all().await.map_err(|e| Error::io(format!("cannot write `{}`", tmp.display()), e))?;
        drop(out);
        tokio::fs::rename(&tmp, local)
            .await
            .map_err(|e| Error::io(format!("cannot move the download into place at `{}`", local.display()), e))?;
        guard.armed = false;
        Ok(DownloadSummary {
            path: manifest.path,
            version: manifest.version,
            size: total,
            blocks: manifest.blocks.len(),
            local: local.to_path_buf(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(blocks: Vec<BlockRef>, size: u64) -> Manifest {
        Manifest { path: "/a".into(), version: 1, size, block_size: 4, modified: String::new(), blocks }
    }

    #[test]
    fn manifests_must_add_up() {
        let b = |d: &[u8]| BlockRef { hash: block_hash(d), size: d.len() as u64 };
        assert!(check_manifest(&manifest(vec![], 0)).is_ok());
        assert!(check_manifest(&manifest(vec![b(b"abcd"), b(b"ef")], 6)).is_ok());
        assert!(check_manifest(&manifest(vec![b(b"abcd"), b(b"ef")], 7)).is_err());
        assert!(check_manifest(&manifest(vec![b(b"abcde")], 5)).is_err(), "larger than block_size");
        let bad = BlockRef { hash: "../../x".into(), size: 1 };
        assert!(check_manifest(&manifest(vec![bad], 1)).is_err());
    }

    #[test]
    fn blocks_are_verified() {
        let good = BlockRef { hash: block_hash(b"abcd"), size: 4 };
        assert!(verify_block("/a", 0, &good, b"abcd").is_ok());
        assert!(matches!(verify_block("/a", 0, &good, b"abce"), Err(Error::Integrity { .. })));
        assert!(matches!(verify_block("/a", 0, &good, b"abc"), Err(Error::Integrity { .. })));
    }

    #[test]
    fn temp_file_sits_next_to_the_target() {
        let t = temp_path_for(Path::new("/x/y/report.pdf"));
        assert_eq!(t.parent(), Some(Path::new("/x/y")));
        assert!(t.file_name().is_some_and(|n| n.to_string_lossy().starts_with(".report.pdf.nimbus-")));
        assert_eq!(temp_path_for(Path::new("a.txt")).parent(), Some(Path::new("")));
    }
}
