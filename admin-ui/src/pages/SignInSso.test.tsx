import { MantineProvider } from '@mantine/core';
import { render, screen } from '@testing-library/react';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { SignIn } from './SignIn';

function methods(oidc: boolean) {
  const fetch = vi.fn(async () => new Response(JSON.stringify({ password: true, oidc }), { status: 200 }));
  vi.stubGlobal('fetch', fetch);
  return fetch;
}

function setup(ssoError: string | null = null) {
  render(
    <MantineProvider>
      <SignIn notice={null} ssoError={ssoError} onSignedIn={vi.fn()} />
    </MantineProvider>,
  );
}

afterEach(() => vi.unstubAllGlobals());

describe('SignIn', () => {
  it('offers single sign-on when the gateway has it', async () => {
    const fetch = methods(true);
    setup();
    const link = await screen.findByRole('link', { name: 'Sign in with single sign-on' });
    expect(link).toHaveAttribute('href', '/api/v1/auth/oidc/start?return=%2Fadmin%2F');
    expect(fetch).toHaveBeenCalledWith('/api/v1/auth/methods', expect.anything());
  });

  it('shows no single sign-on button when the gateway has none', async () => {
    const fetch = methods(false);
    setup();
    await vi.waitFor(() => expect(fetch).toHaveBeenCalled());
    await new Promise((r) => setTimeout(r, 20));
    expect(screen.queryByRole('link', { name: /single sign-on/ })).not.toBeInTheDocument();
    expect(screen.getByRole('button', { name: 'Sign in' })).toBeInTheDocument();
  });

  it('says why a single sign-on failed', async () => {
    methods(true);
    setup('there is no account named `dave` here');
    expect(screen.getByRole('alert')).toHaveTextContent('Single sign-on failed: there is no account named `dave` here');
  });
});
