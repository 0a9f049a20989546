import { BarChart } from '@mantine/charts';
import { Alert, Badge, Paper, SimpleGrid, Stack, Text, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { api } from '../api/client';
import type { CacheStats, UsageSummary } from '../api/types';
import { formatSize } from '../format';

async function readyz(): Promise<{ ok: boolean; text: string }> {
  try {
    const r = await fetch('/readyz');
    return { ok: r.ok, text: (await r.text()).slice(0, 200) };
  } catch {
    return { ok: false, text: 'gateway unreachable' };
  }
}

export function Dashboard() {
  const usage = useQuery({ queryKey: ['usage'], queryFn: () => api<UsageSummary>('GET', '/api/v1/admin/usage'), refetchInterval: 10000 });
  const cache = useQuery({ queryKey: ['cache'], queryFn: () => api<CacheStats>('GET', '/api/v1/admin/cache'), refetchInterval: 10000 });
  const health = useQuery({ queryKey: ['readyz'], queryFn: readyz, refetchInterval: 10000 });
  const u = usage.data;
  return (
    <Stack>
      <Title order={2}>Dashboard</Title>
      {usage.isError && <Alert color="red" role="alert">{usage.error.message}</Alert>}
      <SimpleGrid cols={{ base: 1, xs: 2, md: 4 }}>
        <Tile label="Total storage" value={u ? formatSize(u.total_bytes) : '…'} />
        <Tile label="Files" value={u ? String(u.files) : '…'} />
        <Tile label="Active users" value={u ? `${u.active_users} of ${u.users}` : '…'} />
        <Tile label="Cache hit ratio" value={cache.data ? `${(Number(cache.data.hit_ratio) * 100).toFixed(1)} %` : '…'} />
      </SimpleGrid>
      <Paper withBorder p="md">
        <Text fw={500}>Store health</Text>
        {health.data ? (
          <Badge color={health.data.ok ? 'green' : 'red'}>{health.data.ok ? 'ready' : `not ready: ${health.data.text}`}</Badge>
        ) : (
          <Text>Checking…</Text>
        )}
      </Paper>
      <Paper withBorder p="md">
        <Text fw={500} mb="sm">Storage by user (largest {u?.top_users.length ?? 0})</Text>
        {u && u.top_users.length > 0 ? (
          <BarChart
            h={260}
            data={u.top_users.map((t) => ({ user: t.username, MiB: +(t.used_bytes / 1048576).toFixed(2) }))}
            dataKey="user"
            series={[{ name: 'MiB', color: 'blue.6' }]}
          />
        ) : (
          <Text c="dimmed">No data yet.</Text>
        )}
      </Paper>
    </Stack>
  );
}

function Tile({ label, value }: { label: string; value: string }) {
  return (
    <Paper withBorder p="md">
      <Text size="sm" c="dimmed">{label}</Text>
      <Text fw={700} size="xl">{value}</Text>
    </Paper>
  );
}
