import { Alert, Button, Group, Loader, Modal, Stack, Table, Text, TextInput } from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useRef, useState, type FormEvent, type ReactNode } from 'react';
import { api } from '../../../src/api/client';
import type { Entry, VersionList } from '../../../src/api/types';
import { formatSize } from '../../../src/format';
import { downloadFile, fetchFile } from '../download';
import { describeError } from '../errors';
import { listAll } from '../listing';
import { SHARED, apiUrl, join, nameError, parent } from '../paths';
import { PREVIEW_LIMIT, TEXT_LIMIT, previewOf } from '../preview';
import { QueryStatus } from './QueryStatus';
import { SimpleTable } from './SimpleTable';

export const when = (iso: string) => new Date(iso).toLocaleString();

/** Asks for one text (a name, a path): `check` says what is wrong before sending, `onSubmit`
 * throws to show the gateway's refusal in words. */
function AskDialog({
  title,
  label,
  description,
  initial,
  action,
  check,
  selectName,
  extra,
  onSubmit,
  onClose,
}: {
  title: string;
  label: string;
  description?: string;
  initial: string;
  action: string;
  check: (value: string) => string | null;
  /** Select the name without its extension when the field gets focus, as file managers do. */
  selectName?: boolean;
  /** More below the field, which may change the text (a folder picker). */
  extra?: (value: string, setValue: (v: string) => void) => ReactNode;
  onSubmit: (value: string) => Promise<void>;
  onClose: () => void;
}) {
  const [value, setValue] = useState(initial);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const selected = useRef(false);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const bad = check(value);
    if (bad) return setError(bad);
    setBusy(true);
    try {
      await onSubmit(value);
      onClose();
    } catch (err) {
      setError(describeError(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <Modal opened onClose={onClose} title={title}>
      <form onSubmit={submit}>
        <Stack>
          {error && <Alert color="red" role="alert">{error}</Alert>}
          <TextInput
            label={label}
            description={description}
            value={value}
            onChange={(e) => setValue(e.currentTarget.value)}
            data-autofocus
            onFocus={(e) => {
              if (!selectName || selected.current) return;
              selected.current = true;
              const dot = e.currentTarget.value.lastIndexOf('.');
              e.currentTarget.setSelectionRange(0, dot > 0 ? dot : e.currentTarget.value.length);
            }}
          />
          {extra?.(value, setValue)}
          <Group justify="flex-end">
            <Button variant="default" onClick={onClose}>Cancel</Button>
            <Button type="submit" loading={busy}>{action}</Button>
          </Group>
        </Stack>
      </form>
    </Modal>
  );
}

/** Asks for a name (new folder, rename). */
export function NameDialog(props: { title: string; initial: string; action: string; onSubmit: (name: string) => Promise<void>; onClose: () => void }) {
  return <AskDialog {...props} label="Name" check={nameError} selectName />;
}

/** Asks where to move or copy an entry: the full path of the new place. */
export function PlaceDialog({ entry, mode, onDone, onClose }: { entry: Entry; mode: 'move' | 'copy'; onDone: () => void; onClose: () => void }) {
  const verb = mode === 'move' ? 'Move' : 'Copy';
  return (
    <AskDialog
      title={`${verb} ${entry.name}`}
      label="New path"
      description="The folder and the name, e.g. /Archive/2026/report.pdf; missing folders are not created."
      initial={entry.path}
      action={verb}
      check={(to) =>
        !to.startsWith('/') || to === '/'
          ? 'Give the full new path, starting with / (for example /Archive/report.pdf).'
          : to === entry.path
            ? 'That is where it is now.'
            : null
      }
      extra={(to, setTo) => <FolderPicker dir={to.startsWith('/') ? parent(to) : '/'} onPick={(dir) => setTo(join(dir, entry.name))} />}
      onSubmit={async (to) => {
        await api('POST', `/api/v1/${mode}`, { from: entry.path, to, overwrite: false });
        onDone();
      }}
      onClose={onClose}
    />
  );
}

/** Moves several entries into one folder, keeping their names. */
export function MoveManyDialog({ entries, onDone, onClose }: { entries: Entry[]; onDone: (moved: number) => void; onClose: () => void }) {
  const from = entries.length ? parent(entries[0].path) : '/';
  return (
    <AskDialog
      title={`Move ${entries.length} items`}
      label="Into the folder"
      initial={from}
      action="Move"
      check={(to) => (!to.startsWith('/') ? 'Give the folder\'s full path, starting with /.' : to === from ? 'That is where they are now.' : null)}
      extra={(to, setTo) => <FolderPicker dir={to.startsWith('/') ? to : '/'} onPick={setTo} />}
      onSubmit={async (to) => {
        let moved = 0;
        try {
          for (const e of entries) {
            await api('POST', '/api/v1/move', { from: e.path, to: join(to, e.name), overwrite: false });
            moved++;
          }
        } finally {
          onDone(moved);
        }
      }}
      onClose={onClose}
    />
  );
}

/** The folders inside `dir`, to walk to a place instead of typing it; a click picks one (or
 * the folder above). */
function FolderPicker({ dir, onPick }: { dir: string; onPick: (dir: string) => void }) {
  const listing = useQuery({ queryKey: ['dir', dir], queryFn: () => listAll(dir) });
  const folders = (listing.data ?? []).filter((e) => e.kind === 'dir' && !(dir === '/' && e.name === SHARED));
  return (
    <Stack gap={4} aria-label="Folders">
      <Text size="sm" c="dimmed">In {dir === '/' ? 'My files' : dir}:</Text>
      <Group gap={4}>
        {dir !== '/' && (
          <Button size="compact-sm" variant="default" onClick={() => onPick(parent(dir))}>↑ Up</Button>
        )}
        {folders.map((f) => (
          <Button key={f.path} size="compact-sm" variant="light" onClick={() => onPick(f.path)}>{f.name}</Button>
        ))}
        {listing.isSuccess && folders.length === 0 && <Text size="sm" c="dimmed">no folders</Text>}
      </Group>
    </Stack>
  );
}

/** A file's versions: download, restore, delete older ones. */
export function VersionsDialog({ entry, onClose }: { entry: Entry; onClose: () => void }) {
  const qc = useQueryClient();
  const key = ['versions', entry.path];
  const versions = useQuery({ queryKey: key, queryFn: () => api<VersionList>('GET', apiUrl('versions', entry.path)) });
  const [error, setError] = useState<string | null>(null);
  const act = useMutation({
    mutationFn: async ({ op, version }: { op: 'restore' | 'delete' | 'download'; version: number }) => {
      if (op === 'restore') await api('POST', apiUrl('versions', entry.path), { version });
      else if (op === 'delete') await api('DELETE', `${apiUrl('versions', entry.path)}?version=${version}`);
      else await downloadFile(entry.path, entry.name, entry.size, version);
    },
    onSuccess: () => {
      setError(null);
      void qc.invalidateQueries({ queryKey: key });
      void qc.invalidateQueries({ queryKey: ['dir'] });
      void qc.invalidateQueries({ queryKey: ['me'] });
    },
    onError: (e) => setError(describeError(e)),
  });
  return (
    <Modal opened onClose={onClose} title={`Versions of ${entry.name}`} size="lg">
      <Stack>
        {error && <Alert color="red" role="alert">{error}</Alert>}
        <QueryStatus query={versions} />
        {versions.data && (
          <SimpleTable label="Versions" columns={['Saved', 'Size', 'From', '']}>
            {versions.data.versions.map((v) => (
              <Table.Tr key={v.version} data-testid="version-row">
                <Table.Td>{when(v.created)}{v.current ? ' (current)' : ''}</Table.Td>
                <Table.Td>{formatSize(v.size)}</Table.Td>
                <Table.Td>{v.device ?? ''}</Table.Td>
                <Table.Td>
                  <Group gap={4} justify="flex-end" wrap="nowrap">
                    <Button size="xs" variant="subtle" onClick={() => act.mutate({ op: 'download', version: v.version })}>Download</Button>
                    {!v.current && (
                      <>
                        <Button size="xs" variant="light" onClick={() => act.mutate({ op: 'restore', version: v.version })}>Restore</Button>
                        <Button size="xs" variant="subtle" color="red" onClick={() => act.mutate({ op: 'delete', version: v.version })}>Delete</Button>
                      </>
                    )}
                  </Group>
                </Table.Td>
              </Table.Tr>
            ))}
          </SimpleTable>
        )}
      </Stack>
    </Modal>
  );
}

/** A file shown in the page from a blob of its bytes (preview.ts says which and how). */
export function PreviewDialog({ entry, onClose }: { entry: Entry; onClose: () => void }) {
  const how = previewOf(entry.name);
  const [url, setUrl] = useState<string | null>(null);
  const [text, setText] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    if (!how) return;
    if (entry.size > PREVIEW_LIMIT) {
      setError(`This file is ${formatSize(entry.size)}: too large to show here. Download it instead.`);
      return;
    }
    const ctl = new AbortController();
    let made: string | null = null;
    fetchFile(entry.path, undefined, ctl.signal)
      .then(async (blob) => {
        if (how.kind === 'text') {
          const cut = blob.size > TEXT_LIMIT;
          setText((await blob.slice(0, TEXT_LIMIT).text()) + (cut ? '\n…' : ''));
        } else {
          made = URL.createObjectURL(new Blob([blob], { type: how.type }));
          setUrl(made);
        }
      })
      .catch((e) => {
        if (!ctl.signal.aborted) setError(describeError(e));
      });
    return () => {
      ctl.abort();
      if (made) URL.revokeObjectURL(made);
    };
  }, [entry.path, entry.size, how?.kind, how?.type]);
  return (
    <Modal opened onClose={onClose} title={entry.name} size="xl" fullScreen={false}>
      <Stack>
        {!how && <Text>There is no preview for this kind of file.</Text>}
        {error && <Alert color="red" role="alert">{error}</Alert>}
        {how && !error && !url && text === null && <Loader size="sm" aria-label="Loading preview" />}
        {url && how?.kind === 'image' && <img src={url} alt={entry.name} style={{ maxWidth: '100%', maxHeight: '75vh', objectFit: 'contain' }} />}
        {url && how?.kind === 'video' && <video src={url} controls style={{ maxWidth: '100%', maxHeight: '75vh' }} aria-label={entry.name} />}
        {url && how?.kind === 'audio' && <audio src={url} controls aria-label={entry.name} />}
        {url && how?.kind === 'pdf' && <iframe src={url} title={entry.name} style={{ width: '100%', height: '75vh', border: 0 }} />}
        {text !== null && (
          <pre data-testid="text-preview" style={{ maxHeight: '75vh', overflow: 'auto', whiteSpace: 'pre-wrap', wordBreak: 'break-word', margin: 0 }}>
            {text}
          </pre>
        )}
        <Group justify="flex-end">
          <Button variant="default" onClick={() => void downloadFile(entry.path, entry.name, entry.size).catch((e) => setError(describeError(e)))}>Download</Button>
          <Button onClick={onClose}>Close</Button>
        </Group>
      </Stack>
    </Modal>
  );
}
