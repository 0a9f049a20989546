import { MantineProvider } from '@mantine/core';
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { cleanup, render, screen, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Entry } from '../../../src/api/types';
import { FilesPage } from './Files';

const entry = (path: string, kind: 'file' | 'dir', size = 0): Entry => ({
  id: 1,
  name: path.slice(path.lastIndexOf('/') + 1),
  path,
  kind,
  size,
  modified: '2026-01-01T00:00:00Z',
  version: kind === 'file' ? 1 : null,
});

/** A space: folder path → entries; records every request. */
function gateway(tree: Record<string, Entry[]>) {
  const calls: string[] = [];
  vi.stubGlobal(
    'fetch',
    vi.fn(async (url: string, init: RequestInit) => {
      calls.push(`${init.method} ${url}`);
      const m = /^\/api\/v1\/dirs(\/.*?)?\?/.exec(url);
      if (init.method === 'GET' && m) {
        const dir = decodeURIComponent(m[1] && m[1] !== '/' ? m[1] : '/');
        return new Response(JSON.stringify({ entries: tree[dir] ?? [], next_cursor: null }));
      }
      if (init.method === 'DELETE') return new Response(null, { status: 204, headers: { 'X-Nimbus-Trash-Id': '9' } });
      if (url === '/api/v1/move') return new Response(JSON.stringify({ ...entry(JSON.parse(String(init.body)).to, 'file'), id: 2 }));
      return new Response(JSON.stringify({ error: { code: 'locked', message: 'locked' } }), { status: 423 });
    }),
  );
  return calls;
}

function setup(path: string) {
  render(
    <MantineProvider>
      <QueryClientProvider client={new QueryClient({ defaultOptions: { queries: { retry: false } } })}>
        <FilesPage path={path} />
      </QueryClientProvider>
    </MantineProvider>,
  );
}

const names = () => screen.getAllByRole('row').slice(1).map((r) => r.getAttribute('data-entry'));

afterEach(() => vi.unstubAllGlobals());

