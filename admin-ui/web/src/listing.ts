import { api } from '../../src/api/client';
import type { DirListing, Entry } from '../../src/api/types';
import { apiUrl } from './paths';

/** Every entry of a folder (the API pages by 1000). */
export async function listAll(path: string): Promise<Entry[]> {
  const out: Entry[] = [];
  let cursor: string | null = null;
  do {
    const q: string = cursor ? `?limit=1000&cursor=${encodeURIComponent(cursor)}` : '?limit=1000';
    const page: DirListing = await api<DirListing>('GET', apiUrl('dirs', path) + q);
    out.push(...page.entries);
    cursor = page.next_cursor;
  } while (cursor);
  return out;
}

