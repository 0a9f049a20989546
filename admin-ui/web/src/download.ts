// Downloads need the bearer token, which must never go into a URL: the app fetches the file
// with it and hands the browser the bytes as a blob (held in memory while it saves them).
import { api, request } from '../../src/api/client';
import type { CreateLinkRequest, LinkInfo } from '../../src/api/types';
import { apiUrl } from './paths';

/** The bytes of a file (an older version with `version`). */
export async function fetchFile(path: string, version?: number, signal?: AbortSignal): Promise<Blob> {
  const url = apiUrl('files', path) + (version === undefined ? '' : `?version=${version}`);
  const resp = await request('GET', url, { signal });
  return resp.blob();
}

/** Lets the browser save `blob` as `name`. */
export function saveBlob(blob: Blob, name: string) {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  a.rel = 'noopener';
  document.body.appendChild(a);
  a.click();
  a.remove();
  // The click starts the save; the URL is not needed after that.
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

export async function downloadFile(path: string, name: string, version?: number) {
  saveBlob(await fetchFile(path, version), name);
}

/** A folder as a zip, streamed by the gateway. The REST API has no zip of its own; the public
 * link side does (`/s/{token}/download`), so the app makes a link that opens once and expires
 * in ten minutes, and sends the browser there (no long-lived secret in the URL). */
export async function downloadFolderZip(path: string) {
  const body: CreateLinkRequest = {
    path,
    mode: 'view',
    expires_at: new Date(Date.now() + 10 * 60_000).toISOString(),
    max_downloads: 1,
  };
  const link = await api<LinkInfo>('POST', '/api/v1/links', body);
  const a = document.createElement('a');
  a.href = `/s/${link.token}/download`;
  a.rel = 'noopener noreferrer';
  document.body.appendChild(a);
  a.click();
  a.remove();
}
