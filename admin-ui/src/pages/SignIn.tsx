import { Alert, Anchor, Button, Center, Paper, PasswordInput, Stack, Text, TextInput, Title } from '@mantine/core';
import { useState, type FormEvent, type ReactNode } from 'react';
import { api, errorMessage } from '../api/client';
import type { LoginResponse } from '../api/types';

export function SignIn({ notice, onSignedIn }: { notice: string | null; onSignedIn: (token: string) => void }) {
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

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
    <SignInFrame title="Nimbus admin" notice={notice} error={error} onSubmit={submit}>
      <TextInput label="Username" autoComplete="username" value={username} onChange={(e) => setUsername(e.currentTarget.value)} data-autofocus autoFocus />
      <PasswordInput label="Password" autoComplete="current-password" value={password} onChange={(e) => setPassword(e.currentTarget.value)} />
      <Button type="submit" loading={busy}>Sign in</Button>
    </SignInFrame>
  );
}

/** The sign-in page of both front ends (the web app's is web/src/pages/SignIn.tsx): a form in
 * a card, the notice (why the session ended) and the error above its fields. */
export function SignInFrame({
  title,
  notice,
  error,
  onSubmit,
  children,
}: {
  title: string;
  notice: string | null;
  error: string | null;
  onSubmit: (e: FormEvent) => void;
  children: ReactNode;
}) {
  return (
    <Center mih="100vh" p="md">
      <Paper withBorder p="xl" w={380} maw="100%" component="main">
        <form onSubmit={onSubmit} aria-label="Sign in">
          <Stack>
            <Title order={2}>{title}</Title>
            {notice && <Alert color="yellow" role="status">{notice}</Alert>}
            {error && <Alert color="red" role="alert">{error}</Alert>}
            {children}
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
            for administrators; your files are in the <Anchor href="/">web app</Anchor>, the Nimbus drive and the CLI.
          </Text>
          <Button onClick={onSignOut}>Sign out</Button>
        </Stack>
      </Paper>
    </Center>
  );
}
