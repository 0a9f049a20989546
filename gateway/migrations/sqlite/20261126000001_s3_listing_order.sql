-- S3 listings walk a folder's children in key order: the name, plus '/' for a folder (every
-- key below folder `d` starts with `d/`), compared bytewise (SQLite's BINARY collation).
-- A page of a listing reads this index from where the page starts (doors/s3/listing.rs).
CREATE INDEX nodes_s3_order ON nodes(parent_id, (CASE WHEN kind = 'dir' THEN name || '/' ELSE name END))
    WHERE trashed_at IS NULL;
