//! WinFsp adapter (Windows only) on the `winfsp` crate 0.12.6: FFI and nothing else. Each
//! callback converts WinFsp's arguments (`U16CStr` paths, flags), calls its counterpart in
//! [`crate::nt::ops`] on the core, and writes the answer into WinFsp's structures; core errors
//! become NTSTATUS in [`crate::nt::ntstatus()`]. Every decision (create options, granted
//! access, attributes, FILETIME, write offsets, listings) lives in [`crate::nt`], which is
//! compiled and tested on every platform.
//!
//! Linux CI type-checks and lints this file for `x86_64-pc-windows-msvc`
//! (infra/check-windows.sh); linking and running it need Windows: docs/MOUNT-WINDOWS.md says
//! how to build it there and lists what is unverified.
//!
//! No `unsafe` (the workspace forbids it). What that leaves out: security descriptors. The
//! crate hands their buffers over as `&mut [c_void]`, which safe code cannot write into, so
//! every file reports none (size 0) and WinFsp does no ACL check: the space belongs to the
//! mounting user. The read-only attribute is still enforced (by WinFsp from the attributes we
//! report, and by the core).

use std::ffi::c_void;
use std::sync::Arc;
use std::time::SystemTime;

use winfsp::constants::FspCleanupFlags;
use winfsp::filesystem::{
    DirBuffer, DirBufferLock, DirInfo, DirMarker, FileInfo, FileSecurity, FileSystemContext, OpenFileInfo, VolumeInfo,
    WideNameInfo,
};
use winfsp::host::{FileSystemHost, VolumeParams};
use winfsp::{FspError, U16CStr};

use crate::config::{MountConfig, MountError};
use crate::core::{Vfs, VfsError, VfsResult};
use crate::nt::info::{self as ntinfo, SECTOR_SIZE};
use crate::nt::ops::{self, Node, Read};
use crate::nt::request::{MAX_NAME_UNITS, mount_target};
use crate::nt::status::ntstatus::{STATUS_END_OF_FILE, STATUS_SUCCESS};
use crate::nt::{log_failure, ntstatus};

/// How long WinFsp may reuse file, directory and volume information before asking again.
/// Short, because other devices change the space; the core's cache answers the repeats.
const INFO_TIMEOUT_MS: u32 = 1000;
/// Threads WinFsp dispatches requests on. Each blocks while its core call waits for the
/// gateway, so more than the default (one per CPU) keeps a slow download from stalling the
/// drive.
const DISPATCHER_THREADS: u32 = 16;
const VOLUME_LABEL: &str = "Nimbus";

pub struct NimbusWinFsp {
    vfs: Arc<Vfs>,
    rt: tokio::runtime::Handle,
}

/// One open handle: the core's [`Node`] and, for a directory, the listing WinFsp pages
/// through. `DirBuffer` needs no Mutex: it has interior mutability and WinFsp's own lock
/// inside `acquire` (filling) and `read`.
pub struct NimbusFile {
    node: Node,
    dir: Option<DirBuffer>,
}

impl NimbusFile {
    fn new(node: Node) -> Self {
        Self { node, dir: node.is_dir.then(DirBuffer::new) }
    }
}

impl NimbusWinFsp {
    pub fn new(vfs: Arc<Vfs>, rt: tokio::runtime::Handle) -> Self {
        Self { vfs, rt }
    }

    /// Runs a core call to completion on this (WinFsp) thread; a core error becomes the
    /// NTSTATUS [`ntstatus()`] gives it.
    fn block<T>(&self, op: &str, f: impl Future<Output = VfsResult<T>>) -> winfsp::Result<T> {
        self.rt.block_on(f).map_err(|e| fail(op, &e))
    }

