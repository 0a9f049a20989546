import { describe, expect, it } from 'vitest';
import type { Entry } from '../../src/api/types';
import { apiUrl, baseName, crumbs, encodePath, filterEntries, folderOfRoute, folderRoute, inShared, join, nameError, parent, sortEntries } from './paths';

const e = (name: string, kind: 'file' | 'dir', size = 0, modified = '2026-01-01T00:00:00Z'): Entry => ({
  id: 1,
  name,
  path: `/${name}`,
  kind,
  size,
  modified,
  version: kind === 'file' ? 1 : null,
});

describe('paths', () => {
  it('join, parent and name', () => {
    expect(join('/', 'a')).toBe('/a');
    expect(join('/a', 'b c')).toBe('/a/b c');
    expect(parent('/a/b')).toBe('/a');
    expect(parent('/a')).toBe('/');
    expect(parent('/')).toBe('/');
    expect(baseName('/a/b.txt')).toBe('b.txt');
  });
  it('breadcrumbs run from the top down to the folder', () => {
    expect(crumbs('/')).toEqual([{ name: 'My files', path: '/' }]);
    expect(crumbs('/Docs/2026 plans')).toEqual([
      { name: 'My files', path: '/' },
      { name: 'Docs', path: '/Docs' },
      { name: '2026 plans', path: '/Docs/2026 plans' },
    ]);
  });
  it('encode each component, and read routes back', () => {
    expect(encodePath('/My Docs/a#1?.txt')).toBe('/My%20Docs/a%231%3F.txt');
    expect(apiUrl('dirs', '/')).toBe('/api/v1/dirs/');
    expect(apiUrl('files', '/a b/ü')).toBe('/api/v1/files/a%20b/%C3%BC');
    for (const p of ['/', '/a', '/Shared with me/x/y%z', '/a/b#c']) expect(folderOfRoute(folderRoute(p))).toBe(p);
    expect(folderOfRoute('/')).toBe('/');
    expect(folderOfRoute('/trash')).toBeNull();
    expect(folderOfRoute('/files/%E0%A4%A')).toBeNull();
  });
  it('know the shared folder', () => {
    expect(inShared('/Shared with me')).toBe(true);
    expect(inShared('/Shared with me/x')).toBe(true);
    expect(inShared('/Shared with meat')).toBe(false);
  });
  it('say what is wrong with a name', () => {
    expect(nameError('report.txt')).toBeNull();
    expect(nameError(' ')).toMatch(/Enter a name/);
    expect(nameError('a/b')).toMatch(/\//);
    expect(nameError('..')).toMatch(/"\.\."/);
    expect(nameError('a?')).toMatch(/Windows/);
    expect(nameError('a.')).toMatch(/end with/);
  });
  it('sort folders first, names naturally, either direction', () => {
    const list = [e('file10', 'file', 5), e('b', 'dir'), e('file2', 'file', 50), e('A', 'dir')];
    expect(sortEntries(list, 'name', false).map((x) => x.name)).toEqual(['A', 'b', 'file2', 'file10']);
    expect(sortEntries(list, 'name', true).map((x) => x.name)).toEqual(['b', 'A', 'file10', 'file2']);
    expect(sortEntries(list, 'size', true).map((x) => x.name)).toEqual(['b', 'A', 'file2', 'file10']);
    const dated = [e('old', 'file', 1, '2020-01-01T00:00:00Z'), e('new', 'file', 1, '2026-01-01T00:00:00Z')];
    expect(sortEntries(dated, 'modified', true).map((x) => x.name)).toEqual(['new', 'old']);
  });
  it('filter by name, ignoring case', () => {
    expect(filterEntries([e('Report.pdf', 'file'), e('notes', 'dir')], 'REP').map((x) => x.name)).toEqual(['Report.pdf']);
    expect(filterEntries([e('a', 'file')], '  ')).toHaveLength(1);
  });
});
