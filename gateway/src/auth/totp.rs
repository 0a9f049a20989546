//! Two-factor sign-in with TOTP (RFC 6238 through `totp-rs`: HMAC-SHA1, 6 digits, 30-second
//! steps, the step before and after accepted for clock drift) and single-use recovery codes.
//!
//! The secret must be known to the server to check a code (HMAC needs the key, unlike a
//! password hash), so it is kept sealed under the server key (the S3 secret sealer, bound to
//! `totp:<user id>` so a sealed secret copied onto another user's row does not open): a
//! database dump alone yields no usable secret. Recovery codes are 80 random bits each, so like
//! bearer tokens they are stored as a fast hash (BLAKE3): nothing to brute-force offline, and a
//! sign-in never runs ten argon2 checks.

use rand::Rng;
use subtle::ConstantTimeEq;
use totp_rs::{Algorithm, TOTP};

/// Seconds per code.
pub const STEP_SECS: u64 = 30;
/// Steps accepted either side of the current one (clock drift between phone and server).
pub const SKEW_STEPS: u64 = 1;
/// Secret length: 160 bits, what RFC 4226 recommends for HMAC-SHA1.
const SECRET_BYTES: usize = 20;
/// How many recovery codes an enrolment hands out.
pub const RECOVERY_CODES: usize = 10;
/// Recovery code alphabet: 32 symbols without look-alikes (no i, l, o, 1), 5 bits each.
const RECOVERY_ALPHABET: &[u8] = b"0123456789abcdefghjkmnpqrstuvwxyz";
/// Symbols per recovery code (16 x 5 = 80 bits), shown in groups of four.
const RECOVERY_LEN: usize = 16;
const ISSUER: &str = "Nimbus";

/// Who must use two-factor sign-in (`--require-totp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum RequireTotp {
    /// Nobody: users turn it on for themselves.
    #[default]
    None,
    /// Administrators.
    Admins,
    /// Everybody signing in with a password.
    All,
}

impl RequireTotp {
    pub fn applies_to(self, role: nimbus_proto::wire::Role) -> bool {
        match self {
            RequireTotp::None => false,
            RequireTotp::Admins => role == nimbus_proto::wire::Role::Admin,
            RequireTotp::All => true,
        }
    }
}

/// A fresh random secret.
pub fn new_secret() -> Vec<u8> {
    let mut s = vec![0u8; SECRET_BYTES];
    rand::rng().fill(&mut s[..]);
    s
}

fn totp(secret: &[u8], account: &str) -> TOTP {
    // Unchecked only skips the length and label checks: the secret is ours (160 bits) and the
    // label is URL-encoded by `get_url`.
    TOTP::new_unchecked(
        Algorithm::SHA1,
        6,
        SKEW_STEPS as u8,
        STEP_SECS,
        secret.to_vec(),
        Some(ISSUER.into()),
        account.into(),
    )
}

/// The secret as authenticator apps take it: base32 text and an `otpauth://` URL.
pub fn provisioning(secret: &[u8], account: &str) -> (String, String) {
    let t = totp(secret, account);
    (t.get_secret_base32(), t.get_url())
}

/// The time step `code` is valid for at `now_secs`, if it is one of the accepted steps later
/// than `last_step`. The caller then records the step as used ([`crate::meta::Meta::totp_use_step`]).
pub fn check_code(secret: &[u8], code: &str, now_secs: u64, last_step: Option<i64>) -> Option<i64> {
    if !is_code(code) {
        return None;
    }
    let t = totp(secret, "");
    let current = now_secs / STEP_SECS;
    (current.saturating_sub(SKEW_STEPS)..=current + SKEW_STEPS).find_map(|step| {
        let step_i = i64::try_from(step).ok()?;
        if last_step.is_some_and(|l| step_i <= l) {
            return None;
        }
        let want = t.generate(step * STEP_SECS);
        bool::from(want.as_bytes().ct_eq(code.as_bytes())).then_some(step_i)
    })
}

/// Six ASCII digits: a TOTP code (anything else offered as a second factor is taken for a
/// recovery code).
pub fn is_code(s: &str) -> bool {
    s.len() == 6 && s.bytes().all(|b| b.is_ascii_digit())
}

