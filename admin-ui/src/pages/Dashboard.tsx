import { BarChart, LineChart } from '@mantine/charts';
import { Alert, Badge, Paper, SimpleGrid, Stack, Text, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { api } from '../api/client';
import type { CacheStats, StatsHistory, UsageSummary } from '../api/types';
import { formatSize, sizeUnit } from '../format';

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
  const history = useQuery({
    queryKey: ['history'],
    queryFn: () => api<StatsHistory>('GET', '/api/v1/admin/stats/history'),
    refetchInterval: 10000,
  });
  const u = usage.data;
  return (
    <Stack>
      <Title order={2}>Dashboard</Title>
      {usage.isError && <Alert color="red" role="alert">{usage.error.message}</Alert>}
      <SimpleGrid cols={{ base: 1, xs: 2, md: 4 }}>
        <Tile label="Total storage" value={u ? formatSize(u.total_bytes) : '…'} />
        <Tile label="Files" value={u ? u.files.toLocaleString() : '…'} />
        <Tile label="Active users" value={u ? `${u.active_users} of ${u.users}` : '…'} />
        <Tile label="Cache hit ratio" value={cache.data ? `${(cache.data.hit_ratio * 100).toFixed(1)} %` : '…'} />
      </SimpleGrid>
      <Paper withBorder p="md">
        <Text fw={500}>Store health</Text>
        {health.data ? (
          <Badge color={health.data.ok ? 'green' : 'red'}>{health.data.ok ? 'ready' : `not ready: ${health.data.text}`}</Badge>
        ) : (
          <Text>Checking…</Text>
        )}
      </Paper>
      <History data={history.data} error={history.error?.message} />
      <Paper withBorder p="md">
        <Text fw={500} mb="sm">Storage by user (largest {u?.top_users.length ?? 0})</Text>
        {u && u.top_users.length > 0 ? (
          <StorageByUser users={u.top_users} />        ) : (
          <Text c="dimmed">No data yet.</Text>
        )}
      </Paper>
    </Stack>
  );
}

/** Bars in the unit of the largest (a few KiB would be invisible against GiB bars anyway); the
 * ticks carry the unit. */
function StorageByUser({ users }: { users: UsageSummary['top_users'] }) {
  const { unit, bytes } = sizeUnit(Math.max(...users.map((t) => t.used_bytes)));
  return (
    <BarChart
      h={260}
      data={users.map((t) => ({ user: t.username, [unit]: +(t.used_bytes / bytes).toFixed(2) }))}
      dataKey="user"
      series={[{ name: unit, label: 'stored', color: 'blue.6' }]}
      unit={` ${unit}`}
      xAxisLabel="user"
      aria-label="Storage by user"
    />
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

/** The chart rows of a history: times as local clock labels, ratios as percentages, the cache
 * size in the unit of its largest sample (`cacheUnit`). */
export function historyRows(h: StatsHistory) {
  const { unit, bytes } = sizeUnit(Math.max(0, ...h.samples.map((s) => s.cache_used_bytes)));
  const rows = h.samples.map((s) => ({
    time: new Date(s.at).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' }),
    requests: +s.requests_per_sec.toFixed(2),
    errors: +s.server_errors_per_sec.toFixed(2),
    // No lookups in an interval: a gap in the line, not a made-up 0 %.
    hitRatio: s.cache_hit_ratio === null ? null : +(s.cache_hit_ratio * 100).toFixed(1),
    cache: +(s.cache_used_bytes / bytes).toFixed(1),
  }));
  return { rows, cacheUnit: unit };
}

type Row = ReturnType<typeof historyRows>['rows'][number];

function History({ data, error }: { data?: StatsHistory; error?: string }) {
  if (error) return <Alert color="red" role="alert">{error}</Alert>;
  const { rows, cacheUnit } = data ? historyRows(data) : { rows: [], cacheUnit: 'B' };
  const secs = data ? data.samples.length * data.interval_secs : 0;
  const span = data ? `last ${secs < 120 ? `${secs} s` : `${Math.round(secs / 60)} min`}, every ${data.interval_secs} s` : '';
  return (
    <SimpleGrid cols={{ base: 1, md: 2 }}>
      <HistoryChart
        title={<>Requests {span && <Text span c="dimmed" size="sm">({span})</Text>}</>}
        label="Request rate over time"
        rows={rows}
        yAxisLabel="requests per second"
        series={[
          { name: 'requests', label: 'requests/s', color: 'blue.6' },
          { name: 'errors', label: 'server errors/s', color: 'red.6' },
        ]}
      />
      <HistoryChart
        title="Cache hit ratio and size"
        label="Cache hit ratio and size over time"
        rows={rows}
        yAxisLabel="hit ratio"
        yAxisProps={{ domain: [0, 100], unit: ' %' }}
        right={{ label: 'cache size', unit: ` ${cacheUnit}` }}
        series={[
          { name: 'hitRatio', label: 'hit ratio %', color: 'teal.6' },
          { name: 'cache', label: `cache ${cacheUnit}`, color: 'grape.6', yAxisId: 'right' },
        ]}
      />
    </SimpleGrid>
  );
}

function HistoryChart(props: {
  title: React.ReactNode;
  label: string;
  rows: Row[];
  series: { name: string; label: string; color: string; yAxisId?: string }[];
  yAxisLabel: string;
  yAxisProps?: { domain?: [number, number]; unit?: string };
  right?: { label: string; unit: string };
}) {
  return (
    <Paper withBorder p="md">
      <Text fw={500} mb="sm">{props.title}</Text>
      {props.rows.length < 2 ? (
        <Text c="dimmed">Collecting data…</Text>
      ) : (
        <LineChart
          h={240}
          data={props.rows}
          dataKey="time"
          withDots={false}
          withLegend
          connectNulls={false}
          xAxisLabel="local time"
          yAxisLabel={props.yAxisLabel}
          yAxisProps={props.yAxisProps}
          withRightYAxis={props.right !== undefined}
          rightYAxisLabel={props.right?.label}
          rightYAxisProps={props.right ? { unit: props.right.unit } : undefined}
          aria-label={props.label}
          series={props.series}
        />
      )}
    </Paper>
  );
}
