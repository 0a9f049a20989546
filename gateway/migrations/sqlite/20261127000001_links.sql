-- Public links (api/links.rs, api/public_links.rs): a token that opens one file or folder of
-- its owner's space to anyone who has it. The link points at the node, so it follows renames
-- and moves; purging the node removes its links. The token is found by its BLAKE3 hash and
-- kept sealed (auth/s3key.rs's sealer, bound to the hash) only so that its owner can be shown
-- the link again; the password, if any, is an argon2id hash.
CREATE TABLE links (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    space_id      BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    node_id       BIGINT NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    token_hash    TEXT   NOT NULL UNIQUE,
    token_sealed  TEXT   NOT NULL,
    mode          TEXT   NOT NULL CHECK (mode IN ('view', 'upload')),
    password_hash TEXT,
    expires_at    BIGINT,
    max_downloads BIGINT,
    downloads     BIGINT NOT NULL DEFAULT 0,
    created_at    BIGINT NOT NULL
);
CREATE INDEX links_space ON links(space_id, id);
CREATE INDEX links_node ON links(node_id);
