import { describe, expect, it } from 'vitest';
import { BLOB_LIMIT, streamsByLink } from './download';

describe('downloads', () => {
  it('stream large files of the own space through a one-time link, fetch the rest', () => {
    expect(streamsByLink('/big.iso', BLOB_LIMIT + 1)).toBe(true);
    expect(streamsByLink('/small.txt', 10)).toBe(false);
    // An older version, or a file inside a share, has no link: fetched as a blob.
    expect(streamsByLink('/big.iso', BLOB_LIMIT + 1, 3)).toBe(false);
    expect(streamsByLink('/Shared with me/x/big.iso', BLOB_LIMIT + 1)).toBe(false);
  });
});
