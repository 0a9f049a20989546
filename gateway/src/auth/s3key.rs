//! S3 access keys: an AWS-shaped key id and secret per user. SigV4 signs with the secret, so
//! the server must be able to recover it: it is sealed under a server key that never enters
//! the database (a 0600 file in the data dir, or one named by `--s3-key-file`).
//!
//! Sealing is encrypt-then-MAC on BLAKE3 (already our block hash, so no second crypto stack):
//! keyed BLAKE3 is a PRF, its XOF over a random 24-byte nonce is the keystream, and a keyed
//! BLAKE3 tag (separate derived key) covers key id, nonce and ciphertext. Binding the access
//! key id means a sealed secret copied onto another row does not open.

use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rand::RngCore;
use subtle::ConstantTimeEq;

const NONCE_LEN: usize = 24;
const TAG_LEN: usize = 32;

/// Key ids start with this, so they are recognisable in logs and configs.
pub const KEY_ID_PREFIX: &str = "NMB";
const KEY_ID_LEN: usize = 20;
const SECRET_LEN: usize = 40;
const ALNUM_UPPER: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
const SECRET_CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

#[derive(Debug, thiserror::Error)]
pub enum SealError {
    #[error("the S3 key file {path} must hold exactly 32 bytes (it holds {len})")]
    BadKeyFile { path: String, len: usize },
    #[error("cannot read or create the S3 key file {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("a stored S3 secret does not open with this server key")]
    Open,
}

/// The server key that seals and opens stored S3 secrets.
pub struct SecretSealer {
    enc_key: [u8; 32],
    mac_key: [u8; 32],
}

impl std::fmt::Debug for SecretSealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretSealer(..)")
    }
}

impl SecretSealer {
    pub fn from_bytes(bytes: &[u8; 32]) -> Self {
        SecretSealer {
            enc_key: blake3::derive_key("nimbus 2026-11 s3 secret sealing: encryption", bytes),
            mac_key: blake3::derive_key("nimbus 2026-11 s3 secret sealing: authentication", bytes),
        }
    }

    /// Loads the key from `path`, creating it (32 random bytes, mode 0600) on first start.
    pub fn load_or_create(path: &Path) -> Result<Self, SealError> {
        let io = |source| SealError::Io { path: path.display().to_string(), source };
        match std::fs::read(path) {
            Ok(bytes) => {
                let arr: [u8; 32] = bytes
                    .as_slice()
                    .try_into()
                    .map_err(|_| SealError::BadKeyFile { path: path.display().to_string(), len: bytes.len() })?;
                Ok(Self::from_bytes(&arr))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mut arr = [0u8; 32];
                rand::rng().fill_bytes(&mut arr);
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir).map_err(io)?;
                }
                write_private(path, &arr).map_err(io)?;
                Ok(Self::from_bytes(&arr))
            }
            Err(e) => Err(io(e)),
        }
    }

    fn keystream_xor(&self, nonce: &[u8], buf: &mut [u8]) {
        let mut stream = vec![0u8; buf.len()];
        blake3::Hasher::new_keyed(&self.enc_key).update(nonce).finalize_xof().fill(&mut stream);
        buf.iter_mut().zip(stream).for_each(|(b, k)| *b ^= k);
    }

    fn tag(&self, key_id: &str, nonce: &[u8], ciphertext: &[u8]) -> [u8; TAG_LEN] {
        let mut h = blake3::Hasher::new_keyed(&self.mac_key);
        // Length-prefixed so that no two (key id, ciphertext) pairs hash the same input.
        h.update(&(key_id.len() as u64).to_le_bytes()).update(key_id.as_bytes()).update(nonce).update(ciphertext);
        *h.finalize().as_bytes()
    }

    /// `base64(nonce || ciphertext || tag)`.
    pub fn seal(&self, key_id: &str, secret: &str) -> String {
        let mut nonce = [0u8; NONCE_LEN];
        rand::rng().fill_bytes(&mut nonce);
        let mut buf = secret.as_bytes().to_vec();
        self.keystream_xor(&nonce, &mut buf);
        let tag = self.tag(key_id, &nonce, &buf);
        let mut out = nonce.to_vec();
        out.extend_from_slice(&buf);
        out.extend_from_slice(&tag);
        STANDARD.encode(out)
    }

    pub fn open(&self, key_id: &str, sealed: &str) -> Result<String, SealError> {
        let raw = STANDARD.decode(sealed).map_err(|_| SealError::Open)?;
        if raw.len() < NONCE_LEN + TAG_LEN {
            return Err(SealError::Open);
        }
        let (nonce, rest) = raw.split_at(NONCE_LEN);
        let (ciphertext, tag) = rest.split_at(rest.len() - TAG_LEN);
        if !bool::from(self.tag(key_id, nonce, ciphertext).ct_eq(tag)) {
            return Err(SealError::Open);
        }
        let mut buf = ciphertext.to_vec();
        self.keystream_xor(nonce, &mut buf);
        String::from_utf8(buf).map_err(|_| SealError::Open)
    }
}

#[cfg(unix)]
fn write_private(path: &Path, data: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)?;
    f.write_all(data)?;
    f.sync_all()
}

#[cfg(not(unix))]
fn write_private(path: &Path, data: &[u8]) -> std::io::Result<()> {
    std::fs::write(path, data)
}

fn random_from(alphabet: &[u8], len: usize) -> String {
    // 256 is a multiple of neither alphabet's size: reject the tail to keep it uniform.
    let limit = 256 - (256 % alphabet.len());
    let mut out = String::with_capacity(len);
    let mut rng = rand::rng();
    while out.len() < len {
        let mut b = [0u8; 1];
        rng.fill_bytes(&mut b);
        if (b[0] as usize) < limit {
            out.push(alphabet[b[0] as usize % alphabet.len()] as char);
        }
    }
    out
}

/// A fresh `(access_key_id, secret_access_key)` in the shapes AWS tools expect.
pub fn new_key_pair() -> (String, String) {
    let id = format!("{KEY_ID_PREFIX}{}", random_from(ALNUM_UPPER, KEY_ID_LEN - KEY_ID_PREFIX.len()));
    (id, random_from(SECRET_CHARS, SECRET_LEN))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_round_trip_bound_to_key_id_and_server_key() {
        let s = SecretSealer::from_bytes(&[7u8; 32]);
        let (id, secret) = new_key_pair();
        assert_eq!(id.len(), 20);
        assert!(id.starts_with(KEY_ID_PREFIX));
        assert_eq!(secret.len(), 40);
        let sealed = s.seal(&id, &secret);
        assert!(!sealed.contains(&secret));
        assert_eq!(s.open(&id, &sealed).ok().as_deref(), Some(secret.as_str()));
        assert!(s.open("NMBOTHERKEYID0000000", &sealed).is_err());
        assert!(SecretSealer::from_bytes(&[8u8; 32]).open(&id, &sealed).is_err());
        assert!(s.open(&id, "not base64!").is_err());
    }

    #[test]
    fn key_file_is_created_private_and_reused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s3.key");
        let a = SecretSealer::load_or_create(&path).expect("create");
        let sealed = a.seal("id", "secret");
        let b = SecretSealer::load_or_create(&path).expect("reload");
        assert_eq!(b.open("id", &sealed).ok().as_deref(), Some("secret"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        std::fs::write(&path, b"short").expect("write");
        assert!(matches!(SecretSealer::load_or_create(&path), Err(SealError::BadKeyFile { .. })));
    }
}
