// Single sign-on (docs/IDENTITY.md): the gateway's flow ends by sending the browser back to the
// console as `/admin/#sso_token=<token>&expires_at=<rfc3339>`, or `#sso_error=<message>`. The
// console takes the result out of the address at load and clears it, so the token is neither
// left in the address bar nor in the history.

/** Where the sign-in button sends the browser. */
export const SSO_START = `/api/v1/auth/oidc/start?return=${encodeURIComponent('/admin/')}`;

export interface SsoResult {
  token: string | null;
  error: string | null;
}

/** Reads `sso_token` / `sso_error` from the address's fragment and removes the fragment. */
export function takeSsoResult(loc: Location = window.location, hist: History = window.history): SsoResult {
  const hash = loc.hash.startsWith('#') ? loc.hash.slice(1) : loc.hash;
  const params = new URLSearchParams(hash);
  const token = params.get('sso_token');
  const error = params.get('sso_error');
  if (token === null && error === null) return { token: null, error: null };
  hist.replaceState(hist.state, '', loc.pathname + loc.search);
  return { token: token || null, error: token ? null : error || 'Single sign-on failed.' };
}
