import { ActionIcon, Alert, Anchor, Box, Breadcrumbs, Button, Checkbox, FileButton, Group, Menu, Stack, Table, Text, TextInput, UnstyledButton } from '@mantine/core';
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useRef, useState, type DragEvent, type KeyboardEvent } from 'react';
import { api, request } from '../../../src/api/client';
import type { Entry, IncomingShareList } from '../../../src/api/types';
import { formatSize } from '../../../src/format';
import { MoveManyDialog, NameDialog, PlaceDialog, PreviewDialog, VersionsDialog, when } from '../components/Dialogs';
import { ShareDialog } from '../components/ShareDialog';
import { Thumb } from '../components/Thumb';
import { downloadFile, downloadFolderZip } from '../download';
import { describeError } from '../errors';
import { listAll } from '../listing';
import { SHARED, type SortKey, apiUrl, crumbs, filterEntries, folderRoute, inShared, join, parent, sortEntries } from '../paths';
import { previewOf } from '../preview';
import { navigate } from '../router';
import { fromInput, readDrop, unfinished } from '../upload';
import { useUploads } from '../uploads';
import { QueryStatus } from '../components/QueryStatus';

/** Names containing `q` anywhere under `root`, walking its folders (the API has no search):
 * at most `maxDirs` folders are read, and the answer says when it stopped early. */
async function searchTree(root: string, q: string, maxDirs = 500): Promise<{ hits: Entry[]; complete: boolean }> {
  const hits: Entry[] = [];
  const todo = [root];
  let read = 0;
  while (todo.length && read < maxDirs) {
    const dir = todo.shift() as string;
    read++;
    const entries = await listAll(dir);
    hits.push(...filterEntries(entries, q));
    for (const e of entries) if (e.kind === 'dir') todo.push(e.path);
  }
  return { hits, complete: todo.length === 0 };
}

type Dialog =
  | { kind: 'mkdir' }
  | { kind: 'move-many'; entries: Entry[] }
  | { kind: 'rename' | 'move' | 'copy' | 'share' | 'versions' | 'preview'; entry: Entry }
  | null;

