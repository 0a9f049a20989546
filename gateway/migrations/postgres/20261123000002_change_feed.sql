-- The change feed (GET /api/v1/changes): a move also records where the node came from, and
-- every row records whether it is about a file or a folder. Rows written before this
-- migration have NULLs here; the feed derives their kind from the node if it still exists.
ALTER TABLE changes ADD COLUMN from_path TEXT;
ALTER TABLE changes ADD COLUMN kind TEXT;
