import { afterEach, describe, expect, it, vi } from 'vitest';
import { ApiError, api } from './client';

function answer(status: number, body: string) {
  vi.stubGlobal('fetch', vi.fn().mockResolvedValue(new Response(body, { status })));
}

async function failure(): Promise<ApiError> {
  try {
    await api('GET', '/api/v1/me');
  } catch (e) {
    if (e instanceof ApiError) return e;
    throw e;
  }
  throw new Error('the call succeeded');
}

afterEach(() => vi.unstubAllGlobals());

describe('api errors', () => {
  it('carry the gateway code (proto ErrorCode) and message', async () => {
    answer(409, '{"error":{"code":"already_exists","message":"a user named carol already exists"}}');
    const e = await failure();
    expect(e.status).toBe(409);
    expect(e.code).toBe('already_exists');
    expect(e.message).toBe('a user named carol already exists');
  });
  it('turn a code this build does not know into `error`, keeping the message', async () => {
    answer(409, '{"error":{"code":"some_future_code","message":"m"}}');
    const e = await failure();
    expect(e.code).toBe('error');
    expect(e.message).toBe('m');
  });
  it('report a body without the error shape by status', async () => {
    answer(502, '<html>bad gateway</html>');
    const e = await failure();
    expect(e.code).toBe('error');
    expect(e.message).toBe('HTTP 502');
  });
});
