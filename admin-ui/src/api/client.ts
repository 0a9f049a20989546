// The gateway's API with the session token; errors carry the API's own code and message.
// Shared by the console (src/) and the users' web app (web/src/).
import { ERROR_CODES, type ErrorCode } from './generated';

// Each front end keeps its own session (they share an origin): the web app sets its key at start.
let tokenKey = 'nimbus-admin-token';
export function setSessionKey(key: string) {
  tokenKey = key;
}

/** Codes the console gives an error itself: no answer (`network`), or an answer without a
 * code this build knows (a proxy's page, a newer gateway's code): `error`. */
export type ClientErrorCode = 'network' | 'error';

export class ApiError extends Error {
  constructor(
    public status: number,
    public code: ErrorCode | ClientErrorCode,
    message: string,
    /** The code as the gateway sent it, also one this build does not know (`totp_required`). */
    public rawCode?: string,
  ) {
    super(message);
  }
}

/** The gateway's code (proto's `ErrorCode`, via generated.ts), or `error` for anything else. */
export function errorCode(raw: unknown): ErrorCode | 'error' {
  return ERROR_CODES.find((c) => c === raw) ?? 'error';
}

type Listener = () => void;
let onUnauthorized: Listener = () => {};
export function setUnauthorizedHandler(l: Listener) {
  onUnauthorized = l;
}

export const session = {
  get: () => sessionStorage.getItem(tokenKey),
  set: (t: string) => sessionStorage.setItem(tokenKey, t),
  clear: () => sessionStorage.removeItem(tokenKey),
};

/** A request with the session's token: the answer when it is a success (2xx, 304), else an
 * ApiError from the gateway's error body. For bodies that are not JSON (file contents, blocks). */
export async function request(
  method: string,
  path: string,
  init: { body?: BodyInit; headers?: Record<string, string>; signal?: AbortSignal } = {},
): Promise<Response> {
  const headers: Record<string, string> = { ...init.headers };
  const token = session.get();
  if (token) headers.Authorization = `Bearer ${token}`;
  let resp: Response;
  try {
    resp = await fetch(path, { method, headers, body: init.body, signal: init.signal });
  } catch (e) {
    if (e instanceof DOMException && e.name === 'AbortError') throw e;
    throw new ApiError(0, 'network', 'Cannot reach the gateway.');
  }
  if (resp.ok || resp.status === 304) return resp;
  const text = await resp.text();
  let json: unknown = undefined;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    /* a non-JSON body: reported below by status */
  }
  const err = (json as { error?: { code?: string; message?: string } } | undefined)?.error;
  const e = new ApiError(resp.status, errorCode(err?.code), err?.message ?? `HTTP ${resp.status}`, err?.code);
  if (resp.status === 401 && token && !path.endsWith('/auth/login')) onUnauthorized();
  throw e;
}

export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const resp = await request(method, path, {
    body: body === undefined ? undefined : JSON.stringify(body),
    headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
  });
  if (resp.status === 204) return undefined as T;
  const text = await resp.text();
  try {
    return (text ? JSON.parse(text) : undefined) as T;
  } catch {
    throw new ApiError(resp.status, 'error', `HTTP ${resp.status}: not JSON`);
  }
}

export function errorMessage(e: unknown): string {
  if (e instanceof Error) return e.message;
  return String(e);
}
