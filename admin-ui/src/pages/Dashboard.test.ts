import { describe, expect, it } from 'vitest';
import type { StatsHistory } from '../api/types';
import { historyRows } from './Dashboard';

describe('historyRows', () => {
  it('turns samples into chart rows: percentages, MiB, and gaps where nothing was looked up', () => {
    const h: StatsHistory = {
      interval_secs: 10,
      samples: [
        { at: '2026-11-23T10:00:00Z', requests_per_sec: 12.345, server_errors_per_sec: 0, cache_hit_ratio: 0.8766, cache_used_bytes: 3 * 1048576 },
        { at: '2026-11-23T10:00:10Z', requests_per_sec: 0, server_errors_per_sec: 0.1, cache_hit_ratio: null, cache_used_bytes: 0 },
      ],
    };
    const rows = historyRows(h);
    expect(rows).toHaveLength(2);
    expect(rows[0]['requests/s']).toBe(12.35);
    expect(rows[0]['hit ratio %']).toBe(87.7);
    expect(rows[0]['cache MiB']).toBe(3);
    expect(rows[1]['hit ratio %']).toBeNull();
    expect(rows[1]['5xx/s']).toBe(0.1);
    expect(rows[0].time).not.toBe(rows[1].time);
  });
});
