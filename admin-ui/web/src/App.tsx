import { Alert, Anchor, AppShell, Burger, Button, Group, NavLink, Stack, Text, Title } from '@mantine/core';
import { useDisclosure } from '@mantine/hooks';
import { useQuery } from '@tanstack/react-query';
import { useEffect, useState } from 'react';
import { AppRoot } from '../../src/AppRoot';
import { api } from '../../src/api/client';
import type { Me } from '../../src/api/types';
import { QuotaBar } from './components/QuotaBar';
import { FilesPage } from './pages/Files';
import { SecurityPage } from './pages/Security';
import { SettingsPage } from './pages/Settings';
import { SignIn } from './pages/SignIn';
import { TrashPage } from './pages/Trash';
import { SHARED, folderOfRoute, folderRoute } from './paths';
import { SECURITY, navigate, useRoute } from './router';
import { unfinished } from './upload';
import { UploadProvider } from './uploads';

export function App() {
  return (
    <AppRoot signIn={(notice, onSignedIn) => <SignIn notice={notice} onSignedIn={onSignedIn} />}>
      {(signOut) => (
        <UploadProvider>
          <Shell signOut={signOut} />
        </UploadProvider>
      )}
    </AppRoot>
  );
}

/** Whether the browser says it has a network (the `online` and `offline` events). */
function useOnline(): boolean {
  const [online, setOnline] = useState(navigator.onLine);
  useEffect(() => {
    const on = () => setOnline(navigator.onLine);
    window.addEventListener('online', on);
    window.addEventListener('offline', on);
    return () => {
      window.removeEventListener('online', on);
      window.removeEventListener('offline', on);
    };
  }, []);
  return online;
}

function Shell({ signOut }: { signOut: () => Promise<void> }) {
  const route = useRoute();
  const [opened, { toggle, close }] = useDisclosure();
  const me = useQuery({ queryKey: ['me'], queryFn: () => api<Me>('GET', '/api/v1/me') });
  if (me.data) unfinished.setOwner(me.data.username);
  const online = useOnline();
  // The administrator requires two-factor sign-in and this account has none yet: the token
  // reaches nothing but the security page (everything else would answer 403).
  const setupOnly = me.data?.totp_setup_required === true;
  useEffect(() => {
    if (setupOnly && route !== SECURITY) navigate(SECURITY);
  }, [setupOnly, route]);

  const folder = folderOfRoute(route);
  let page;
  // Until `me` answers, whether this sign-in may reach the other pages is not known.
  if (me.isPending) page = null;
  else if (setupOnly || route === SECURITY) page = <SecurityPage />;
  else if (route === '/trash') page = <TrashPage />;
  else if (route === '/settings') page = <SettingsPage />;
  else page = <FilesPage path={folder ?? '/'} />;

  const sharedPath = `/${SHARED}`;
  const nav: [string, string, boolean][] = [
    ['/files', 'My files', folder !== null && !(folder === sharedPath || folder.startsWith(`${sharedPath}/`))],
    [folderRoute(sharedPath), SHARED, folder !== null && (folder === sharedPath || folder.startsWith(`${sharedPath}/`))],
    ['/trash', 'Trash', route === '/trash'],
    ['/settings', 'Devices and keys', route === '/settings'],
    [SECURITY, 'Security', route === SECURITY],
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
            {me.data?.role === 'admin' && <Anchor href="/admin/" size="sm" visibleFrom="sm">Admin console</Anchor>}
            <Button variant="light" onClick={signOut}>Sign out</Button>
          </Group>
        </Group>
      </AppShell.Header>
      <AppShell.Navbar p="xs" aria-label="Main">
        <Stack justify="space-between" h="100%">
          <div>
            {(setupOnly ? nav.filter(([to]) => to === SECURITY) : nav).map(([to, label, active]) => (
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
          {me.data && !setupOnly && <QuotaBar me={me.data} />}
        </Stack>
      </AppShell.Navbar>
      <AppShell.Main>
        {!online && (
          <Alert color="orange" role="status" mb="md">
            You are offline. What you see may be out of date, and changes wait until you are back online.
          </Alert>
        )}
        {page}
      </AppShell.Main>
    </AppShell>
  );
}
