//! The WinFsp callbacks' work, on the core: each function is one callback with WinFsp's
//! arguments in plain types (paths as UTF-16, flags as `u32`) and its answer as a [`FileInfo`],
//! so the adapter only converts and calls through, and all of it runs in the tests on Linux.

use std::sync::Arc;

use crate::core::{Attr, Fh, Ino, Kind, ROOT, SetAttr, Vfs, VfsError, VfsResult};

use super::info::{self, FileInfo};
use super::request::{self, CreateAs, OpenAs};
use super::status::log_failure;

/// Entries asked from the core per `readdir` page when listing a directory.
pub const DIR_PAGE: usize = 512;

/// An open handle as the core knows it: the inode, the core's handle (a file handle from
/// `open`/`create`, a directory handle from `opendir`) and which of the two it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Node {
    pub ino: Ino,
    pub fh: Fh,
    pub is_dir: bool,
}

/// Walks a path from the root with the core's lookup (case-insensitive, as Windows wants).
pub async fn resolve(vfs: &Vfs, comps: &[String]) -> VfsResult<Attr> {
    let mut attr = vfs.getattr(ROOT).await?;
    for name in comps {
        attr = vfs.lookup(attr.ino, name).await?;
    }
    Ok(attr)
}

/// The parent directory and the last name of a path; `None` for the root.
pub async fn resolve_parent<'a>(vfs: &Vfs, comps: &'a [String]) -> VfsResult<Option<(Attr, &'a str)>> {
    let Some((parent, name)) = request::split_parent(comps) else { return Ok(None) };
    Ok(Some((resolve(vfs, parent).await?, name)))
}

/// `GetSecurityByName`: the attributes of what the path names (no security descriptor).
pub async fn security_attributes(vfs: &Vfs, path: &[u16]) -> VfsResult<u32> {
    let comps = request::components(path)?;
    Ok(info::attributes(&resolve(vfs, &comps).await?))
}

/// `Open` of an existing node.
pub async fn open(vfs: &Vfs, path: &[u16], create_options: u32, granted_access: u32) -> VfsResult<(Node, FileInfo)> {
    let comps = request::components(path)?;
    let a = resolve(vfs, &comps).await?;
    let fh = match request::open_as(a.kind, create_options, granted_access)? {
        OpenAs::Dir => vfs.opendir(a.ino)?,
        OpenAs::File(mode) => vfs.open(a.ino, mode).await?.0,
    };
    Ok((Node { ino: a.ino, fh, is_dir: a.kind == Kind::Dir }, FileInfo::of(&a)))
}

/// `Create` of a new file or directory.
pub async fn create(vfs: &Vfs, path: &[u16], create_options: u32, file_attributes: u32) -> VfsResult<(Node, FileInfo)> {
    let comps = request::components(path)?;
    let Some((parent, name)) = resolve_parent(vfs, &comps).await? else {
        // The root always exists.
        return Err(VfsError::Exists);
    };
    let (a, fh) = match request::create_as(create_options, file_attributes) {
        CreateAs::Dir => {
            let a = vfs.mkdir(parent.ino, name).await?;
            let fh = vfs.opendir(a.ino)?;
            (a, fh)
        }
        CreateAs::File { mode, readonly } => vfs.create(parent.ino, name, mode, readonly).await?,
    };
    Ok((Node { ino: a.ino, fh, is_dir: a.kind == Kind::Dir }, FileInfo::of(&a)))
}

/// `Close`. It cannot fail, and the core's release may upload (the last writer's changes):
/// that runs on the runtime instead of holding a WinFsp thread meanwhile. Until it has, the
/// file reads from its staging copy; the journal keeps it across a crash.
pub fn close(vfs: &Arc<Vfs>, rt: &tokio::runtime::Handle, node: Node) {
    if node.is_dir {
        vfs.releasedir(node.fh);
        return;
    }
    let vfs = vfs.clone();
    rt.spawn(async move {
        if let Err(e) = vfs.release(node.fh).await {
            log_failure("close", &e);
        }
    });
}

/// `Cleanup` with the Delete flag (a delete disposition or FILE_DELETE_ON_CLOSE), at the last
/// handle's CloseHandle. WinFsp expects the name gone now, before Close arrives: a save that
/// deletes the original and renames the new copy onto its name relies on it. So the core
/// marks the node and the name is unlinked here, if it still names this node; the core's
/// release (at Close) then finds it already unlinked.
pub async fn delete_at_cleanup(vfs: &Vfs, node: Node, path: &[u16]) -> VfsResult<()> {
    vfs.set_delete_pending(node.ino, true)?;
    let comps = request::components(path)?;
    let Some((parent, name)) = resolve_parent(vfs, &comps).await? else { return Ok(()) };
    if vfs.lookup(parent.ino, name).await?.ino != node.ino {
        // The name went to another node meanwhile: not ours to delete.
        return Ok(());
    }
    if node.is_dir { vfs.rmdir(parent.ino, name).await } else { vfs.unlink(parent.ino, name).await }
}

/// `Flush` of a file (`FlushFileBuffers`): returns once the server has the data. A directory
/// has nothing to flush.
pub async fn flush(vfs: &Vfs, node: Node) -> VfsResult<FileInfo> {
    if !node.is_dir {
        vfs.fsync(node.fh).await?;
    }
    file_info(vfs, node).await
}

