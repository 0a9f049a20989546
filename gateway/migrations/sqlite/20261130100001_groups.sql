-- Groups of users, made by administrators, and shares with a group. A group share is a row of
-- `shares` with `group_id` set and no recipient; each member (but its owner) gets an entry of
-- their own under `/Shared with me`: a row with `recipient_id` and `parent_id` (the group
-- share), kept in step with memberships by the gateway (meta/groups.rs), so every door, the
-- change feed and revocation treat it as a share with that user. A member who leaves a group
-- share is remembered in `share_leaves`, so the entry does not come back.
CREATE TABLE user_groups (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    name       TEXT   NOT NULL,
    name_key   TEXT   NOT NULL UNIQUE,
    created_at BIGINT NOT NULL
);
CREATE TABLE group_members (
    group_id BIGINT NOT NULL REFERENCES user_groups(id) ON DELETE CASCADE,
    user_id  BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    added_at BIGINT NOT NULL,
    PRIMARY KEY (group_id, user_id)
);
CREATE INDEX group_members_user ON group_members(user_id);

-- SQLite cannot drop the NOT NULL of `recipient_id`: the table is rebuilt. Dropping the old
-- one empties `share_uploads` (ON DELETE CASCADE), so its rows are kept aside and put back,
-- and the id sequence goes on where it was (ids of revoked shares are not given again).
CREATE TABLE keep_share_uploads AS SELECT share_id, hash FROM share_uploads;
CREATE TABLE keep_shares_seq AS SELECT seq FROM sqlite_sequence WHERE name = 'shares';
CREATE TABLE shares_new (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    owner_id     BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    node_id      BIGINT NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    recipient_id BIGINT REFERENCES users(id) ON DELETE CASCADE,
    group_id     BIGINT REFERENCES user_groups(id) ON DELETE CASCADE,
    parent_id    BIGINT,
    permission   TEXT   NOT NULL CHECK (permission IN ('read', 'write')),
    name         TEXT   NOT NULL,
    name_key     TEXT   NOT NULL,
    created_at   BIGINT NOT NULL,
    CHECK ((recipient_id IS NULL) <> (group_id IS NULL)),
    UNIQUE (node_id, recipient_id),
    UNIQUE (recipient_id, name_key),
    UNIQUE (node_id, group_id)
);
INSERT INTO shares_new (id, owner_id, node_id, recipient_id, permission, name, name_key, created_at)
    SELECT id, owner_id, node_id, recipient_id, permission, name, name_key, created_at FROM shares;
DROP TABLE shares;
ALTER TABLE shares_new RENAME TO shares;
CREATE INDEX shares_owner ON shares(owner_id);
CREATE INDEX shares_parent ON shares(parent_id);
CREATE INDEX shares_group ON shares(group_id);
INSERT INTO share_uploads (share_id, hash) SELECT share_id, hash FROM keep_share_uploads;
DROP TABLE keep_share_uploads;
DELETE FROM sqlite_sequence WHERE name = 'shares';
INSERT INTO sqlite_sequence (name, seq)
    SELECT 'shares', MAX(COALESCE((SELECT MAX(id) FROM shares), 0), COALESCE((SELECT MAX(seq) FROM keep_shares_seq), 0));
DROP TABLE keep_shares_seq;

CREATE TABLE share_leaves (
    share_id BIGINT NOT NULL REFERENCES shares(id) ON DELETE CASCADE,
    user_id  BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    PRIMARY KEY (share_id, user_id)
);
