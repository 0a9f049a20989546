import { Alert, Button, Center, Divider, Paper, PasswordInput, Stack, Text, TextInput, Title } from '@mantine/core';
import { useEffect, useState, type FormEvent } from 'react';
import { api, errorMessage } from '../api/client';
import type { AuthMethods, LoginResponse } from '../api/types';
import { SSO_START } from '../sso';

export function SignIn({
  notice,
  ssoError = null,
  onSignedIn,
}: {
  notice: string | null;
  /** Why the single sign-on that brought the browser back failed (`#sso_error`). */
  ssoError?: string | null;
  onSignedIn: (token: string) => void;
}) {
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState<string | null>(ssoError ? `Single sign-on failed: ${ssoError}` : null);
  const [busy, setBusy] = useState(false);
  // The button shows only where the gateway offers single sign-on.
  const [sso, setSso] = useState(false);
  useEffect(() => {
    let live = true;
    api<AuthMethods>('GET', '/api/v1/auth/methods')
      .then((m) => live && setSso(m.oidc))
      .catch(() => {
        /* an older gateway without the route: passwords only */
      });
    return () => {
      live = false;
    };
  }, []);

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    if (!username || !password) {
      setError('Enter your username and password.');
      return;
    }
    setBusy(true);
    setError(null);
    try {
      const r = await api<LoginResponse>('POST', '/api/v1/auth/login', { username, password, device: 'admin console' });
      onSignedIn(r.token);
    } catch (err) {
      setError(errorMessage(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <Center mih="100vh" p="md">
      <Paper withBorder p="xl" w={380} maw="100%" component="main">
        <form onSubmit={submit} aria-label="Sign in">
          <Stack>
            <Title order={2}>Nimbus admin</Title>
            {notice && <Alert color="yellow" role="status">{notice}</Alert>}
            {error && <Alert color="red" role="alert">{error}</Alert>}
            <TextInput label="Username" autoComplete="username" value={username} onChange={(e) => setUsername(e.currentTarget.value)} data-autofocus autoFocus />
            <PasswordInput label="Password" autoComplete="current-password" value={password} onChange={(e) => setPassword(e.currentTarget.value)} />
            <Button type="submit" loading={busy}>Sign in</Button>
            {sso && (
              <>
                <Divider label="or" labelPosition="center" />
                <Button variant="default" component="a" href={SSO_START}>
                  Sign in with single sign-on
                </Button>
              </>
            )}
          </Stack>
        </form>
      </Paper>
    </Center>
  );
}

export function NotAdmin({ username, onSignOut }: { username: string; onSignOut: () => void }) {
  return (
    <Center mih="100vh" p="md">
      <Paper withBorder p="xl" w={420} maw="100%" component="main">
        <Stack>
          <Title order={2}>Not an administrator</Title>
          <Text>
            You are signed in as <b>{username}</b>, which is not an administrator account. The admin console is only
            for administrators; use the Nimbus drive or CLI to reach your files.
          </Text>
          <Button onClick={onSignOut}>Sign out</Button>
        </Stack>
      </Paper>
    </Center>
  );
}
