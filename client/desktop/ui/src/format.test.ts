import { describe, expect, it } from 'vitest';
import { humanBytes, percent } from './format';

describe('humanBytes', () => {
  it('uses binary units', () => {
    expect(humanBytes(0)).toBe('0 B');
    expect(humanBytes(1023)).toBe('1023 B');
    expect(humanBytes(1536)).toBe('1.5 KiB');
    expect(humanBytes(10 * 1024 ** 3)).toBe('10 GiB');
    expect(humanBytes(-1)).toBe('?');
  });
});

describe('percent', () => {
  it('is bounded and safe without a total', () => {
    expect(percent(5, 10)).toBe(50);
    expect(percent(20, 10)).toBe(100);
    expect(percent(5, null)).toBe(0);
    expect(percent(5, 0)).toBe(0);
  });
});
