import { describe, expect, it } from 'vitest';
import { auditDetail, formatSize, formatSizeInput, parseSize, passwordError, sizeUnit, usernameError } from './format';

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
});

describe('sizes for people', () => {
  it('formats as the gateway does', () => {
    expect(formatSize(null)).toBe('unlimited');
    expect(formatSize(0)).toBe('0 B');
    expect(formatSize(512)).toBe('512 B');
    expect(formatSize(1536)).toBe('1.5 KiB');
    expect(formatSize(10 * 1048576)).toBe('10 MiB');
    expect(formatSize(300000)).toBe('293 KiB');
    expect(formatSize(500e6)).toBe('476.8 MiB');
  });
  it('writes an editable size that reads back to the byte', () => {
    expect(formatSizeInput(null)).toBe('');
    expect(formatSizeInput(10 * 1024 ** 3)).toBe('10 GiB');
    expect(formatSizeInput(500e6)).toBe('500 MB');
    expect(formatSizeInput(1536)).toBe('1.5 KiB');
    expect(formatSizeInput(310000)).toBe('310 KB');
    expect(formatSizeInput(0)).toBe('0 B');
    for (const n of [1, 1000, 1023, 123456789, 5 * 1024 ** 4, 2.25 * 1024 ** 3, 1048577]) {
      expect(parseSize(formatSizeInput(n))).toBe(n);
    }
  });
  it('picks a chart unit from the largest value', () => {
    expect(sizeUnit(0)).toEqual({ unit: 'B', bytes: 1 });
    expect(sizeUnit(1023)).toEqual({ unit: 'B', bytes: 1 });
    expect(sizeUnit(1024)).toEqual({ unit: 'KiB', bytes: 1024 });
    expect(sizeUnit(3 * 1024 ** 3)).toEqual({ unit: 'GiB', bytes: 1024 ** 3 });
  });
});

describe('auditDetail', () => {
  it('shows what the gateway writes as it is', () => {
    expect(auditDetail('role user, quota 10 MiB')).toBe('role user, quota 10 MiB');
    expect(auditDetail('quota removed (unlimited), disabled')).toBe('quota removed (unlimited), disabled');
    expect(auditDetail(null)).toBe('');
  });
  it('makes what older gateways wrote readable', () => {
    expect(auditDetail('quota Some(10485760)')).toBe('quota 10 MiB');
    expect(auditDetail('quota None, role admin')).toBe('quota removed (unlimited), role admin');
    expect(auditDetail('role user, quota 1000 bytes')).toBe('role user, quota 1000 B');
    expect(auditDetail('version 3, 1048576 bytes')).toBe('version 3, 1 MiB');
    expect(auditDetail('device "alice-phone" (token 12)')).toBe('device: alice-phone');
  });
});
