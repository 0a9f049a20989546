-- What the directory says about an account beside its name: an e-mail address and a display
-- name (`--ldap-email-attr`, `--ldap-display-name-attr`; docs/IDENTITY.md). NULL: none given.
ALTER TABLE users ADD COLUMN email TEXT;
ALTER TABLE users ADD COLUMN display_name TEXT;
