import { Alert, Anchor, Badge, Button, Group, Modal, Paper, PasswordInput, Progress, Select, Stack, Table, Text, TextInput, Title } from '@mantine/core';
import { useDisclosure } from '@mantine/hooks';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { api, errorMessage } from '../api/client';
import type { AdminShareList, AuditList, IdentitySource, Role, TokenList, UpdateUserRequest, UserInfo } from '../api/types';
import { auditDetail, formatSize, formatSizeInput, parseSize, passwordError } from '../format';
import { navigate } from '../router';

// Where an account comes from, in words.
const SOURCE_TEXT: Record<IdentitySource, string> = {
  local: 'Local account',
  ldap: 'From the LDAP directory',
  oidc: 'From single sign-on (OpenID Connect)',
};

export function UserPage({ id }: { id: number }) {
  const qc = useQueryClient();
  const user = useQuery({ queryKey: ['user', id], queryFn: () => api<UserInfo>('GET', `/api/v1/admin/users/${id}`) });
  const [msg, setMsg] = useState<{ ok: boolean; text: string } | null>(null);
  const patch = useMutation({
    mutationFn: ({ body }: { body: UpdateUserRequest; done: string }) =>
      api<UserInfo>('PATCH', `/api/v1/admin/users/${id}`, body),
    onMutate: () => setMsg(null),
    onSuccess: (u, { done }) => {
      qc.setQueryData(['user', id], u);
      qc.invalidateQueries({ queryKey: ['users'] });
      qc.invalidateQueries({ queryKey: ['activity', id] });
      qc.invalidateQueries({ queryKey: ['devices', id] });
      setMsg({ ok: true, text: done });
    },
    onError: (e) => setMsg({ ok: false, text: errorMessage(e) }),
  });

  if (user.isPending) return <Text>Loading user…</Text>;
  if (user.isError) return <Alert color="red" role="alert">{user.error.message}</Alert>;
  const u = user.data;
  const pct = u.quota_bytes ? Math.min(100, (u.used_bytes / u.quota_bytes) * 100) : 0;

  return (
    <Stack>
      <Anchor href="/admin/users" onClick={(e) => { e.preventDefault(); navigate('/users'); }}>← Users</Anchor>
      <Group>
        <Title order={2}>{u.username}</Title>
        <Badge>{u.role}</Badge>
        {u.disabled ? <Badge color="gray">disabled</Badge> : <Badge color="green">active</Badge>}
      </Group>
      {(u.display_name || u.email) && (
        <Text data-testid="profile">
          {u.display_name}
          {u.display_name && u.email && ' · '}
          {u.email && <Anchor href={`mailto:${u.email}`}>{u.email}</Anchor>}
        </Text>
      )}
      <Text size="sm" c="dimmed" data-testid="identity">
        {SOURCE_TEXT[u.source]} · {u.totp ? 'two-factor sign-in on' : 'no two-factor sign-in'} ·{' '}
        {u.last_login ? `last signed in ${new Date(u.last_login).toLocaleString()}` : 'never signed in'}
      </Text>
      {msg && <Alert color={msg.ok ? 'green' : 'red'} role={msg.ok ? 'status' : 'alert'} withCloseButton onClose={() => setMsg(null)}>{msg.text}</Alert>}
      <Paper withBorder p="md">
        <Text fw={500}>Usage</Text>
        <Text data-testid="usage">
          {u.quota_bytes === null
            ? `${formatSize(u.used_bytes)} used, no quota`
            : `${formatSize(u.used_bytes)} of ${formatSize(u.quota_bytes)} (${Math.round(pct)} %)`}
        </Text>
        {u.quota_bytes !== null && <Progress value={pct} aria-label="Usage of quota" mt="xs" />}
        <UsageParts usage={u.usage} />
      </Paper>
      <EditForm user={u} onSave={(body) => patch.mutate({ body, done: 'Quota and role saved.' })} busy={patch.isPending} />
      <Paper withBorder p="md">
        <Stack>
          <Text fw={500}>Access</Text>
          <Group>
            <Button color={u.disabled ? 'green' : 'orange'} onClick={() => patch.mutate({ body: { disabled: !u.disabled }, done: u.disabled ? 'User enabled.' : 'User disabled; signed out everywhere.' })}>
              {u.disabled ? 'Enable user' : 'Disable user'}
            </Button>
          </Group>
          <Text size="sm" c="dimmed">Disabling or resetting the password signs the user out of every device.</Text>
          {POLICIES.map((p) => (
            <PolicySwitch key={p.name} {...p} on={u[p.name]} onChange={(body, done) => patch.mutate({ body, done })} />
          ))}
          <ResetPassword onReset={(password) => patch.mutate({ body: { password }, done: 'Password reset; the user was signed out everywhere.' })} />
          {u.totp && <ResetTotp user={u} onDone={(text) => setMsg({ ok: true, text })} onError={(text) => setMsg({ ok: false, text })} />}
        </Stack>
      </Paper>
      <Devices id={id} />
      <Shares username={u.username} />
      <Activity id={id} username={u.username} />
      <DeleteUser user={u} />
    </Stack>
  );
}