    /// Puts the whole listing of an opened directory into its buffer (WinFsp sorts it and
    /// serves the marker-based paging from there).
    fn fill_dir(&self, ctx: &NimbusFile, lock: &DirBufferLock<'_>) -> winfsp::Result<()> {
        let mut entry: DirInfo<MAX_NAME_UNITS> = DirInfo::new();
        for e in self.block("read_directory", ops::list(&self.vfs, ctx.node))? {
            entry.reset();
            fill_info(entry.file_info_mut(), &e.info);
            // Cannot fail: `ops::list` keeps only names of at most MAX_NAME_UNITS.
            entry.set_name_raw(e.name.as_slice())?;
            lock.write(&mut entry)?;
        }
        Ok(())
    }
}

fn fail(op: &str, e: &VfsError) -> FspError {
    log_failure(op, e);
    FspError::NTSTATUS(ntstatus(e))
}

fn fill_info(out: &mut FileInfo, i: &ntinfo::FileInfo) {
    out.file_attributes = i.file_attributes;
    out.reparse_tag = 0;
    out.file_size = i.file_size;
    out.allocation_size = i.allocation_size;
    out.creation_time = i.creation_time;
    out.last_access_time = i.last_access_time;
    out.last_write_time = i.last_write_time;
    out.change_time = i.change_time;
    out.index_number = i.index_number;
    out.hard_links = 0;
    out.ea_size = 0;
}

impl FileSystemContext for NimbusWinFsp {
    type FileContext = NimbusFile;

    fn get_security_by_name(
        &self,
        file_name: &U16CStr,
        _security_descriptor: Option<&mut [c_void]>,
        _reparse_point_resolver: impl FnOnce(&U16CStr) -> Option<FileSecurity>,
    ) -> winfsp::Result<FileSecurity> {
        let attributes =
            self.block("get_security_by_name", ops::security_attributes(&self.vfs, file_name.as_slice()))?;
        // No security descriptor (see the module comment): size 0.
        Ok(FileSecurity { reparse: false, sz_security_descriptor: 0, attributes })
    }

    fn open(
        &self,
        file_name: &U16CStr,
        create_options: u32,
        granted_access: u32,
        file_info: &mut OpenFileInfo,
    ) -> winfsp::Result<NimbusFile> {
        let (node, info) =
            self.block("open", ops::open(&self.vfs, file_name.as_slice(), create_options, granted_access))?;
        fill_info(file_info.as_mut(), &info);
        Ok(NimbusFile::new(node))
    }

    fn close(&self, ctx: NimbusFile) {
        ops::close(&self.vfs, &self.rt, ctx.node);
    }

    #[allow(clippy::too_many_arguments)]
    fn create(
        &self,
        file_name: &U16CStr,
        create_options: u32,
        _granted_access: u32,
        file_attributes: u32,
        _security_descriptor: Option<&[c_void]>,
        _allocation_size: u64,
        _extra_buffer: Option<&[u8]>,
        _extra_buffer_is_reparse_point: bool,
        file_info: &mut OpenFileInfo,
    ) -> winfsp::Result<NimbusFile> {
        let (node, info) =
            self.block("create", ops::create(&self.vfs, file_name.as_slice(), create_options, file_attributes))?;
        fill_info(file_info.as_mut(), &info);
        Ok(NimbusFile::new(node))
    }

    fn cleanup(&self, ctx: &NimbusFile, file_name: Option<&U16CStr>, flags: u32) {
        // Only the Delete flag is acted on (see `ops::delete_at_cleanup`); nothing can be
        // returned, so a failure is logged (the core's release retries a file's deletion).
        if !FspCleanupFlags::FspCleanupDelete.is_flagged(flags) {
            return;
        }
        let Some(file_name) = file_name else { return };
        if let Err(e) = self.rt.block_on(ops::delete_at_cleanup(&self.vfs, ctx.node, file_name.as_slice())) {
            log_failure("cleanup (delete)", &e);
        }
    }

    fn flush(&self, ctx: Option<&NimbusFile>, file_info: &mut FileInfo) -> winfsp::Result<()> {
        // The whole volume: everything written is in the journal already.
        let Some(ctx) = ctx else { return Ok(()) };
        let info = self.block("flush", ops::flush(&self.vfs, ctx.node))?;
        fill_info(file_info, &info);
        Ok(())
    }

