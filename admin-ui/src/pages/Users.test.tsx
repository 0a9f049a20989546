import { MantineProvider } from '@mantine/core';
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { render, screen, waitFor } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { UserList } from '../api/types';
import { UsersPage } from './Users';

function page(users: string[], next: string | null): UserList {
  return {
    users: users.map((username, i) => ({ id: i + 1, username, role: 'user', quota_bytes: null, used_bytes: 0, usage: { current: 0, versions: 0, trash: 0, pending: 0 }, disabled: false, sharing: true, links: true, source: 'local' as const, totp: false, last_login: null, created: '2026-11-23T10:00:00Z' })),
    next_cursor: next,
  };
}

afterEach(() => vi.unstubAllGlobals());

function show() {
  render(
    // env="test": no transitions or portals, so the dropdown's options are in the DOM at once.
    <MantineProvider env="test">
      <QueryClientProvider client={new QueryClient()}>
        <UsersPage />
      </QueryClientProvider>
    </MantineProvider>,
  );
}

describe('UsersPage', () => {
  it('shows where each account comes from, its two-factor state and last sign-in, from the one page request', async () => {
    const body = page(['anna', 'bob', 'cleo'], null);
    body.users[1] = { ...body.users[1], source: 'ldap', totp: true, last_login: '2026-11-25T08:30:00Z', display_name: 'Bob Builder', email: 'bob@example.org' };
    body.users[2] = { ...body.users[2], source: 'oidc' };
    const fetch = vi.fn(async () => new Response(JSON.stringify(body), { status: 200 }));
    vi.stubGlobal('fetch', fetch);
    show();
    await screen.findByText('anna');
    const headers = screen.getAllByRole('columnheader').map((h) => h.textContent);
    expect(headers).toEqual(expect.arrayContaining(['Name', 'Source', 'Two-factor', 'Last sign-in']));
    const cells = (name: string) => {
      const row = document.querySelector(`tr[data-user="${name}"]`);
      const i = (h: string) => headers.indexOf(h);
      const td = row ? Array.from(row.querySelectorAll('td')).map((c) => c.textContent) : [];
      return [td[i('Name')], td[i('Source')], td[i('Two-factor')], td[i('Last sign-in')]];
    };
    expect(cells('anna')).toEqual(['', 'local', 'off', 'never']);
    expect(cells('bob')).toEqual(['Bob Builderbob@example.org', 'LDAP', 'on', new Date('2026-11-25T08:30:00Z').toLocaleDateString()]);
    expect(cells('cleo')).toEqual(['', 'SSO (OIDC)', 'off', 'never']);
    expect(fetch).toHaveBeenCalledTimes(1);
  });

  it('asks the gateway for the chosen order and starts again from the first page', async () => {
    const urls: string[] = [];
    vi.stubGlobal(
      'fetch',
      vi.fn(async (url: string) => {
        urls.push(url);
        const params = new URL(url, 'http://x').searchParams;
        const body = params.get('cursor') ? page(['carl'], null) : page(['anna', 'bob'], 'bob');
        return new Response(JSON.stringify(body), { status: 200 });
      }),
    );
    show();
    const u = userEvent.setup();
    expect(await screen.findByText('anna')).toBeInTheDocument();
    expect(new URL(urls[0], 'http://x').searchParams.get('sort')).toBe('name');
    await u.click(screen.getByRole('button', { name: 'Next page' }));
    expect(await screen.findByText('carl')).toBeInTheDocument();
    expect(new URL(urls[urls.length - 1], 'http://x').searchParams.get('cursor')).toBe('bob');

    await u.click(screen.getAllByLabelText('Sort by')[0]);
    await u.click(await screen.findByRole('option', { name: 'Largest usage first' }));
    await waitFor(() => {
      const last = new URL(urls[urls.length - 1], 'http://x').searchParams;
      expect(last.get('sort')).toBe('-usage');
      // A new order restarts paging: a cursor of the old order means nothing in the new one.
      expect(last.get('cursor')).toBeNull();
    });
    expect(await screen.findByText('anna')).toBeInTheDocument();
  });
});
