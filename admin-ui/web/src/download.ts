// Downloads need the bearer token, which must never go into a URL: the app fetches the file
// with it and hands the browser the bytes as a blob (held in memory while it saves them), or,
// for large files and folders, sends the browser to a link that opens once (openOnce).
import { api, request } from '../../src/api/client';
import type { CreateLinkRequest, LinkInfo } from '../../src/api/types';
import { apiUrl, inShared } from './paths';

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

/** Files up to this size are fetched into the page; larger ones stream through a one-time link. */
export const BLOB_LIMIT = 256 * 1024 * 1024;

/** Whether a download of `size` bytes at `path` goes through a one-time link (streamed by the
 * browser, nothing held in the page) rather than a blob: large current files of the user's own
 * space (links cannot be made inside `Shared with me`, nor for an older version). */
export function streamsByLink(path: string, size: number, version?: number): boolean {
  return size > BLOB_LIMIT && version === undefined && !inShared(path);
}

export async function downloadFile(path: string, name: string, size: number, version?: number) {
  if (streamsByLink(path, size, version)) return openOnce(path);
  saveBlob(await fetchFile(path, version), name);
}

/** A folder as a zip, streamed by the gateway. */
export const downloadFolderZip = openOnce;

/** The REST API streams neither a folder's zip nor a file to a plain browser request (it needs
 * the bearer token, which never goes into a URL); the public link side does
 * (`/s/{token}/download`). So the app makes a link that opens once and expires in ten minutes,
 * and sends the browser there: the link's token is good for this one download only. */
async function openOnce(path: string) {
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
