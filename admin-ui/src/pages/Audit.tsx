import { Alert, Button, Group, Stack, Table, Text, TextInput, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { api } from '../api/client';
import type { AuditList } from '../api/types';
import { auditDetail } from '../format';

export function AuditPage() {
  const [user, setUser] = useState('');
  const [action, setAction] = useState('');
  const [since, setSince] = useState('');
  const [until, setUntil] = useState('');
  const [filters, setFilters] = useState({ user: '', action: '', since: '', until: '' });
  const [cursors, setCursors] = useState<(string | null)[]>([null]);
  const cursor = cursors[cursors.length - 1];
  const q = useQuery({
    queryKey: ['audit', filters, cursor],
    queryFn: () => {
      const p = new URLSearchParams({ limit: '50' });
      if (filters.user) p.set('user', filters.user);
      if (filters.action) p.set('action', filters.action);
      if (filters.since) p.set('since', new Date(filters.since).toISOString());
      if (filters.until) p.set('until', new Date(filters.until).toISOString());
      if (cursor) p.set('cursor', cursor);
      return api<AuditList>('GET', `/api/v1/admin/audit?${p}`);
    },
  });
  const apply = (e: FormEvent) => {
    e.preventDefault();
    setFilters({ user: user.trim(), action: action.trim(), since, until });
    setCursors([null]);
  };
  return (
    <Stack>
      <Title order={2}>Audit log</Title>
      <form onSubmit={apply} aria-label="Audit filters">
        <Group align="flex-end">
          <TextInput label="User" value={user} onChange={(e) => setUser(e.currentTarget.value)} />
          <TextInput label="Action" placeholder="e.g. user_create" value={action} onChange={(e) => setAction(e.currentTarget.value)} />
          <TextInput type="datetime-local" label="From" value={since} onChange={(e) => setSince(e.currentTarget.value)} />
          <TextInput type="datetime-local" label="To" value={until} onChange={(e) => setUntil(e.currentTarget.value)} />
          <Button type="submit">Filter</Button>
        </Group>
      </form>
      {q.isPending && <Text>Loading…</Text>}
      {q.isError && <Alert color="red" role="alert">{q.error.message}</Alert>}
      {q.data && q.data.entries.length === 0 && <Text>No entries.</Text>}
      {q.data && q.data.entries.length > 0 && (
        <Table.ScrollContainer minWidth={640}>
          <Table striped>
            <Table.Thead>
              <Table.Tr><Table.Th>When</Table.Th><Table.Th>Actor</Table.Th><Table.Th>Action</Table.Th><Table.Th>Target</Table.Th><Table.Th>Detail</Table.Th><Table.Th>IP</Table.Th></Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {q.data.entries.map((e) => (
                <Table.Tr key={e.id}>
                  <Table.Td>{new Date(e.at).toLocaleString()}</Table.Td>
                  <Table.Td>{e.actor}</Table.Td>
                  <Table.Td>{e.action}</Table.Td>
                  <Table.Td>{e.target}</Table.Td>
                  <Table.Td>{auditDetail(e.detail)}</Table.Td>
                  <Table.Td>{e.ip}</Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      )}
      <Group>
        <Button variant="default" disabled={cursors.length <= 1} onClick={() => setCursors(cursors.slice(0, -1))}>Previous page</Button>
        <Button variant="default" disabled={!q.data?.next_cursor} onClick={() => q.data?.next_cursor && setCursors([...cursors, q.data.next_cursor])}>Next page</Button>
      </Group>
    </Stack>
  );
}
