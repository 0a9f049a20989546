// The gateway's API with the session token; errors carry the API's own message.
const TOKEN_KEY = 'nimbus-admin-token';

export class ApiError extends Error {
  constructor(
    public status: number,
    public code: string,
    message: string,
  ) {
    super(message);
  }
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
    const e = new ApiError(resp.status, err?.code ?? 'error', err?.message ?? `HTTP ${resp.status}`);
    if (resp.status === 401 && token && !path.endsWith('/auth/login')) onUnauthorized();
    throw e;
  }
  return json as T;
}

export function errorMessage(e: unknown): string {
  if (e instanceof Error) return e.message;
  return String(e);
}
