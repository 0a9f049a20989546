import { MantineProvider } from '@mantine/core';
import { render, screen, waitFor } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { SignIn } from './SignIn';

afterEach(() => {
  vi.unstubAllGlobals();
  sessionStorage.clear();
});

const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status });
const err = (status: number, code: string, message: string) => json({ error: { code, message } }, status);
const user = { id: 1, username: 'admin', role: 'admin' };

function show(onSignedIn: (t: string) => void) {
  render(
    <MantineProvider env="test">
      <SignIn notice={null} onSignedIn={onSignedIn} />
    </MantineProvider>,
  );
}

describe('SignIn', () => {
  it('asks for the two-factor code when the gateway wants one, and sends it with the password', async () => {
    const bodies: Record<string, unknown>[] = [];
    vi.stubGlobal(
      'fetch',
      vi.fn(async (_url: string, init?: RequestInit) => {
        const body = JSON.parse(String(init?.body));
        bodies.push(body);
        if (!body.totp) return err(401, 'totp_required', 'send the code');
        if (body.totp !== '123456') return err(401, 'unauthorized', 'missing or invalid credentials');
        return json({ token: 'nmb_full', expires_at: '2026-12-01T00:00:00Z', user });
      }),
    );
    const signedIn = vi.fn();
    show(signedIn);
    const u = userEvent.setup();
    expect(screen.queryByLabelText('Two-factor code')).toBeNull();
    await u.type(screen.getByLabelText('Username'), 'admin');
    await u.type(screen.getByLabelText('Password'), 'secret password');
    await u.click(screen.getByRole('button', { name: 'Sign in' }));

    const code = await screen.findByLabelText('Two-factor code');
    expect(screen.queryByRole('alert')).toBeNull();
    await u.type(code, '654321');
    await u.click(screen.getByRole('button', { name: 'Verify' }));
    expect(await screen.findByRole('alert')).toHaveTextContent('That code is not right');
    expect(signedIn).not.toHaveBeenCalled();

    await u.type(screen.getByLabelText('Two-factor code'), ' 123456 ');
    await u.click(screen.getByRole('button', { name: 'Verify' }));
    await waitFor(() => expect(signedIn).toHaveBeenCalledWith('nmb_full'));
    expect(bodies).toEqual([
      { username: 'admin', password: 'secret password', device: 'admin console' },
      { username: 'admin', password: 'secret password', device: 'admin console', totp: '654321' },
      { username: 'admin', password: 'secret password', device: 'admin console', totp: '123456' },
    ]);
  });

  it('sets two-factor up first when the gateway requires it, then shows the recovery codes once', async () => {
    const calls: string[] = [];
    vi.stubGlobal(
      'fetch',
      vi.fn(async (url: string, init?: RequestInit) => {
        const path = new URL(url, 'http://x').pathname;
        const auth = (init?.headers as Record<string, string> | undefined)?.Authorization ?? '';
        calls.push(`${init?.method} ${path} ${auth}`.trim());
        if (path === '/api/v1/auth/login') {
          return json({ token: 'nmb_setup', expires_at: '2026-12-01T00:00:00Z', user, totp_setup_required: true });
        }
        if (path === '/api/v1/auth/totp') return json({ secret: 'JBSWY3DPEHPK3PXP', otpauth_url: 'otpauth://totp/Nimbus:admin?secret=JBSWY3DPEHPK3PXP&issuer=Nimbus' });
        if (path === '/api/v1/auth/totp/confirm') {
          const { code } = JSON.parse(String(init?.body));
          return code === '111111' ? json({ recovery_codes: ['aaaa-bbbb-cccc-dddd', 'eeee-ffff-gggg-hhhh'] }) : err(400, 'bad_request', 'that code is not right');
        }
        return json({}, 404);
      }),
    );
    const signedIn = vi.fn();
    show(signedIn);
    const u = userEvent.setup();
    await u.type(screen.getByLabelText('Username'), 'admin');
    await u.type(screen.getByLabelText('Password'), 'secret password');
    await u.click(screen.getByRole('button', { name: 'Sign in' }));
    await u.click(await screen.findByRole('button', { name: 'Set up' }));
    expect(await screen.findByTestId('totp-secret')).toHaveTextContent('JBSWY3DPEHPK3PXP');
    expect(screen.getByRole('img', { name: 'QR code for your authenticator app' })).toBeInTheDocument();
    await u.type(screen.getByLabelText('Code'), '999999');
    await u.click(screen.getByRole('button', { name: 'Turn on' }));
    expect(await screen.findByRole('alert')).toHaveTextContent('that code is not right');
    await u.clear(screen.getByLabelText('Code'));
    await u.type(screen.getByLabelText('Code'), '111111');
    await u.click(screen.getByRole('button', { name: 'Turn on' }));
    expect(await screen.findByTestId('recovery-codes')).toHaveTextContent('aaaa-bbbb-cccc-dddd');
    expect(signedIn).not.toHaveBeenCalled();
    await u.click(screen.getByRole('button', { name: 'Continue' }));
    expect(signedIn).toHaveBeenCalledWith('nmb_setup');
    // The page asks once whether single sign-on is offered.
    expect(calls.filter((c) => c !== 'GET /api/v1/auth/methods')).toEqual([
      'POST /api/v1/auth/login',
      'POST /api/v1/auth/totp Bearer nmb_setup',
      'POST /api/v1/auth/totp/confirm Bearer nmb_setup',
      'POST /api/v1/auth/totp/confirm Bearer nmb_setup',
    ]);
  });
});
