import { Alert, Anchor, Badge, Button, Group, Modal, Select, Stack, Table, Text, TextInput, Title } from '@mantine/core';
import { useDebouncedValue, useDisclosure } from '@mantine/hooks';
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api } from '../api/client';
import type { CreatedUser, IdentitySource, UserList } from '../api/types';
import { formatSize } from '../format';
import { navigate } from '../router';
import { CreateUserForm } from './CreateUserForm';

const PAGE = 50;

/** The account's source, short for a column (the user's page says it in full). */
export const SOURCE_SHORT: Record<IdentitySource, string> = { local: 'local', ldap: 'LDAP', oidc: 'SSO (OIDC)' };

/** A sign-in time for the table: the date, with the time in a tooltip; `never` for none. */
function lastSignIn(at: string | null) {
  if (!at) return <Text size="sm" c="dimmed">never</Text>;
  const d = new Date(at);
  return <span title={d.toLocaleString()}>{d.toLocaleDateString()}</span>;
}

// The gateway's `?sort=` values (a leading - is descending).
export const SORTS = [
  { value: 'name', label: 'Name (A–Z)' },
  { value: '-name', label: 'Name (Z–A)' },
  { value: '-usage', label: 'Largest usage first' },
  { value: 'usage', label: 'Smallest usage first' },
  { value: '-created', label: 'Newest first' },
  { value: 'created', label: 'Oldest first' },
];

export function UsersPage() {
  const qc = useQueryClient();
  const [search, setSearch] = useState('');
  const [q] = useDebouncedValue(search, 250);
  const [sort, setSort] = useState('name');
  // Cursor paging: the stack holds the cursors of the pages before this one.
  const [cursors, setCursors] = useState<(string | null)[]>([null]);
  const cursor = cursors[cursors.length - 1];
  const [opened, { open, close }] = useDisclosure(false);

  const list = useQuery({
    queryKey: ['users', q, sort, cursor],
    queryFn: () => {
      const p = new URLSearchParams({ limit: String(PAGE), sort });
      if (q) p.set('q', q);
      if (cursor) p.set('cursor', cursor);
      return api<UserList>('GET', `/api/v1/admin/users?${p}`);
    },
  });

  return (
    <Stack>
      <Group justify="space-between">
        <Title order={2}>Users</Title>
        <Button onClick={open}>New user</Button>
      </Group>
      <Group align="flex-end" grow preventGrowOverflow={false}>
        <TextInput
          label="Search users"
          placeholder="name contains…"
          value={search}
          onChange={(e) => {
            setSearch(e.currentTarget.value);
            setCursors([null]);
          }}
        />
        <Select
          label="Sort by"
          data={SORTS}
          value={sort}
          allowDeselect={false}
          onChange={(v) => {
            setSort(v ?? 'name');
            setCursors([null]);
          }}
        />
      </Group>
      {list.isPending && <Text>Loading users…</Text>}
      {list.isError && <Alert color="red" role="alert">{list.error.message}</Alert>}
      {list.data && list.data.users.length === 0 && <Text>No users match.</Text>}
      {list.data && list.data.users.length > 0 && (
        <Table.ScrollContainer minWidth={820}>
          <Table striped highlightOnHover>
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Username</Table.Th>
                <Table.Th>Name</Table.Th>
                <Table.Th>Role</Table.Th>
                <Table.Th>Used</Table.Th>
                <Table.Th>Quota</Table.Th>
                <Table.Th>Status</Table.Th>
                <Table.Th>Source</Table.Th>
                <Table.Th>Two-factor</Table.Th>
                <Table.Th>Last sign-in</Table.Th>
                <Table.Th>Created</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {list.data.users.map((u) => (
                <Table.Tr key={u.id} data-user={u.username}>
                  <Table.Td>
                    <Anchor
                      href={`/admin/users/${u.id}`}
                      onClick={(e) => {
                        e.preventDefault();
                        navigate(`/users/${u.id}`);
                      }}
                    >
                      {u.username}
                    </Anchor>
                  </Table.Td>
                  <Table.Td>
                    {/* From the directory (LDAP); local accounts have neither. */}
                    {u.display_name ?? ''}
                    {u.email && <Text size="xs" c="dimmed">{u.email}</Text>}
                  </Table.Td>
                  <Table.Td>{u.role}</Table.Td>
                  <Table.Td>{formatSize(u.used_bytes)}</Table.Td>
                  <Table.Td>{formatSize(u.quota_bytes)}</Table.Td>
                  <Table.Td>{u.disabled ? <Badge color="gray">disabled</Badge> : <Badge color="green">active</Badge>}</Table.Td>
                  <Table.Td>{SOURCE_SHORT[u.source]}</Table.Td>
                  <Table.Td>{u.totp ? <Badge color="teal" variant="light">on</Badge> : <Text size="sm" c="dimmed">off</Text>}</Table.Td>
                  <Table.Td>{lastSignIn(u.last_login)}</Table.Td>
                  <Table.Td>{new Date(u.created).toLocaleDateString()}</Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      )}
      <Group>
        <Button variant="default" disabled={cursors.length <= 1} onClick={() => setCursors(cursors.slice(0, -1))}>
          Previous page
        </Button>
        <Button
          variant="default"
          disabled={!list.data?.next_cursor}
          onClick={() => list.data?.next_cursor && setCursors([...cursors, list.data.next_cursor])}
        >
          Next page
        </Button>
      </Group>
      <Modal opened={opened} onClose={close} title="New user">
        <CreateUserForm
          onCreate={async (req) => {
            const u = await api<CreatedUser>('POST', '/api/v1/admin/users', req);
            qc.invalidateQueries({ queryKey: ['users'] });
            return u;
          }}
        />
      </Modal>
    </Stack>
  );
}
