-- Shares between users: a node of the owner's space (a file or a folder, followed by id so
-- renames and moves keep the share) given to another user with a permission. The recipient
-- sees it as `/Shared with me/<name>`; `name_key` keeps those names unique per recipient.
CREATE TABLE shares (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    owner_id     BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    node_id      BIGINT NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    recipient_id BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    permission   TEXT   NOT NULL CHECK (permission IN ('read', 'write')),
    name         TEXT   NOT NULL,
    name_key     TEXT   NOT NULL,
    created_at   BIGINT NOT NULL,
    UNIQUE (node_id, recipient_id),
    UNIQUE (recipient_id, name_key)
);
CREATE INDEX shares_owner ON shares(owner_id);
