// The one way the UI reaches the app: every command and the event stream go through here.
// In the Tauri app it is `invoke`/`listen` (@tauri-apps/api); in a plain browser (vitest, the
// Playwright test, `npm run dev`) it is the in-memory mock in mock.ts. Types come from Rust
// (generated/bindings.ts), so both sides agree on every field.
import type {
  CommandError,
  CommandName,
  DesktopEvent,
  MountRequest,
  MountState,
  ResolveReply,
  ResolveRequest,
  SignInOutcome,
  SignInRequest,
  SignOutOutcome,
  SignOutRequest,
  SsoSignInRequest,
  Status,
} from './generated/bindings';
import { EVENT_NAME } from './generated/bindings';
import { MockBackend } from './mock';

export interface Backend {
  readonly kind: 'tauri' | 'mock';
  getStatus(): Promise<Status>;
  signIn(req: SignInRequest): Promise<SignInOutcome>;
  /** Single sign-on in the system browser; resolves when the browser came back. */
  signInSso(req: SsoSignInRequest): Promise<SignInOutcome>;
  signOut(req: SignOutRequest): Promise<SignOutOutcome>;
  mount(req: MountRequest): Promise<MountState>;
  unmount(): Promise<MountState>;
  retryUploads(): Promise<number>;
  /** Retry, save a copy of, or discard one change the server refused. */
  resolveProblem(req: ResolveRequest): Promise<ResolveReply>;
  freeCache(): Promise<void>;
  openInFileManager(): Promise<void>;
  /** Calls `cb` on every event; returns the function that stops listening. */
  onEvent(cb: (e: DesktopEvent) => void): Promise<() => void>;
}

/** A failed command, with the code Rust gave it (see ErrorCode in bindings.ts). */
export class BackendError extends Error {
  readonly code: CommandError['code'];
  constructor(e: CommandError) {
    super(e.message);
    this.code = e.code;
  }
}

function isCommandError(e: unknown): e is CommandError {
  return typeof e === 'object' && e !== null && 'code' in e && 'message' in e;
}

class TauriBackend implements Backend {
  readonly kind = 'tauri' as const;

  private async call<T>(name: CommandName, args?: Record<string, unknown>): Promise<T> {
    const { invoke } = await import('@tauri-apps/api/core');
    try {
      return await invoke<T>(name, args);
    } catch (e) {
      throw isCommandError(e) ? new BackendError(e) : new BackendError({ code: 'server', message: String(e) });
    }
  }

  getStatus() {
    return this.call<Status>('get_status');
  }
  signIn(req: SignInRequest) {
    return this.call<SignInOutcome>('sign_in', { req });
  }
  signInSso(req: SsoSignInRequest) {
    return this.call<SignInOutcome>('sign_in_sso', { req });
  }
  signOut(req: SignOutRequest) {
    return this.call<SignOutOutcome>('sign_out', { req });
  }
  mount(req: MountRequest) {
    return this.call<MountState>('mount', { req });
  }
  unmount() {
    return this.call<MountState>('unmount');
  }
  retryUploads() {
    return this.call<number>('retry_uploads');
  }
  resolveProblem(req: ResolveRequest) {
    return this.call<ResolveReply>('resolve_problem', { req });
  }
  freeCache() {
    return this.call<void>('free_cache');
  }
  openInFileManager() {
    return this.call<void>('open_in_file_manager');
  }
  async onEvent(cb: (e: DesktopEvent) => void) {
    const { listen } = await import('@tauri-apps/api/event');
    return listen<DesktopEvent>(EVENT_NAME, (e) => cb(e.payload));
  }
}

/** Inside the Tauri webview the runtime injects `__TAURI_INTERNALS__`. */
export function inTauri(): boolean {
  return typeof window !== 'undefined' && '__TAURI_INTERNALS__' in window;
}

let current: Backend | undefined;

export function backend(): Backend {
  current ??= inTauri() ? new TauriBackend() : new MockBackend();
  return current;
}

/** Tests swap in their own mock. */
export function setBackend(b: Backend): void {
  current = b;
}
