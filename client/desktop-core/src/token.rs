//! Where the device token lives: the OS keychain when one answers, else a file only this user
//! can read (0600 in a 0700 directory, like the CLI's session file). [`TokenStore::detect`]
//! decides once at start-up; [`TokenStore::kind`] tells the UI which, so it can show a note.

use std::fs;
use std::path::{Path, PathBuf};

use crate::api::TokenStorage;

/// The keychain service name under which the token is kept.
pub const KEYCHAIN_SERVICE: &str = "nimbus-drive";

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("the keychain refused: {0}")]
    Keychain(String),
    #[error("cannot use the token file {path}: {err}")]
    File { path: String, err: std::io::Error },
}

#[derive(Debug, Clone)]
pub enum TokenStore {
    /// Entries `KEYCHAIN_SERVICE` / `<account key>`.
    Keychain { service: String },
    /// One file per account key in `dir`.
    File { dir: PathBuf },
}

impl TokenStore {
    /// The keychain if a probe entry can be written, read back and deleted there; otherwise
    /// the file store in `fallback_dir`. Blocking (the keychain is a D-Bus or system call):
    /// call from `spawn_blocking` in async code.
    pub fn detect(fallback_dir: &Path) -> TokenStore {
        match probe_keychain(KEYCHAIN_SERVICE) {
            Ok(()) => TokenStore::Keychain { service: KEYCHAIN_SERVICE.into() },
            Err(e) => {
                tracing::info!(error = %e, dir = %fallback_dir.display(), "no usable keychain; tokens go to a private file");
                TokenStore::File { dir: fallback_dir.to_path_buf() }
            }
        }
    }

    pub fn kind(&self, key: &str) -> TokenStorage {
        match self {
            TokenStore::Keychain { .. } => TokenStorage::Keychain,
            TokenStore::File { dir } => TokenStorage::File { path: file_path(dir, key).display().to_string() },
        }
    }

    pub fn save(&self, key: &str, token: &str) -> Result<(), TokenError> {
        match self {
            TokenStore::Keychain { service } => {
                keychain_entry(service, key)?.set_password(token).map_err(|e| TokenError::Keychain(e.to_string()))
            }
            TokenStore::File { dir } => write_private(&file_path(dir, key), token.as_bytes()),
        }
    }

    /// The saved token, `None` if there is none.
    pub fn load(&self, key: &str) -> Result<Option<String>, TokenError> {
        match self {
            TokenStore::Keychain { service } => match keychain_entry(service, key)?.get_password() {
                Ok(t) => Ok(Some(t)),
                Err(keyring::Error::NoEntry) => Ok(None),
                Err(e) => Err(TokenError::Keychain(e.to_string())),
            },
            TokenStore::File { dir } => {
                let path = file_path(dir, key);
                match fs::read_to_string(&path) {
                    Ok(t) => Ok(Some(t.trim().to_string()).filter(|t| !t.is_empty())),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                    Err(err) => Err(TokenError::File { path: path.display().to_string(), err }),
                }
            }
        }
    }

    /// Forgets the token; not an error if there was none.
    pub fn delete(&self, key: &str) -> Result<(), TokenError> {
        match self {
            TokenStore::Keychain { service } => match keychain_entry(service, key)?.delete_credential() {
                Ok(()) | Err(keyring::Error::NoEntry) => Ok(()),
                Err(e) => Err(TokenError::Keychain(e.to_string())),
            },
            TokenStore::File { dir } => {
                let path = file_path(dir, key);
                match fs::remove_file(&path) {
                    Ok(()) => Ok(()),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                    Err(err) => Err(TokenError::File { path: path.display().to_string(), err }),
                }
            }
        }
    }
}

/// The key of an account: `username@server`, also a safe file name once hashed.
pub fn account_key(server_url: &str, username: &str) -> String {
    format!("{username}@{server_url}")
}

fn file_path(dir: &Path, key: &str) -> PathBuf {
    // Server URLs contain `/` and `:`: name the file by a hash of the key instead.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    dir.join(format!("token-{h:016x}"))
}

fn keychain_entry(service: &str, key: &str) -> Result<keyring::Entry, TokenError> {
    keyring::Entry::new(service, key).map_err(|e| TokenError::Keychain(e.to_string()))
}

fn probe_keychain(service: &str) -> Result<(), TokenError> {
    let key = format!("probe-{}", std::process::id());
    let entry = keychain_entry(service, &key)?;
    entry.set_password("probe").map_err(|e| TokenError::Keychain(e.to_string()))?;
    let back = entry.get_password().map_err(|e| TokenError::Keychain(e.to_string()));
    let _ = entry.delete_credential();
    match back? {
        p if p == "probe" => Ok(()),
        _ => Err(TokenError::Keychain("the keychain returned something else than was stored".into())),
    }
}

/// Atomic write (temp file + rename) of a file readable only by its owner.
fn write_private(path: &Path, data: &[u8]) -> Result<(), TokenError> {
    nimbus_client::private_file::write_private(path, data)
        .map_err(|(at, err)| TokenError::File { path: at.display().to_string(), err })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_store_round_trip_is_private() -> Result<(), Box<dyn std::error::Error>> {
        let tmp = tempfile::tempdir()?;
        let dir = tmp.path().join("tokens");
        let store = TokenStore::File { dir: dir.clone() };
        let key = account_key("https://h:8443", "alice");
        assert_eq!(store.load(&key)?, None);
        store.save(&key, "secret-1")?;
        assert_eq!(store.load(&key)?.as_deref(), Some("secret-1"));
        store.save(&key, "secret-2")?;
        assert_eq!(store.load(&key)?.as_deref(), Some("secret-2"));
        // Another account has its own entry.
        let other = account_key("https://h:8443", "bob");
        assert_eq!(store.load(&other)?, None);
        let TokenStorage::File { path } = store.kind(&key) else { panic!("file store reports {:?}", store.kind(&key)) };
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(fs::metadata(&path)?.permissions().mode() & 0o777, 0o600);
            assert_eq!(fs::metadata(&dir)?.permissions().mode() & 0o777, 0o700);
        }
        // No temp files are left behind.
        assert_eq!(fs::read_dir(&dir)?.count(), 1);
        store.delete(&key)?;
        assert_eq!(store.load(&key)?, None);
        assert!(!Path::new(&path).exists());
        store.delete(&key)?;
        Ok(())
    }

    /// Where no Secret Service runs (no D-Bus session bus, as on this CI), detection must
    /// fall back to the file store rather than fail or hang.
    #[cfg(all(unix, not(target_os = "macos")))]
    #[test]
    fn detect_falls_back_to_a_file_without_a_session_bus() {
        if std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_some() {
            eprintln!("skipped: a D-Bus session bus is configured here");
            return;
        }
        let tmp = std::env::temp_dir().join("nimbus-token-detect");
        match TokenStore::detect(&tmp) {
            TokenStore::File { dir } => assert_eq!(dir, tmp),
            other => panic!("expected the file fallback, got {other:?}"),
        }
    }
}
