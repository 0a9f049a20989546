import { describe, expect, it } from 'vitest';
import { readDrop } from './upload';

// Stand-ins for what a browser hands a drop handler: entries of files and folders, a folder's
// reader answering in batches (Chromium: 100 at a time) until an empty one.
const fileEntry = (name: string) => ({ name, isFile: true, isDirectory: false, file: (ok: (f: File) => void) => ok(new File([name], name)) });
const dirEntry = (name: string, children: unknown[], batch = 2) => ({
  name,
  isFile: false,
  isDirectory: true,
  createReader: () => {
    let at = 0;
    return {
      readEntries: (ok: (e: unknown[]) => void) => {
        ok(children.slice(at, at + batch));
        at += batch;
      },
    };
  },
});
const items = (entries: unknown[], plain: File[] = []) =>
  [
    ...entries.map((e) => ({ kind: 'file', webkitGetAsEntry: () => e, getAsFile: () => null })),
    ...plain.map((f) => ({ kind: 'file', webkitGetAsEntry: () => null, getAsFile: () => f })),
    { kind: 'string', webkitGetAsEntry: () => null, getAsFile: () => null },
  ] as unknown as DataTransferItemList;

describe('a drop', () => {
  it('walks dropped folders in every batch, keeps empty ones, and takes plain files too', async () => {
    const tree = dirEntry('Photos', [fileEntry('a.jpg'), fileEntry('b.jpg'), dirEntry('2026', [fileEntry('c.jpg')]), dirEntry('empty', [])]);
    const { files, dirs } = await readDrop(items([tree, fileEntry('top.txt')], [new File(['x'], 'loose.txt')]));
    expect(files.map((f) => f.rel).sort()).toEqual(['Photos/2026/c.jpg', 'Photos/a.jpg', 'Photos/b.jpg', 'loose.txt', 'top.txt']);
    expect(dirs.sort()).toEqual(['Photos', 'Photos/2026', 'Photos/empty']);
  });
});