/** A permission of the user's (`sharing`, `links`) as the console shows it: what the button
 * says, the state in words beside it, and what to say once it flipped. */
interface Policy {
  name: 'sharing' | 'links';
  turnOn: string;
  turnOff: string;
  onText: string;
  offText: string;
  onDone: string;
  offDone: string;
}

const POLICIES: Policy[] = [
  {
    name: 'sharing',
    turnOn: 'Allow sharing',
    turnOff: 'Turn sharing off',
    onText: 'May share files and folders with other users.',
    offText: 'May not share with other users; shares made before stay until revoked below.',
    onDone: 'Sharing allowed for this user.',
    offDone: 'Sharing turned off for this user.',
  },
  {
    name: 'links',
    turnOn: 'Allow public links',
    turnOff: 'Turn public links off',
    onText: 'May make public links to files and folders.',
    offText: 'May not make public links; the links made before do not open.',
    onDone: 'Public links allowed for this user.',
    offDone: 'Public links turned off for this user; their links no longer open.',
  },
];

/** A button that flips one permission, with its state in words (`data-testid`: its name). */
function PolicySwitch({ name, on, turnOn, turnOff, onText, offText, onDone, offDone, onChange }: Policy & {
  on: boolean;
  onChange: (body: UpdateUserRequest, done: string) => void;
}) {
  return (
    <Group>
      <Button variant="default" onClick={() => onChange({ [name]: !on }, on ? offDone : onDone)}>
        {on ? turnOff : turnOn}
      </Button>
      <Text size="sm" data-testid={name}>{on ? onText : offText}</Text>
    </Group>
  );
}

/** What the usage is made of; every part counts against the quota. */
function UsageParts({ usage }: { usage: UserInfo['usage'] }) {
  const parts: [string, string, number][] = [
    ['current', 'Current files', usage.current],
    ['versions', 'Older versions', usage.versions],
    ['trash', 'Trash', usage.trash],
    ['pending', 'Uploads not yet committed', usage.pending],
  ];
  return (
    <Table mt="xs" aria-label="Usage by kind" withRowBorders={false}>
      <Table.Tbody>
        {parts.map(([key, label, n]) => (
          <Table.Tr key={key}>
            <Table.Td>{label}</Table.Td>
            <Table.Td data-testid={`usage-${key}`} title={`${n} bytes`}>{formatSize(n)}</Table.Td>
          </Table.Tr>
        ))}
      </Table.Tbody>
    </Table>
  );
}

