import { describe, expect, it, vi } from 'vitest';
import { SSO_START, takeSsoResult } from './sso';

function at(hash: string) {
  const loc = { hash, pathname: '/admin/', search: '?x=1' } as Location;
  const hist = { state: null, replaceState: vi.fn() } as unknown as History;
  return { loc, hist };
}

describe('takeSsoResult', () => {
  it('takes the token and clears the address', () => {
    const { loc, hist } = at('#sso_token=nmb_abc%2Bdef&expires_at=2026-12-01T00%3A00%3A00Z');
    expect(takeSsoResult(loc, hist)).toEqual({ token: 'nmb_abc+def', error: null });
    expect(hist.replaceState).toHaveBeenCalledWith(null, '', '/admin/?x=1');
  });
  it('takes an error message', () => {
    const { loc, hist } = at('#sso_error=there%20is%20no%20account%20named%20%60dave%60');
    expect(takeSsoResult(loc, hist)).toEqual({ token: null, error: 'there is no account named `dave`' });
    expect(hist.replaceState).toHaveBeenCalled();
  });
  it('leaves other addresses alone', () => {
    const { loc, hist } = at('#section');
    expect(takeSsoResult(loc, hist)).toEqual({ token: null, error: null });
    expect(hist.replaceState).not.toHaveBeenCalled();
  });
  it('starts the flow with a return to the console', () => {
    expect(SSO_START).toBe('/api/v1/auth/oidc/start?return=%2Fadmin%2F');
  });
});
