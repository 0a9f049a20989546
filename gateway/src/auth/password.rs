//! Password hashing with argon2id (the crate's default parameters: m=19 MiB, t=2, p=1, per
//! OWASP). Hashing is CPU-heavy, so callers run it on the blocking pool.

use argon2::Argon2;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};
use rand::Rng;

pub const MIN_PASSWORD_LEN: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    #[error("passwords must be at least {MIN_PASSWORD_LEN} characters long")]
    TooShort,
    #[error("passwords must be at most 1024 bytes long")]
    TooLong,
    #[error("password hashing failed: {0}")]
    Hash(String),
}

pub fn hash_password(password: &str) -> Result<String, PasswordError> {
    if password.chars().count() < MIN_PASSWORD_LEN {
        return Err(PasswordError::TooShort);
    }
    if password.len() > 1024 {
        return Err(PasswordError::TooLong);
    }
    // A fresh random salt per hash (the trait draws it from the OS).
    let hash: argon2::password_hash::phc::PasswordHash =
        Argon2::default().hash_password(password.as_bytes()).map_err(|e| PasswordError::Hash(e.to_string()))?;
    Ok(hash.to_string())
}

pub fn verify_password(password: &str, stored: &str) -> bool {
    // Parses the PHC string and compares in constant time.
    Argon2::default().verify_password(password.as_bytes(), stored).is_ok()
}

/// Verifies against the user's hash, or against a fixed dummy hash when there is no such
/// user, so a login for an unknown name costs the same time as a wrong password.
pub fn verify_password_or_dummy(password: &str, stored: Option<&str>) -> bool {
    static DUMMY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    match stored {
        Some(s) => verify_password(password, s),
        None => {
            let dummy = DUMMY.get_or_init(|| hash_password("dummy-password-for-timing").unwrap_or_default());
            let _ = verify_password(password, dummy);
            false
        }
    }
}

/// A generated password: 20 characters from an alphabet without look-alikes (~114 bits).
pub fn generate_password() -> String {
    const ALPHABET: &[u8] = b"abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    let mut rng = rand::rng();
    (0..20).map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_and_verify() -> Result<(), PasswordError> {
        let h = hash_password("correct horse")?;
        assert!(h.starts_with("$argon2id$"));
        assert!(verify_password("correct horse", &h));
        assert!(!verify_password("correct horsE", &h));
        assert!(!verify_password_or_dummy("x", None));
        assert!(matches!(hash_password("short"), Err(PasswordError::TooShort)));
        Ok(())
    }

    #[test]
    fn generated_passwords_are_long_and_differ() {
        let (a, b) = (generate_password(), generate_password());
        assert_eq!(a.len(), 20);
        assert_ne!(a, b);
    }
}
