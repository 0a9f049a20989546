//! End-to-end harness: starts the real `nimbus-gateway` binary (and, for the PostgreSQL + S3
//! backend, a fresh PostgreSQL database and a private MinIO process; for the Garage backend, a
//! private single-node Garage) and drives it over HTTP on loopback, as users and clients do.
//!
//! Running:
//! ```text
//! cargo build -p nimbus-gateway                      # the binary under test
//! cargo test -p nimbus-e2e                           # SQLite + local store; the rest skip
//! cargo test -p nimbus-e2e -- --skip big_file        # without the 2 GiB streaming test
//! cargo test -p nimbus-e2e sqlite_local              # one backend only
//! ./infra/test.sh                                    # the whole suite, every backend
//!
//! # every backend, e2e only:
//! export NIMBUS_TEST_PG_URL=$(./infra/postgres.sh start)
//! export NIMBUS_TEST_MINIO_BIN=/var/cache/nimbus/bin/minio NIMBUS_TEST_REQUIRE_ALL=1
//! export NIMBUS_TEST_GARAGE_BIN=/var/cache/nimbus/garage/bin/garage
//! cargo test -p nimbus-e2e
//! ```
//! Environment:
//! - `NIMBUS_GATEWAY_BIN`, `NIMBUS_CLI_BIN`: the binaries (default: next to the test executable,
//!   i.e. `target/debug/nimbus-gateway` and `target/debug/nimbus`).
//! - `NIMBUS_TEST_PG_URL`: admin URL of a throwaway PostgreSQL cluster (`infra/postgres.sh start`);
//!   each test creates its own database `nimbus_t_<random>` and drops it afterwards.
//! - `NIMBUS_TEST_MINIO_BIN`: a `minio` binary; each PostgreSQL + S3 test starts its own.
//! - `NIMBUS_TEST_GARAGE_BIN`: a `garage` binary (`infra/install-deps.sh` builds 2.5.0); each
//!   SQLite + Garage test starts its own single-node Garage.
//! - `NIMBUS_TEST_REQUIRE_ALL=1`: a test whose backend is not configured fails instead of skipping
//!   (except the Garage backend under `NIMBUS_SKIP_GARAGE=1`).
//! - `NIMBUS_TEST_GATEWAY_LOG`: the gateway's `--log` filter (default `info`).
//! - `NIMBUS_TEST_MOUNT_LOG`: the drive's `NIMBUS_LOG` filter in [`mount`] (default
//!   `info,nimbus_mount=debug`).
//!
//! One test body runs against every backend through [`backend_test!`]: the generated tests are
//! `<name>::sqlite_local`, `<name>::postgres_s3` and `<name>::sqlite_garage`.

pub mod backend;
pub mod bins;
pub mod browser;
pub mod data;
pub mod dav;
pub mod garage;
pub mod gateway;
pub mod http;
pub mod inproc;
pub mod ldap;
pub mod minio;
pub mod mount;
pub mod netproxy;
pub mod oidc;
pub mod ops;
pub mod postgres;
pub mod s3;

pub use backend::Backend;
pub use gateway::{ADMIN_PASSWORD, Gateway, GatewayOptions, run_on};
pub use http::{Api, Resp, encode_path, raw_request};

/// Defines one test per backend, each starting its own gateway and running `$body` on it:
///
/// ```ignore
/// backend_test!(put_then_get, |gw| async move {
///     let api = gw.admin().await?;
///     api.put_file("/a.txt", "hi").await?.check(201)?;
///     Ok(())
/// });
/// backend_test!(expiry, opts = GatewayOptions::default().token_ttl(2), |gw| async move { Ok(()) });
/// backend_test!(faults, only = postgres_s3, opts = GatewayOptions::default(), |gw| async move { Ok(()) });
/// ```
/// The generated tests are `put_then_get::sqlite_local`, `put_then_get::postgres_s3` and
/// `put_then_get::sqlite_garage`; `only = <backend>` generates just that one.
#[macro_export]
macro_rules! backend_test {
    ($name:ident, $body:expr) => {
        $crate::backend_test!($name, opts = $crate::GatewayOptions::default(), $body);
    };
    ($name:ident, opts = $opts:expr, $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite_local() -> anyhow::Result<()> {
                $crate::run_on($crate::Backend::SqliteLocal, $opts, $body).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres_s3() -> anyhow::Result<()> {
                $crate::run_on($crate::Backend::PostgresS3, $opts, $body).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite_garage() -> anyhow::Result<()> {
                $crate::run_on($crate::Backend::SqliteGarage, $opts, $body).await
            }
        }
    };
    ($name:ident, only = sqlite_local, opts = $opts:expr, $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite_local() -> anyhow::Result<()> {
                $crate::run_on($crate::Backend::SqliteLocal, $opts, $body).await
            }
        }
    };
    ($name:ident, only = postgres_s3, opts = $opts:expr, $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres_s3() -> anyhow::Result<()> {
                $crate::run_on($crate::Backend::PostgresS3, $opts, $body).await
            }
        }
    };
    ($name:ident, only = sqlite_garage, opts = $opts:expr, $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite_garage() -> anyhow::Result<()> {
                $crate::run_on($crate::Backend::SqliteGarage, $opts, $body).await
            }
        }
    };
}
