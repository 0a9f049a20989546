import { Alert, Button, Group, Modal, Paper, Progress, SimpleGrid, Stack, Text, TextInput, Title } from '@mantine/core';
import { useDisclosure } from '@mantine/hooks';
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { api, errorMessage } from '../api/client';
import type { CacheStats, WarmJob, WarmRequest } from '../api/types';
import { formatSize } from '../format';
import { UserPicker } from './UserPicker';

export function CachePage() {
  const qc = useQueryClient();
  const stats = useQuery({ queryKey: ['cache'], queryFn: () => api<CacheStats>('GET', '/api/v1/admin/cache'), refetchInterval: 5000 });
  const [opened, { open, close }] = useDisclosure(false);
  const [msg, setMsg] = useState<{ ok: boolean; text: string } | null>(null);
  const purge = async () => {
    close();
    try {
      await api('DELETE', '/api/v1/admin/cache');
      setMsg({ ok: true, text: 'Cache purged.' });
      qc.invalidateQueries({ queryKey: ['cache'] });
    } catch (e) {
      setMsg({ ok: false, text: errorMessage(e) });
    }
  };
  const s = stats.data;
  return (
    <Stack>
      <Title order={2}>Cache</Title>
      {msg && <Alert color={msg.ok ? 'green' : 'red'} role={msg.ok ? 'status' : 'alert'}>{msg.text}</Alert>}
      {stats.isPending && <Text>Loading…</Text>}
      {stats.isError && <Alert color="red" role="alert">{stats.error.message}</Alert>}
      {s && (
        <SimpleGrid cols={{ base: 1, sm: 3 }}>
          <Stat label="Hit ratio" value={`${(s.hit_ratio * 100).toFixed(1)} %`} />
          <Stat label="Memory" value={`${formatSize(s.mem_used_bytes)} of ${formatSize(s.mem_capacity_bytes)}`} />
          <Stat label="Disk" value={s.disk_enabled ? `${formatSize(s.disk_used_bytes)} of ${formatSize(s.disk_capacity_bytes)}` : 'off'} />
          <Stat label="Hits (memory / disk)" value={`${s.hits_mem.toLocaleString()} / ${s.hits_disk.toLocaleString()}`} />
          <Stat label="Misses" value={s.misses.toLocaleString()} />
          <Stat label="Served from store" value={formatSize(s.bytes_fetched_store)} />
        </SimpleGrid>
      )}
      <Group><Button color="red" onClick={open}>Purge cache…</Button></Group>
      <Modal opened={opened} onClose={close} title="Purge the cache?">
        <Stack>
          <Text>Both tiers are emptied; reads go to the object store until the cache warms up again.</Text>
          <Group><Button variant="default" onClick={close}>Cancel</Button><Button color="red" onClick={purge}>Purge</Button></Group>
        </Stack>
      </Modal>
      <Warm />
    </Stack>
  );
}

function Stat({ label, value }: { label: string; value: string }) {
  return (
    <Paper withBorder p="md">
      <Text size="sm" c="dimmed">{label}</Text>
      <Text fw={600} size="lg">{value}</Text>
    </Paper>
  );
}

const WARM_STATES: Record<WarmJob['state'], string> = {
  listing: 'Listing the folder',
  warming: 'Warming',
  done: 'Done',
  failed: 'Failed',
};

function Warm() {
  const [userId, setUserId] = useState<number | null>(null);
  const [path, setPath] = useState('');
  const [jobId, setJobId] = useState<number | null>(null);
  const [err, setErr] = useState<string | null>(null);
  const job = useQuery({
    queryKey: ['warm', jobId],
    enabled: jobId !== null,
    queryFn: () => api<WarmJob>('GET', `/api/v1/admin/cache/warm/${jobId}`),
    refetchInterval: (q) => (q.state.data && ['done', 'failed'].includes(q.state.data.state) ? false : 1000),
  });
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    if (userId === null) {
      setErr('Choose whose folder to warm');
      return;
    }
    setErr(null);
    try {
      const body: WarmRequest = { user_id: userId, path: path || null };
      const j = await api<WarmJob>('POST', '/api/v1/admin/cache/warm', body);
      setJobId(j.id);
    } catch (x) {
      setErr(errorMessage(x));
    }
  };
  const j = job.data;
  return (
    <Paper withBorder p="md">
      <form onSubmit={submit} aria-label="Warm a folder">
        <Stack>
          <Text fw={500}>Warm a user's folder</Text>
          {err && <Alert color="red" role="alert">{err}</Alert>}
          <Group align="flex-end">
            <UserPicker label="User" value={userId} onChange={setUserId} />
            <TextInput label="Folder" placeholder="/ (whole space)" value={path} onChange={(e) => setPath(e.currentTarget.value)} />
            <Button type="submit">Warm</Button>
          </Group>
          {j && (
            <>
              <Text role="status">
                {WARM_STATES[j.state]}: {j.files_done} of {j.files_total} files, {formatSize(j.bytes_done)} of {formatSize(j.bytes_total)}
                {j.error ? ` — ${j.error}` : ''}
              </Text>
              <Progress value={j.bytes_total ? (j.bytes_done / j.bytes_total) * 100 : j.state === 'done' ? 100 : 0} aria-label="Warm progress" />
            </>
          )}
        </Stack>
      </form>
    </Paper>
  );
}
