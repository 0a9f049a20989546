import { AppShell, Burger, Button, Group, NavLink, Text, Title } from '@mantine/core';
import { useDisclosure } from '@mantine/hooks';
import { useQuery } from '@tanstack/react-query';
import { Suspense, lazy, useState } from 'react';
import { AppRoot } from './AppRoot';
import { api, session } from './api/client';
import type { Me } from './api/types';
import { navigate, useRoute } from './router';
import { SignIn, NotAdmin } from './pages/SignIn';
import { takeSsoResult } from './sso';
import { UsersPage } from './pages/Users';
import { UserPage } from './pages/User';
import { GroupsPage } from './pages/Groups';
import { CachePage } from './pages/Cache';
import { AuditPage } from './pages/Audit';

// The charts library is most of the bundle; only the dashboard needs it, so it loads on its own.
const Dashboard = lazy(() => import('./pages/Dashboard').then((m) => ({ default: m.Dashboard })));

export function App() {
  // A single sign-on that just ended brought a token (or an error) in the address; taken
  // before the session below reads its token.
  const [sso] = useState(() => {
    const r = takeSsoResult();
    if (r.token) session.set(r.token);
    return r;
  });
  return (
    <AppRoot signIn={(notice, onSignedIn) => <SignIn notice={notice} ssoError={notice ? null : sso.error} onSignedIn={onSignedIn} />}>
      {(signOut) => <Console signOut={signOut} />}
    </AppRoot>
  );
}

const NAV = [
  ['/', 'Dashboard'],
  ['/users', 'Users'],
  ['/groups', 'Groups'],
  ['/cache', 'Cache'],
  ['/audit', 'Audit log'],
] as const;

function Console({ signOut }: { signOut: () => Promise<void> }) {
  const route = useRoute();
  const [opened, { toggle, close }] = useDisclosure();
  const me = useQuery({ queryKey: ['me'], queryFn: () => api<Me>('GET', '/api/v1/me') });

  if (me.isPending) return <Text p="md">Loading…</Text>;
  if (me.isError) return <Text p="md" role="alert">{me.error.message}</Text>;
  if (me.data.role !== 'admin') return <NotAdmin username={me.data.username} onSignOut={signOut} />;

  let page;
  const userMatch = /^\/users\/(\d+)$/.exec(route);
  if (userMatch) page = <UserPage id={Number(userMatch[1])} />;
  else if (route === '/users') page = <UsersPage />;
  else if (route === '/groups') page = <GroupsPage />;
  else if (route === '/cache') page = <CachePage />;
  else if (route === '/audit') page = <AuditPage />;
  else page = <Dashboard />;

  return (
    <AppShell header={{ height: 56 }} navbar={{ width: 200, breakpoint: 'sm', collapsed: { mobile: !opened } }} padding="md">
      <AppShell.Header>
        <Group h="100%" px="md" justify="space-between">
          <Group>
            <Burger opened={opened} onClick={toggle} hiddenFrom="sm" size="sm" aria-label="Toggle navigation" />
            <Title order={3}>Nimbus admin</Title>
          </Group>
          <Group>
            <Text size="sm" visibleFrom="xs">{me.data.username}</Text>
            <Button variant="light" onClick={signOut}>Sign out</Button>
          </Group>
        </Group>
      </AppShell.Header>
      <AppShell.Navbar p="xs" aria-label="Main">
        {NAV.map(([to, label]) => (
          <NavLink
            key={to}
            href={`/admin${to}`}
            label={label}
            active={to === '/' ? route === '/' : route.startsWith(to)}
            onClick={(e) => {
              e.preventDefault();
              close();
              navigate(to);
            }}
          />
        ))}
      </AppShell.Navbar>
      <AppShell.Main>
        <Suspense fallback={<Text>Loading…</Text>}>{page}</Suspense>
      </AppShell.Main>
    </AppShell>
  );
}
