-- Where an account comes from (`local`, `ldap` or `oidc`: docs/IDENTITY.md), whether it has
-- two-factor sign-in on, and when it last signed in (the console shows all three).
ALTER TABLE users ADD COLUMN source TEXT NOT NULL DEFAULT 'local';
ALTER TABLE users ADD COLUMN totp_enabled BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE users ADD COLUMN last_login_at BIGINT;
