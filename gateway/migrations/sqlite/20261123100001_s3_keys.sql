-- Per-user S3 access keys. SigV4 needs the secret itself on the server, so it cannot be
-- hashed: it is sealed (encrypt-then-MAC, bound to the access key id) with a server key
-- kept outside the database (see gateway/src/auth/s3key.rs). A database leak alone yields no
-- usable secret.
CREATE TABLE s3_keys (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id       BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    access_key_id TEXT   NOT NULL UNIQUE,
    secret_sealed TEXT   NOT NULL,
    name          TEXT   NOT NULL,
    created_at    BIGINT NOT NULL,
    last_used_at  BIGINT,
    revoked_at    BIGINT
);
CREATE INDEX s3_keys_user ON s3_keys(user_id);
