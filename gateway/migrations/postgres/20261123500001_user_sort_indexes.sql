-- The console's user list sorts by usage and by creation time, keyset-paged with the id as
-- tie-breaker; these keep a page a short index walk at any number of users.
CREATE INDEX users_by_usage ON users (used_bytes, id);
CREATE INDEX users_by_created ON users (created_at, id);
