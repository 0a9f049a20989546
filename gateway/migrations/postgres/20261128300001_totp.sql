-- Two-factor sign-in (TOTP, docs/IDENTITY.md). The secrets are sealed under the server key
-- (auth/s3key.rs) before they get here; `pending_secret` is an enrolment not yet confirmed,
-- kept apart from the active `secret` so that starting over never turns off what works.
-- `last_step` is the last accepted 30-second step: a code is accepted once.
CREATE TABLE user_totp (
    user_id        BIGINT PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
    secret         TEXT,
    pending_secret TEXT,
    last_step      BIGINT,
    enabled_at     BIGINT
);
-- Single-use recovery codes, as BLAKE3 hashes (80 random bits each: a fast hash is enough).
CREATE TABLE totp_recovery (
    user_id   BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    code_hash TEXT   NOT NULL,
    used_at   BIGINT,
    PRIMARY KEY (user_id, code_hash)
);
-- A token from a sign-in that must set up two-factor first (`--require-totp`): it reaches only
-- /api/v1/me, /api/v1/auth/totp* and logout until the enrolment is confirmed.
ALTER TABLE tokens ADD COLUMN totp_setup_only BOOLEAN NOT NULL DEFAULT FALSE;
