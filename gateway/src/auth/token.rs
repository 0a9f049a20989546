//! Bearer tokens: 32 random bytes, shown once to the client as `nmb_<base64url>`, stored only
//! as their BLAKE3 hash. The token has 256 bits of entropy, so a fast hash is enough: a
//! database leak yields nothing usable.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore;

pub const TOKEN_PREFIX: &str = "nmb_";

/// A fresh token and the hash to store.
pub fn new_token() -> (String, String) {
    let mut raw = [0u8; 32];
    rand::rng().fill_bytes(&mut raw);
    let token = format!("{TOKEN_PREFIX}{}", URL_SAFE_NO_PAD.encode(raw));
    let hash = token_hash(&token);
    (token, hash)
}

/// What the database keeps of a token: the hex of [`token_key`].
pub fn token_hash(token: &str) -> String {
    token_key(token).to_hex().to_string()
}

/// A token's BLAKE3 hash, what it is looked up by.
pub fn token_key(token: &str) -> blake3::Hash {
    blake3::hash(token.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_unique_and_hashed() {
        let (t1, h1) = new_token();
        let (t2, _) = new_token();
        assert!(t1.starts_with(TOKEN_PREFIX));
        assert_ne!(t1, t2);
        assert_eq!(token_hash(&t1), h1);
        assert!(!h1.contains(&t1));
    }
}