function EditForm({ user, onSave, busy }: { user: UserInfo; onSave: (b: UpdateUserRequest) => void; busy: boolean }) {
  // In the units it was most likely set in ("10 GiB", "500 MB"), exactly: saving it unchanged
  // keeps the quota to the byte.
  const [quota, setQuota] = useState(formatSizeInput(user.quota_bytes));
  const [role, setRole] = useState<Role>(user.role);
  const [err, setErr] = useState<string | null>(null);
  const submit = (e: FormEvent) => {
    e.preventDefault();
    try {
      const q = parseSize(quota);
      setErr(null);
      onSave({ quota_bytes: q, role });
    } catch (x) {
      setErr(errorMessage(x));
    }
  };
  return (
    <Paper withBorder p="md">
      <form onSubmit={submit} aria-label="Quota and role">
        <Stack>
          <Text fw={500}>Quota and role</Text>
          <TextInput label="Quota" description="e.g. 10 GiB or 500 MB; empty for unlimited" value={quota} error={err} onChange={(e) => setQuota(e.currentTarget.value)} />
          <Select label="Role" data={[{ value: 'user', label: 'User' }, { value: 'admin', label: 'Administrator' }]} value={role} allowDeselect={false} onChange={(v) => setRole((v as Role) ?? 'user')} />
          <Group><Button type="submit" loading={busy}>Save</Button></Group>
        </Stack>
      </form>
    </Paper>
  );
}

function ResetPassword({ onReset }: { onReset: (p: string) => void }) {
  const [pw, setPw] = useState('');
  const [err, setErr] = useState<string | null>(null);
  const submit = (e: FormEvent) => {
    e.preventDefault();
    const problem = pw === '' ? 'Enter the new password' : passwordError(pw);
    setErr(problem);
    if (problem) return;
    onReset(pw);
    setPw('');
  };
  return (
    <form onSubmit={submit} aria-label="Reset password">
      <Group align="flex-end">
        <PasswordInput label="New password" value={pw} error={err} onChange={(e) => setPw(e.currentTarget.value)} />
        <Button type="submit" variant="default">Reset password</Button>
      </Group>
    </form>
  );
}

/** The shares the user gave or got, each revocable. */
function Shares({ username }: { username: string }) {
  const qc = useQueryClient();
  const key = ['shares', username];
  const q = useQuery({
    queryKey: key,
    queryFn: () => api<AdminShareList>('GET', `/api/v1/admin/shares?user=${encodeURIComponent(username)}`),
  });
  const [msg, setMsg] = useState<{ ok: boolean; text: string } | null>(null);
  const revoke = async (id: number, what: string) => {
    try {
      await api('DELETE', `/api/v1/admin/shares/${id}`);
      setMsg({ ok: true, text: `Share revoked: ${what}.` });
    } catch (e) {
      setMsg({ ok: false, text: errorMessage(e) });
    }
    qc.invalidateQueries({ queryKey: key });
  };
  const shares = q.data?.shares ?? [];
  return (
    <Paper withBorder p="md">
      <Text fw={500}>Shares</Text>
      {msg && <Alert color={msg.ok ? 'green' : 'red'} role={msg.ok ? 'status' : 'alert'} mt="xs">{msg.text}</Alert>}
      {q.isPending && <Text>Loading…</Text>}
      {q.isError && <Alert color="red" role="alert">{q.error.message}</Alert>}
      {q.data && shares.length === 0 && <Text c="dimmed">Shares nothing and has nothing shared with them.</Text>}
      {shares.length > 0 && (
        <Table.ScrollContainer minWidth={520}>
          <Table aria-label="Shares">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Owner</Table.Th>
                <Table.Th>What</Table.Th>
                <Table.Th>Shared with</Table.Th>
                <Table.Th>Permission</Table.Th>
                <Table.Th>Since</Table.Th>
                <Table.Th />
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {shares.map((s) => {
                const withWhom = s.username ?? `group ${s.group}`;
                const what = `${s.path ?? '(in the trash)'} of ${s.owner} with ${withWhom}`;
                return (
                  <Table.Tr key={s.id}>
                    <Table.Td>{s.owner}</Table.Td>
                    <Table.Td>{s.path ?? <Text span c="dimmed">in the trash</Text>}</Table.Td>
                    <Table.Td>{withWhom}</Table.Td>
                    <Table.Td>{s.permission === 'write' ? 'can edit' : 'can view'}</Table.Td>
                    <Table.Td>{new Date(s.created).toLocaleString()}</Table.Td>
                    <Table.Td>
                      <Button size="xs" variant="default" aria-label={`Revoke ${what}`} onClick={() => revoke(s.id, what)}>
                        Revoke
                      </Button>
                    </Table.Td>
                  </Table.Tr>
                );
              })}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      )}
    </Paper>
  );
}

