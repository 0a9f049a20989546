import { MantineProvider } from '@mantine/core';
import { QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { render, screen } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { SecurityPage, groupKey } from './Security';

type Answer = { status: number; body?: unknown };
const err = (status: number, code: string) => ({ status, body: { error: { code, message: code } } });

/** A gateway whose account has two-factor `on` (and `setup` required) until a confirm or
 * delete answered with success changes it; other answers come from `script` in order. */
function gateway(state: { totp: boolean; setup?: boolean; required?: boolean }, script: Answer[]) {
  const sent: string[] = [];
  vi.stubGlobal(
    'fetch',
    vi.fn(async (url: string, init: RequestInit) => {
      if (url === '/api/v1/me') {
        const me = { id: 2, username: 'ann', role: 'user', quota_bytes: null, used_bytes: 0, usage: { current: 0, versions: 0, trash: 0, pending: 0 }, source: 'local', totp: state.totp, totp_setup_required: !!state.setup, totp_required: !!(state.required || state.setup) };
        return new Response(JSON.stringify(me));
      }
      sent.push(`${init.method} ${url} ${init.body ?? ''}`.trim());
      const a = script.shift();
      if (!a) throw new Error(`unexpected ${init.method} ${url}`);
      if (a.status < 300 && url.endsWith('/confirm')) state = { totp: true, required: state.required || state.setup };
      if (a.status < 300 && init.method === 'DELETE') state = { totp: false };
      return new Response(a.body === undefined ? null : JSON.stringify(a.body), { status: a.status });
    }),
  );
  return sent;
}

function setup() {
  render(
    <MantineProvider>
      <QueryClientProvider client={new QueryClient({ defaultOptions: { queries: { retry: false } } })}>
        <SecurityPage />
      </QueryClientProvider>
    </MantineProvider>,
  );
}

const SECRET = 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP';
const enrolment = { status: 200, body: { secret: SECRET, otpauth_url: `otpauth://totp/Nimbus:ann?secret=${SECRET}&issuer=Nimbus` } };
const codes = ['aaaa-bbbb-cccc-dddd', 'eeee-ffff-gggg-hhhh'];

afterEach(() => vi.unstubAllGlobals());

describe('SecurityPage', () => {
  it('turns two-factor on: QR code and key, a wrong code said in words, then the recovery codes once', async () => {
    const sent = gateway({ totp: false }, [enrolment, err(400, 'bad_request'), { status: 200, body: { recovery_codes: codes } }]);
    setup();
    const u = userEvent.setup();
    expect(await screen.findByTestId('totp-state')).toHaveTextContent('Off');
    await u.click(screen.getByRole('button', { name: 'Turn on two-factor sign-in' }));
    expect(await screen.findByRole('img', { name: 'QR code for your authenticator app' })).toBeInTheDocument();
    expect(screen.getByTestId('totp-secret')).toHaveTextContent('JBSW Y3DP EHPK 3PXP JBSW Y3DP EHPK 3PXP');
    expect(screen.getByTestId('totp-secret')).toHaveAttribute('data-secret', SECRET);
    expect(screen.getByRole('link', { name: 'open this link' })).toHaveAttribute('href', enrolment.body.otpauth_url);

    // Not six digits: said before anything is sent.
    await u.type(screen.getByLabelText(/Code from the app/), '12345');
    await u.click(screen.getByRole('button', { name: 'Turn on' }));
    expect(await screen.findByRole('alert')).toHaveTextContent('Enter the 6-digit code');
    await u.clear(screen.getByLabelText(/Code from the app/));
    await u.type(screen.getByLabelText(/Code from the app/), '000 000');
    await u.click(screen.getByRole('button', { name: 'Turn on' }));
    expect(await screen.findByRole('alert')).toHaveTextContent('That code is not right');
    await u.type(screen.getByLabelText(/Code from the app/), '123456');
    await u.click(screen.getByRole('button', { name: 'Turn on' }));
    expect(await screen.findByTestId('recovery-codes')).toHaveTextContent(codes.join(' '));
    expect(await screen.findByTestId('totp-state')).toHaveTextContent('On');
    expect(screen.getByRole('button', { name: 'Download' })).toBeInTheDocument();
    expect(sent).toEqual([
      'POST /api/v1/auth/totp',
      'POST /api/v1/auth/totp/confirm {"code":"000000"}',
      'POST /api/v1/auth/totp/confirm {"code":"123456"}',
    ]);

    // Once put away, they are gone for good: the page offers turning it off.
    await u.click(screen.getByRole('button', { name: 'I have kept them' }));
    expect(screen.queryByTestId('recovery-codes')).toBeNull();
    expect(screen.getByRole('button', { name: 'Turn off' })).toBeInTheDocument();
  });

  it('turns it off with a code, and says why when the administrator requires it', async () => {
    const sent = gateway({ totp: true }, [err(403, 'forbidden'), err(400, 'bad_request'), { status: 204 }]);
    setup();
    const u = userEvent.setup();
    expect(await screen.findByTestId('totp-state')).toHaveTextContent('On');
    await u.type(screen.getByLabelText(/^Code/), '123456');
    await u.click(screen.getByRole('button', { name: 'Turn off' }));
    expect(await screen.findByRole('alert')).toHaveTextContent('Your administrator requires two-factor sign-in');
    await u.type(screen.getByLabelText(/^Code/), '111111');
    await u.click(screen.getByRole('button', { name: 'Turn off' }));
    expect(await screen.findByRole('alert')).toHaveTextContent('That code is not right');
    await u.type(screen.getByLabelText(/^Code/), 'aaaa-bbbb-cccc-dddd');
    await u.click(screen.getByRole('button', { name: 'Turn off' }));
    expect(await screen.findByText(/your password alone signs you in/)).toBeInTheDocument();
    expect(await screen.findByTestId('totp-state')).toHaveTextContent('Off');
    expect(sent[2]).toBe('DELETE /api/v1/auth/totp {"code":"aaaa-bbbb-cccc-dddd"}');
  });

  it('tells a sign-in that may only set it up what to do, and then offers no Turn off', async () => {
    const sent = gateway({ totp: false, setup: true }, [enrolment, { status: 200, body: { recovery_codes: codes } }]);
    setup();
    const u = userEvent.setup();
    expect(await screen.findByText('Set up two-factor sign-in to continue')).toBeInTheDocument();
    await u.click(screen.getByRole('button', { name: 'Turn on two-factor sign-in' }));
    await u.type(await screen.findByLabelText(/Code from the app/), '123456');
    await u.click(screen.getByRole('button', { name: 'Turn on' }));
    await u.click(await screen.findByRole('button', { name: 'I have kept them' }));
    expect(await screen.findByTestId('totp-required')).toHaveTextContent('Your administrator requires two-factor sign-in for your account, so it cannot be turned off.');
    expect(screen.getByTestId('totp-state')).toHaveTextContent('On');
    expect(screen.queryByRole('button', { name: 'Turn off' })).toBeNull();
    expect(screen.queryByLabelText(/^Code/)).toBeNull();
    expect(sent).toEqual(['POST /api/v1/auth/totp', 'POST /api/v1/auth/totp/confirm {"code":"123456"}']);
  });

  it('offers no Turn off when the policy covers an account that has it on', async () => {
    gateway({ totp: true, required: true }, []);
    setup();
    expect(await screen.findByTestId('totp-required')).toHaveTextContent('cannot be turned off');
    expect(screen.getByTestId('totp-state')).toHaveTextContent('On');
    expect(screen.queryByRole('button', { name: 'Turn off' })).toBeNull();
  });

  it('groups the key in fours', () => {
    expect(groupKey('ABCDEFGHIJ')).toBe('ABCD EFGH IJ');
    expect(groupKey('ABCDEFGH')).toBe('ABCD EFGH');
  });
});
