import { Alert, Badge, Button, CloseButton, Group, Modal, Paper, Stack, Text, TextInput, Title } from '@mantine/core';
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { api, errorMessage } from '../api/client';
import type { GroupInfo, GroupList } from '../api/types';
import { UsernamePicker } from './UserPicker';

type Msg = { ok: boolean; text: string } | null;

/** Groups of users: what a share can be given to besides one user. Made, renamed and deleted
 * here; members picked by name. */
export function GroupsPage() {
  const qc = useQueryClient();
  const list = useQuery({ queryKey: ['groups'], queryFn: () => api<GroupList>('GET', '/api/v1/admin/groups') });
  const [name, setName] = useState('');
  const [msg, setMsg] = useState<Msg>(null);
  const refresh = () => void qc.invalidateQueries({ queryKey: ['groups'] });
  const create = async (e: FormEvent) => {
    e.preventDefault();
    if (!name.trim()) return setMsg({ ok: false, text: 'Enter a name for the group.' });
    try {
      const g = await api<GroupInfo>('POST', '/api/v1/admin/groups', { name: name.trim() });
      setMsg({ ok: true, text: `Group ${g.name} created.` });
      setName('');
    } catch (err) {
      setMsg({ ok: false, text: errorMessage(err) });
    }
    refresh();
  };
  const groups = list.data?.groups ?? [];
  return (
    <Stack>
      <Title order={2}>Groups</Title>
      <Text c="dimmed" size="sm">
        A file or folder shared with a group reaches every member. Taking someone out of a group, or deleting it, ends its shares for them at once.
      </Text>
      {msg && <Alert color={msg.ok ? 'green' : 'red'} role={msg.ok ? 'status' : 'alert'}>{msg.text}</Alert>}
      <form onSubmit={create} aria-label="Create a group">
        <Group align="flex-end">
          <TextInput label="New group" placeholder="e.g. sales" value={name} onChange={(e) => setName(e.currentTarget.value)} />
          <Button type="submit">Create group</Button>
        </Group>
      </form>
      {list.isPending && <Text>Loading…</Text>}
      {list.isError && <Alert color="red" role="alert">{list.error.message}</Alert>}
      {list.data && groups.length === 0 && <Text c="dimmed">No groups yet.</Text>}
      {groups.map((g) => (
        <GroupCard key={g.id} group={g} onChanged={refresh} onMessage={setMsg} />
      ))}
    </Stack>
  );
}

function GroupCard({ group, onChanged, onMessage }: { group: GroupInfo; onChanged: () => void; onMessage: (m: Msg) => void }) {
  const [member, setMember] = useState<string | null>(null);
  const [renaming, setRenaming] = useState<string | null>(null);
  const [confirm, setConfirm] = useState(false);
  const act = async (what: () => Promise<unknown>, ok: string) => {
    try {
      await what();
      onMessage({ ok: true, text: ok });
    } catch (err) {
      onMessage({ ok: false, text: errorMessage(err) });
    }
    onChanged();
  };
  const url = `/api/v1/admin/groups/${group.id}`;
  return (
    <Paper withBorder p="md" aria-label={`Group ${group.name}`} component="section">
      <Group justify="space-between">
        <Group gap="xs">
          <Text fw={500}>{group.name}</Text>
          <Badge variant="light">{group.members.length === 1 ? '1 member' : `${group.members.length} members`}</Badge>
        </Group>
        <Group gap="xs">
          <Button size="xs" variant="default" onClick={() => setRenaming(group.name)}>Rename</Button>
          <Button size="xs" variant="default" color="red" onClick={() => setConfirm(true)}>Delete</Button>
        </Group>
      </Group>
      <Group gap="xs" mt="xs" aria-label={`Members of ${group.name}`}>
        {group.members.length === 0 && <Text size="sm" c="dimmed">No members.</Text>}
        {group.members.map((m) => (
          <Badge
            key={m}
            variant="outline"
            tt="none"
            rightSection={
              <CloseButton
                size="xs"
                aria-label={`Remove ${m} from ${group.name}`}
                onClick={() => act(() => api('DELETE', `${url}/members/${encodeURIComponent(m)}`), `${m} removed from ${group.name}.`)}
              />
            }
          >
            {m}
          </Badge>
        ))}
      </Group>
      <Group align="flex-end" mt="xs">
        <UsernamePicker label={`Add a member to ${group.name}`} value={member} onChange={setMember} />
        <Button
          disabled={!member}
          onClick={() => {
            const m = member;
            if (!m) return;
            setMember(null);
            void act(() => api('POST', `${url}/members`, { username: m }), `${m} added to ${group.name}.`);
          }}
        >
          Add
        </Button>
      </Group>
      <Modal opened={renaming !== null} onClose={() => setRenaming(null)} title={`Rename ${group.name}`}>
        <form
          onSubmit={(e) => {
            e.preventDefault();
            const n = (renaming ?? '').trim();
            setRenaming(null);
            void act(() => api('PATCH', url, { name: n }), `${group.name} renamed to ${n}.`);
          }}
        >
          <TextInput label="New name" value={renaming ?? ''} onChange={(e) => setRenaming(e.currentTarget.value)} data-autofocus />
          <Button type="submit" mt="sm">Rename</Button>
        </form>
      </Modal>
      <Modal opened={confirm} onClose={() => setConfirm(false)} title={`Delete ${group.name}?`}>
        <Text size="sm">Everything shared with {group.name} stops being shared with its members. The members' accounts and files stay.</Text>
        <Group mt="sm">
          <Button
            color="red"
            onClick={() => {
              setConfirm(false);
              void act(() => api('DELETE', url), `Group ${group.name} deleted.`);
            }}
          >
            Delete group
          </Button>
          <Button variant="default" onClick={() => setConfirm(false)}>Cancel</Button>
        </Group>
      </Modal>
    </Paper>
  );
}
