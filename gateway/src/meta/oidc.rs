//! OpenID Connect sign-in state shared by every gateway (migration `*_oidc.sql`): browser flows
//! in progress and the one-time codes of finished client flows.

use super::engine::{scalar, sql};
use super::{Meta, MetaResult, now_ms};

/// A browser flow between `/api/v1/auth/oidc/start` and its callback.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct OidcFlow {
    pub state: String,
    pub pkce_verifier: String,
    pub nonce: String,
    pub redirect_uri: String,
    pub return_to: String,
    /// BLAKE3 of the cookie the starting browser got.
    pub browser_hash: String,
    pub cli_redirect: Option<String>,
    pub cli_challenge: Option<String>,
    pub device: Option<String>,
    pub expires_at: i64,
}

/// A one-time code for a client flow, as traded in.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct OidcCode {
    pub user_id: i64,
    pub cli_challenge: String,
    pub device: String,
}

impl Meta {
    /// Records a flow unless `max` live flows exist already (expired ones are removed first):
    /// returns false then. Anyone may start a flow, so their number must have a bound.
    pub async fn insert_oidc_flow(&self, f: &OidcFlow, max: i64) -> MetaResult<bool> {
        let now = now_ms();
        let mut tx = self.begin_write().await?;
        sql("DELETE FROM oidc_flows WHERE expires_at <= $1").bind(now).execute(&mut tx).await?;
        let live = scalar::<i64>("SELECT COUNT(*) FROM oidc_flows").fetch_one(&mut tx).await?;
        if live >= max {
            return Ok(false);
        }
        sql("INSERT INTO oidc_flows (state, pkce_verifier, nonce, redirect_uri, return_to, cli_redirect, \
             cli_challenge, device, expires_at, browser_hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)")
        .bind(&f.state)
        .bind(&f.pkce_verifier)
        .bind(&f.nonce)
        .bind(&f.redirect_uri)
        .bind(&f.return_to)
        .bind(f.cli_redirect.as_deref())
        .bind(f.cli_challenge.as_deref())
        .bind(f.device.as_deref())
        .bind(f.expires_at)
        .bind(&f.browser_hash)
        .execute(&mut tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Takes the live flow of `state` (a flow is used once, whatever comes of it).
    pub async fn take_oidc_flow(&self, state: &str) -> MetaResult<Option<OidcFlow>> {
        let mut tx = self.begin_write().await?;
        let flow = sql("SELECT state, pkce_verifier, nonce, redirect_uri, return_to, browser_hash, cli_redirect, \
                        cli_challenge, device, expires_at FROM oidc_flows WHERE state = $1")
        .bind(state)
        .fetch_optional::<OidcFlow, _>(&mut tx)
        .await?;
        if flow.is_some() {
            sql("DELETE FROM oidc_flows WHERE state = $1").bind(state).execute(&mut tx).await?;
        }
        tx.commit().await?;
        Ok(flow.filter(|f| f.expires_at > now_ms()))
    }

    pub async fn insert_oidc_code(
        &self,
        code_hash: &str,
        user_id: i64,
        cli_challenge: &str,
        device: &str,
        expires_at: i64,
    ) -> MetaResult<()> {
        let mut tx = self.begin_write().await?;
        sql("DELETE FROM oidc_codes WHERE expires_at <= $1").bind(now_ms()).execute(&mut tx).await?;
        sql("INSERT INTO oidc_codes (code_hash, user_id, cli_challenge, device, expires_at) VALUES ($1, $2, $3, $4, $5)")
            .bind(code_hash)
            .bind(user_id)
            .bind(cli_challenge)
            .bind(device)
            .bind(expires_at)
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Takes the live code with this hash: a code works once, even when the verifier is wrong.
    pub async fn take_oidc_code(&self, code_hash: &str) -> MetaResult<Option<OidcCode>> {
        let mut tx = self.begin_write().await?;
        let code =
            sql("SELECT user_id, cli_challenge, device FROM oidc_codes WHERE code_hash = $1 AND expires_at > $2")
                .bind(code_hash)
                .bind(now_ms())
                .fetch_optional::<OidcCode, _>(&mut tx)
                .await?;
        sql("DELETE FROM oidc_codes WHERE code_hash = $1").bind(code_hash).execute(&mut tx).await?;
        tx.commit().await?;
        Ok(code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(state: &str, expires_at: i64) -> OidcFlow {
        OidcFlow {
            state: state.into(),
            pkce_verifier: "v".into(),
            nonce: "n".into(),
            redirect_uri: "http://x/cb".into(),
            return_to: "/".into(),
            browser_hash: "b".into(),
            cli_redirect: None,
            cli_challenge: None,
            device: None,
            expires_at,
        }
    }

    async fn sqlite() -> (tempfile::TempDir, Meta) {
        let dir = tempfile::tempdir().expect("tempdir");
        let meta = Meta::connect(&format!("sqlite://{}", dir.path().join("meta.db").display())).await.expect("connect");
        (dir, meta)
    }

    #[tokio::test]
    async fn flows_are_bounded_used_once_and_expire() {
        let (_dir, meta) = sqlite().await;
        let later = now_ms() + 60_000;
        for s in ["a", "b", "c"] {
            assert!(meta.insert_oidc_flow(&flow(s, later), 3).await.expect("insert"));
        }
        // Full: an anonymous caller cannot add more.
        assert!(!meta.insert_oidc_flow(&flow("d", later), 3).await.expect("insert"));
        assert_eq!(meta.take_oidc_flow("a").await.expect("take").map(|f| f.state).as_deref(), Some("a"));
        assert!(meta.take_oidc_flow("a").await.expect("take").is_none(), "a flow is used once");
        assert!(meta.take_oidc_flow("zzz").await.expect("take").is_none());
        // Room again; and an expired flow neither counts nor comes back.
        assert!(meta.insert_oidc_flow(&flow("old", now_ms() - 1), 3).await.expect("insert"));
        assert!(meta.take_oidc_flow("old").await.expect("take").is_none(), "expired");
        assert!(meta.insert_oidc_flow(&flow("e", later), 3).await.expect("insert"));
    }

    #[tokio::test]
    async fn codes_are_used_once() {
        let (_dir, meta) = sqlite().await;
        let user = meta.create_user("alice", "x", "user", None).await.expect("user");
        meta.insert_oidc_code("h1", user.id, "chal", "laptop", now_ms() + 60_000).await.expect("code");
        meta.insert_oidc_code("h2", user.id, "chal", "laptop", now_ms() - 1).await.expect("code");
        let c = meta.take_oidc_code("h1").await.expect("take").expect("live");
        assert_eq!((c.user_id, c.cli_challenge.as_str(), c.device.as_str()), (user.id, "chal", "laptop"));
        assert!(meta.take_oidc_code("h1").await.expect("take").is_none());
        assert!(meta.take_oidc_code("h2").await.expect("take").is_none(), "expired");
    }
}
