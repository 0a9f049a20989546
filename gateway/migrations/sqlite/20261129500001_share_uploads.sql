-- Blocks a recipient uploaded through a write share (their proof of holding the bytes): a
-- commit through the share may name only these and blocks of the file's own versions, so a
-- recipient who merely knows the hash of one of the owner's other blocks cannot commit it
-- into the share and read it back.
CREATE TABLE share_uploads (
    share_id BIGINT NOT NULL REFERENCES shares(id) ON DELETE CASCADE,
    hash     TEXT   NOT NULL,
    PRIMARY KEY (share_id, hash)
);
