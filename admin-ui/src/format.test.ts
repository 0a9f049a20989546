import { describe, expect, it } from 'vitest';
import { formatSize, parseSize, passwordError, usernameError } from './format';

describe('parseSize', () => {
  it('reads units', () => {
    expect(parseSize('10 GiB')).toBe(10 * 1024 ** 3);
    expect(parseSize('500MB')).toBe(500e6);
    expect(parseSize('1048576')).toBe(1048576);
    expect(parseSize('1.5 KiB')).toBe(1536);
  });
  it('treats empty as unlimited', () => {
    expect(parseSize('')).toBeNull();
    expect(parseSize('  ')).toBeNull();
  });
  it('rejects junk', () => {
    expect(() => parseSize('ten gigs')).toThrow(/Enter a size/);
    expect(() => parseSize('10 XB')).toThrow(/Unknown unit/);
    expect(() => parseSize('-5')).toThrow();
  });
});

describe('validation', () => {
  it('usernames', () => {
    expect(usernameError('alice')).toBeNull();
    expect(usernameError('')).toMatch(/required/);
    expect(usernameError('.hidden')).toMatch(/start with/);
    expect(usernameError('a b')).toMatch(/Letters/);
    expect(usernameError('x'.repeat(65))).toMatch(/64/);
  });
  it('passwords', () => {
    expect(passwordError('')).toBeNull();
    expect(passwordError('short')).toMatch(/8/);
    expect(passwordError('long enough')).toBeNull();
  });
  it('formats', () => {
    expect(formatSize(null)).toBe('unlimited');
    expect(formatSize(512)).toBe('512 B');
    expect(formatSize(1536)).toBe('1.5 KiB');
  });
});
