//! The Nimbus wire contract: JSON types of the REST API (`/api/v1`) and the rules every
//! name and path must follow. The gateway and all clients (CLI, mount, desktop) use this
//! crate, so a name one side accepts is a name the other side accepts too.

#[cfg(feature = "ts")]
pub mod bindings;
pub mod drive;
pub mod names;
pub mod size;
pub mod wire;

pub use names::{NameError, RemotePath};

/// Content is split into blocks of this size (the last block of a file may be shorter).
/// 4 MiB balances per-request overhead against the re-upload cost of a small edit.
pub const DEFAULT_BLOCK_SIZE: u64 = 4 * 1024 * 1024;

/// Sent with `GET /api/v1/blocks/{hash}` by a client that checks every block against its hash
/// itself: a gateway with `--s3-direct-reads` may then answer `307 Temporary Redirect` to a
/// short-lived URL that reads the block straight from the object store.
pub const ACCEPT_REDIRECT_HEADER: &str = "x-nimbus-accept-redirect";

/// Blocks are addressed by their BLAKE3 hash, written as 64 lowercase hex digits.
pub fn is_block_hash(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The address of one block's content: its BLAKE3 hash in lowercase hex.
pub fn block_hash(data: &[u8]) -> String {
    blake3::hash(data).to_hex().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_hash_is_lowercase_hex_and_recognised() {
        let h = block_hash(b"hello");
        assert!(is_block_hash(&h));
        assert!(!is_block_hash(&h.to_uppercase()));
        assert!(!is_block_hash(&h[..63]));
        assert!(!is_block_hash("../../etc/passwd"));
    }
}
