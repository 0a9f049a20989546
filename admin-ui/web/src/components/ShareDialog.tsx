import { Alert, Badge, Button, CopyButton, Group, NumberInput, PasswordInput, SegmentedControl, Select, Stack, Table, Tabs, Text, TextInput, Modal } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { api } from '../../../src/api/client';
import type { CreateLinkRequest, CreateShareRequest, Entry, LinkInfo, LinkList, LinkMode, SharePermission, ShareList } from '../../../src/api/types';
import { describeError } from '../errors';
import { when } from './Dialogs';

const PERMISSIONS = [
  { value: 'read', label: 'Can view' },
  { value: 'write', label: 'Can edit' },
];

/** Who has this file or folder, and the links that open it. */
export function ShareDialog({ entry, onClose }: { entry: Entry; onClose: () => void }) {
  return (
    <Modal opened onClose={onClose} title={`Share ${entry.name}`} size="lg">
      <Tabs defaultValue="people">
        <Tabs.List>
          <Tabs.Tab value="people">People</Tabs.Tab>
          <Tabs.Tab value="links">Links</Tabs.Tab>
        </Tabs.List>
        <Tabs.Panel value="people" pt="sm">
          <People entry={entry} />
        </Tabs.Panel>
        <Tabs.Panel value="links" pt="sm">
          <Links entry={entry} />
        </Tabs.Panel>
      </Tabs>
    </Modal>
  );
}

