// Single sign-on ends on the app's page with the session in the fragment
// (`#sso_token=<token>&expires_at=...`): a fragment never reaches a server or a Referer. The
// app takes it as its session at load and removes it from the address bar and the history.
export function takeSsoToken(store: (token: string) => void, loc: Location = window.location, hist: History = window.history): boolean {
  if (!loc.hash.startsWith('#')) return false;
  const params = new URLSearchParams(loc.hash.slice(1));
  const token = params.get('sso_token');
  if (!token) return false;
  store(token);
  hist.replaceState(null, '', loc.pathname + loc.search);
  return true;
}
