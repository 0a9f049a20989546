// The upload queue: files picked, dropped or resumed go through it one at a time (blocks of
// one file two at a time, upload.ts), with progress; it outlives page changes inside the app.
import { Alert, Button, CloseButton, Group, Paper, Progress, Stack, Text } from '@mantine/core';
import { useQueryClient } from '@tanstack/react-query';
import { createContext, useCallback, useContext, useRef, useState, type ReactNode } from 'react';
import { api } from '../../src/api/client';
import type { ServerInfo } from '../../src/api/types';
import { formatSize } from '../../src/format';
import { describeError } from './errors';
import { apiUrl, join } from './paths';
import { type Phase, type Picked, foldersToCreate, unfinished, uploadFile } from './upload';

interface Item {
  id: number;
  name: string;
  path: string;
  phase: Phase | 'waiting' | 'failed';
  done: number;
  total: number;
  error?: string;
}

interface Uploads {
  /** Uploads `files` (and creates `emptyDirs`) into the folder `dir`. */
  start: (dir: string, files: Picked[], emptyDirs?: string[]) => void;
  /** Uploads one file to an exact path (resuming an unfinished upload). */
  resume: (path: string, file: File) => void;
}

const Ctx = createContext<Uploads>({ start: () => {}, resume: () => {} });
export const useUploads = () => useContext(Ctx);

let blockSize: number | null = null;
async function theBlockSize(): Promise<number> {
  if (blockSize === null) blockSize = (await api<ServerInfo>('GET', '/api/v1/info')).block_size;
  return blockSize;
}

export function UploadProvider({ children }: { children: ReactNode }) {
  const qc = useQueryClient();
  const [items, setItems] = useState<Item[]>([]);
  const queue = useRef<Promise<void>>(Promise.resolve());
  const nextId = useRef(1);

  const update = (id: number, patch: Partial<Item>) => setItems((xs) => xs.map((x) => (x.id === id ? { ...x, ...patch } : x)));

  const enqueue = useCallback(
    (path: string, file: File) => {
      const id = nextId.current++;
      setItems((xs) => [...xs, { id, name: file.name, path, phase: 'waiting', done: 0, total: file.size }]);
      queue.current = queue.current.then(async () => {
        unfinished.add({ path, name: file.name, size: file.size, lastModified: file.lastModified });
        try {
          await uploadFile(file, path, await theBlockSize(), (p) => update(id, { phase: p.phase, done: p.done, total: p.total }));
          unfinished.remove(path);
        } catch (e) {
          update(id, { phase: 'failed', error: describeError(e) });
        }
        void qc.invalidateQueries({ queryKey: ['dir'] });
        void qc.invalidateQueries({ queryKey: ['me'] });
      });
    },
    [qc],
  );

  const start = useCallback(
    (dir: string, files: Picked[], emptyDirs: string[] = []) => {
      const folders = foldersToCreate(
        files.map((f) => f.rel),
        emptyDirs,
      );
      // Folders first (the commit of a file needs its folder), then the files in order.
      queue.current = queue.current.then(async () => {
        for (const f of folders) {
          try {
            await api('POST', apiUrl('dirs', join(dir, f)));
          } catch (e) {
            const id = nextId.current++;
            setItems((xs) => [...xs, { id, name: `${f}/`, path: join(dir, f), phase: 'failed', done: 0, total: 0, error: describeError(e) }]);
          }
        }
        if (folders.length) void qc.invalidateQueries({ queryKey: ['dir'] });
      });
      for (const f of files) enqueue(join(dir, f.rel), f.file);
    },
    [enqueue, qc],
  );

  return (
    <Ctx.Provider value={{ start, resume: enqueue }}>
      {children}
      <UploadPanel items={items} onClear={() => setItems((xs) => xs.filter((x) => x.phase !== 'done' && x.phase !== 'failed'))} />
    </Ctx.Provider>
  );
}

const PHASE: Record<Item['phase'], string> = {
  waiting: 'Waiting',
  hashing: 'Checking',
  sending: 'Uploading',
  committing: 'Saving',
  done: 'Done',
  failed: 'Failed',
};

function UploadPanel({ items, onClear }: { items: Item[]; onClear: () => void }) {
  if (items.length === 0) return null;
  const active = items.filter((x) => x.phase !== 'done' && x.phase !== 'failed').length;
  return (
    <Paper
      withBorder
      shadow="md"
      p="sm"
      pos="fixed"
      bottom={16}
      right={16}
      w={360}
      maw="calc(100vw - 32px)"
      style={{ zIndex: 300, maxHeight: '40vh', overflowY: 'auto' }}
      role="region"
      aria-label="Uploads"
    >
      <Group justify="space-between" mb="xs">
        <Text fw={600}>{active ? `Uploading ${active} file${active === 1 ? '' : 's'}` : 'Uploads finished'}</Text>
        {active === 0 && <CloseButton aria-label="Close uploads" onClick={onClear} />}
      </Group>
      <Stack gap="xs">
        {items.map((x) => (
          <div key={x.id} data-testid="upload-item" data-phase={x.phase}>
            <Group justify="space-between" wrap="nowrap" gap="xs">
              <Text size="sm" truncate title={x.path}>{x.name}</Text>
              <Text size="xs" c="dimmed" style={{ whiteSpace: 'nowrap' }}>
                {PHASE[x.phase]} {x.phase === 'sending' || x.phase === 'hashing' ? `${formatSize(x.done)} of ${formatSize(x.total)}` : ''}
              </Text>
            </Group>
            {x.phase !== 'failed' && <Progress size="sm" value={x.total ? (x.done / x.total) * 100 : x.phase === 'done' ? 100 : 0} aria-label={`${x.name} progress`} />}
            {x.error && <Alert color="red" p={4} role="alert">{x.error}</Alert>}
          </div>
        ))}
      </Stack>
      {active === 0 && <Button mt="xs" size="xs" variant="subtle" onClick={onClear}>Clear</Button>}
    </Paper>
  );
}
