import { describe, expect, it } from 'vitest';
import { ApiError } from '../../src/api/client';
import { describeError } from './errors';

describe('error texts', () => {
  it('say in words what happened and what to do', () => {
    expect(describeError(new ApiError(413, 'quota_exceeded', 'x'))).toMatch(/not enough room.*Empty the trash/);
    expect(describeError(new ApiError(423, 'locked', 'x'))).toMatch(/editing this item/);
    expect(describeError(new ApiError(409, 'conflict', 'base is stale'))).toMatch(/changed or moved.*Reload/);
    expect(describeError(new ApiError(412, 'precondition_failed', 'x'))).toMatch(/changed in the meantime/);
    expect(describeError(new ApiError(409, 'already_exists', 'x'))).toMatch(/already there/);
    expect(describeError(new ApiError(403, 'forbidden', 'read-only share'))).toMatch(/not allowed.*read-only share/);
  });
  it('tell offline from an unreachable server', () => {
    expect(describeError(new ApiError(0, 'network', ''), false)).toMatch(/You are offline/);
    expect(describeError(new ApiError(0, 'network', ''), true)).toMatch(/cannot be reached/);
  });
  it('keep the server message for codes it has no words for', () => {
    expect(describeError(new ApiError(400, 'error', 'something new'))).toBe('something new');
    expect(describeError(new Error('plain'))).toBe('plain');
  });
});
