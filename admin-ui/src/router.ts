// A tiny path router under /admin: the gateway answers every /admin/* with index.html.
import { useEffect, useState } from 'react';

const BASE = '/admin';

export function currentRoute(): string {
  const p = window.location.pathname;
  const r = p.startsWith(BASE) ? p.slice(BASE.length) : p;
  return r === '' ? '/' : r;
}

export function navigate(route: string) {
  window.history.pushState(null, '', BASE + route);
  window.dispatchEvent(new PopStateEvent('popstate'));
}

export function useRoute(): string {
  const [route, setRoute] = useState(currentRoute());
  useEffect(() => {
    const on = () => setRoute(currentRoute());
    window.addEventListener('popstate', on);
    return () => window.removeEventListener('popstate', on);
  }, []);
  return route;
}
