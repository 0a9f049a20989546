-- When a CompleteMultipartUpload took this upload in hand (Unix ms), NULL when none is under
-- way: a second one meanwhile answers 409 OperationAborted instead of making a second version.
-- A claim older than an hour is taken over (its gateway died halfway).
ALTER TABLE s3_uploads ADD COLUMN completing_at BIGINT;
