-- Every byte a space holds counts against its quota (docs/API.md, "Usage and quota").
-- users.used_bytes stays the total the quota applies to and is always the sum of four parts:
--   current_bytes   current versions of live files
--   versions_bytes  older versions of live files
--   trash_bytes     every version of the files in the trash
--   pending_bytes   blocks uploaded (or announced as present) that no version references yet
-- usage_counted FALSE: the parts must be recounted from the tables; the gateway does that at
-- start for rows this migration adds them to, and `gc` repairs any drift the same way.
ALTER TABLE users ADD COLUMN current_bytes BIGINT NOT NULL DEFAULT 0;
ALTER TABLE users ADD COLUMN versions_bytes BIGINT NOT NULL DEFAULT 0;
ALTER TABLE users ADD COLUMN trash_bytes BIGINT NOT NULL DEFAULT 0;
ALTER TABLE users ADD COLUMN pending_bytes BIGINT NOT NULL DEFAULT 0;
ALTER TABLE users ADD COLUMN usage_counted BOOLEAN NOT NULL DEFAULT FALSE;

-- What a trash item holds, fixed when it goes to the trash (nothing inside a trashed subtree
-- changes until it is restored or purged): the current and the older versions of its files,
-- not counting items trashed separately before it.
ALTER TABLE trash ADD COLUMN current_bytes BIGINT NOT NULL DEFAULT 0;
ALTER TABLE trash ADD COLUMN versions_bytes BIGINT NOT NULL DEFAULT 0;
CREATE INDEX trash_age ON trash(space_id, deleted_at);

-- A block row is now inserted before its object is written, as the upload's claim on the
-- quota: `stored` turns TRUE once the store has the object, and only stored blocks exist for
-- readers and commits. `pending`: charged to the space as uploaded-but-uncommitted.
ALTER TABLE blocks ADD COLUMN stored BOOLEAN NOT NULL DEFAULT TRUE;
ALTER TABLE blocks ADD COLUMN pending BOOLEAN NOT NULL DEFAULT FALSE;
CREATE INDEX blocks_pending ON blocks(space_id) WHERE pending;

-- Oldest older versions first, when room must be made and when retention runs.
CREATE INDEX versions_space ON versions(space_id, id);
