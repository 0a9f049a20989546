-- Garbage collection: when a block was last reported present (POST /blocks/missing) or
-- uploaded again. GC only removes unreferenced blocks untouched for its grace period, so a
-- client told "present" can still commit. NULL means "never touched since created_at".
ALTER TABLE blocks ADD COLUMN touched_at BIGINT;
