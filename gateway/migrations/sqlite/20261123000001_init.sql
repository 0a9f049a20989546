-- Nimbus metadata, SQLite flavour. Times are Unix milliseconds (BIGINT) so both engines
-- store and decode them the same way. Keep in step with ../postgres/.
CREATE TABLE users (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    username      TEXT    NOT NULL,
    username_key  TEXT    NOT NULL UNIQUE,
    password_hash TEXT    NOT NULL,
    role          TEXT    NOT NULL CHECK (role IN ('user', 'admin')),
    quota_bytes   BIGINT,
    used_bytes    BIGINT  NOT NULL DEFAULT 0,
    disabled      BOOLEAN NOT NULL DEFAULT FALSE,
    created_at    BIGINT  NOT NULL,
    updated_at    BIGINT  NOT NULL
);

CREATE TABLE tokens (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id      BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    token_hash   TEXT   NOT NULL UNIQUE,
    device       TEXT   NOT NULL,
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    last_used_at BIGINT,
    revoked_at   BIGINT
);
CREATE INDEX tokens_user ON tokens(user_id);

-- One tree per user space. The root has parent_id NULL and an empty name.
-- trashed_at is set on the top node of a subtree in the trash; its descendants keep their
-- links and become unreachable by path until it is restored.
CREATE TABLE nodes (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    space_id    BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    parent_id   BIGINT REFERENCES nodes(id) ON DELETE CASCADE,
    name        TEXT   NOT NULL,
    name_key    TEXT   NOT NULL,
    kind        TEXT   NOT NULL CHECK (kind IN ('file', 'dir')),
    size        BIGINT NOT NULL DEFAULT 0,
    version_id  BIGINT,
    created_at  BIGINT NOT NULL,
    modified_at BIGINT NOT NULL,
    trashed_at  BIGINT
);
-- Case-insensitive uniqueness among live siblings (name_key = NFC + lowercase), and the
-- index that listing pages walk.
CREATE UNIQUE INDEX nodes_live_name ON nodes(parent_id, name_key) WHERE trashed_at IS NULL;
CREATE INDEX nodes_parent ON nodes(parent_id);
CREATE INDEX nodes_space ON nodes(space_id, parent_id);

CREATE TABLE versions (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    node_id    BIGINT NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    space_id   BIGINT NOT NULL,
    size       BIGINT NOT NULL,
    block_size BIGINT NOT NULL,
    device     TEXT,
    created_at BIGINT NOT NULL
);
CREATE INDEX versions_node ON versions(node_id);

-- The ordered block list of a version.
CREATE TABLE version_blocks (
    version_id BIGINT NOT NULL REFERENCES versions(id) ON DELETE CASCADE,
    idx        BIGINT NOT NULL,
    hash       TEXT   NOT NULL,
    size       BIGINT NOT NULL,
    PRIMARY KEY (version_id, idx)
);
CREATE INDEX version_blocks_hash ON version_blocks(hash);

-- Blocks a space holds in the object store (written before this row is inserted).
CREATE TABLE blocks (
    space_id   BIGINT NOT NULL,
    hash       TEXT   NOT NULL,
    size       BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (space_id, hash)
);

CREATE TABLE trash (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    space_id      BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    node_id       BIGINT NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    original_path TEXT   NOT NULL,
    deleted_at    BIGINT NOT NULL
);
CREATE INDEX trash_space ON trash(space_id, id);

-- Append-only change journal per space (the mount's change feed reads it in seq order).
CREATE TABLE changes (
    seq      INTEGER PRIMARY KEY AUTOINCREMENT,
    space_id BIGINT NOT NULL,
    node_id  BIGINT,
    op       TEXT   NOT NULL,
    path     TEXT,
    at       BIGINT NOT NULL
);
CREATE INDEX changes_space ON changes(space_id, seq);

CREATE TABLE audit (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    at       BIGINT NOT NULL,
    actor_id BIGINT,
    actor    TEXT,
    action   TEXT   NOT NULL,
    target   TEXT,
    detail   TEXT,
    ip       TEXT
);
CREATE INDEX audit_actor ON audit(actor_id, id);
CREATE INDEX audit_action ON audit(action, id);
