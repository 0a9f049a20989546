import { Progress, Stack, Text, Tooltip } from '@mantine/core';
import type { Me } from '../../../src/api/types';
import { formatSize } from '../../../src/format';

const PARTS = [
  ['current', 'Files', 'blue'],
  ['versions', 'Older versions', 'grape'],
  ['trash', 'Trash', 'orange'],
  ['pending', 'Uploads in progress', 'gray'],
] as const;

/** How much of the quota the space uses, and on what (GET /api/v1/me's usage). */
export function QuotaBar({ me }: { me: Me }) {
  // Without a quota the bar shows the parts against the total used.
  const scale = me.quota_bytes ?? Math.max(me.used_bytes, 1);
  const pct = (n: number) => Math.min(100, (n / scale) * 100);
  return (
    <Stack gap={4} aria-label="Storage used">
      <Progress.Root size="lg" aria-hidden>
        {PARTS.map(([key, label, color]) =>
          me.usage[key] > 0 ? (
            <Tooltip key={key} label={`${label}: ${formatSize(me.usage[key])}`}>
              <Progress.Section value={pct(me.usage[key])} color={color} />
            </Tooltip>
          ) : null,
        )}
      </Progress.Root>
      <Text size="sm" data-testid="quota-text">
        {formatSize(me.used_bytes)} of {me.quota_bytes === null ? 'unlimited' : formatSize(me.quota_bytes)} used
      </Text>
      {PARTS.map(([key, label, color]) => (
        <Text key={key} size="xs" c="dimmed">
          <Text span c={color} aria-hidden>■ </Text>
          {label}: {formatSize(me.usage[key])}
        </Text>
      ))}
    </Stack>
  );
}
