import { Alert, Button, Code, Group, Modal, PasswordInput, Stack, Table, Text, TextInput, Title, CopyButton } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { api } from '../../../src/api/client';
import type { CreatedS3Key, LoginResponse, Me, S3KeyList, TokenList } from '../../../src/api/types';
import { when } from '../components/Dialogs';
import { describeError } from '../errors';
import { QueryStatus } from '../components/QueryStatus';
import { SimpleTable } from '../components/SimpleTable';

/** A secret shown once, with a copy button. */
function Secret({ label, value }: { label: string; value: string }) {
  return (
    <Stack gap={4}>
      <Text size="sm" fw={600}>{label}</Text>
      <Group wrap="nowrap" gap="xs">
        <Code style={{ wordBreak: 'break-all', flex: 1 }} data-testid="secret">{value}</Code>
        <CopyButton value={value}>{({ copied, copy }) => <Button size="xs" variant="light" onClick={copy}>{copied ? 'Copied' : 'Copy'}</Button>}</CopyButton>
      </Group>
    </Stack>
  );
}

export function SettingsPage() {
  return (
    <Stack gap="xl">
      <Devices />
      <S3Keys />
    </Stack>
  );
}

function Devices() {
  const qc = useQueryClient();
  const me = useQuery({ queryKey: ['me'], queryFn: () => api<Me>('GET', '/api/v1/me') });
  const tokens = useQuery({ queryKey: ['tokens'], queryFn: () => api<TokenList>('GET', '/api/v1/auth/tokens') });
  const [error, setError] = useState<string | null>(null);
  const [creating, setCreating] = useState(false);
  const revoke = useMutation({
    mutationFn: (id: number) => api('DELETE', `/api/v1/auth/tokens/${id}`),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ['tokens'] }),
    onError: (e) => setError(describeError(e)),
  });
  return (
    <Stack>
      <Group justify="space-between">
        <Title order={2}>Devices and app passwords</Title>
        <Button onClick={() => setCreating(true)}>New app password</Button>
      </Group>
      <Text size="sm" c="dimmed">
        Every place you are signed in, and the app passwords you made for WebDAV clients, the drive or scripts. Revoke one you do not recognise.
      </Text>
      {error && <Alert color="red" role="alert">{error}</Alert>}
      <QueryStatus query={tokens} />
      {tokens.data && (
        <SimpleTable label="Devices" columns={['Device', { label: 'Signed in', from: 'sm' }, { label: 'Last used', from: 'xs' }, { label: 'From', from: 'sm' }, '']}>
          {tokens.data.tokens.map((t) => (
            <Table.Tr key={t.id} data-testid="device-row">
              <Table.Td>{t.device}{t.current ? ' (this browser)' : ''}</Table.Td>
              <Table.Td visibleFrom="sm">{when(t.created)}</Table.Td>
              <Table.Td visibleFrom="xs">{t.last_used ? when(t.last_used) : 'never'}</Table.Td>
              <Table.Td visibleFrom="sm">{t.last_ip ?? ''}</Table.Td>
              <Table.Td>
                {!t.current && <Button size="xs" variant="subtle" color="red" onClick={() => revoke.mutate(t.id)}>Revoke</Button>}
              </Table.Td>
            </Table.Tr>
          ))}
        </SimpleTable>
      )}
      {creating && me.data && <NewAppPassword username={me.data.username} onClose={() => { setCreating(false); void qc.invalidateQueries({ queryKey: ['tokens'] }); }} />}
    </Stack>
  );
}

/** An app password is a token of its own: a sign-in under a device name, with the account's
 * password asked again (the API makes tokens only by signing in). */
