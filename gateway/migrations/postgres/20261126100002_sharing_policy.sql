-- Per-user policy: whether the user may share files and folders with others (an
-- administrator's switch; shares made before it was turned off stay until revoked).
ALTER TABLE users ADD COLUMN sharing BOOLEAN NOT NULL DEFAULT TRUE;
