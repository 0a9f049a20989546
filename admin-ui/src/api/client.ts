// The gateway's API with the session token; errors carry the API's own code and message.
import { ERROR_CODES, type ErrorCode } from './generated';

const TOKEN_KEY = 'nimbus-admin-token';

/** Codes the console gives an error itself: no answer (`network`), or an answer without a
 * code this build knows (a proxy's page, a newer gateway's code): `error`. */
export type ClientErrorCode = 'network' | 'error';

export class ApiError extends Error {
  constructor(
    public status: number,
    public code: ErrorCode | ClientErrorCode,
    message: string,
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
  get: () => sessionStorage.getItem(TOKEN_KEY),
  set: (t: string) => sessionStorage.setItem(TOKEN_KEY, t),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = {};
  const token = session.get();
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let resp: Response;
  try {
    resp = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch {
    throw new ApiError(0, 'network', 'Cannot reach the gateway.');
  }
  if (resp.status === 204) return undefined as T;
  const text = await resp.text();
  let json: unknown = undefined;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    /* a non-JSON body: reported below by status */
  }
  if (!resp.ok) {
    const err = (json as { error?: { code?: string; message?: string } } | undefined)?.error;
    const e = new ApiError(resp.status, errorCode(err?.code), err?.message ?? `HTTP ${resp.status}`);
    if (resp.status === 401 && token && !path.endsWith('/auth/login')) onUnauthorized();
    throw e;
  }
  return json as T;
}

export function errorMessage(e: unknown): string {
  if (e instanceof Error) return e.message;
  return String(e);
}
