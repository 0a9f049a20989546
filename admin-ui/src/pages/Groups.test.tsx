import { MantineProvider } from '@mantine/core';
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { render, screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { GroupList } from '../api/types';
import { GroupsPage } from './Groups';

afterEach(() => vi.unstubAllGlobals());

function show() {
  render(
    <MantineProvider env="test">
      <QueryClientProvider client={new QueryClient()}>
        <GroupsPage />
      </QueryClientProvider>
    </MantineProvider>,
  );
}

/** A fake gateway: the group list, and every other request recorded and answered. */
function gateway(groups: GroupList) {
  const calls: { method: string; url: string; body: unknown }[] = [];
  vi.stubGlobal(
    'fetch',
    vi.fn(async (url: string, init?: RequestInit) => {
      const method = init?.method ?? 'GET';
      calls.push({ method, url, body: init?.body ? JSON.parse(String(init.body)) : null });
      if (method === 'GET' && url === '/api/v1/admin/groups') return new Response(JSON.stringify(groups), { status: 200 });
      if (method === 'GET' && url.startsWith('/api/v1/admin/users')) {
        const users = ['anna', 'bob'].map((username, i) => ({ id: i + 1, username }));
        return new Response(JSON.stringify({ users, next_cursor: null }), { status: 200 });
      }
      if (method === 'DELETE') return new Response(null, { status: 204 });
      if (method === 'POST' && url === '/api/v1/admin/groups') {
        return new Response(JSON.stringify({ error: { code: 'already_exists', message: 'a group named `team` already exists' } }), { status: 409 });
      }
      return new Response(JSON.stringify(groups.groups[0]), { status: 201 });
    }),
  );
  return calls;
}

describe('GroupsPage', () => {
  it('lists groups with their members and takes one out by name', async () => {
    const calls = gateway({ groups: [{ id: 7, name: 'team', members: ['anna', 'bob'], created: '2026-11-26T10:00:00Z' }] });
    show();
    const card = await screen.findByRole('region', { name: 'Group team' });
    expect(within(card).getByText('2 members')).toBeTruthy();
    await userEvent.click(within(card).getByRole('button', { name: 'Remove bob from team' }));
    await waitFor(() => expect(calls.some((c) => c.method === 'DELETE' && c.url === '/api/v1/admin/groups/7/members/bob')).toBe(true));
    expect(await screen.findByRole('status')).toHaveProperty('textContent', 'bob removed from team.');
  });

  it("shows the gateway's refusal of a taken name in words", async () => {
    const calls = gateway({ groups: [] });
    show();
    await screen.findByText('No groups yet.');
    await userEvent.type(screen.getByLabelText('New group'), 'team');
    await userEvent.click(screen.getByRole('button', { name: 'Create group' }));
    expect((await screen.findByRole('alert')).textContent).toContain('already exists');
    expect(calls.find((c) => c.method === 'POST')?.body).toEqual({ name: 'team' });
  });
});
