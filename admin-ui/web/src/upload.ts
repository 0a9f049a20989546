// Uploads by the block protocol (docs/API.md, "Block protocol"): the browser cuts a file into
// blocks of the gateway's block size, hashes each with BLAKE3, asks which blocks the space does
// not hold yet, sends only those, then commits the list. An upload cut short (reload, lost
// connection) resumes by doing the same again: the blocks already sent are held (pending), so
// only the rest travel. Unfinished uploads are remembered in localStorage so the app can offer
// to resume them after a reload (the browser cannot keep the file itself: the user picks it again).
import { createBLAKE3 } from 'hash-wasm';
import { api, request } from '../../src/api/client';
import type { BlockRef, CommitRequest, Entry, MissingBlocksResponse } from '../../src/api/types';
import { apiUrl } from './paths';

/** The byte ranges of a file's blocks: all `blockSize` long but the last; none for an empty file. */
export function blockRanges(size: number, blockSize: number): { offset: number; size: number }[] {
  const out = [];
  for (let offset = 0; offset < size; offset += blockSize) out.push({ offset, size: Math.min(blockSize, size - offset) });
  return out;
}

/** Which blocks to send: the indexes of the first block of each missing hash (a hash that
 * occurs twice in a file is sent once), and how many bytes the gateway holds already. */
export function planSend(blocks: BlockRef[], missing: string[]): { send: number[]; presentBytes: number } {
  const want = new Set(missing);
  const isMissing = new Set(missing);
  const send: number[] = [];
  let presentBytes = 0;
  blocks.forEach((b, i) => {
    if (want.has(b.hash)) {
      send.push(i);
      want.delete(b.hash);
    } else if (!isMissing.has(b.hash)) {
      presentBytes += b.size;
    }
  });
  return { send, presentBytes };
}

export type Phase = 'hashing' | 'sending' | 'committing' | 'done';
export interface Progress {
  phase: Phase;
  /** Bytes hashed (hashing) or bytes the gateway holds (sending). */
  done: number;
  total: number;
}

/** BLAKE3 of each block of `file`, as lowercase hex. */
export async function hashBlocks(file: Blob, blockSize: number, onProgress?: (done: number) => void, signal?: AbortSignal): Promise<BlockRef[]> {
  const hasher = await createBLAKE3();
  const out: BlockRef[] = [];
  let done = 0;
  for (const r of blockRanges(file.size, blockSize)) {
    signal?.throwIfAborted();
    const bytes = new Uint8Array(await file.slice(r.offset, r.offset + r.size).arrayBuffer());
    hasher.init();
    hasher.update(bytes);
    out.push({ hash: hasher.digest('hex'), size: r.size });
    done += r.size;
    onProgress?.(done);
  }
  return out;
}

/** The API takes at most this many hashes per question. */
const MISSING_BATCH = 10000;

async function missingOf(blocks: BlockRef[]): Promise<string[]> {
  const hashes = [...new Set(blocks.map((b) => b.hash))];
  const out: string[] = [];
  for (let i = 0; i < hashes.length; i += MISSING_BATCH) {
    const r = await api<MissingBlocksResponse>('POST', '/api/v1/blocks/missing', { hashes: hashes.slice(i, i + MISSING_BATCH) });
    out.push(...r.missing);
  }
  return out;
}

/** Uploads `file` to `path` (replacing what is there: the old content stays as a version). */
export async function uploadFile(
  file: Blob,
  path: string,
  blockSize: number,
  onProgress: (p: Progress) => void,
  signal?: AbortSignal,
): Promise<Entry> {
  const total = file.size;
  onProgress({ phase: 'hashing', done: 0, total });
  const blocks = await hashBlocks(file, blockSize, (done) => onProgress({ phase: 'hashing', done, total }), signal);
  const missing = await missingOf(blocks);
  const { send, presentBytes } = planSend(blocks, missing);
  let held = presentBytes;
  onProgress({ phase: 'sending', done: held, total });
  const offsets = blockRanges(total, blockSize);
  // Two blocks in flight: enough to hide a round trip without holding much memory.
  let next = 0;
  let failed = false;
  const worker = async () => {
    while (next < send.length && !failed) {
      const i = send[next++];
      signal?.throwIfAborted();
      const r = offsets[i];
      try {
        await request('PUT', `/api/v1/blocks/${blocks[i].hash}`, { body: file.slice(r.offset, r.offset + r.size), signal });
      } catch (e) {
        failed = true; // the other worker stops too: what arrived is kept for a resume
        throw e;
      }
      held += blocks.filter((b) => b.hash === blocks[i].hash).reduce((n, b) => n + b.size, 0);
      onProgress({ phase: 'sending', done: held, total });
    }
  };
  // Both settle before the upload is reported failed, so no late progress follows the failure.
  const results = await Promise.allSettled([worker(), worker()]);
  const failure = results.find((r) => r.status === 'rejected');
  if (failure) throw failure.reason;
  onProgress({ phase: 'committing', done: total, total });
  const body: CommitRequest = { base_version: null, blocks, force: true };
  const entry = await api<Entry>('POST', apiUrl('manifests', path), body);
  onProgress({ phase: 'done', done: total, total });
  return entry;
}

