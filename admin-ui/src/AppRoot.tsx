// The frame both front ends (the console, src/App.tsx, and the web app, web/src/App.tsx) share:
// Mantine, TanStack Query and the session: the sign-in page while there is no token, the app
// once there is one. A 401 on any call ends the session with a notice; sign-out revokes the token.
import { MantineProvider } from '@mantine/core';
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { useCallback, useEffect, useState, type ReactNode } from 'react';
import { ApiError, api, session, setUnauthorizedHandler } from './api/client';

export const queryClient = new QueryClient({
  defaultOptions: { queries: { retry: (n, e) => !(e instanceof ApiError && e.status < 500) && n < 2 } },
});

export function AppRoot({
  signIn,
  children,
}: {
  signIn: (notice: string | null, onSignedIn: (token: string) => void) => ReactNode;
  children: (signOut: () => Promise<void>) => ReactNode;
}) {
  return (
    <MantineProvider>
      <QueryClientProvider client={queryClient}>
        <Session signIn={signIn}>{children}</Session>
      </QueryClientProvider>
    </MantineProvider>
  );
}

function Session({ signIn, children }: Parameters<typeof AppRoot>[0]) {
  const [token, setToken] = useState(session.get());
  const [notice, setNotice] = useState<string | null>(null);
  const expire = useCallback(() => {
    session.clear();
    queryClient.clear();
    setNotice('Your session has expired. Please sign in again.');
    setToken(null);
  }, []);
  useEffect(() => setUnauthorizedHandler(expire), [expire]);
  const signOut = useCallback(async () => {
    try {
      await api('POST', '/api/v1/auth/logout');
    } catch {
      /* the token is dropped either way */
    }
    session.clear();
    queryClient.clear();
    setToken(null);
  }, []);

  if (!token) {
    return signIn(notice, (t) => {
      session.set(t);
      setNotice(null);
      setToken(t);
    });
  }
  return children(signOut);
}