function People({ entry }: { entry: Entry }) {
  const qc = useQueryClient();
  const shares = useQuery({ queryKey: ['shares'], queryFn: () => api<ShareList>('GET', '/api/v1/shares') });
  const mine = shares.data?.shares.filter((s) => s.path === entry.path) ?? [];
  const [username, setUsername] = useState('');
  const [to, setTo] = useState<'user' | 'group'>('user');
  const [permission, setPermission] = useState<SharePermission>('read');
  const [error, setError] = useState<string | null>(null);
  const done = () => {
    setError(null);
    void qc.invalidateQueries({ queryKey: ['shares'] });
  };
  const add = useMutation({
    mutationFn: (body: CreateShareRequest) => api('POST', '/api/v1/shares', body),
    onSuccess: () => {
      setUsername('');
      done();
    },
    onError: (e) => setError(describeError(e)),
  });
  const change = useMutation({
    mutationFn: ({ id, permission }: { id: number; permission: SharePermission }) => api('PATCH', `/api/v1/shares/${id}`, { permission }),
    onSuccess: done,
    onError: (e) => setError(describeError(e)),
  });
  const revoke = useMutation({
    mutationFn: (id: number) => api('DELETE', `/api/v1/shares/${id}`),
    onSuccess: done,
    onError: (e) => setError(describeError(e)),
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    const name = username.trim();
    if (to === 'group') {
      if (!name) return setError('Enter the name of the group to share with.');
      return add.mutate({ path: entry.path, group: name, permission });
    }
    if (!name) return setError('Enter the username of the person to share with.');
    add.mutate({ path: entry.path, username: name, permission });
  };
  return (
    <Stack>
      {error && <Alert color="red" role="alert">{error}</Alert>}
      <form onSubmit={submit} aria-label="Share with a person">
        <SegmentedControl
          aria-label="Share with"
          mb="xs"
          value={to}
          onChange={(v) => setTo(v as 'user' | 'group')}
          data={[
            { value: 'user', label: 'A person' },
            { value: 'group', label: 'A group' },
          ]}
        />
        <Group align="flex-end" wrap="wrap">
          <TextInput label={to === 'group' ? 'Group name' : 'Username'} value={username} onChange={(e) => setUsername(e.currentTarget.value)} style={{ flex: 1, minWidth: 160 }} data-autofocus />
          <Select label="Permission" data={PERMISSIONS} value={permission} onChange={(v) => v && setPermission(v as SharePermission)} allowDeselect={false} w={130} />
          <Button type="submit" loading={add.isPending}>Share</Button>
        </Group>
      </form>
      {mine.length === 0 ? (
        <Text c="dimmed" size="sm">Not shared with anyone yet.</Text>
      ) : (
        <Table aria-label="Shared with">
          <Table.Tbody>
            {mine.map((s) => (
              <Table.Tr key={s.id} data-testid="share-row">
                <Table.Td>{s.username ?? <>Group {s.group} <Badge size="xs" variant="light">group</Badge></>}</Table.Td>
                <Table.Td>
                  <Select
                    aria-label={`Permission of ${s.username ?? `group ${s.group}`}`}
                    data={PERMISSIONS}
                    value={s.permission}
                    allowDeselect={false}
                    onChange={(v) => v && change.mutate({ id: s.id, permission: v as SharePermission })}
                    w={130}
                  />
                </Table.Td>
                <Table.Td>
                  <Button size="xs" variant="subtle" color="red" onClick={() => revoke.mutate(s.id)}>Stop sharing</Button>
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
    </Stack>
  );
}

function Links({ entry }: { entry: Entry }) {
  const qc = useQueryClient();
  const links = useQuery({ queryKey: ['links'], queryFn: () => api<LinkList>('GET', '/api/v1/links') });
  const mine = links.data?.links.filter((l) => l.path === entry.path) ?? [];
  const [mode, setMode] = useState<LinkMode>('view');
  const [password, setPassword] = useState('');
  const [expires, setExpires] = useState('');
  const [limit, setLimit] = useState<number | string>('');
  const [error, setError] = useState<string | null>(null);
  const create = useMutation({
    mutationFn: (body: CreateLinkRequest) => api<LinkInfo>('POST', '/api/v1/links', body),
    onSuccess: () => {
      setError(null);
      setPassword('');
      void qc.invalidateQueries({ queryKey: ['links'] });
    },
    onError: (e) => setError(describeError(e)),
  });
  const revoke = useMutation({
    mutationFn: (id: number) => api('DELETE', `/api/v1/links/${id}`),
    onSuccess: () => void qc.invalidateQueries({ queryKey: ['links'] }),
    onError: (e) => setError(describeError(e)),
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (password && password.length < 8) return setError('A link password needs at least 8 characters.');
    const body: CreateLinkRequest = { path: entry.path, mode };
    if (password) body.password = password;
    if (expires) {
      const t = new Date(`${expires}T23:59:59`);
      if (Number.isNaN(t.getTime()) || t.getTime() < Date.now()) return setError('Choose an expiry date in the future.');
      body.expires_at = t.toISOString();
    }
    if (limit !== '' && mode === 'view') body.max_downloads = Number(limit);
    create.mutate(body);
  };
  return (
    <Stack>
      {error && <Alert color="red" role="alert">{error}</Alert>}
      <form onSubmit={submit} aria-label="Create a link">
        <Stack gap="xs">
          {entry.kind === 'dir' && (
            <SegmentedControl
              value={mode}
              onChange={(v) => setMode(v as LinkMode)}
              data={[
                { value: 'view', label: 'Anyone with the link can download' },
                { value: 'upload', label: 'File drop: others can add files' },
              ]}
            />
          )}
          <Group grow wrap="wrap" align="flex-end">
            <PasswordInput label="Password (optional)" value={password} onChange={(e) => setPassword(e.currentTarget.value)} autoComplete="new-password" />
            <TextInput label="Expires (optional)" type="date" value={expires} onChange={(e) => setExpires(e.currentTarget.value)} />
            {mode === 'view' && <NumberInput label="Download limit (optional)" min={1} value={limit} onChange={setLimit} allowDecimal={false} />}
          </Group>
          <Group justify="flex-end">
            <Button type="submit" loading={create.isPending}>Create link</Button>
          </Group>
        </Stack>
      </form>
      {mine.length === 0 ? (
        <Text c="dimmed" size="sm">No links yet.</Text>
      ) : (
        <Stack gap="xs">
          {mine.map((l) => (
            <Group key={l.id} justify="space-between" wrap="wrap" data-testid="link-row">
              <Stack gap={0} style={{ minWidth: 0, flex: 1 }}>
                <Text size="sm" style={{ wordBreak: 'break-all' }} data-testid="link-url">{l.url}</Text>
                <Group gap={4}>
                  <Badge size="xs" variant="light">{l.mode === 'view' ? 'download' : 'file drop'}</Badge>
                  {l.has_password && <Badge size="xs" variant="light" color="grape">password</Badge>}
                  {l.expires_at && <Badge size="xs" variant="light" color="orange">until {when(l.expires_at)}</Badge>}
                  {l.max_downloads !== null && <Badge size="xs" variant="light" color="teal">{l.downloads} of {l.max_downloads} downloads</Badge>}
                  {!l.active && <Badge size="xs" color="gray">not active</Badge>}
                </Group>
              </Stack>
              <Group gap={4}>
                <CopyButton value={l.url}>
                  {({ copied, copy }) => (
                    <Button size="xs" variant="light" onClick={copy}>{copied ? 'Copied' : 'Copy link'}</Button>
                  )}
                </CopyButton>
                <Button size="xs" variant="subtle" color="red" onClick={() => revoke.mutate(l.id)}>Delete link</Button>
              </Group>
            </Group>
          ))}
        </Stack>
      )}
    </Stack>
  );
}
