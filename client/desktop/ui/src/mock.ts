// The in-browser stand-in for the Rust back end, for vitest, the Playwright test and
// `npm run dev`. It follows the same rules as nimbus-desktop-core (desktop.rs): a self-signed
// server must be trusted by fingerprint, a wrong password is `bad_credentials`, sign-out
// refuses while uploads are pending. The real logic is tested in Rust against a real gateway
// (tests/tests/desktop.rs); this only lets the UI be exercised without one.
import type { Backend } from './backend';
import { BackendError } from './backend';
import type {
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

export const MOCK_USER = 'alice';
export const MOCK_PASSWORD = 'correct horse';
/** A server URL containing this offers no single sign-on. */
export const MOCK_NO_SSO = 'no-sso';
/** A server URL containing this is "self-signed" and shows MOCK_FINGERPRINT. */
export const MOCK_SELF_SIGNED = 'self-signed';
export const MOCK_FINGERPRINT =
  '3A:9F:10:C4:77:2B:E8:01:5D:6E:AA:93:0C:F1:42:7B:88:19:D0:5E:E3:64:2C:71:BB:08:4F:96:1A:CD:37:E2';

const GIB = 1024 ** 3;

function signedOut(location: string | null): Status {
  return {
    account: null,
    mount: { mounted: false, location },
    connectivity: 'signed_out',
    quota: null,
    activity: {
      pending_uploads: 0,
      uploads_in_flight: 0,
      commits_in_progress: 0,
      errors: [],
      conflicts: [],
      problems: [],
    },
    cache: null,
    last_error: null,
  };
}

export class MockBackend implements Backend {
  readonly kind = 'mock' as const;
  private status: Status = signedOut(null);
  private listeners = new Set<(e: DesktopEvent) => void>();
  /** Servers whose certificate was trusted (kept, like the app keeps the certificate file). */
  private trusted = new Set<string>();
  /** Test hook: a retry is refused again (the space is still full). */
  refuseRetries = false;
  /** Milliseconds each command takes (lets tests see busy states). */
  delay = 150;

  private async wait() {
    if (this.delay > 0) await new Promise((r) => setTimeout(r, this.delay));
  }

  private emit() {
    const status = structuredClone(this.status);
    for (const l of this.listeners) l({ kind: 'status_changed', status });
  }

  private set(patch: Partial<Status>) {
    this.status = { ...this.status, ...patch };
    this.emit();
  }

  /** Test hook: what the drive is doing (pending uploads, errors, conflicts, offline). */
  simulate(patch: Partial<Status>) {
    this.set(patch);
  }

  async getStatus() {
    await this.wait();
    return structuredClone(this.status);
  }

  /** Like the app: the server first (address, certificate), then the browser signs in as
   * MOCK_USER (the provider's part is the browser's, so there is nothing to type here). */
  async signInSso(req: SsoSignInRequest): Promise<SignInOutcome> {
    const url = await this.reach(req.server_url, req.trusted_fingerprint ?? null);
    if (typeof url !== 'string') return url;
    if (url.includes(MOCK_NO_SSO)) {
      throw new BackendError({ code: 'invalid', message: `${url} does not offer single sign-on; sign in with a username and password` });
    }
    return this.signedIn(url, MOCK_USER);
  }

  async signIn(req: SignInRequest): Promise<SignInOutcome> {
    const url = await this.reach(req.server_url, req.trusted_fingerprint ?? null);
    if (typeof url !== 'string') return url;
    if (req.username !== MOCK_USER || req.password !== MOCK_PASSWORD) {
      throw new BackendError({ code: 'bad_credentials', message: 'wrong username or password (or the account is disabled)' });
    }
    return this.signedIn(url, req.username);
  }

  private signedIn(url: string, username: string): SignInOutcome {
    const account = {
      server_url: url,
      username,
      token_storage: { kind: 'file' as const, path: '/home/alice/.config/nimbus-desktop/tokens/token-5f1c' },
      certificate_fingerprint: this.trusted.has(url) ? MOCK_FINGERPRINT : null,
    };
    this.set({ account, connectivity: 'online', quota: { used_bytes: 3.2 * GIB, total_bytes: 10 * GIB } });
    return { kind: 'signed_in', account };
  }

  /** The server's address checked and its certificate trusted: the URL, or the question. */
  private async reach(raw: string, fingerprint: string | null): Promise<string | SignInOutcome> {
    await this.wait();
    if (this.status.account) throw new BackendError({ code: 'invalid', message: 'already signed in: sign out first' });
    const url = raw.trim().replace(/\/+$/, '');
    if (!/^https?:\/\/[^/]+/.test(url)) {
      throw new BackendError({ code: 'invalid', message: `not a server address: ${raw}` });
    }
    if (url.includes('unreachable')) {
      throw new BackendError({ code: 'unreachable', message: `cannot reach a Nimbus server at ${url}: connection refused` });
    }
    const norm = (s: string) => s.replace(/[^0-9a-f]/gi, '').toUpperCase();
    if (url.includes(MOCK_SELF_SIGNED) && !this.trusted.has(url)) {
      if (norm(fingerprint ?? '') !== norm(MOCK_FINGERPRINT)) {
        return { kind: 'untrusted_certificate', server_url: url, fingerprint: MOCK_FINGERPRINT };
      }
      this.trusted.add(url);
    }
    return url;
  }

  async signOut(req: SignOutRequest): Promise<SignOutOutcome> {
    await this.wait();
    if (!this.status.account) throw new BackendError({ code: 'not_signed_in', message: 'not signed in' });
    const pending = this.status.activity.pending_uploads;
    if (this.status.mount.mounted && pending > 0 && !req.force) return { kind: 'pending_uploads', pending };
    this.status = signedOut(this.status.mount.location ?? null);
    this.emit();
    return { kind: 'signed_out', revoked: true, warning: null };
  }

  async mount(req: MountRequest): Promise<MountState> {
    await this.wait();
    if (!this.status.account) throw new BackendError({ code: 'not_signed_in', message: 'not signed in' });
    if (this.status.mount.mounted) {
      throw new BackendError({ code: 'already_mounted', message: `already mounted at ${this.status.mount.location}` });
    }
    const location = req.mountpoint?.trim() || '/home/alice/Nimbus';
    const mount = { mounted: true, location };
    this.set({
      mount,
      cache: { dir: '/home/alice/.cache/nimbus-desktop/drive-1f2e', used_bytes: 734 * 1024 ** 2, capacity_bytes: 10 * GIB },
    });
    return mount;
  }

  async unmount(): Promise<MountState> {
    await this.wait();
    if (!this.status.mount.mounted) throw new BackendError({ code: 'not_mounted', message: 'the drive is not mounted' });
    const mount = { mounted: false, location: this.status.mount.location ?? null };
    this.set({
      mount,
      cache: null,
      activity: { ...this.status.activity, pending_uploads: 0, uploads_in_flight: 0, commits_in_progress: 0 },
    });
    return mount;
  }

  async retryUploads() {
    await this.wait();
    if (!this.status.mount.mounted) throw new BackendError({ code: 'not_mounted', message: 'the drive is not mounted' });
    const n = this.status.activity.pending_uploads;
    // The mock's "uploads" finish at once.
    this.set({
      activity: { ...this.status.activity, pending_uploads: 0, uploads_in_flight: 0, commits_in_progress: 0, errors: [] },
    });
    return n;
  }

  async resolveProblem(req: ResolveRequest): Promise<ResolveReply> {
    await this.wait();
    if (!this.status.mount.mounted) throw new BackendError({ code: 'not_mounted', message: 'the drive is not mounted' });
    const problems = this.status.activity.problems;
    const p = problems.find((x) => x.path.toLowerCase() === req.path.toLowerCase());
    if (!p) {
      throw new BackendError({ code: 'mount', message: `no refused change is waiting at ${req.path}` });
    }
    if (req.action === 'retry' && this.refuseRetries) {
      throw new BackendError({ code: 'mount', message: p.detail });
    }
    const rest = problems.filter((x) => x !== p);
    this.set({ activity: { ...this.status.activity, problems: rest } });
    const dot = p.path.lastIndexOf('.');
    const [stem, ext] = dot > p.path.lastIndexOf('/') + 1 ? [p.path.slice(0, dot), p.path.slice(dot)] : [p.path, ''];
    const message = {
      retry: `uploaded ${p.path}`,
      save_copy: `saved this device's version of ${p.path} as ${stem} (copy 2026-11-26 0900 laptop)${ext}`,
      discard: `discarded this device's change to ${p.path}`,
    }[req.action];
    return { ok: true, message };
  }

  async freeCache() {
    await this.wait();
    if (!this.status.cache) throw new BackendError({ code: 'not_mounted', message: 'the drive is not mounted' });
    this.set({ cache: { ...this.status.cache, used_bytes: 0 } });
  }

  async openInFileManager() {
    await this.wait();
    if (!this.status.mount.mounted) throw new BackendError({ code: 'not_mounted', message: 'the drive is not mounted' });
  }

  async onEvent(cb: (e: DesktopEvent) => void) {
    this.listeners.add(cb);
    return () => {
      this.listeners.delete(cb);
    };
  }
}