function NewAppPassword({ username, onClose }: { username: string; onClose: () => void }) {
  const [device, setDevice] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [token, setToken] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    if (!device.trim()) return setError('Name the device or program, e.g. "laptop WebDAV".');
    setBusy(true);
    try {
      const r = await api<LoginResponse>('POST', '/api/v1/auth/login', { username, password, device: device.trim() });
      setToken(r.token);
      setError(null);
    } catch (err) {
      setError(describeError(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <Modal opened onClose={onClose} title="New app password">
      {token ? (
        <Stack>
          <Secret label="App password (shown once)" value={token} />
          <Text size="sm">Use it with your username <b>{username}</b> in the program instead of your password.</Text>
          <Button onClick={onClose}>Done</Button>
        </Stack>
      ) : (
        <form onSubmit={submit}>
          <Stack>
            {error && <Alert color="red" role="alert">{error}</Alert>}
            <TextInput label="Device or program" value={device} onChange={(e) => setDevice(e.currentTarget.value)} data-autofocus />
            <PasswordInput label="Your password" autoComplete="current-password" value={password} onChange={(e) => setPassword(e.currentTarget.value)} />
            <Group justify="flex-end">
              <Button variant="default" onClick={onClose}>Cancel</Button>
              <Button type="submit" loading={busy}>Create</Button>
            </Group>
          </Stack>
        </form>
      )}
    </Modal>
  );
}

function S3Keys() {
  const qc = useQueryClient();
  const keys = useQuery({ queryKey: ['s3keys'], queryFn: () => api<S3KeyList>('GET', '/api/v1/keys') });
  const [name, setName] = useState('');
  const [created, setCreated] = useState<CreatedS3Key | null>(null);
  const [error, setError] = useState<string | null>(null);
  const create = useMutation({
    mutationFn: () => api<CreatedS3Key>('POST', '/api/v1/keys', name.trim() ? { name: name.trim() } : {}),
    onSuccess: (k) => {
      setCreated(k);
      setName('');
      setError(null);
      void qc.invalidateQueries({ queryKey: ['s3keys'] });
    },
    onError: (e) => setError(describeError(e)),
  });
  const revoke = useMutation({
    mutationFn: (id: number) => api('DELETE', `/api/v1/keys/${id}`),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ['s3keys'] }),
    onError: (e) => setError(describeError(e)),
  });
  return (
    <Stack>
      <Title order={2}>S3 keys</Title>
      <Text size="sm" c="dimmed">Keys for S3 tools (aws-cli, rclone, backup programs) to reach your files through the S3 door.</Text>
      {error && <Alert color="red" role="alert">{error}</Alert>}
      <form
        onSubmit={(e) => {
          e.preventDefault();
          create.mutate();
        }}
      >
        <Group align="flex-end">
          <TextInput label="Label (optional)" placeholder="S3 key" value={name} onChange={(e) => setName(e.currentTarget.value)} />
          <Button type="submit" loading={create.isPending}>Create key</Button>
        </Group>
      </form>
      <QueryStatus query={keys} />
      {keys.data && keys.data.keys.length === 0 && <Text c="dimmed" size="sm">No keys yet.</Text>}
      {keys.data && keys.data.keys.length > 0 && (
        <SimpleTable label="S3 keys" columns={['Label', 'Access key', { label: 'Last used', from: 'sm' }, '']}>
          {keys.data.keys.map((k) => (
            <Table.Tr key={k.id}>
              <Table.Td>{k.name}</Table.Td>
              <Table.Td><Code>{k.access_key_id}</Code></Table.Td>
              <Table.Td visibleFrom="sm">{k.last_used ? when(k.last_used) : 'never'}</Table.Td>
              <Table.Td><Button size="xs" variant="subtle" color="red" onClick={() => revoke.mutate(k.id)}>Revoke</Button></Table.Td>
            </Table.Tr>
          ))}
        </SimpleTable>
      )}
      <Modal opened={created !== null} onClose={() => setCreated(null)} title="New S3 key">
        {created && (
          <Stack>
            <Secret label="Access key ID" value={created.access_key_id} />
            <Secret label="Secret access key (shown once)" value={created.secret_access_key} />
            <Text size="sm">Store the secret now: it cannot be shown again. Lost it? Revoke the key and make a new one.</Text>
            <Button onClick={() => setCreated(null)}>Done</Button>
          </Stack>
        )}
      </Modal>
    </Stack>
  );
}
