// A tiny path router under a base path: the gateway answers every route of a front end with its
// index.html. The console lives under /admin; the web app (web/src/router.ts) at the root.
import { useEffect, useState } from 'react';

export function createRouter(base: string) {
  function currentRoute(): string {
    const p = window.location.pathname;
    const r = p.startsWith(base) ? p.slice(base.length) : p;
    return r === '' ? '/' : r;
  }
  function navigate(route: string) {
    window.history.pushState(null, '', base + route);
    window.dispatchEvent(new PopStateEvent('popstate'));
  }
  function useRoute(): string {
    const [route, setRoute] = useState(currentRoute());
    useEffect(() => {
      const on = () => setRoute(currentRoute());
      window.addEventListener('popstate', on);
      return () => window.removeEventListener('popstate', on);
    }, []);
    return route;
  }
  return { currentRoute, navigate, useRoute };
}

export const { currentRoute, navigate, useRoute } = createRouter('/admin');
