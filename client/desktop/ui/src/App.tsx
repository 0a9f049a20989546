import {
  Alert,
  Badge,
  Button,
  Card,
  Code,
  Container,
  Group,
  List,
  MantineProvider,
  PasswordInput,
  Progress,
  Stack,
  Text,
  TextInput,
  Title,
} from '@mantine/core';
import { QueryClient, QueryClientProvider, useQuery, useQueryClient } from '@tanstack/react-query';
import { type FormEvent, useEffect, useState } from 'react';
import { backend } from './backend';
import { humanBytes, percent } from './format';
import { Problems, problemBusyKey } from './Problems';
import type { Status } from './generated/bindings';

const STATUS_KEY = ['status'];

function message(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** The status: fetched once, then kept current by the back end's events. */
function useStatus() {
  const qc = useQueryClient();
  useEffect(() => {
    let stop: (() => void) | undefined;
    let cancelled = false;
    void backend()
      .onEvent((e) => {
        if (e.kind === 'status_changed') qc.setQueryData(STATUS_KEY, e.status);
      })
      .then((unlisten) => {
        if (cancelled) unlisten();
        else stop = unlisten;
      });
    return () => {
      cancelled = true;
      stop?.();
    };
  }, [qc]);
  return useQuery({ queryKey: STATUS_KEY, queryFn: () => backend().getStatus() });
}

export function SignIn() {
  const [server, setServer] = useState('');
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  // `sso`: the question about the certificate came from "Sign in with SSO" (trusting it
  // goes on with that, not with the password).
  const [untrusted, setUntrusted] = useState<{ server_url: string; fingerprint: string; sso: boolean } | null>(null);
  // The system browser is open at the identity provider; the back end waits for it.
  const [inBrowser, setInBrowser] = useState(false);

  async function submit(trusted: string | null, sso = false) {
    setBusy(true);
    setError(null);
    setInBrowser(sso);
    try {
      const out = sso
        ? await backend().signInSso({ server_url: server, trusted_fingerprint: trusted })
        : await backend().signIn({ server_url: server, username, password, trusted_fingerprint: trusted });
      if (out.kind === 'untrusted_certificate') {
        setUntrusted({ server_url: out.server_url, fingerprint: out.fingerprint, sso });
      } else {
        setUntrusted(null);
      }
    } catch (e) {
      setError(message(e));
      setUntrusted(null);
    } finally {
      setBusy(false);
      setInBrowser(false);
    }
  }

  function onSubmit(e: FormEvent) {
    e.preventDefault();
    void submit(null);
  }

  return (
    <Container size={420} py="xl">
      <Title order={2} mb="xs">
        Nimbus Drive
      </Title>
      <Text c="dimmed" mb="lg">
        Sign in to your Nimbus server to use your space as a drive.
      </Text>
      <form onSubmit={onSubmit} aria-label="Sign in">
        <Stack>
          <TextInput
            label="Server address"
            name="server_url"
            placeholder="https://nimbus.example.com:8443"
            required
            value={server}
            onChange={(e) => setServer(e.currentTarget.value)}
          />
          <TextInput label="Username" name="username" required value={username} onChange={(e) => setUsername(e.currentTarget.value)} />
          <PasswordInput
            label="Password"
            name="password"
            required
            value={password}
            onChange={(e) => setPassword(e.currentTarget.value)}
          />
          {error && (
            <Alert color="red" role="alert" title="Cannot sign in">
              {error}
            </Alert>
          )}
          {untrusted ? (
            <Alert color="yellow" title="Unknown certificate" role="dialog" aria-label="Unknown certificate">
              <Stack gap="xs">
                <Text size="sm">
                  {untrusted.server_url} presents a certificate that is not signed by an authority this computer
                  trusts. Compare its SHA-256 fingerprint with the one your administrator gave you (the server prints
                  it at start-up):
                </Text>
                <Code block data-testid="fingerprint">
                  {untrusted.fingerprint}
                </Code>
                <Group>
                  <Button loading={busy} onClick={() => void submit(untrusted.fingerprint, untrusted.sso)}>
                    Trust and sign in
                  </Button>
                  <Button variant="default" onClick={() => setUntrusted(null)} disabled={busy}>
                    Cancel
                  </Button>
                </Group>
              </Stack>
            </Alert>
          ) : (
            <>
              <Button type="submit" loading={busy && !inBrowser} disabled={inBrowser}>
                Sign in
              </Button>
              {/* Needs only the server address: the organisation's sign-in page asks the rest. */}
              <Button
                type="button"
                variant="default"
                loading={inBrowser}
                disabled={busy && !inBrowser}
                onClick={() => {
                  if (!server.trim()) return setError('Enter the server address first.');
                  void submit(null, true);
                }}
              >
                Sign in with SSO
              </Button>
              {inBrowser && (
                <Text size="sm" role="status">
                  Continue in your browser: sign in with your organisation's account there, then come back here.
                </Text>
              )}
            </>
          )}
        </Stack>
      </form>
    </Container>
  );
}

function Section({ title, children }: { title: string; children: React.ReactNode }) {
  return (
    <Card withBorder padding="md" component="section" aria-label={title}>
      <Title order={4} mb="sm">
        {title}
      </Title>
      {children}
    </Card>
  );
}

export function Main({ status }: { status: Status }) {
  const account = status.account;
  const [busy, setBusy] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [location, setLocation] = useState(status.mount.location ?? '');
  const [pendingWarning, setPendingWarning] = useState<number | null>(null);
  const [note, setNote] = useState<string | null>(null);

  async function run(what: string, f: () => Promise<unknown>) {
    setBusy(what);
    setError(null);
    setNote(null);
    try {
      await f();
    } catch (e) {
      setError(message(e));
    } finally {
      setBusy(null);
    }
  }

  async function signOut(force: boolean) {
    await run('sign-out', async () => {
      const out = await backend().signOut({ force });
      if (out.kind === 'pending_uploads') setPendingWarning(out.pending);
      else {
        setPendingWarning(null);
        if (out.warning) setNote(out.warning);
      }
    });
  }

  if (!account) return null;
  const { mount, activity, quota, cache } = status;
  const online = status.connectivity === 'online';
  return (
    <Container size={640} py="md">
      <Stack>
        <Group justify="space-between">
          <div>
            <Title order={3}>Nimbus Drive</Title>
            <Text size="sm" c="dimmed">
              {account.username} on {account.server_url}
            </Text>
          </div>
          <Badge color={online ? 'green' : 'gray'} size="lg" aria-label="Connection">
            {online ? 'Online' : 'Offline'}
          </Badge>
        </Group>
        {account.token_storage.kind === 'file' && (
          <Alert color="blue" title="No keychain available" aria-label="Token storage note">
            Your sign-in is kept in a file only you can read ({account.token_storage.path}), because no system keychain
            is running.
          </Alert>
        )}
        {error && (
          <Alert color="red" role="alert" title="That did not work" withCloseButton onClose={() => setError(null)}>
            {error}
          </Alert>
        )}
        {note && (
          <Alert color="yellow" title="Note">
            {note}
          </Alert>
        )}
        {status.last_error && (
          <Alert color="orange" title="Drive problem">
            {status.last_error}
          </Alert>
        )}

        <Section title="Drive">
          <Stack gap="sm">
            <Group>
              <Badge color={mount.mounted ? 'green' : 'gray'} aria-label="Drive state">
                {mount.mounted ? 'Mounted' : 'Not mounted'}
              </Badge>
              {mount.mounted && <Text data-testid="mount-location">{mount.location}</Text>}
            </Group>
            {mount.mounted ? (
              <Group>
                <Button onClick={() => void run('open', () => backend().openInFileManager())} loading={busy === 'open'}>
                  Open in file manager
                </Button>
                <Button
                  variant="default"
                  onClick={() => void run('unmount', () => backend().unmount())}
                  loading={busy === 'unmount'}
                >
                  Unmount
                </Button>
              </Group>
            ) : (
              <Group align="end">
                <TextInput
                  label="Location"
                  description="Folder (Linux, macOS) or drive letter (Windows); empty for the default"
                  value={location}
                  onChange={(e) => setLocation(e.currentTarget.value)}
                  style={{ flex: 1 }}
                />
                <Button
                  onClick={() => void run('mount', () => backend().mount({ mountpoint: location || null }))}
                  loading={busy === 'mount'}
                >
                  Mount
                </Button>
              </Group>
            )}
          </Stack>
        </Section>

        <Section title="Storage">
          {quota ? (
            <Stack gap={4}>
              <Progress value={percent(quota.used_bytes, quota.total_bytes)} aria-label="Quota used" />
              <Text size="sm" data-testid="quota">
                {quota.total_bytes != null
                  ? `${humanBytes(quota.used_bytes)} of ${humanBytes(quota.total_bytes)} used`
                  : `${humanBytes(quota.used_bytes)} used (no quota)`}
              </Text>
            </Stack>
          ) : (
            <Text size="sm" c="dimmed">
              Unknown while offline.
            </Text>
          )}
        </Section>

        <Section title="Activity">
          <Stack gap="xs">
            <Text size="sm" data-testid="activity">
              {activity.pending_uploads === 0 && activity.uploads_in_flight === 0
                ? 'Everything is uploaded.'
                : `${activity.pending_uploads} file(s) waiting to upload, ${activity.uploads_in_flight} uploading now.`}
            </Text>
            {activity.errors.length > 0 && (
              <Alert color="red" title="Upload errors" aria-label="Upload errors">
                <List size="sm">
                  {activity.errors.map((e, i) => (
                    <List.Item key={`${i}-${e}`}>{e}</List.Item>
                  ))}
                </List>
                <Button
                  mt="xs"
                  size="xs"
                  onClick={() => void run('retry', () => backend().retryUploads())}
                  loading={busy === 'retry'}
                >
                  Retry
                </Button>
              </Alert>
            )}
            <Problems
              problems={activity.problems}
              busy={busy}
              onResolve={(p, a) =>
                void run(problemBusyKey(p, a), async () => {
                  const reply = await backend().resolveProblem({ path: p.path, action: a });
                  setNote(reply.message);
                })
              }
            />
            {activity.conflicts.length > 0 && (
              <Alert color="yellow" title="Conflicts" aria-label="Conflicts">
                <List size="sm">
                  {activity.conflicts.map((c) => (
                    <List.Item key={c.copy}>
                      {c.path} was changed elsewhere too; your version is saved as {c.copy}
                    </List.Item>
                  ))}
                </List>
              </Alert>
            )}
          </Stack>
        </Section>

        <Section title="Cache">
          {cache ? (
            <Stack gap={4}>
              <Text size="sm">{cache.dir}</Text>
              <Progress value={percent(cache.used_bytes, cache.capacity_bytes)} aria-label="Cache used" />
              <Group justify="space-between">
                <Text size="sm" data-testid="cache">
                  {humanBytes(cache.used_bytes)} of {humanBytes(cache.capacity_bytes)}
                </Text>
                <Button
                  size="xs"
                  variant="default"
                  onClick={() => void run('free', () => backend().freeCache())}
                  loading={busy === 'free'}
                >
                  Free up space
                </Button>
              </Group>
            </Stack>
          ) : (
            <Text size="sm" c="dimmed">
              Mount the drive to see its cache.
            </Text>
          )}
        </Section>

        {pendingWarning != null && (
          <Alert color="orange" title="Uploads pending" role="alertdialog" aria-label="Uploads pending">
            <Text size="sm">
              {pendingWarning} file(s) are not on the server yet. Unmount or retry first so they are uploaded. If you
              sign out anyway they stay in this computer's journal and go up the next time you sign in and mount.
            </Text>
            <Group mt="xs">
              <Button color="red" onClick={() => void signOut(true)} loading={busy === 'sign-out'}>
                Sign out anyway
              </Button>
              <Button variant="default" onClick={() => setPendingWarning(null)}>
                Cancel
              </Button>
            </Group>
          </Alert>
        )}
        <Group justify="flex-end">
          <Button variant="subtle" color="red" onClick={() => void signOut(false)} loading={busy === 'sign-out'}>
            Sign out
          </Button>
        </Group>
      </Stack>
    </Container>
  );
}

function Shell() {
  const status = useStatus();
  if (status.isPending) return <Text p="md">Loading…</Text>;
  if (status.isError) {
    return (
      <Alert color="red" role="alert" m="md" title="The app's back end does not answer">
        {message(status.error)}
      </Alert>
    );
  }
  return status.data.account ? <Main status={status.data} /> : <SignIn />;
}

export function App({ client }: { client?: QueryClient }) {
  const [qc] = useState(() => client ?? new QueryClient({ defaultOptions: { queries: { retry: 1 } } }));
  return (
    <MantineProvider>
      <QueryClientProvider client={qc}>
        <Shell />
      </QueryClientProvider>
    </MantineProvider>
  );
}
