-- Per-user policy: whether the user may make public links (an administrator's switch). While
-- it is off, the user's existing links do not open either (404), as if revoked.
ALTER TABLE users ADD COLUMN links BOOLEAN NOT NULL DEFAULT TRUE;
