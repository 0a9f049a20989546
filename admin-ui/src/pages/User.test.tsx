import { MantineProvider } from '@mantine/core';
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { render, screen, waitFor } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { AuditList, UserInfo } from '../api/types';
import { UserPage } from './User';

const alice: UserInfo = {
  id: 7, username: 'alice', role: 'user', quota_bytes: 500e6, used_bytes: 300000,
  usage: { current: 300000, versions: 0, trash: 0, pending: 0 }, disabled: false, sharing: true, links: true, source: 'local' as const, totp: false, last_login: null, created: '2026-11-23T10:00:00Z',
};
const activity: AuditList = {
  entries: [{ id: 1, at: '2026-11-23T10:00:00Z', actor: 'admin', action: 'user_update', target: 'alice', detail: 'quota Some(10485760)', ip: null }],
  next_cursor: null,
};

afterEach(() => vi.unstubAllGlobals());

describe('UserPage', () => {
  it('shows and takes the quota in units, keeps it to the byte, and shows audit details in words', async () => {
    const patches: unknown[] = [];
    vi.stubGlobal(
      'fetch',
      vi.fn(async (url: string, init?: RequestInit) => {
        const path = new URL(url, 'http://x').pathname;
        if (path === '/api/v1/admin/users/7' && init?.method === 'PATCH') {
          const body = JSON.parse(String(init.body));
          patches.push(body);
          return new Response(JSON.stringify({ ...alice, quota_bytes: body.quota_bytes }));
        }
        if (path === '/api/v1/admin/users/7') return new Response(JSON.stringify(alice));
        if (path === '/api/v1/admin/users/7/devices') return new Response(JSON.stringify({ tokens: [] }));
        if (path === '/api/v1/admin/audit') return new Response(JSON.stringify(activity));
        return new Response('{}', { status: 404 });
      }),
    );
    render(
      <MantineProvider env="test">
        <QueryClientProvider client={new QueryClient()}>
          <UserPage id={7} />
        </QueryClientProvider>
      </MantineProvider>,
    );
    const u = userEvent.setup();
    expect(await screen.findByTestId('usage')).toHaveTextContent('293 KiB of 476.8 MiB (0 %)');
    expect(screen.queryByText(/bytes/)).toBeNull();
    expect(screen.getByTestId('identity')).toHaveTextContent('Local account · no two-factor sign-in · never signed in');
    expect(await screen.findByText('quota 10 MiB')).toBeInTheDocument();
    const quota = screen.getByLabelText('Quota');
    expect(quota).toHaveValue('500 MB');

    // Saved untouched: the same bytes, not a rounded 476.8 MiB.
    await u.click(screen.getByRole('button', { name: 'Save' }));
    await waitFor(() => expect(patches).toEqual([{ quota_bytes: 500e6, role: 'user' }]));

    await u.clear(quota);
    await u.type(quota, '10 GiB');
    await u.click(screen.getByRole('button', { name: 'Save' }));
    await waitFor(() => expect(patches[1]).toEqual({ quota_bytes: 10 * 1024 ** 3, role: 'user' }));

    await u.clear(quota);
    await u.type(quota, 'a lot');
    await u.click(screen.getByRole('button', { name: 'Save' }));
    expect(await screen.findByText(/Enter a size such as 10 GiB/)).toBeInTheDocument();
    expect(patches).toHaveLength(2);
  });

  it('turns sharing off and revokes one of the user\'s shares', async () => {
    const calls: string[] = [];
    let shares = [
      { id: 3, owner: 'alice', path: '/Projects/Plan', username: 'bob', permission: 'write', created: '2026-11-26T10:00:00Z' },
      { id: 2, owner: 'carol', path: null, username: 'alice', group: null, permission: 'read', created: '2026-11-25T10:00:00Z' },
      { id: 1, owner: 'alice', path: '/Team', username: null, group: 'sales', permission: 'read', created: '2026-11-24T10:00:00Z' },
    ];
    vi.stubGlobal(
      'fetch',
      vi.fn(async (url: string, init?: RequestInit) => {
        const u = new URL(url, 'http://x');
        calls.push(`${init?.method ?? 'GET'} ${u.pathname}${u.search}`);
        if (u.pathname === '/api/v1/admin/users/7' && init?.method === 'PATCH') {
          return new Response(JSON.stringify({ ...alice, ...JSON.parse(String(init.body)) }));
        }
        if (u.pathname === '/api/v1/admin/users/7') return new Response(JSON.stringify(alice));
        if (u.pathname === '/api/v1/admin/users/7/devices') return new Response(JSON.stringify({ tokens: [] }));
        if (u.pathname === '/api/v1/admin/audit') return new Response(JSON.stringify({ entries: [], next_cursor: null }));
        if (u.pathname === '/api/v1/admin/shares') return new Response(JSON.stringify({ shares }));
        if (u.pathname === '/api/v1/admin/shares/3' && init?.method === 'DELETE') {
          shares = shares.filter((s) => s.id !== 3);
          return new Response(null, { status: 204 });
        }
        return new Response('{}', { status: 404 });
      }),
    );
    render(
      <MantineProvider env="test">
        <QueryClientProvider client={new QueryClient()}>
          <UserPage id={7} />
        </QueryClientProvider>
      </MantineProvider>,
    );
    const u = userEvent.setup();
    expect(await screen.findByTestId('sharing')).toHaveTextContent('May share files and folders');
    await u.click(screen.getByRole('button', { name: 'Turn sharing off' }));
    expect(await screen.findByText('Sharing turned off for this user.')).toBeInTheDocument();
    expect(calls).toContain('PATCH /api/v1/admin/users/7');
    expect(screen.getByTestId('sharing')).toHaveTextContent('May not share');
    expect(calls).toContain('GET /api/v1/admin/shares?user=alice');
    await u.click(screen.getByRole('button', { name: 'Turn public links off' }));
    expect(await screen.findByText(/Public links turned off for this user/)).toBeInTheDocument();
    expect(screen.getByTestId('links')).toHaveTextContent('May not make public links');

    expect(await screen.findByText('/Projects/Plan')).toBeInTheDocument();
    expect(screen.getByText('in the trash')).toBeInTheDocument();
    // A share with a group says so.
    expect(screen.getByText('group sales')).toBeInTheDocument();
    expect(screen.getByRole('button', { name: 'Revoke /Team of alice with group sales' })).toBeInTheDocument();
    await u.click(screen.getByRole('button', { name: 'Revoke /Projects/Plan of alice with bob' }));
    expect(await screen.findByText('Share revoked: /Projects/Plan of alice with bob.')).toBeInTheDocument();
    expect(calls).toContain('DELETE /api/v1/admin/shares/3');
    await waitFor(() => expect(screen.queryByText('/Projects/Plan')).toBeNull());
  });

  it('resets the user\'s two-factor sign-in after asking', async () => {
    const calls: string[] = [];
    let current: UserInfo = { ...alice, totp: true };
    vi.stubGlobal(
      'fetch',
      vi.fn(async (url: string, init?: RequestInit) => {
        const u = new URL(url, 'http://x');
        calls.push(`${init?.method ?? 'GET'} ${u.pathname}`);
        if (u.pathname === '/api/v1/admin/users/7/totp' && init?.method === 'DELETE') {
          current = { ...current, totp: false };
          return new Response(null, { status: 204 });
        }
        if (u.pathname === '/api/v1/admin/users/7') return new Response(JSON.stringify(current));
        if (u.pathname === '/api/v1/admin/users/7/devices') return new Response(JSON.stringify({ tokens: [] }));
        if (u.pathname === '/api/v1/admin/audit') return new Response(JSON.stringify({ entries: [], next_cursor: null }));
        if (u.pathname === '/api/v1/admin/shares') return new Response(JSON.stringify({ shares: [], next_cursor: null }));
        return new Response('{}', { status: 404 });
      }),
    );
    render(
      <MantineProvider env="test">
        <QueryClientProvider client={new QueryClient()}>
          <UserPage id={7} />
        </QueryClientProvider>
      </MantineProvider>,
    );
    const u = userEvent.setup();
    expect(await screen.findByTestId('identity')).toHaveTextContent('two-factor sign-in on');
    await u.click(screen.getByRole('button', { name: 'Reset two-factor…' }));
    expect(calls).not.toContain('DELETE /api/v1/admin/users/7/totp');
    await u.click(await screen.findByRole('button', { name: 'Reset two-factor' }));
    expect(await screen.findByText(/Two-factor sign-in reset/)).toBeInTheDocument();
    expect(calls).toContain('DELETE /api/v1/admin/users/7/totp');
    await waitFor(() => expect(screen.getByTestId('identity')).toHaveTextContent('no two-factor sign-in'));
    expect(screen.queryByRole('button', { name: 'Reset two-factor…' })).toBeNull();
  });
  it('shows the display name and e-mail a directory gives', async () => {
    const ldap: UserInfo = { ...alice, source: 'ldap', display_name: 'Alice Liddell', email: 'alice@example.org' };
    vi.stubGlobal(
      'fetch',
      vi.fn(async (url: string) => {
        const u = new URL(url, 'http://x');
        if (u.pathname === '/api/v1/admin/users/7') return new Response(JSON.stringify(ldap));
        if (u.pathname === '/api/v1/admin/users/7/devices') return new Response(JSON.stringify({ tokens: [] }));
        if (u.pathname === '/api/v1/admin/audit') return new Response(JSON.stringify({ entries: [], next_cursor: null }));
        if (u.pathname === '/api/v1/admin/shares') return new Response(JSON.stringify({ shares: [], next_cursor: null }));
        return new Response('{}', { status: 404 });
      }),
    );
    render(
      <MantineProvider env="test">
        <QueryClientProvider client={new QueryClient()}>
          <UserPage id={7} />
        </QueryClientProvider>
      </MantineProvider>,
    );
    expect(await screen.findByTestId('profile')).toHaveTextContent('Alice Liddell · alice@example.org');
    expect(screen.getByRole('link', { name: 'alice@example.org' })).toHaveAttribute('href', 'mailto:alice@example.org');
  });
});
