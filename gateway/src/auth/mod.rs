//! Authentication: argon2id passwords, opaque bearer tokens stored hashed, login throttling,
//! and the extractors (`AuthUser`, `AdminUser`) that make a handler impossible to reach
//! without a valid identity.

mod extract;
mod password;
pub mod s3key;
mod throttle;
mod token;

pub use extract::{AdminUser, AuthUser, ClientIp};
pub use password::{
    MIN_PASSWORD_LEN, PasswordError, generate_password, hash_password, verify_password, verify_password_or_dummy,
};
pub use throttle::Throttle;
pub use token::{TOKEN_PREFIX, new_token, token_hash};