/** An upload that started and has not finished (kept across reloads). */
export interface Unfinished {
  path: string;
  name: string;
  size: number;
  lastModified: number;
}

// Per user: another account signed in on the same browser sees none of them.
let owner = '';
const key = () => `nimbus-unfinished-uploads:${owner}`;

export const unfinished = {
  /** Whose unfinished uploads `list`, `add` and `remove` work on (the signed-in user). */
  setOwner(username: string) {
    owner = username;
  },
  list(): Unfinished[] {
    try {
      const v = JSON.parse(localStorage.getItem(key()) ?? '[]');
      return Array.isArray(v) ? v : [];
    } catch {
      return [];
    }
  },
  add(u: Unfinished) {
    const rest = unfinished.list().filter((x) => x.path !== u.path);
    localStorage.setItem(key(), JSON.stringify([...rest, u]));
  },
  remove(path: string) {
    localStorage.setItem(key(), JSON.stringify(unfinished.list().filter((x) => x.path !== path)));
  },
  /** The unfinished upload a file the user picked again belongs to (same name and size). */
  match(file: File): Unfinished | undefined {
    return unfinished.list().find((u) => u.name === file.name && u.size === file.size);
  },
};

/** A file to upload with its path relative to the folder it is dropped on (`sub/a.txt`). */
export interface Picked {
  file: File;
  rel: string;
}

/** The folders to create for a set of picked files and empty folders, parents first. */
export function foldersToCreate(rels: string[], emptyDirs: string[] = []): string[] {
  const dirs = new Set<string>();
  const add = (d: string) => {
    const parts = d.split('/').filter(Boolean);
    for (let i = 1; i <= parts.length; i++) dirs.add(parts.slice(0, i).join('/'));
  };
  for (const r of rels) add(r.split('/').slice(0, -1).join('/'));
  for (const d of emptyDirs) add(d);
  return [...dirs].sort((a, b) => a.split('/').length - b.split('/').length || a.localeCompare(b));
}

/** Files and folders of a drop: folders are walked (webkitGetAsEntry), empty ones kept. */
export async function readDrop(items: DataTransferItemList): Promise<{ files: Picked[]; dirs: string[] }> {
  const files: Picked[] = [];
  const dirs: string[] = [];
  const entries: FileSystemEntry[] = [];
  for (const item of Array.from(items)) {
    if (item.kind !== 'file') continue;
    const e = item.webkitGetAsEntry();
    if (e) entries.push(e);
    else {
      // No entry (a browser without it, or a DataTransfer a script made): the file alone.
      const file = item.getAsFile();
      if (file) files.push({ file, rel: file.name });
    }
  }
  const walk = async (entry: FileSystemEntry, prefix: string): Promise<void> => {
    const rel = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (entry.isFile) {
      const file = await new Promise<File>((res, rej) => (entry as FileSystemFileEntry).file(res, rej));
      files.push({ file, rel });
      return;
    }
    dirs.push(rel);
    const reader = (entry as FileSystemDirectoryEntry).createReader();
    // readEntries answers in batches (100 in Chromium) until an empty one.
    for (;;) {
      const batch = await new Promise<FileSystemEntry[]>((res, rej) => reader.readEntries(res, rej));
      if (batch.length === 0) break;
      for (const child of batch) await walk(child, rel);
    }
  };
  for (const e of entries) await walk(e, '');
  return { files, dirs };
}

/** Files from an `<input type=file>` (with `webkitdirectory`, each knows its relative path). */
export function fromInput(list: FileList): Picked[] {
  return Array.from(list).map((file) => ({ file, rel: file.webkitRelativePath || file.name }));
}
