import { afterEach, describe, expect, it } from 'vitest';
import { unfinished } from './upload';

afterEach(() => localStorage.clear());

describe('unfinished uploads', () => {
  it('are remembered per user until done, and found again by name and size', () => {
    unfinished.setOwner('alice');
    unfinished.add({ path: '/big.bin', name: 'big.bin', size: 10, lastModified: 1 });
    unfinished.add({ path: '/big.bin', name: 'big.bin', size: 10, lastModified: 1 });
    expect(unfinished.list()).toHaveLength(1);
    expect(unfinished.match(new File(['0123456789'], 'big.bin'))?.path).toBe('/big.bin');
    expect(unfinished.match(new File(['01234'], 'big.bin'))).toBeUndefined();
    unfinished.setOwner('bob');
    expect(unfinished.list()).toEqual([]);
    unfinished.setOwner('alice');
    unfinished.remove('/big.bin');
    expect(unfinished.list()).toEqual([]);
  });
});
