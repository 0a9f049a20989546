import { Alert, Button, Group, Modal, Stack, Table, Text, TextInput, Title } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { ApiError, api } from '../../../src/api/client';
import type { TrashEntry, TrashList } from '../../../src/api/types';
import { formatSize } from '../../../src/format';
import { when } from '../components/Dialogs';
import { describeError } from '../errors';
import { QueryStatus } from '../components/QueryStatus';
import { SimpleTable } from '../components/SimpleTable';

async function listTrash(): Promise<TrashEntry[]> {
  const out: TrashEntry[] = [];
  let cursor: string | null = null;
  do {
    const q: string = cursor ? `?limit=1000&cursor=${encodeURIComponent(cursor)}` : '?limit=1000';
    const page: TrashList = await api<TrashList>('GET', `/api/v1/trash${q}`);
    out.push(...page.entries);
    cursor = page.next_cursor;
  } while (cursor);
  return out;
}

export function TrashPage() {
  const qc = useQueryClient();
  const trash = useQuery({ queryKey: ['trash'], queryFn: listTrash });
  const [message, setMessage] = useState<{ text: string; color: string } | null>(null);
  const [confirmEmpty, setConfirmEmpty] = useState(false);
  // A restore whose original place is taken asks where to put it instead.
  const [elsewhere, setElsewhere] = useState<{ item: TrashEntry; to: string } | null>(null);
  const done = (text: string) => {
    setMessage({ text, color: 'green' });
    void qc.invalidateQueries({ queryKey: ['trash'] });
    void qc.invalidateQueries({ queryKey: ['dir'] });
    void qc.invalidateQueries({ queryKey: ['me'] });
  };
  const restore = useMutation({
    mutationFn: ({ item, to }: { item: TrashEntry; to?: string }) => api('POST', `/api/v1/trash/${item.id}/restore`, to ? { to } : {}),
    onSuccess: (_, { item, to }) => {
      setElsewhere(null);
      done(`${item.name} is back at ${to ?? item.original_path}.`);
    },
    onError: (e, { item, to }) => {
      if (e instanceof ApiError && e.status === 409 && !to) setElsewhere({ item, to: `${item.original_path} (restored)` });
      else setMessage({ text: describeError(e), color: 'red' });
    },
  });
  const purge = useMutation({
    mutationFn: (item: TrashEntry) => api('DELETE', `/api/v1/trash/${item.id}`),
    onSuccess: (_, item) => done(`${item.name} was deleted for good.`),
    onError: (e) => setMessage({ text: describeError(e), color: 'red' }),
  });
  const empty = useMutation({
    mutationFn: () => api('DELETE', '/api/v1/trash'),
    onSuccess: () => {
      setConfirmEmpty(false);
      done('The trash is empty.');
    },
    onError: (e) => setMessage({ text: describeError(e), color: 'red' }),
  });
  const total = (trash.data ?? []).reduce((n, t) => n + t.size + t.versions_bytes, 0);

  return (
    <Stack>
      <Group justify="space-between">
        <Title order={2}>Trash</Title>
        {trash.data && trash.data.length > 0 && (
          <Button color="red" variant="light" onClick={() => setConfirmEmpty(true)}>Empty trash ({formatSize(total)})</Button>
        )}
      </Group>
      {message && (
        <Alert color={message.color} role={message.color === 'red' ? 'alert' : 'status'} withCloseButton onClose={() => setMessage(null)}>
          {message.text}
        </Alert>
      )}
      <QueryStatus query={trash} />
      {trash.data && trash.data.length === 0 && <Text c="dimmed">The trash is empty.</Text>}
      {trash.data && trash.data.length > 0 && (
        <SimpleTable label="Trash" columns={['Name', { label: 'Was at', from: 'sm' }, { label: 'Size', from: 'xs' }, { label: 'Deleted', from: 'sm' }, '']}>
          {trash.data.map((t) => (
            <Table.Tr key={t.id} data-entry={t.name}>
              <Table.Td fw={t.kind === 'dir' ? 700 : undefined}>{t.name}{t.kind === 'dir' ? '/' : ''}</Table.Td>
              <Table.Td visibleFrom="sm">{t.original_path}</Table.Td>
              <Table.Td visibleFrom="xs">{formatSize(t.size + t.versions_bytes)}</Table.Td>
              <Table.Td visibleFrom="sm">{when(t.deleted_at)}</Table.Td>
              <Table.Td>
                <Group gap={4} justify="flex-end" wrap="nowrap">
                  <Button size="xs" variant="light" onClick={() => restore.mutate({ item: t })}>Restore</Button>
                  <Button size="xs" variant="subtle" color="red" onClick={() => purge.mutate(t)}>Delete for good</Button>
                </Group>
              </Table.Td>
            </Table.Tr>
          ))}
        </SimpleTable>
      )}
      <Modal opened={confirmEmpty} onClose={() => setConfirmEmpty(false)} title="Empty the trash?">
        <Stack>
          <Text>Everything in the trash ({formatSize(total)}) is deleted for good. This cannot be undone.</Text>
          <Group justify="flex-end">
            <Button variant="default" onClick={() => setConfirmEmpty(false)}>Cancel</Button>
            <Button color="red" loading={empty.isPending} onClick={() => empty.mutate()}>Empty trash</Button>
          </Group>
        </Stack>
      </Modal>
      <Modal opened={elsewhere !== null} onClose={() => setElsewhere(null)} title="Its place is taken">
        {elsewhere && (
          <Stack>
            <Text>Something else is at {elsewhere.item.original_path} now. Restore it under another path:</Text>
            <TextInput label="Restore to" value={elsewhere.to} onChange={(e) => setElsewhere({ ...elsewhere, to: e.currentTarget.value })} data-autofocus />
            <Group justify="flex-end">
              <Button variant="default" onClick={() => setElsewhere(null)}>Cancel</Button>
              <Button loading={restore.isPending} onClick={() => restore.mutate({ item: elsewhere.item, to: elsewhere.to })}>Restore</Button>
            </Group>
          </Stack>
        )}
      </Modal>
    </Stack>
  );
}
