import { describe, expect, it } from 'vitest';
import type { StatsHistory } from '../api/types';
import { historyRows } from './Dashboard';

describe('historyRows', () => {
  it('turns samples into chart rows: percentages, the cache in one unit, and gaps where nothing was looked up', () => {
    const h: StatsHistory = {
      interval_secs: 10,
      samples: [
        { at: '2026-11-23T10:00:00Z', requests_per_sec: 12.345, server_errors_per_sec: 0, cache_hit_ratio: 0.8766, cache_used_bytes: 3 * 1048576 },
        { at: '2026-11-23T10:00:10Z', requests_per_sec: 0, server_errors_per_sec: 0.1, cache_hit_ratio: null, cache_used_bytes: 0 },
      ],
    };
    const { rows, cacheUnit } = historyRows(h);
    expect(rows).toHaveLength(2);
    expect(rows[0].requests).toBe(12.35);
    expect(rows[0].hitRatio).toBe(87.7);
    expect(cacheUnit).toBe('MiB');
    expect(rows[0].cache).toBe(3);
    expect(rows[1].cache).toBe(0);
    expect(rows[1].hitRatio).toBeNull();
    expect(rows[1].errors).toBe(0.1);
    expect(rows[0].time).not.toBe(rows[1].time);
  });

  it('draws the cache in the unit of its largest sample', () => {
    const at = '2026-11-23T10:00:00Z';
    const sample = (bytes: number) => ({ at, requests_per_sec: 0, server_errors_per_sec: 0, cache_hit_ratio: null, cache_used_bytes: bytes });
    const big = historyRows({ interval_secs: 10, samples: [sample(512 * 1048576), sample(3 * 1024 ** 3)] });
    expect(big.cacheUnit).toBe('GiB');
    expect(big.rows.map((r) => r.cache)).toEqual([0.5, 3]);
    expect(historyRows({ interval_secs: 10, samples: [] }).cacheUnit).toBe('B');
  });
});
