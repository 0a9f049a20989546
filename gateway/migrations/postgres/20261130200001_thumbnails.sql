-- Thumbnails of images for the web app's listings (gateway/src/thumbs.rs), kept so that a
-- listing shown again decodes nothing. Keyed by the space that holds the content (no user ever
-- gets a thumbnail made from another space's file, as blocks and the cache are per space), a
-- key of the version's content (BLAKE3 over its block list) and the box size. Served only
-- after the caller's path resolves to a version with that content key. At most a fixed number
-- of rows is kept, oldest evicted first (docs/API.md, Thumbnails).
CREATE TABLE thumbnails (
    space_id    BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    content_key TEXT   NOT NULL,
    size        BIGINT NOT NULL,
    mime        TEXT   NOT NULL,
    data        BYTEA  NOT NULL,
    bytes       BIGINT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (space_id, content_key, size)
);
CREATE INDEX thumbnails_by_age ON thumbnails (created_at);