describe('FilesPage', () => {
  it('shows breadcrumbs down to the folder and lists folders first, sortable by size', async () => {
    gateway({ '/My Docs/2026': [entry('/My Docs/2026/small.txt', 'file', 5), entry('/My Docs/2026/big.bin', 'file', 500), entry('/My Docs/2026/sub', 'dir')] });
    setup('/My Docs/2026');
    await screen.findByText('small.txt');
    const crumbs = within(screen.getByLabelText('Folder path'));
    expect(crumbs.getByRole('link', { name: 'My files' })).toHaveAttribute('href', '/files');
    expect(crumbs.getByRole('link', { name: 'My Docs' })).toHaveAttribute('href', '/files/My%20Docs');
    expect(crumbs.getByText('2026')).toHaveAttribute('aria-current', 'page');
    expect(names()).toEqual(['sub', 'big.bin', 'small.txt']);
    const u = userEvent.setup();
    await u.click(screen.getByRole('button', { name: /^Size/ }));
    expect(names()).toEqual(['sub', 'small.txt', 'big.bin']);
    await u.type(screen.getByLabelText('Filter by name'), 'BIG');
    expect(names()).toEqual(['big.bin']);
  });

  it('moves to the trash with the Delete key and says so, with Undo', async () => {
    const calls = gateway({ '/': [entry('/a.txt', 'file', 1)] });
    setup('/');
    const row = (await screen.findByText('a.txt')).closest('tr') as HTMLElement;
    row.focus();
    const u = userEvent.setup();
    await u.keyboard('{Delete}');
    expect(await screen.findByText('a.txt was moved to the trash.')).toBeInTheDocument();
    expect(calls).toContain('DELETE /api/v1/files/a.txt');
    await u.click(screen.getByRole('button', { name: 'Undo' }));
    // The restore is refused here (423): the refusal is said in words.
    expect(await screen.findByText(/Someone is editing this item right now/)).toBeInTheDocument();
    expect(calls).toContain('POST /api/v1/trash/9/restore');
  });

  it('acts on several entries at once: tick them, then Delete', async () => {
    const calls = gateway({ '/': [entry('/a.txt', 'file', 1), entry('/b.txt', 'file', 1), entry('/c.txt', 'file', 1)] });
    setup('/');
    await screen.findByText('a.txt');
    const u = userEvent.setup();
    await u.click(screen.getByLabelText('Select a.txt'));
    await u.click(screen.getByLabelText('Select c.txt'));
    const bar = within(screen.getByRole('toolbar', { name: 'Selected items' }));
    expect(bar.getByText('2 selected')).toBeInTheDocument();
    await u.click(bar.getByRole('button', { name: 'Delete' }));
    expect(await screen.findByText('2 items were moved to the trash.')).toBeInTheDocument();
    expect(calls.filter((c) => c.startsWith('DELETE'))).toEqual(['DELETE /api/v1/files/a.txt', 'DELETE /api/v1/files/c.txt']);
    expect(screen.queryByRole('toolbar', { name: 'Selected items' })).toBeNull();
  });

  it('moves several entries into a folder, keeping their names', async () => {
    const calls = gateway({ '/': [entry('/a.txt', 'file', 1), entry('/b.txt', 'file', 1), entry('/Archive', 'dir')] });
    setup('/');
    await screen.findByText('a.txt');
    const u = userEvent.setup();
    await u.click(screen.getByLabelText('Select all'));
    await u.click(screen.getByLabelText('Select Archive'));
    await u.click(screen.getByRole('button', { name: 'Move to…' }));
    // The folder picker lists the folders of the current one.
    const dialog = within(await screen.findByRole('dialog'));
    await u.click(await dialog.findByRole('button', { name: 'Archive' }));
    expect(dialog.getByLabelText('Into the folder')).toHaveValue('/Archive');
    await u.click(dialog.getByRole('button', { name: 'Move' }));
    expect(await screen.findByText('2 items moved.')).toBeInTheDocument();
    expect(calls.filter((c) => c.startsWith('POST'))).toEqual(['POST /api/v1/move', 'POST /api/v1/move']);
  });

  it('shows the gateway thumbnail of an image, and the icon when there is none', async () => {
    const calls = gateway({
      '/Pics': [entry('/Pics/cat.png', 'file', 50), entry('/Pics/fake.jpg', 'file', 50), entry('/Pics/notes.txt', 'file', 50)],
    });
    const inner = fetch as unknown as (url: string, init: RequestInit) => Promise<Response>;
    vi.stubGlobal(
      'fetch',
      vi.fn(async (url: string, init: RequestInit) => {
        if (url === '/api/v1/thumbnails/Pics/cat.png?size=64') {
          calls.push(`${init.method} ${url}`);
          expect(new Headers(init.headers).get('Authorization')).toBe('Bearer t0ken');
          return new Response(new Blob([new Uint8Array([0xff, 0xd8])], { type: 'image/jpeg' }));
        }
        if (url.startsWith('/api/v1/thumbnails/')) {
          calls.push(`${init.method} ${url}`);
          return new Response(JSON.stringify({ error: { code: 'unsupported_media_type', message: 'not an image' } }), { status: 415 });
        }
        return inner(url, init);
      }),
    );
    // jsdom has no object URLs: a subclass with them, for this test only (unstubbed after).
    class BlobURL extends URL {
      static createObjectURL = () => 'blob:thumb-1';
      static revokeObjectURL = () => {};
    }
    vi.stubGlobal('URL', BlobURL);
    sessionStorage.setItem('nimbus-admin-token', 't0ken');
    setup('/Pics');
    await screen.findByText('notes.txt');
    const row = (name: string) => document.querySelector(`tr[data-entry="${name}"]`) as HTMLElement;
    await vi.waitFor(() => expect(row('cat.png').querySelector('img[data-thumbnail="cat.png"]')).toHaveAttribute('src', 'blob:thumb-1'));
    expect(row('cat.png').querySelector('img')).toHaveAttribute('loading', 'lazy');
    await vi.waitFor(() => expect(calls).toContain('GET /api/v1/thumbnails/Pics/fake.jpg?size=64'));
    expect(row('fake.jpg').querySelector('img')).toBeNull();
    expect(row('fake.jpg').querySelector('[data-icon="file"]')).not.toBeNull();
    // Text files are not asked for.
    expect(calls.some((c) => c.includes('notes.txt'))).toBe(false);
    expect(row('notes.txt').querySelector('[data-icon="file"]')).not.toBeNull();
    // Unmounted while the stub stands: the object URL is revoked through it.
    cleanup();
    sessionStorage.clear();
  });
});