/// `GetFileInfo`.
pub async fn file_info(vfs: &Vfs, node: Node) -> VfsResult<FileInfo> {
    Ok(FileInfo::of(&vfs.getattr(node.ino).await?))
}

async fn change(vfs: &Vfs, node: Node, set: SetAttr) -> VfsResult<FileInfo> {
    Ok(FileInfo::of(&vfs.setattr(node.ino, Some(node.fh), set).await?))
}

/// `Overwrite`: see [`info::overwrite_change`].
pub async fn overwrite(vfs: &Vfs, node: Node, file_attributes: u32, replace: bool) -> VfsResult<FileInfo> {
    change(vfs, node, info::overwrite_change(file_attributes, replace)).await
}

/// `SetBasicInfo`: see [`info::basic_info_change`].
pub async fn set_basic_info(vfs: &Vfs, node: Node, file_attributes: u32, last_write_time: u64) -> VfsResult<FileInfo> {
    change(vfs, node, info::basic_info_change(file_attributes, last_write_time)).await
}

/// `SetFileSize`: see [`info::resize`].
pub async fn set_file_size(vfs: &Vfs, node: Node, new_size: u64, set_allocation_size: bool) -> VfsResult<FileInfo> {
    let a = vfs.getattr(node.ino).await?;
    match info::resize(a.size, new_size, set_allocation_size) {
        None => Ok(FileInfo::of(&a)),
        Some(size) => change(vfs, node, SetAttr { size: Some(size), ..SetAttr::default() }).await,
    }
}

/// `SetDelete`. The answer is due now (the deletion itself happens at cleanup): a read-only
/// file refuses (core), and so does a directory that is not empty (a fresh listing says).
pub async fn set_delete(vfs: &Vfs, node: Node, delete: bool) -> VfsResult<()> {
    if delete && node.is_dir {
        let h = vfs.opendir(node.ino)?;
        let first = vfs.readdir(h, 0, 1).await;
        vfs.releasedir(h);
        if !first?.is_empty() {
            return Err(VfsError::NotEmpty);
        }
    }
    vfs.set_delete_pending(node.ino, delete)
}

/// `Rename` (`replace`: MoveFileEx's REPLACE_EXISTING).
pub async fn rename(vfs: &Vfs, from: &[u16], to: &[u16], replace: bool) -> VfsResult<()> {
    let from = request::components(from)?;
    let to = request::components(to)?;
    let (Some((src_dir, src)), Some((dst_dir, dst))) =
        (resolve_parent(vfs, &from).await?, resolve_parent(vfs, &to).await?)
    else {
        return Err(VfsError::Invalid("the root cannot be renamed".into()));
    };
    vfs.rename(src_dir.ino, src, dst_dir.ino, dst, replace).await
}

/// What `Read` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// This many bytes were copied to the start of the buffer.
    Bytes(u32),
    /// Nothing at or past the end of the file: STATUS_END_OF_FILE (as NTFS answers).
    EndOfFile,
}

/// `Read` into `buffer` from `offset`.
pub async fn read(vfs: &Vfs, node: Node, buffer: &mut [u8], offset: u64) -> VfsResult<Read> {
    let want = u32::try_from(buffer.len()).unwrap_or(u32::MAX);
    let data = vfs.read(node.fh, offset, want).await?;
    if data.is_empty() && !buffer.is_empty() {
        return Ok(Read::EndOfFile);
    }
    let n = data.len().min(buffer.len());
    buffer[..n].copy_from_slice(&data[..n]);
    Ok(Read::Bytes(n as u32))
}

/// `Write`: where it goes is [`request::write_range`]'s decision against the size the core
/// reports. Returns the bytes written and the file's information afterwards.
pub async fn write(
    vfs: &Vfs,
    node: Node,
    buffer: &[u8],
    offset: u64,
    write_to_eof: bool,
    constrained_io: bool,
) -> VfsResult<(u32, FileInfo)> {
    let size = vfs.getattr(node.ino).await?.size;
    let n = match request::write_range(offset, buffer.len(), size, write_to_eof, constrained_io) {
        None => 0,
        Some((off, len)) => vfs.write(node.fh, off, &buffer[..len]).await?,
    };
    Ok((n, file_info(vfs, node).await?))
}

/// One entry of a directory listing as WinFsp's directory buffer takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub name: Vec<u16>,
    pub info: FileInfo,
}

/// The whole listing of an open directory, for `ReadDirectory` to put into WinFsp's buffer
/// (WinFsp sorts it and pages through it by marker): `.` and `..` everywhere but in the
/// drive's root (both with the directory's own information), then the core's entries; a name
/// longer than a directory entry holds is skipped with a warning.
pub async fn list(vfs: &Vfs, node: Node) -> VfsResult<Vec<Listed>> {
    let mut out = Vec::new();
    if node.ino != ROOT {
        let me = file_info(vfs, node).await?;
        for dot in [".", ".."] {
            out.push(Listed { name: dot.encode_utf16().collect(), info: me });
        }
    }
    let mut offset = 0;
    loop {
        let page = vfs.readdir(node.fh, offset, DIR_PAGE).await?;
        let Some(last) = page.last() else { return Ok(out) };
        offset = last.offset;
        for e in &page {
            match request::entry_name(&e.name) {
                Some(name) => out.push(Listed { name, info: FileInfo::of(&e.attr) }),
                None => tracing::warn!(name = %e.name, "name too long to list on Windows; skipped"),
            }
        }
    }
}

#[cfg(test)]
mod tests;