function Devices({ id }: { id: number }) {
  const qc = useQueryClient();
  const path = `/api/v1/admin/users/${id}/devices`;
  const q = useQuery({ queryKey: ['devices', id], queryFn: () => api<TokenList>('GET', path) });
  const [msg, setMsg] = useState<{ ok: boolean; text: string } | null>(null);
  const [confirmAll, { open: openAll, close: closeAll }] = useDisclosure(false);
  const revoke = async (url: string, done: string) => {
    closeAll();
    try {
      await api('DELETE', url);
      setMsg({ ok: true, text: done });
    } catch (e) {
      setMsg({ ok: false, text: errorMessage(e) });
    }
    qc.invalidateQueries({ queryKey: ['devices', id] });
    qc.invalidateQueries({ queryKey: ['activity', id] });
  };
  const tokens = q.data?.tokens ?? [];
  return (
    <Paper withBorder p="md">
      <Group justify="space-between">
        <Text fw={500}>Devices</Text>
        {tokens.length > 0 && (
          <Button size="xs" color="orange" variant="light" onClick={openAll}>Sign out everywhere…</Button>
        )}
      </Group>
      {msg && <Alert color={msg.ok ? 'green' : 'red'} role={msg.ok ? 'status' : 'alert'} mt="xs">{msg.text}</Alert>}
      {q.isPending && <Text>Loading…</Text>}
      {q.isError && <Alert color="red" role="alert">{q.error.message}</Alert>}
      {q.data && tokens.length === 0 && <Text c="dimmed">Not signed in on any device.</Text>}
      {tokens.length > 0 && (
        <Table.ScrollContainer minWidth={520}>
          <Table aria-label="Devices">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Device</Table.Th>
                <Table.Th>Last seen</Table.Th>
                <Table.Th>From</Table.Th>
                <Table.Th>Signed in</Table.Th>
                <Table.Th />
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {tokens.map((t) => (
                <Table.Tr key={t.id}>
                  <Table.Td>{t.device}{t.current ? ' (this session)' : ''}</Table.Td>
                  <Table.Td>{t.last_used ? new Date(t.last_used).toLocaleString() : 'never'}</Table.Td>
                  <Table.Td>{t.last_ip ?? '—'}</Table.Td>
                  <Table.Td>{new Date(t.created).toLocaleString()}</Table.Td>
                  <Table.Td>
                    <Button
                      size="xs"
                      variant="default"
                      aria-label={`Revoke ${t.device}`}
                      onClick={() => revoke(`${path}/${t.id}`, `${t.device} signed out.`)}
                    >
                      Revoke
                    </Button>
                  </Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      )}
      <Modal opened={confirmAll} onClose={closeAll} title="Sign out of every device?">
        <Stack>
          <Text>Every device of this user must sign in again. Their account and files stay as they are.</Text>
          <Group>
            <Button variant="default" onClick={closeAll}>Cancel</Button>
            <Button color="orange" onClick={() => revoke(path, 'Signed out of every device.')}>Sign out everywhere</Button>
          </Group>
        </Stack>
      </Modal>
    </Paper>
  );
}

function Activity({ id, username }: { id: number; username: string }) {
  const q = useQuery({
    queryKey: ['activity', id],
    // What they did and what was done to them, newest first.
    queryFn: async () => {
      const n = encodeURIComponent(username);
      const [by, to] = await Promise.all([
        api<AuditList>('GET', `/api/v1/admin/audit?user=${n}&limit=20`),
        api<AuditList>('GET', `/api/v1/admin/audit?target=${n}&limit=20`),
      ]);
      const seen = new Set<number>();
      const entries = [...by.entries, ...to.entries]
        .filter((e) => !seen.has(e.id) && seen.add(e.id))
        .sort((a, b) => b.id - a.id)
        .slice(0, 20);
      return { entries, next_cursor: null } as AuditList;
    },
  });
  return (
    <Paper withBorder p="md">
      <Text fw={500}>Recent activity</Text>
      {q.isPending && <Text>Loading…</Text>}
      {q.isError && <Alert color="red">{q.error.message}</Alert>}
      {q.data && q.data.entries.length === 0 && <Text c="dimmed">No activity recorded.</Text>}
      {q.data && q.data.entries.length > 0 && (
        <Table.ScrollContainer minWidth={480}>
          <Table>
            <Table.Tbody>
              {q.data.entries.map((e) => (
                <Table.Tr key={e.id}>
                  <Table.Td>{new Date(e.at).toLocaleString()}</Table.Td>
                  <Table.Td>{e.actor}</Table.Td>
                  <Table.Td>{e.action}</Table.Td>
                  <Table.Td>{auditDetail(e.detail)}</Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      )}
    </Paper>
  );
}

/** Turns the user's two-factor sign-in off (a lost phone): they sign in with the password
 * alone again and can set it up anew (unless the gateway requires it: then at the next sign-in). */
function ResetTotp({ user, onDone, onError }: { user: UserInfo; onDone: (t: string) => void; onError: (t: string) => void }) {
  const qc = useQueryClient();
  const [opened, { open, close }] = useDisclosure(false);
  const [busy, setBusy] = useState(false);
  const reset = async () => {
    setBusy(true);
    try {
      await api('DELETE', `/api/v1/admin/users/${user.id}/totp`);
      qc.invalidateQueries({ queryKey: ['user', user.id] });
      qc.invalidateQueries({ queryKey: ['users'] });
      qc.invalidateQueries({ queryKey: ['activity', user.id] });
      onDone('Two-factor sign-in reset: the user signs in with the password alone until they set it up again.');
    } catch (e) {
      onError(errorMessage(e));
    } finally {
      setBusy(false);
      close();
    }
  };
  return (
    <>
      <Group>
        <Button variant="default" onClick={open}>Reset two-factor…</Button>
        <Text size="sm" c="dimmed">For a lost phone: turns two-factor sign-in off and deletes the user's recovery codes.</Text>
      </Group>
      <Modal opened={opened} onClose={close} title={`Reset two-factor sign-in of ${user.username}?`}>
        <Stack>
          <Text size="sm">Only do this once you are sure it is really {user.username} asking: afterwards the password alone signs in.</Text>
          <Button color="orange" loading={busy} onClick={reset}>Reset two-factor</Button>
        </Stack>
      </Modal>
    </>
  );
}

function DeleteUser({ user }: { user: UserInfo }) {
  const qc = useQueryClient();
  const [opened, { open, close }] = useDisclosure(false);
  const [typed, setTyped] = useState('');
  const [err, setErr] = useState<string | null>(null);
  const del = async () => {
    try {
      await api('DELETE', `/api/v1/admin/users/${user.id}`);
      qc.invalidateQueries({ queryKey: ['users'] });
      close();
      navigate('/users');
    } catch (e) {
      setErr(errorMessage(e));
    }
  };
  return (
    <Paper withBorder p="md">
      <Text fw={500}>Delete</Text>
      <Text size="sm">Deletes the user, their devices and all their files.</Text>
      <Button color="red" mt="xs" onClick={open}>Delete user…</Button>
      <Modal opened={opened} onClose={close} title={`Delete ${user.username}?`}>
        <Stack>
          {err && <Alert color="red" role="alert">{err}</Alert>}
          <TextInput label={`Type ${user.username} to confirm`} value={typed} onChange={(e) => setTyped(e.currentTarget.value)} />
          <Button color="red" disabled={typed !== user.username} onClick={del}>Delete permanently</Button>
        </Stack>
      </Modal>
    </Paper>
  );
}
