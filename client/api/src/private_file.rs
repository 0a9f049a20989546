//! Files only their owner may read (device tokens, sessions): a 0700 directory and an atomic
//! (temp file + rename) 0600 write. The CLI's session and the desktop app's token file both
//! go through here, so both get the same guarantees.

use std::fs;
use std::io::Write;
use std::path::Path;

/// Creates `dir` (and parents) private to the owner; an existing one is tightened to 0700.
#[cfg(unix)]
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
}

/// Creates `dir` (and parents); on Windows it inherits the user profile's owner-only ACL.
#[cfg(not(unix))]
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    fs::create_dir_all(dir)
}

/// Writes `data` to `path` in a private directory: a temp file beside it (0600, synced), then
/// a rename, so a reader sees the old content or the new, never a torn or world-readable file.
/// On error the temp file is removed and `Err` names the failing step's path.
pub fn write_private(path: &Path, data: &[u8]) -> Result<(), (std::path::PathBuf, std::io::Error)> {
    if let Some(dir) = path.parent() {
        create_private_dir(dir).map_err(|e| (dir.to_path_buf(), e))?;
    }
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let write = || -> std::io::Result<()> {
        let mut f = private_file(&tmp)?;
        f.write_all(data)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = fs::remove_file(&tmp);
        (path.to_path_buf(), e)
    })
}

#[cfg(unix)]
fn private_file(path: &Path) -> std::io::Result<fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let _ = fs::remove_file(path);
    fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)
}

#[cfg(not(unix))]
fn private_file(path: &Path) -> std::io::Result<fs::File> {
    // Windows: the file inherits the user profile directory's ACL (owner only).
    fs::OpenOptions::new().write(true).create(true).truncate(true).open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_privately_and_atomically() -> Result<(), Box<dyn std::error::Error>> {
        let tmp = tempfile::tempdir()?;
        let dir = tmp.path().join("a").join("b");
        let path = dir.join("token");
        write_private(&path, b"one").map_err(|(p, e)| format!("{}: {e}", p.display()))?;
        write_private(&path, b"two").map_err(|(p, e)| format!("{}: {e}", p.display()))?;
        assert_eq!(fs::read(&path)?, b"two");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(fs::metadata(&path)?.permissions().mode() & 0o777, 0o600);
            assert_eq!(fs::metadata(&dir)?.permissions().mode() & 0o777, 0o700);
        }
        // No temp file left beside it.
        assert_eq!(fs::read_dir(&dir)?.count(), 1);
        // A directory where the file should go: an error naming it, nothing left behind.
        let blocked = dir.join("blocked");
        fs::create_dir(&blocked)?;
        let (p, _) = write_private(&blocked, b"x").err().ok_or("writing over a directory succeeded")?;
        assert_eq!(p, blocked);
        assert_eq!(fs::read_dir(&dir)?.count(), 2);
        Ok(())
    }
}
