-- Sign-in throttling shared by every gateway on this database (gateway/src/auth/throttle.rs).
-- One row per throttle key: a client address ("a:203.0.113.7", IPv6 as its /64), or a
-- username at a client address ("p:<address>|<username key>"). A row quiet for the throttle's
-- window is forgotten (and pruned).
CREATE TABLE login_throttle (
    key          TEXT PRIMARY KEY,
    failures     BIGINT NOT NULL,
    last_failure BIGINT NOT NULL,
    -- Unix ms; 0 = not locked.
    locked_until BIGINT NOT NULL
);
CREATE INDEX login_throttle_last ON login_throttle (last_failure);

-- The client address a device token was last seen from (at sign-in, then with last_used_at),
-- behind a trusted proxy the X-Forwarded-For client: the device list shows it.
ALTER TABLE tokens ADD COLUMN last_ip TEXT;
