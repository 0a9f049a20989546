import { AppShell, Burger, Button, Group, MantineProvider, NavLink, Stack, Text, Title } from '@mantine/core';
import { useDisclosure } from '@mantine/hooks';
import { QueryClient, QueryClientProvider, useQuery } from '@tanstack/react-query';
import { useCallback, useEffect, useState } from 'react';
import { ApiError, api, session, setUnauthorizedHandler } from '../../src/api/client';
import type { Me } from '../../src/api/types';
import { QuotaBar } from './components/QuotaBar';
import { FilesPage } from './pages/Files';
import { SettingsPage } from './pages/Settings';
import { SignIn } from './pages/SignIn';
import { TrashPage } from './pages/Trash';
import { SHARED, folderOfRoute, folderRoute } from './paths';
import { navigate, useRoute } from './router';
import { unfinished } from './upload';
import { UploadProvider } from './uploads';

const queryClient = new QueryClient({
  defaultOptions: { queries: { retry: (n, e) => !(e instanceof ApiError && e.status < 500) && n < 2 } },
});

export function App() {
  return (
    <MantineProvider>
      <QueryClientProvider client={queryClient}>
        <Root />
      </QueryClientProvider>
    </MantineProvider>
  );
}

function Root() {
  const [token, setToken] = useState(session.get());
  const [notice, setNotice] = useState<string | null>(null);
  const expire = useCallback(() => {
    session.clear();
    queryClient.clear();
    setNotice('Your session has ended. Please sign in again.');
    setToken(null);
  }, []);
  useEffect(() => setUnauthorizedHandler(expire), [expire]);

  if (!token) {
    return (
      <SignIn
        notice={notice}
        onSignedIn={(t) => {
          session.set(t);
          setNotice(null);
          setToken(t);
        }}
      />
    );
  }
  return (
    <UploadProvider>
      <Shell onSignOut={() => setToken(null)} />
    </UploadProvider>
  );
}

function Shell({ onSignOut }: { onSignOut: () => void }) {
  const route = useRoute();
  const [opened, { toggle, close }] = useDisclosure();
  const me = useQuery({ queryKey: ['me'], queryFn: () => api<Me>('GET', '/api/v1/me') });
  if (me.data) unfinished.setOwner(me.data.username);

  const signOut = async () => {
    try {
      await api('POST', '/api/v1/auth/logout');
    } catch {
      /* the token is dropped either way */
    }
    session.clear();
    queryClient.clear();
    onSignOut();
  };

  const folder = folderOfRoute(route);
  let page;
  if (route === '/trash') page = <TrashPage />;
  else if (route === '/settings') page = <SettingsPage />;
  else page = <FilesPage path={folder ?? '/'} />;

  const sharedPath = `/${SHARED}`;
  const nav: [string, string, boolean][] = [
    ['/files', 'My files', folder !== null && !(folder === sharedPath || folder.startsWith(`${sharedPath}/`))],
    [folderRoute(sharedPath), SHARED, folder !== null && (folder === sharedPath || folder.startsWith(`${sharedPath}/`))],
    ['/trash', 'Trash', route === '/trash'],
    ['/settings', 'Devices and keys', route === '/settings'],
  ];

  return (
    <AppShell header={{ height: 56 }} navbar={{ width: 240, breakpoint: 'sm', collapsed: { mobile: !opened } }} padding="md">
      <AppShell.Header>
        <Group h="100%" px="md" justify="space-between" wrap="nowrap">
          <Group wrap="nowrap">
            <Burger opened={opened} onClick={toggle} hiddenFrom="sm" size="sm" aria-label="Toggle navigation" />
            <Title order={3}>Nimbus</Title>
          </Group>
          <Group wrap="nowrap">
            {me.data && <Text size="sm" visibleFrom="xs" data-testid="whoami">{me.data.username}</Text>}
            <Button variant="light" onClick={signOut}>Sign out</Button>
          </Group>
        </Group>
      </AppShell.Header>
      <AppShell.Navbar p="xs" aria-label="Main">
        <Stack justify="space-between" h="100%">
          <div>
            {nav.map(([to, label, active]) => (
              <NavLink
                key={to}
                href={to}
                label={label}
                active={active}
                onClick={(e) => {
                  e.preventDefault();
                  close();
                  navigate(to);
                }}
              />
            ))}
          </div>
          {me.data && <QuotaBar me={me.data} />}
        </Stack>
      </AppShell.Navbar>
      <AppShell.Main>{page}</AppShell.Main>
    </AppShell>
  );
}