/// Fresh recovery codes, as shown to the user (`xxxx-xxxx-xxxx-xxxx`).
pub fn new_recovery_codes() -> Vec<String> {
    let mut rng = rand::rng();
    (0..RECOVERY_CODES)
        .map(|_| {
            let raw: Vec<u8> =
                (0..RECOVERY_LEN).map(|_| RECOVERY_ALPHABET[rng.random_range(0..RECOVERY_ALPHABET.len())]).collect();
            raw.chunks(4).map(|c| String::from_utf8_lossy(c).into_owned()).collect::<Vec<_>>().join("-")
        })
        .collect()
}

/// The stored form of a recovery code of `user_id`: case, dashes and spaces do not matter.
pub fn recovery_hash(user_id: i64, code: &str) -> String {
    let norm: String =
        code.chars().filter(|c| !c.is_whitespace() && *c != '-').flat_map(char::to_lowercase).take(64).collect();
    let mut h = blake3::Hasher::new_derive_key("nimbus 2026-11 totp recovery code");
    h.update(&user_id.to_le_bytes()).update(norm.as_bytes());
    h.finalize().to_hex().to_string()
}

/// The key id the sealer binds a user's TOTP secret to.
pub fn seal_id(user_id: i64) -> String {
    format!("totp:{user_id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc6238_sha1_vectors() {
        // RFC 6238 appendix B (SHA1, 8 digits there; the last 6 digits here).
        let secret = b"12345678901234567890";
        for (t, code) in [(59u64, "287082"), (1111111109, "081804"), (1234567890, "005924"), (2000000000, "279037")] {
            let step = (t / STEP_SECS) as i64;
            assert_eq!(check_code(secret, code, t, None), Some(step), "t={t}");
        }
    }

    #[test]
    fn drift_replay_and_junk() {
        let secret = new_secret();
        let t = totp(&secret, "");
        let now = 1_800_000_000u64;
        let step = (now / STEP_SECS) as i64;
        let prev = t.generate(now - STEP_SECS);
        let next = t.generate(now + STEP_SECS);
        assert_eq!(check_code(&secret, &prev, now, None), Some(step - 1));
        assert_eq!(check_code(&secret, &next, now, None), Some(step + 1));
        // Two steps away: refused.
        assert_eq!(check_code(&secret, &t.generate(now - 2 * STEP_SECS), now, None), None);
        // Already used (or an earlier step after a later one): refused.
        assert_eq!(check_code(&secret, &prev, now, Some(step - 1)), None);
        assert_eq!(check_code(&secret, &prev, now, Some(step)), None);
        for junk in ["", "12345", "1234567", "abcdef", "١٢٣٤٥٦"] {
            assert_eq!(check_code(&secret, junk, now, None), None, "{junk:?}");
        }
    }

    #[test]
    fn recovery_codes_are_distinct_and_normalised() {
        let codes = new_recovery_codes();
        assert_eq!(codes.len(), RECOVERY_CODES);
        assert!(codes.iter().all(|c| c.len() == 19 && !is_code(c)));
        let mut d = codes.clone();
        d.sort();
        d.dedup();
        assert_eq!(d.len(), codes.len());
        let c = &codes[0];
        assert_eq!(recovery_hash(1, c), recovery_hash(1, &c.to_uppercase().replace('-', " ")));
        assert_ne!(recovery_hash(1, c), recovery_hash(2, c));
    }

    #[test]
    fn the_policy_names_who_must() {
        use nimbus_proto::wire::Role;
        assert!(!RequireTotp::None.applies_to(Role::Admin));
        assert!(RequireTotp::Admins.applies_to(Role::Admin) && !RequireTotp::Admins.applies_to(Role::User));
        assert!(RequireTotp::All.applies_to(Role::User));
    }

    #[test]
    fn provisioning_url_names_issuer_and_account() {
        let (b32, url) = provisioning(&[7u8; 20], "alice");
        assert!(url.starts_with("otpauth://totp/Nimbus:alice?secret="), "{url}");
        assert!(url.contains(&b32) && url.contains("issuer=Nimbus"), "{url}");
    }
}
