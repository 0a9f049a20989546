//! The backends every test body runs against, and whether this machine can run them.

use std::fmt;

/// Metadata database + block store combinations the gateway supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// SQLite in the data dir and blocks in a local directory (the defaults). Always available.
    SqliteLocal,
    /// A fresh PostgreSQL database and a private MinIO process (S3).
    PostgresS3,
    /// SQLite in the data dir and blocks in a private single-node Garage (a second S3
    /// implementation, so the S3 store stays S3-generic).
    SqliteGarage,
}

pub const ENV_REQUIRE_ALL: &str = "NIMBUS_TEST_REQUIRE_ALL";
/// `NIMBUS_SKIP_GARAGE=1` (which also makes `infra/install-deps.sh` skip building Garage): an
/// unconfigured Garage backend is skipped even under `NIMBUS_TEST_REQUIRE_ALL=1`.
pub const ENV_SKIP_GARAGE: &str = "NIMBUS_SKIP_GARAGE";

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::SqliteLocal => "sqlite_local",
            Backend::PostgresS3 => "postgres_s3",
            Backend::SqliteGarage => "sqlite_garage",
        }
    }

    /// `None` if the backend can run here, else what is missing.
    pub fn missing(self) -> Option<&'static str> {
        match self {
            Backend::SqliteLocal => None,
            Backend::PostgresS3 => {
                let pg = crate::postgres::configured_url().is_some();
                let minio = crate::minio::configured_bin().is_some();
                match (pg, minio) {
                    (true, true) => None,
                    (false, true) => Some("NIMBUS_TEST_PG_URL"),
                    (true, false) => Some("NIMBUS_TEST_MINIO_BIN"),
                    (false, false) => Some("NIMBUS_TEST_PG_URL / NIMBUS_TEST_MINIO_BIN"),
                }
            }
            Backend::SqliteGarage => crate::garage::configured_bin().is_none().then_some("NIMBUS_TEST_GARAGE_BIN"),
        }
    }

    /// True if a test on this backend should run. When the backend is not configured: panics
    /// under `NIMBUS_TEST_REQUIRE_ALL=1` (unless it is Garage and `NIMBUS_SKIP_GARAGE=1`), else
    /// prints why it is skipped and returns false.
    pub fn should_run(self) -> bool {
        let Some(missing) = self.missing() else { return true };
        let require_all = std::env::var(ENV_REQUIRE_ALL).is_ok_and(|v| v == "1");
        if self == Backend::SqliteGarage && std::env::var(ENV_SKIP_GARAGE).is_ok_and(|v| v == "1") {
            eprintln!("skipping {self}: {ENV_SKIP_GARAGE}=1");
            return false;
        }
        if require_all {
            panic!("{ENV_REQUIRE_ALL}=1 but backend {self} is not configured: set {missing} (run ./infra/test.sh)");
        }
        eprintln!("skipping {self}: set {missing} (run ./infra/test.sh)");
        false
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
