import { MantineProvider } from '@mantine/core';
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { render, screen } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { SignIn } from './SignIn';

type Answer = { status: number; body: unknown };

/** Answers the login and methods requests from a script, recording the login bodies. */
function gateway(logins: Answer[], methods: Answer = { status: 404, body: { error: { code: 'not_found', message: 'no' } } }) {
  const sent: Record<string, unknown>[] = [];
  vi.stubGlobal(
    'fetch',
    vi.fn(async (url: string, init: RequestInit) => {
      const a = url === '/api/v1/auth/methods' ? methods : (sent.push(JSON.parse(String(init.body))), logins.shift());
      if (!a) throw new Error(`unexpected ${url}`);
      return new Response(JSON.stringify(a.body), { status: a.status });
    }),
  );
  return sent;
}

function setup() {
  const onSignedIn = vi.fn();
  render(
    <MantineProvider>
      <QueryClientProvider client={new QueryClient()}>
        <SignIn notice={null} onSignedIn={onSignedIn} />
      </QueryClientProvider>
    </MantineProvider>,
  );
  return onSignedIn;
}

const ok = { status: 200, body: { token: 'tok', expires_at: '2026-12-01T00:00:00Z', user: { id: 2, username: 'ann', role: 'user' } } };
const totpRequired = { status: 401, body: { error: { code: 'totp_required', message: 'a code is needed' } } };

afterEach(() => vi.unstubAllGlobals());

describe('SignIn', () => {
  it.each([
    ['the 6-digit code', '123456', '123456'],
    ['a recovery code', ' k7p2-xq9m-4hdt-a8rw ', 'k7p2-xq9m-4hdt-a8rw'],
  ])('asks for a code when the gateway wants one, and sends %s with the password', async (_, typed, totp) => {
    const sent = gateway([totpRequired, ok]);
    const onSignedIn = setup();
    const u = userEvent.setup();
    await u.type(screen.getByLabelText('Username'), 'ann');
    await u.type(screen.getByLabelText('Password'), 'ann-password');
    await u.click(screen.getByRole('button', { name: 'Sign in' }));
    await u.type(await screen.findByLabelText('Code'), typed);
    await u.click(screen.getByRole('button', { name: 'Verify' }));
    await vi.waitFor(() => expect(onSignedIn).toHaveBeenCalledWith('tok'));
    expect(sent).toEqual([
      { username: 'ann', password: 'ann-password', device: 'web app' },
      { username: 'ann', password: 'ann-password', device: 'web app', totp },
    ]);
  });

  it('says a wrong code in words and keeps asking', async () => {
    gateway([totpRequired, totpRequired]);
    setup();
    const u = userEvent.setup();
    await u.type(screen.getByLabelText('Username'), 'ann');
    await u.type(screen.getByLabelText('Password'), 'pw-pw-pw-pw');
    await u.click(screen.getByRole('button', { name: 'Sign in' }));
    await u.type(await screen.findByLabelText('Code'), '000000');
    await u.click(screen.getByRole('button', { name: 'Verify' }));
    expect(await screen.findByRole('alert')).toHaveTextContent('That code is not right');
    expect(screen.getByLabelText('Code')).toBeInTheDocument();
  });

  it('offers single sign-on only when the gateway has it', async () => {
    gateway([], { status: 200, body: { oidc: true } });
    setup();
    const link = await screen.findByRole('link', { name: 'Sign in with single sign-on' });
    expect(link).toHaveAttribute('href', '/api/v1/auth/oidc/start?return=/');
  });

  it('shows only the password form without single sign-on (404)', async () => {
    const sent = gateway([{ status: 401, body: { error: { code: 'unauthorized', message: 'bad' } } }]);
    setup();
    const u = userEvent.setup();
    await u.type(screen.getByLabelText('Username'), 'ann');
    await u.type(screen.getByLabelText('Password'), 'nope-nope');
    await u.click(screen.getByRole('button', { name: 'Sign in' }));
    expect(await screen.findByRole('alert')).toHaveTextContent('Wrong username or password.');
    expect(screen.queryByRole('link', { name: /single sign-on/ })).toBeNull();
    expect(sent).toHaveLength(1);
  });
});
