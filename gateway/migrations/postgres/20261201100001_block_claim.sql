-- The streaming upload that charged a block as pending and that nothing else has claimed or
-- touched since: a random number the upload holds (gateway/src/space/mod.rs, `Claims`). An
-- upload that fails, or an S3 multipart upload aborted, deletes at once the blocks that still
-- carry its claim and that nothing references, instead of leaving them in the store outside
-- the quota until garbage collection. Any other claim or touch sets it NULL: that block then
-- stays, charged as pending, until a commit references it or collection removes it.
ALTER TABLE blocks ADD COLUMN claim BIGINT;
