-- WebDAV locks (doors/dav). A lock guards a path of one space until it expires; every door
-- checks it in the metadata layer (commit, trash, move, copy), so a document locked through
-- WebDAV is locked everywhere. Matching is by path_key (the path with every component
-- name-keyed, as names are compared), and by prefix for depth-infinity locks.
CREATE TABLE dav_locks (
    token       TEXT   PRIMARY KEY,
    space_id    BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    path        TEXT   NOT NULL,
    path_key    TEXT   COLLATE "C" NOT NULL,
    principal   TEXT,
    owner_xml   TEXT,
    shared      BOOLEAN NOT NULL,
    deep        BOOLEAN NOT NULL,
    timeout_ms  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    created_at  BIGINT NOT NULL
);
CREATE INDEX dav_locks_space ON dav_locks(space_id, expires_at);

-- WebDAV dead properties (PROPPATCH of properties the gateway does not compute). Keyed by
-- node, so they follow a move and go with the node when it is purged.
CREATE TABLE dav_props (
    node_id   BIGINT NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
    ns        TEXT   NOT NULL,
    name      TEXT   NOT NULL,
    prefix    TEXT,
    xml       TEXT   NOT NULL,
    PRIMARY KEY (node_id, ns, name)
);