export function FilesPage({ path }: { path: string }) {
  const qc = useQueryClient();
  const uploads = useUploads();
  const listing = useQuery({ queryKey: ['dir', path], queryFn: () => listAll(path) });
  const incoming = useQuery({
    queryKey: ['incoming'],
    queryFn: () => api<IncomingShareList>('GET', '/api/v1/shares/incoming'),
    enabled: path === `/${SHARED}`,
  });
  const [sort, setSort] = useState<{ key: SortKey; desc: boolean }>({ key: 'name', desc: false });
  const [filter, setFilter] = useState('');
  const [search, setSearch] = useState<{ q: string; hits: Entry[]; complete: boolean } | null>(null);
  const [searching, setSearching] = useState(false);
  const [dialog, setDialog] = useState<Dialog>(null);
  const [message, setMessage] = useState<{ text: string; color: string; undo?: () => void } | null>(null);
  const [dragging, setDragging] = useState(false);
  // Paths of the entries ticked for an action on several at once (the bar above the list).
  const [selected, setSelected] = useState<Set<string>>(new Set());
  useEffect(() => setSelected(new Set()), [path]);
  const toggle = (p: string) =>
    setSelected((s) => {
      const n = new Set(s);
      if (n.has(p)) n.delete(p);
      else n.add(p);
      return n;
    });
  const folderInput = useRef<HTMLInputElement>(null);
  const rows = useRef<HTMLTableSectionElement>(null);

  const refresh = () => {
    void qc.invalidateQueries({ queryKey: ['dir'] });
    void qc.invalidateQueries({ queryKey: ['me'] });
  };
  const fail = (e: unknown) => setMessage({ text: describeError(e), color: 'red' });

  /** Moves entries to the trash, one by one (each its own trash item); Undo brings them back. */
  const trash = async (entries: Entry[]) => {
    const ids: string[] = [];
    const what = (n: number) => (entries.length === 1 ? entries[0].name : `${n} item${n === 1 ? '' : 's'}`);
    const undo = async () => {
      try {
        for (const id of ids) await api('POST', `/api/v1/trash/${id}/restore`, {});
        setMessage({ text: `${what(ids.length)} ${ids.length === 1 ? 'is' : 'are'} back.`, color: 'green' });
      } catch (err) {
        fail(err);
      }
      refresh();
    };
    try {
      for (const e of entries) {
        const resp = await request('DELETE', apiUrl('files', e.path));
        const id = resp.headers.get('X-Nimbus-Trash-Id');
        if (id) ids.push(id);
      }
      setMessage({ text: `${what(entries.length)} ${entries.length === 1 ? 'was' : 'were'} moved to the trash.`, color: 'blue', undo: ids.length ? undo : undefined });
    } catch (err) {
      const done = ids.length ? ` (${what(ids.length)} moved to the trash before that)` : '';
      setMessage({ text: describeError(err) + done, color: 'red', undo: ids.length ? undo : undefined });
    }
    setSelected(new Set());
    refresh();
  };

  const open = (e: Entry) => {
    if (e.kind === 'dir') {
      setSearch(null);
      setFilter('');
      navigate(folderRoute(e.path));
    } else if (previewOf(e.name)) setDialog({ kind: 'preview', entry: e });
    else void downloadFile(e.path, e.name, e.size).catch(fail);
  };

  const onDrop = async (ev: DragEvent) => {
    ev.preventDefault();
    setDragging(false);
    try {
      const { files, dirs } = await readDrop(ev.dataTransfer.items);
      if (files.length || dirs.length) uploads.start(path, files, dirs);
    } catch (e) {
      fail(e);
    }
  };

  const runSearch = async () => {
    if (!filter.trim()) return setSearch(null);
    setSearching(true);
    try {
      setSearch({ q: filter, ...(await searchTree(path, filter)) });
    } catch (e) {
      fail(e);
    } finally {
      setSearching(false);
    }
  };

  // Arrow keys move between rows; Enter opens, F2 renames, Delete moves to the trash.
  const onRowKey = (ev: KeyboardEvent<HTMLTableRowElement>, e: Entry) => {
    const all = Array.from(rows.current?.querySelectorAll<HTMLTableRowElement>('tr[data-entry]') ?? []);
    const i = all.indexOf(ev.currentTarget);
    if (ev.key === 'ArrowDown') all[i + 1]?.focus();
    else if (ev.key === 'ArrowUp') all[i - 1]?.focus();
    else if (ev.key === 'Enter') open(e);
    else if (ev.key === 'F2') setDialog({ kind: 'rename', entry: e });
    else if (ev.key === 'Delete') void trash(selected.size ? shown.filter((x) => selected.has(x.path)) : [e]);
    else if (ev.key === ' ') toggle(e.path);
    else if (ev.key === 'Backspace' && path !== '/') navigate(folderRoute(parent(path)));
    else return;
    ev.preventDefault();
  };

  const sortBy = (key: SortKey) => setSort((s) => ({ key, desc: s.key === key ? !s.desc : false }));
  const arrow = (key: SortKey) => (sort.key === key ? (sort.desc ? ' ↓' : ' ↑') : '');
  const ariaSort = (key: SortKey) => (sort.key === key ? (sort.desc ? 'descending' : 'ascending') : 'none');

  const shown = search ? search.hits : sortEntries(filterEntries(listing.data ?? [], filter), sort.key, sort.desc);
  const picked = shown.filter((e) => selected.has(e.path));
  const here = unfinished.list().filter((u) => parent(u.path) === path);
  const atSharedTop = path === `/${SHARED}`;
  const owners = new Map(incoming.data?.shares.map((s) => [s.name, s]) ?? []);

  return (
    <Box
      onDragOver={(e) => {
        e.preventDefault();
        setDragging(true);
      }}
      onDragLeave={(e) => {
        if (e.currentTarget === e.target) setDragging(false);
      }}
      onDrop={onDrop}
      data-testid="drop-zone"
      style={{ minHeight: '70vh', outline: dragging ? '2px dashed var(--mantine-color-blue-5)' : undefined, outlineOffset: 4 }}
    >
      <Stack>
        <Breadcrumbs separator="›" aria-label="Folder path" style={{ flexWrap: 'wrap' }}>
          {crumbs(path).map((c, i, all) =>
            i === all.length - 1 ? (
              <Text key={c.path} fw={600} aria-current="page">{c.name}</Text>
            ) : (
              <Anchor
                key={c.path}
                href={folderRoute(c.path)}
                onClick={(e) => {
                  e.preventDefault();
                  navigate(folderRoute(c.path));
                }}
              >
                {c.name}
              </Anchor>
            ),
          )}
        </Breadcrumbs>

        <Group justify="space-between" wrap="wrap" gap="xs">
          <Group gap="xs" wrap="wrap">
            {!atSharedTop && (
              <>
                <FileButton multiple onChange={(files) => files.length && uploads.start(path, files.map((file) => ({ file, rel: file.name })))}>
                  {(props) => <Button {...props}>Upload files</Button>}
                </FileButton>
                <Button variant="light" onClick={() => folderInput.current?.click()}>Upload folder</Button>
                <input
                  ref={folderInput}
                  type="file"
                  hidden
                  data-testid="folder-input"
                  // Non-standard but in every current browser: pick a whole folder.
                  {...{ webkitdirectory: '', directory: '' }}
                  multiple
                  onChange={(e) => {
                    if (e.currentTarget.files?.length) uploads.start(path, fromInput(e.currentTarget.files));
                    e.currentTarget.value = '';
                  }}
                />
                <Button variant="default" onClick={() => setDialog({ kind: 'mkdir' })}>New folder</Button>
              </>
            )}
          </Group>
          <Group gap="xs" wrap="wrap">
            <TextInput
              placeholder="Filter by name"
              aria-label="Filter by name"
              value={filter}
              onChange={(e) => {
                setFilter(e.currentTarget.value);
                setSearch(null);
              }}
              onKeyDown={(e) => e.key === 'Enter' && void runSearch()}
            />
            <Button variant="default" loading={searching} onClick={() => void runSearch()} title="Search this folder and every folder inside it">
              Search subfolders
            </Button>
          </Group>
        </Group>

        {picked.length > 0 && (
          <Group gap="xs" role="toolbar" aria-label="Selected items">
            <Text size="sm" fw={600}>{picked.length} selected</Text>
            <Button size="xs" variant="light" onClick={() => setDialog({ kind: 'move-many', entries: picked })}>Move to…</Button>
            <Button size="xs" variant="light" color="red" onClick={() => void trash(picked)}>Delete</Button>
            <Button size="xs" variant="subtle" onClick={() => setSelected(new Set())}>Clear selection</Button>
          </Group>
        )}
        {message && (
          <Alert color={message.color} role={message.color === 'red' ? 'alert' : 'status'} withCloseButton onClose={() => setMessage(null)}>
            <Group justify="space-between">
              <Text size="sm">{message.text}</Text>
              {message.undo && <Button size="xs" variant="white" onClick={message.undo}>Undo</Button>}
            </Group>
          </Alert>
        )}

        {here.map((u) => (
          <Alert key={u.path} color="yellow" role="status" title="Unfinished upload">
            <Group justify="space-between">
              <Text size="sm">{u.name} ({formatSize(u.size)}) did not finish. Choose the same file again to resume: only the missing parts are sent.</Text>
              <Group gap="xs">
                <FileButton
                  onChange={(file) => {
                    if (!file) return;
                    if (file.name !== u.name || file.size !== u.size) return fail(new Error(`That is not ${u.name} (${formatSize(u.size)}).`));
                    uploads.resume(u.path, file);
                  }}
                >
                  {(props) => <Button size="xs" {...props}>Resume</Button>}
                </FileButton>
                <Button size="xs" variant="subtle" onClick={() => { unfinished.remove(u.path); setMessage(null); }}>Forget</Button>
              </Group>
            </Group>
          </Alert>
        ))}

        {search && (
          <Text size="sm" c="dimmed" role="status">
            {search.hits.length} found under {path === '/' ? 'My files' : path} for “{search.q}”{search.complete ? '' : ' (stopped after 500 folders)'}.{' '}
            <Anchor component="button" size="sm" onClick={() => setSearch(null)}>Back to the folder</Anchor>
          </Text>
        )}

        <QueryStatus query={listing} />
        {listing.data && (
          <Table.ScrollContainer minWidth={360}>
            <Table highlightOnHover aria-label="Files">
              <Table.Thead>
                <Table.Tr>
                  <Table.Th w={36}>
                    {!atSharedTop && shown.length > 0 && (
                      <Checkbox
                        aria-label="Select all"
                        checked={picked.length === shown.length}
                        indeterminate={picked.length > 0 && picked.length < shown.length}
                        onChange={() => setSelected(picked.length === shown.length ? new Set() : new Set(shown.map((e) => e.path)))}
                      />
                    )}
                  </Table.Th>
                  <Table.Th aria-sort={ariaSort('name')}>
                    <UnstyledButton onClick={() => sortBy('name')} fw={600}>Name{arrow('name')}</UnstyledButton>
                  </Table.Th>
                  <Table.Th aria-sort={ariaSort('size')} visibleFrom="xs">
                    <UnstyledButton onClick={() => sortBy('size')} fw={600}>Size{arrow('size')}</UnstyledButton>
                  </Table.Th>
                  <Table.Th aria-sort={ariaSort('modified')} visibleFrom="sm">
                    <UnstyledButton onClick={() => sortBy('modified')} fw={600}>Modified{arrow('modified')}</UnstyledButton>
                  </Table.Th>
                  <Table.Th w={48}><Text size="sm" span style={{ position: 'absolute', left: -9999 }}>Actions</Text></Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody ref={rows}>
                {shown.length === 0 && (
                  <Table.Tr>
                    <Table.Td colSpan={5}>
                      <Text c="dimmed" size="sm">
                        {search || filter
                          ? 'Nothing matches.'
                          : atSharedTop
                            ? 'Nobody has shared anything with you yet.'
                            : 'This folder is empty. Drop files or folders here, or use Upload.'}
                      </Text>
                    </Table.Td>
                  </Table.Tr>
                )}
                {shown.map((e) => {
                  const share = atSharedTop ? owners.get(e.name) : undefined;
                  const top = e.path === `/${SHARED}` || (atSharedTop && !!share);
                  return (
                    <Table.Tr key={e.path} tabIndex={0} data-entry={e.name} onKeyDown={(ev) => onRowKey(ev, e)} onDoubleClick={() => open(e)}>
                      <Table.Td>
                        {!top && <Checkbox aria-label={`Select ${e.name}`} checked={selected.has(e.path)} onChange={() => toggle(e.path)} tabIndex={-1} />}
                      </Table.Td>
                      <Table.Td>
                        <Group gap={0} wrap="nowrap" align="center">
                          <Thumb entry={e} />
                          <Anchor
                            component="button"
                            onClick={() => open(e)}
                            tabIndex={-1}
                            fw={e.kind === 'dir' ? 700 : undefined}
                            style={{ textAlign: 'left', wordBreak: 'break-word', minWidth: 0 }}
                            title={e.kind === 'dir' ? 'Folder' : undefined}
                          >
                            {search ? e.path : e.name}
                          </Anchor>
                        </Group>
                        {share && (
                          <Text size="xs" c="dimmed">
                            from {share.owner}, {share.permission === 'write' ? 'can edit' : 'view only'}
                          </Text>
                        )}
                      </Table.Td>
                      <Table.Td visibleFrom="xs">{e.kind === 'dir' ? '' : formatSize(e.size)}</Table.Td>
                      <Table.Td visibleFrom="sm">{when(e.modified)}</Table.Td>
                      <Table.Td>
                        {e.path !== `/${SHARED}` && (
                          <Menu position="bottom-end" withinPortal>
                            <Menu.Target>
                              <ActionIcon variant="subtle" aria-label={`Actions for ${e.name}`}>⋯</ActionIcon>
                            </Menu.Target>
                            <Menu.Dropdown>
                              {e.kind === 'file' && previewOf(e.name) && <Menu.Item onClick={() => setDialog({ kind: 'preview', entry: e })}>Preview</Menu.Item>}
                              {e.kind === 'file' && <Menu.Item onClick={() => void downloadFile(e.path, e.name, e.size).catch(fail)}>Download</Menu.Item>}
                              {e.kind === 'dir' && !inShared(e.path) && <Menu.Item onClick={() => void downloadFolderZip(e.path).catch(fail)}>Download as zip</Menu.Item>}
                              {(!top || share) && <Menu.Item onClick={() => setDialog({ kind: 'rename', entry: e })}>Rename</Menu.Item>}
                              {!top && <Menu.Item onClick={() => setDialog({ kind: 'move', entry: e })}>Move</Menu.Item>}
                              {!top && <Menu.Item onClick={() => setDialog({ kind: 'copy', entry: e })}>Copy</Menu.Item>}
                              {!inShared(e.path) && <Menu.Item onClick={() => setDialog({ kind: 'share', entry: e })}>Share</Menu.Item>}
                              {e.kind === 'file' && <Menu.Item onClick={() => setDialog({ kind: 'versions', entry: e })}>Versions</Menu.Item>}
                              {share && (
                                <Menu.Item
                                  color="red"
                                  onClick={() =>
                                    void api('DELETE', `/api/v1/shares/${share.id}`)
                                      .then(() => {
                                        void qc.invalidateQueries({ queryKey: ['incoming'] });
                                        refresh();
                                      })
                                      .catch(fail)
                                  }
                                >
                                  Leave this share
                                </Menu.Item>
                              )}
                              {!top && <Menu.Item color="red" onClick={() => void trash([e])}>Delete</Menu.Item>}
                            </Menu.Dropdown>
                          </Menu>
                        )}
                      </Table.Td>
                    </Table.Tr>
                  );
                })}
              </Table.Tbody>
            </Table>
          </Table.ScrollContainer>
        )}
        {!atSharedTop && <Text size="xs" c="dimmed">Tip: drop files or whole folders anywhere on this page to upload them. Keys: ↑ ↓ to move, Space to tick, Enter to open, F2 to rename, Delete to move to the trash, Backspace for the folder above.</Text>}
      </Stack>

      {dialog?.kind === 'mkdir' && (
        <NameDialog
          title="New folder"
          initial=""
          action="Create"
          onSubmit={async (name) => {
            await api('POST', apiUrl('dirs', join(path, name)));
            refresh();
          }}
          onClose={() => setDialog(null)}
        />
      )}
      {dialog?.kind === 'rename' && (
        <NameDialog
          title={`Rename ${dialog.entry.name}`}
          initial={dialog.entry.name}
          action="Rename"
          onSubmit={async (name) => {
            await api('POST', '/api/v1/move', { from: dialog.entry.path, to: join(parent(dialog.entry.path), name), overwrite: false });
            // A share's entry in `Shared with me` renamed: the caller's own name for it.
            if (parent(dialog.entry.path) === `/${SHARED}`) void qc.invalidateQueries({ queryKey: ['incoming'] });
            refresh();
          }}
          onClose={() => setDialog(null)}
        />
      )}
      {(dialog?.kind === 'move' || dialog?.kind === 'copy') && (
        <PlaceDialog entry={dialog.entry} mode={dialog.kind} onDone={refresh} onClose={() => setDialog(null)} />
      )}
      {dialog?.kind === 'move-many' && (
        <MoveManyDialog
          entries={dialog.entries}
          onDone={(n) => {
            if (n) setMessage({ text: `${n} item${n === 1 ? '' : 's'} moved.`, color: 'green' });
            setSelected(new Set());
            refresh();
          }}
          onClose={() => setDialog(null)}
        />
      )}
      {dialog?.kind === 'share' && <ShareDialog entry={dialog.entry} onClose={() => setDialog(null)} />}
      {dialog?.kind === 'versions' && <VersionsDialog entry={dialog.entry} onClose={() => setDialog(null)} />}
      {dialog?.kind === 'preview' && <PreviewDialog entry={dialog.entry} onClose={() => setDialog(null)} />}
    </Box>
  );
}
