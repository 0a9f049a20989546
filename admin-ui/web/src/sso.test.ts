import { describe, expect, it } from 'vitest';
import { takeSsoToken } from './sso';

describe('single sign-on landing', () => {
  it('takes the token from the fragment and clears it', () => {
    window.history.replaceState(null, '', '/files/Docs?x=1#sso_token=abc%2Bdef&expires_at=2026-01-01T00%3A00%3A00Z');
    let stored = '';
    expect(takeSsoToken((t) => (stored = t))).toBe(true);
    expect(stored).toBe('abc+def');
    expect(window.location.hash).toBe('');
    expect(window.location.pathname + window.location.search).toBe('/files/Docs?x=1');
  });
  it('leaves other fragments alone', () => {
    window.history.replaceState(null, '', '/files#section');
    expect(takeSsoToken(() => {})).toBe(false);
    expect(window.location.hash).toBe('#section');
  });
});
