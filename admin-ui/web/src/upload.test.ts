import { afterEach, describe, expect, it, vi } from 'vitest';
import { blake3 } from 'hash-wasm';
import { session } from '../../src/api/client';
import { blockRanges, foldersToCreate, hashBlocks, planSend, uploadFile } from './upload';

afterEach(() => vi.unstubAllGlobals());

// The part of a Blob the upload uses (jsdom's Blob has no arrayBuffer()).
const blob = (data: Uint8Array): Blob =>
  ({ size: data.length, slice: (a?: number, b?: number) => blob(data.slice(a, b)), arrayBuffer: async () => data.slice().buffer }) as unknown as Blob;

describe('blocks', () => {
  it('cut a file into full blocks and a shorter last one', () => {
    expect(blockRanges(0, 4)).toEqual([]);
    expect(blockRanges(4, 4)).toEqual([{ offset: 0, size: 4 }]);
    expect(blockRanges(10, 4)).toEqual([
      { offset: 0, size: 4 },
      { offset: 4, size: 4 },
      { offset: 8, size: 2 },
    ]);
  });
  it('hash each block with BLAKE3', async () => {
    const data = new TextEncoder().encode('abcdefghij');
    const blocks = await hashBlocks(blob(data), 4);
    expect(blocks).toEqual([
      { hash: await blake3(data.slice(0, 4)), size: 4 },
      { hash: await blake3(data.slice(4, 8)), size: 4 },
      { hash: await blake3(data.slice(8)), size: 2 },
    ]);
    // The known BLAKE3 of the empty input, so the hash is the protocol's and not another.
    expect(await blake3(new Uint8Array())).toBe('af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262');
  });
  it('plan a resume: send only what is missing, each hash once', () => {
    const blocks = [
      { hash: 'a', size: 4 },
      { hash: 'b', size: 4 },
      { hash: 'a', size: 4 },
      { hash: 'c', size: 2 },
    ];
    expect(planSend(blocks, ['a', 'b', 'c'])).toEqual({ send: [0, 1, 3], presentBytes: 0 });
    // After a reload, a and b had arrived: only c travels.
    expect(planSend(blocks, ['c'])).toEqual({ send: [3], presentBytes: 12 });
    expect(planSend(blocks, [])).toEqual({ send: [], presentBytes: 14 });
  });
  it('create every folder of a dropped tree once, parents first', () => {
    expect(foldersToCreate(['a.txt', 'f/b.txt', 'f/g/c.txt', 'f/g/d.txt'], ['f/empty'])).toEqual(['f', 'f/empty', 'f/g']);
  });
});

describe('uploadFile', () => {
  it('sends only the blocks the gateway lacks, then commits all of them', async () => {
    const data = new TextEncoder().encode('0123456789');
    const hashes = [await blake3(data.slice(0, 4)), await blake3(data.slice(4, 8)), await blake3(data.slice(8))];
    const calls: string[] = [];
    session.set('tok');
    vi.stubGlobal(
      'fetch',
      vi.fn(async (url: string, init: RequestInit) => {
        calls.push(`${init.method} ${url}`);
        expect((init.headers as Record<string, string>).Authorization).toBe('Bearer tok');
        if (url === '/api/v1/blocks/missing') return new Response(JSON.stringify({ missing: [hashes[2]] }));
        if (url.startsWith('/api/v1/blocks/')) return new Response('', { status: 201 });
        const body = JSON.parse(String(init.body));
        expect(body).toEqual({ base_version: null, force: true, blocks: hashes.map((h, i) => ({ hash: h, size: i < 2 ? 4 : 2 })) });
        return new Response(JSON.stringify({ id: 1, name: 'a b.txt', path: '/d/a b.txt', kind: 'file', size: 10, modified: '', version: 3 }), { status: 201 });
      }),
    );
    const seen: string[] = [];
    const entry = await uploadFile(blob(data), '/d/a b.txt', 4, (p) => seen.push(`${p.phase}:${p.done}`));
    expect(entry.version).toBe(3);
    expect(calls).toEqual(['POST /api/v1/blocks/missing', `PUT /api/v1/blocks/${hashes[2]}`, 'POST /api/v1/manifests/d/a%20b.txt']);
    expect(seen).toContain('sending:8');
    expect(seen.at(-1)).toBe('done:10');
  });
});
