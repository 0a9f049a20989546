//! Password hashing with argon2id (the crate's default parameters: m=19 MiB, t=2, p=1, per
//! OWASP). Hashing is CPU-heavy, so request handlers run it through the [`PasswordGate`]: on
//! the blocking pool, at most `--password-hash-concurrency` at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use argon2::Argon2;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};
use rand::Rng;
use tokio::sync::Semaphore;

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

/// Bounds the password hashing (argon2id: tens of ms of CPU and 19 MiB each) that requests
/// can start: a burst of unauthenticated sign-ins must not occupy every core and hundreds of
/// MiB. At most `concurrency` hashes run; up to [`WAITERS_PER_PERMIT`] per permit wait at most
/// [`MAX_WAIT`] for one; anyone else is answered at once with 429 (`Retry-After: 1`).
pub struct PasswordGate {
    permits: Arc<Semaphore>,
    waiting: AtomicUsize,
    max_waiting: usize,
    max_wait: Duration,
}

/// Waiters allowed per hashing slot: enough to absorb a normal burst (a few sign-ins at once)
/// without refusing, few enough that a queued request waits well under a second.
pub const WAITERS_PER_PERMIT: usize = 8;
/// The longest a request waits for a hashing slot.
pub const MAX_WAIT: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
pub enum GateError {
    /// Too many password checks at once.
    #[error("the gateway is checking too many passwords at once")]
    Busy,
    #[error("a password hashing task failed: {0}")]
    Task(String),
}

// Here rather than in `error`: the error type stays a leaf that knows no auth types.
impl From<GateError> for crate::error::ApiError {
    fn from(e: GateError) -> Self {
        match e {
            GateError::Busy => crate::error::ApiError::Busy { retry_after: 1 },
            other => crate::error::ApiError::internal(other),
        }
    }
}

impl PasswordGate {
    pub fn new(concurrency: usize) -> Self {
        Self::with_limits(concurrency, WAITERS_PER_PERMIT, MAX_WAIT)
    }

    fn with_limits(concurrency: usize, waiters_per_permit: usize, max_wait: Duration) -> Self {
        let c = concurrency.max(1);
        PasswordGate {
            permits: Arc::new(Semaphore::new(c)),
            waiting: AtomicUsize::new(0),
            max_waiting: c.saturating_mul(waiters_per_permit),
            max_wait,
        }
    }

    /// The default bound: one hash per core.
    pub fn default_concurrency() -> usize {
        std::thread::available_parallelism().map_or(2, |n| n.get())
    }

    /// Runs `f` (a hash or a verification) on the blocking pool once a slot is free.
    pub async fn run<T, F>(&self, f: F) -> Result<T, GateError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let permit = match self.permits.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                if self.waiting.fetch_add(1, Ordering::SeqCst) >= self.max_waiting {
                    self.waiting.fetch_sub(1, Ordering::SeqCst);
                    metrics::counter!("nimbus_password_checks_refused_total").increment(1);
                    return Err(GateError::Busy);
                }
                // Counted down however this wait ends, including the caller going away.
                let _waiting = Waiting(&self.waiting);
                match tokio::time::timeout(self.max_wait, self.permits.clone().acquire_owned()).await {
                    Ok(Ok(p)) => p,
                    _ => {
                        metrics::counter!("nimbus_password_checks_refused_total").increment(1);
                        return Err(GateError::Busy);
                    }
                }
            }
        };
        // The permit moves into the blocking task: a client that disconnects mid-check does
        // not free the slot while the hash still runs.
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            f()
        })
        .await
        .map_err(|e| GateError::Task(e.to_string()))
    }
}

struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
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

    #[tokio::test]
    async fn the_gate_bounds_running_and_waiting_checks() {
        use std::sync::mpsc;
        let gate = Arc::new(PasswordGate::with_limits(1, 1, Duration::from_secs(30)));
        // One check holds the only slot until told to finish.
        let (release, hold) = mpsc::channel::<()>();
        let running = tokio::spawn({
            let gate = gate.clone();
            async move { gate.run(move || hold.recv().is_ok()).await }
        });
        while gate.permits.available_permits() > 0 {
            tokio::task::yield_now().await;
        }
        // One may wait; the next is refused at once.
        let waiter = tokio::spawn({
            let gate = gate.clone();
            async move { gate.run(|| 7).await }
        });
        while gate.waiting.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        assert!(matches!(gate.run(|| 8).await, Err(GateError::Busy)));
        release.send(()).expect("release");
        assert!(matches!(running.await.expect("join"), Ok(true)));
        assert!(matches!(waiter.await.expect("join"), Ok(7)));
        assert_eq!(gate.waiting.load(Ordering::SeqCst), 0);
        assert!(matches!(gate.run(|| 9).await, Ok(9)));
    }

    #[tokio::test]
    async fn a_waiter_gives_up_after_the_wait_and_a_cancelled_one_frees_its_place() {
        use std::sync::mpsc;
        let gate = Arc::new(PasswordGate::with_limits(1, 4, Duration::from_millis(50)));
        let (release, hold) = mpsc::channel::<()>();
        let running = tokio::spawn({
            let gate = gate.clone();
            async move { gate.run(move || hold.recv().is_ok()).await }
        });
        while gate.permits.available_permits() > 0 {
            tokio::task::yield_now().await;
        }
        assert!(matches!(gate.run(|| 1).await, Err(GateError::Busy)), "the wait is bounded");
        let cancelled = tokio::spawn({
            let gate = gate.clone();
            async move { gate.run(|| 2).await }
        });
        while gate.waiting.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        cancelled.abort();
        let _ = cancelled.await;
        assert_eq!(gate.waiting.load(Ordering::SeqCst), 0);
        release.send(()).expect("release");
        assert!(matches!(running.await.expect("join"), Ok(true)));
    }

    #[test]
    fn generated_passwords_are_long_and_differ() {
        let (a, b) = (generate_password(), generate_password());
        assert_eq!(a.len(), 20);
        assert_ne!(a, b);
    }
}
