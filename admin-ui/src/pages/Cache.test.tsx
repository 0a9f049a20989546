import { MantineProvider } from '@mantine/core';
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { render, screen, waitFor } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { CacheStats, UserList, WarmJob } from '../api/types';
import { CachePage } from './Cache';

const stats: CacheStats = {
  hit_ratio: 0.5, hits_mem: 12000, hits_disk: 3, misses: 4, mem_used_bytes: 3 * 1048576, mem_capacity_bytes: 256 * 1048576,
  disk_enabled: false, disk_used_bytes: 0, disk_capacity_bytes: 0, bytes_fetched_store: 1536,
} as CacheStats;

function users(names: [number, string][]): UserList {
  return {
    users: names.map(([id, username]) => ({ id, username, role: 'user', quota_bytes: null, used_bytes: 0, usage: { current: 0, versions: 0, trash: 0, pending: 0 }, disabled: false, sharing: true, links: true, source: 'local' as const, totp: false, last_login: null, created: '2026-11-23T10:00:00Z' })),
    next_cursor: null,
  };
}

afterEach(() => vi.unstubAllGlobals());

describe('CachePage', () => {
  it('warms the folder of a user chosen by name, and shows sizes in units', async () => {
    const posts: unknown[] = [];
    vi.stubGlobal(
      'fetch',
      vi.fn(async (url: string, init?: RequestInit) => {
        const u = new URL(url, 'http://x');
        if (u.pathname === '/api/v1/admin/cache') return new Response(JSON.stringify(stats));
        if (u.pathname === '/api/v1/admin/users') {
          const q = u.searchParams.get('q') ?? '';
          const all: [number, string][] = [[7, 'alice'], [42, 'bob']];
          return new Response(JSON.stringify(users(all.filter(([, n]) => n.includes(q)))));
        }
        if (u.pathname === '/api/v1/admin/cache/warm' && init?.method === 'POST') {
          posts.push(JSON.parse(String(init.body)));
          const job: WarmJob = { id: 1, state: 'done', files_total: 2, files_done: 2, bytes_total: 2 * 1048576, bytes_done: 2 * 1048576, error: null } as WarmJob;
          return new Response(JSON.stringify(job), { status: 202 });
        }
        if (u.pathname === '/api/v1/admin/cache/warm/1') {
          return new Response(JSON.stringify({ id: 1, state: 'done', files_total: 2, files_done: 2, bytes_total: 2 * 1048576, bytes_done: 2 * 1048576, error: null }));
        }
        return new Response('{}', { status: 404 });
      }),
    );
    render(
      <MantineProvider env="test">
        <QueryClientProvider client={new QueryClient()}>
          <CachePage />
        </QueryClientProvider>
      </MantineProvider>,
    );
    const u = userEvent.setup();
    expect(await screen.findByText('3 MiB of 256 MiB')).toBeInTheDocument();
    expect(screen.getByText('12,000 / 3')).toBeInTheDocument();
    expect(screen.getByText('1.5 KiB')).toBeInTheDocument();

    // Without a user: says what is missing instead of sending.
    await u.click(screen.getByRole('button', { name: 'Warm' }));
    expect(await screen.findByText('Choose whose folder to warm')).toBeInTheDocument();
    expect(posts).toHaveLength(0);

    await u.type(screen.getAllByLabelText('User')[0], 'bo');
    await u.click(await screen.findByRole('option', { name: 'bob' }));
    await u.type(screen.getByLabelText('Folder'), '/photos');
    await u.click(screen.getByRole('button', { name: 'Warm' }));
    await waitFor(() => expect(posts).toEqual([{ user_id: 42, path: '/photos' }]));
    expect(await screen.findByText('Done: 2 of 2 files, 2 MiB of 2 MiB')).toBeInTheDocument();
  });
});