    fn get_file_info(&self, ctx: &NimbusFile, file_info: &mut FileInfo) -> winfsp::Result<()> {
        let info = self.block("get_file_info", ops::file_info(&self.vfs, ctx.node))?;
        fill_info(file_info, &info);
        Ok(())
    }

    fn overwrite(
        &self,
        ctx: &NimbusFile,
        file_attributes: u32,
        replace_file_attributes: bool,
        _allocation_size: u64,
        _extra_buffer: Option<&[u8]>,
        file_info: &mut FileInfo,
    ) -> winfsp::Result<()> {
        let info =
            self.block("overwrite", ops::overwrite(&self.vfs, ctx.node, file_attributes, replace_file_attributes))?;
        fill_info(file_info, &info);
        Ok(())
    }

    fn read_directory(
        &self,
        ctx: &NimbusFile,
        _pattern: Option<&U16CStr>,
        marker: DirMarker<'_>,
        buffer: &mut [u8],
    ) -> winfsp::Result<u32> {
        // The pattern is ignored: WinFsp filters by it itself unless the volume asks for it
        // (PassQueryDirectoryPattern, off here).
        let Some(dir) = &ctx.dir else { return Err(fail("read_directory", &VfsError::NotDir)) };
        // No marker: a new enumeration (or a rewind), which (re)fills the buffer from the core.
        // With a marker WinFsp continues after that name in what is buffered.
        match dir.acquire(marker.is_none(), None) {
            Ok(lock) => self.fill_dir(ctx, &lock)?,
            // Not acquired, with success: the buffer is already filled.
            Err(FspError::NTSTATUS(STATUS_SUCCESS)) => {}
            Err(e) => return Err(e),
        }
        Ok(dir.read(marker, buffer))
    }

    fn rename(
        &self,
        _ctx: &NimbusFile,
        file_name: &U16CStr,
        new_file_name: &U16CStr,
        replace_if_exists: bool,
    ) -> winfsp::Result<()> {
        self.block("rename", ops::rename(&self.vfs, file_name.as_slice(), new_file_name.as_slice(), replace_if_exists))
    }

    #[allow(clippy::too_many_arguments)]
    fn set_basic_info(
        &self,
        ctx: &NimbusFile,
        file_attributes: u32,
        _creation_time: u64,
        _last_access_time: u64,
        last_write_time: u64,
        _last_change_time: u64,
        file_info: &mut FileInfo,
    ) -> winfsp::Result<()> {
        let info =
            self.block("set_basic_info", ops::set_basic_info(&self.vfs, ctx.node, file_attributes, last_write_time))?;
        fill_info(file_info, &info);
        Ok(())
    }

    fn set_delete(&self, ctx: &NimbusFile, _file_name: &U16CStr, delete_file: bool) -> winfsp::Result<()> {
        self.block("set_delete", ops::set_delete(&self.vfs, ctx.node, delete_file))
    }

    fn set_file_size(
        &self,
        ctx: &NimbusFile,
        new_size: u64,
        set_allocation_size: bool,
        file_info: &mut FileInfo,
    ) -> winfsp::Result<()> {
        let info =
            self.block("set_file_size", ops::set_file_size(&self.vfs, ctx.node, new_size, set_allocation_size))?;
        fill_info(file_info, &info);
        Ok(())
    }

    fn read(&self, ctx: &NimbusFile, buffer: &mut [u8], offset: u64) -> winfsp::Result<u32> {
        match self.block("read", ops::read(&self.vfs, ctx.node, buffer, offset))? {
            Read::Bytes(n) => Ok(n),
            Read::EndOfFile => Err(FspError::NTSTATUS(STATUS_END_OF_FILE)),
        }
    }

    fn write(
        &self,
        ctx: &NimbusFile,
        buffer: &[u8],
        offset: u64,
        write_to_eof: bool,
        constrained_io: bool,
        file_info: &mut FileInfo,
    ) -> winfsp::Result<u32> {
        let (n, info) =
            self.block("write", ops::write(&self.vfs, ctx.node, buffer, offset, write_to_eof, constrained_io))?;
        fill_info(file_info, &info);
        Ok(n)
    }

