// Paths of the user's space as the API names them ("/", "/Docs/a.txt") and as the app's
// routes carry them (/files/Docs/a.txt, each component percent-encoded).
import type { Entry } from '../../src/api/types';

/** The virtual folder at the top of every space that holds the shares given to the user. */
export const SHARED = 'Shared with me';

export function join(dir: string, name: string): string {
  return dir === '/' ? `/${name}` : `${dir}/${name}`;
}

export function parent(path: string): string {
  const i = path.lastIndexOf('/');
  return i <= 0 ? '/' : path.slice(0, i);
}

export function baseName(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}

/** Whether the path is `/Shared with me` or inside it. */
export function inShared(path: string): boolean {
  return path === `/${SHARED}` || path.startsWith(`/${SHARED}/`);
}

/** The breadcrumb trail of a folder: the space's top, then every folder down to it. */
export function crumbs(path: string): { name: string; path: string }[] {
  const out = [{ name: 'My files', path: '/' }];
  let p = '';
  for (const part of path.split('/').filter(Boolean)) {
    p += `/${part}`;
    out.push({ name: part, path: p });
  }
  return out;
}

/** `/My Docs/a#1.txt` → `/My%20Docs/a%231.txt`: one component at a time, as the API wants. */
export function encodePath(path: string): string {
  return path
    .split('/')
    .map((c) => encodeURIComponent(c))
    .join('/');
}

/** An API URL of a path: `api('files', '/a b')` → `/api/v1/files/a%20b`. The root has a trailing slash. */
export function apiUrl(resource: string, path: string): string {
  return path === '/' ? `/api/v1/${resource}/` : `/api/v1/${resource}${encodePath(path)}`;
}

/** The app's route of a folder, and back. */
export function folderRoute(path: string): string {
  return path === '/' ? '/files' : `/files${encodePath(path)}`;
}

export function folderOfRoute(route: string): string | null {
  if (route === '/' || route === '/files' || route === '/files/') return '/';
  if (!route.startsWith('/files/')) return null;
  try {
    const parts = route.slice('/files/'.length).split('/').filter(Boolean).map(decodeURIComponent);
    return parts.length === 0 ? '/' : `/${parts.join('/')}`;
  } catch {
    return null; // a malformed %-escape
  }
}

/** A name the gateway will refuse for sure (it has the full rules: nimbus_proto::names), said
 * before sending; null when it looks fine. */
export function nameError(name: string): string | null {
  if (name.trim() === '') return 'Enter a name.';
  if (name === '.' || name === '..') return 'A name cannot be "." or "..".';
  if (/[/\\]/.test(name)) return 'A name cannot contain / or \\.';
  if (/[\u0000-\u001f]/.test(name)) return 'A name cannot contain control characters.';
  if (/[<>:"|?*]/.test(name)) return 'A name cannot contain any of < > : " | ? * (Windows could not open it).';
  if (/[ .]$/.test(name)) return 'A name cannot end with a space or a dot.';
  return null;
}

export type SortKey = 'name' | 'size' | 'modified';

/** Folders first, then by the key; names compare as people expect ("file2" before "file10"). */
export function sortEntries(entries: Entry[], key: SortKey, descending: boolean): Entry[] {
  const collator = new Intl.Collator(undefined, { numeric: true, sensitivity: 'base' });
  const cmp = (a: Entry, b: Entry): number => {
    let c = 0;
    if (key === 'size') c = a.size - b.size;
    else if (key === 'modified') c = Date.parse(a.modified) - Date.parse(b.modified);
    if (c === 0) c = collator.compare(a.name, b.name);
    return descending ? -c : c;
  };
  const dirs = entries.filter((e) => e.kind === 'dir').sort(cmp);
  const files = entries.filter((e) => e.kind !== 'dir').sort(cmp);
  return [...dirs, ...files];
}

/** Entries whose name contains `q`, case-insensitively (the filter box). */
export function filterEntries(entries: Entry[], q: string): Entry[] {
  const needle = q.trim().toLocaleLowerCase();
  return needle === '' ? entries : entries.filter((e) => e.name.toLocaleLowerCase().includes(needle));
}
