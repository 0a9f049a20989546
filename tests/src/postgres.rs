//! A fresh PostgreSQL database per test, created in the throwaway cluster named by
//! `NIMBUS_TEST_PG_URL` (an admin URL, from `infra/postgres.sh start`) and dropped afterwards.

use anyhow::{Context, bail};
use sqlx::Connection;

pub const ENV_URL: &str = "NIMBUS_TEST_PG_URL";

/// The admin URL from `NIMBUS_TEST_PG_URL`, if set.
pub fn configured_url() -> Option<String> {
    std::env::var(ENV_URL).ok().filter(|v| !v.is_empty())
}

pub struct PgDatabase {
    admin_url: String,
    name: String,
    url: String,
}

impl PgDatabase {
    /// Creates `nimbus_t_<random>`.
    pub async fn create(admin_url: &str) -> anyhow::Result<Self> {
        let name = format!("nimbus_t_{:016x}", rand::random::<u64>());
        let mut conn = sqlx::PgConnection::connect(admin_url)
            .await
            .with_context(|| format!("cannot connect to {ENV_URL}={admin_url} (is ./infra/postgres.sh running?)"))?;
        // `name` is ours: `nimbus_t_` and hex digits.
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut conn)
            .await
            .with_context(|| format!("cannot create database {name}"))?;
        let _ = conn.close().await;
        let url = with_database(admin_url, &name)?;
        Ok(Self { admin_url: admin_url.to_string(), name, url })
    }

    /// The URL of the new database, for `--database-url`.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        if std::env::var_os("NIMBUS_TEST_KEEP_DB").is_some() {
            eprintln!("keeping database {} (NIMBUS_TEST_KEEP_DB)", self.name);
            return;
        }
        // Drop runs inside the test's runtime; do the async clean-up on a thread of its own.
        let (admin_url, name) = (self.admin_url.clone(), self.name.clone());
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
            rt.block_on(async {
                if let Ok(mut conn) = sqlx::PgConnection::connect(&admin_url).await {
                    let _ = sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")))
                        .execute(&mut conn)
                        .await;
                    let _ = conn.close().await;
                }
            });
        })
        .join();
    }
}

/// `postgres://user@host:port/admin_db?opts` → the same URL naming database `db`.
fn with_database(admin_url: &str, db: &str) -> anyhow::Result<String> {
    let scheme_end = admin_url.find("://").context("the PostgreSQL URL has no scheme")? + 3;
    let (base, query) = match admin_url.find('?') {
        Some(q) => (&admin_url[..q], &admin_url[q..]),
        None => (admin_url, ""),
    };
    let authority_end = base[scheme_end..].find('/').map(|i| i + scheme_end).unwrap_or(base.len());
    if authority_end <= scheme_end {
        bail!("cannot parse the PostgreSQL URL {admin_url}");
    }
    Ok(format!("{}/{db}{query}", &base[..authority_end]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swaps_the_database_name() -> anyhow::Result<()> {
        assert_eq!(
            with_database("postgres://postgres@127.0.0.1:55432/postgres", "x")?,
            "postgres://postgres@127.0.0.1:55432/x"
        );
        assert_eq!(
            with_database("postgres://u:p@h:1/postgres?sslmode=disable", "x")?,
            "postgres://u:p@h:1/x?sslmode=disable"
        );
        assert_eq!(with_database("postgres://u@h:1", "x")?, "postgres://u@h:1/x");
        Ok(())
    }
}