    fn get_volume_info(&self, out_volume_info: &mut VolumeInfo) -> winfsp::Result<()> {
        let (total, free) = self.rt.block_on(self.vfs.statfs());
        out_volume_info.total_size = total;
        out_volume_info.free_size = free;
        out_volume_info.set_volume_label(VOLUME_LABEL);
        Ok(())
    }
}

/// A WinFsp file system owned by one thread from mount to unmount, like FUSE's session thread:
/// it mounts, starts the dispatcher (WinFsp's own threads serve the calls), reports readiness,
/// then waits for `stop` (or for the sender to go) to unmount and free it. The host is `Send`
/// (winfsp 0.12.6: `FileSystemHost<T>` is for `T: Send`), so the thread is not required; it
/// keeps creating, unmounting and freeing the file system in one place.
pub(crate) struct HostThread {
    stop: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl HostThread {
    pub(crate) fn start(
        rt: &tokio::runtime::Runtime,
        vfs: Arc<Vfs>,
        cfg: &MountConfig,
    ) -> Result<HostThread, MountError> {
        // Loads the WinFsp DLL (delay-loaded, see docs/MOUNT-WINDOWS.md) from the installation.
        winfsp::winfsp_init().map_err(|e| {
            MountError::Runtime(format!("cannot load WinFsp ({e:?}); is WinFsp installed? https://winfsp.dev/rel/"))
        })?;
        let target = mount_target(&cfg.mountpoint);
        let handle = rt.handle().clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), MountError>>();
        let (stop, stop_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("winfsp-host".into())
            .spawn(move || {
                let mut host = match mount_host(vfs, handle, &target) {
                    Ok(h) => h,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(()));
                // Until stopped, or until the `Mounted` holding the sender is gone.
                let _ = stop_rx.recv();
                host.unmount();
                host.stop();
                // Dropping the host frees the file system (and our context) before the runtime goes.
                drop(host);
            })
            .map_err(|e| MountError::Runtime(e.to_string()))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(HostThread { stop, thread }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => Err(MountError::Runtime("the WinFsp host thread ended before mounting".into())),
        }
    }

    pub(crate) fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// Unmounts and waits for the host thread to free the file system.
    pub(crate) fn unmount_and_join(self) {
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }
}

fn mount_host(
    vfs: Arc<Vfs>,
    rt: tokio::runtime::Handle,
    target: &str,
) -> Result<FileSystemHost<NimbusWinFsp>, MountError> {
    let mount_err = |what: &str, e: String| MountError::Mount {
        path: target.to_string(),
        err: std::io::Error::other(format!("{what}: {e}")),
    };
    let now = ntinfo::filetime(SystemTime::now());
    let mut params = VolumeParams::new();
    params
        .filesystem_name("Nimbus")
        .sector_size(SECTOR_SIZE)
        .sectors_per_allocation_unit(1)
        .max_component_length(MAX_NAME_UNITS as u16)
        .volume_creation_time(now)
        .volume_serial_number((now / 10_000_000) as u32)
        .file_info_timeout(INFO_TIMEOUT_MS)
        .case_sensitive_search(false)
        .case_preserved_names(true)
        .unicode_on_disk(true)
        .persistent_acls(false)
        // Cleanup is only sent for handles that modified or deleted something: the adapter
        // acts on cleanup only to delete.
        .post_cleanup_when_modified_only(true)
        // Flush cached data at the last handle's cleanup and let go of the file, so Close
        // (where the core uploads) follows CloseHandle promptly.
        .flush_and_purge_on_cleanup(true);
    let fs = NimbusWinFsp::new(vfs, rt);
    let mut host =
        FileSystemHost::new(params, fs).map_err(|e| mount_err("cannot create the file system", e.to_string()))?;
    host.mount(target).map_err(|e| mount_err("cannot mount", e.to_string()))?;
    host.start_with_threads(DISPATCHER_THREADS).map_err(|e| mount_err("cannot start", e.to_string()))?;
    Ok(host)
}
