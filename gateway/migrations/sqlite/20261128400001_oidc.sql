-- OpenID Connect sign-in (auth/oidc.rs, api/oidc.rs; docs/IDENTITY.md).
-- A browser flow between `/api/v1/auth/oidc/start` and its callback: what the callback must
-- check (the `state` is the key) and what it needs (the PKCE verifier, the nonce, where to go
-- next). In the database, not in one gateway's memory, so that the callback may reach another
-- gateway behind the load balancer. Rows live 10 minutes; their number is bounded by the
-- gateway (an anonymous caller can start flows).
CREATE TABLE oidc_flows (
    state         TEXT   NOT NULL PRIMARY KEY,
    pkce_verifier TEXT   NOT NULL,
    nonce         TEXT   NOT NULL,
    redirect_uri  TEXT   NOT NULL,
    return_to     TEXT   NOT NULL,
    -- BLAKE3 of the cookie `/start` gave the browser: the callback must come from that browser
    -- (a callback link sent to someone else signs nobody in).
    browser_hash  TEXT   NOT NULL,
    -- A command-line or desktop client's flow (RFC 8252): its loopback URL and PKCE challenge.
    cli_redirect  TEXT,
    cli_challenge TEXT,
    device        TEXT,
    expires_at    BIGINT NOT NULL
);
CREATE INDEX oidc_flows_expiry ON oidc_flows(expires_at);

-- The one-time code a finished client flow hands to its loopback redirect, found by its
-- BLAKE3 hash; traded once, within 2 minutes, by the holder of the PKCE verifier.
CREATE TABLE oidc_codes (
    code_hash     TEXT   NOT NULL PRIMARY KEY,
    user_id       BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    cli_challenge TEXT   NOT NULL,
    device        TEXT   NOT NULL,
    expires_at    BIGINT NOT NULL
);
