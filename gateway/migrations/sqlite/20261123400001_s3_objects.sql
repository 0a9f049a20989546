-- The S3 door's own state (gateway/src/doors/s3).
--
-- S3 clients compare ETags with the MD5 of what they sent (rclone does after every upload)
-- and keep their own metadata on objects (rclone: the modification time), so a version
-- written through the door keeps its S3 ETag, content type and x-amz-meta-* (JSON object);
-- versions written through other doors have none and show the REST version ETag instead.
CREATE TABLE s3_object_meta (
    version_id   BIGINT NOT NULL PRIMARY KEY REFERENCES versions(id) ON DELETE CASCADE,
    etag         TEXT   NOT NULL,
    content_type TEXT,
    user_meta    TEXT
);

-- Multipart uploads in progress. Parts are stored as ordinary blocks of the space; their
-- block lists live here until CompleteMultipartUpload commits them as one version. Garbage
-- collection keeps blocks listed here; uploads left open too long are aborted by gc.
CREATE TABLE s3_uploads (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    upload_id  TEXT   NOT NULL UNIQUE,
    user_id    BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    object_key TEXT   NOT NULL,
    -- What CreateMultipartUpload said the object will carry (see s3_object_meta).
    content_type TEXT,
    user_meta    TEXT,
    created_at BIGINT NOT NULL
);
CREATE INDEX s3_uploads_user ON s3_uploads(user_id, object_key);

CREATE TABLE s3_upload_parts (
    upload_id   BIGINT NOT NULL REFERENCES s3_uploads(id) ON DELETE CASCADE,
    part_number BIGINT NOT NULL,
    etag        TEXT   NOT NULL,
    size        BIGINT NOT NULL,
    created_at  BIGINT NOT NULL,
    PRIMARY KEY (upload_id, part_number)
);

CREATE TABLE s3_upload_blocks (
    upload_id   BIGINT NOT NULL,
    part_number BIGINT NOT NULL,
    idx         BIGINT NOT NULL,
    hash        TEXT   NOT NULL,
    size        BIGINT NOT NULL,
    PRIMARY KEY (upload_id, part_number, idx),
    FOREIGN KEY (upload_id, part_number) REFERENCES s3_upload_parts(upload_id, part_number) ON DELETE CASCADE
);
CREATE INDEX s3_upload_blocks_hash ON s3_upload_blocks(hash);
