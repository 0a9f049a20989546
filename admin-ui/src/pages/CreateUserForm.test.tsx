import { MantineProvider } from '@mantine/core';
import { render, screen } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { describe, expect, it, vi } from 'vitest';
import { ApiError } from '../api/client';
import { CreateUserForm } from './CreateUserForm';

function setup(onCreate = vi.fn()) {
  render(
    <MantineProvider>
      <CreateUserForm onCreate={onCreate} />
    </MantineProvider>,
  );
  return onCreate;
}

describe('CreateUserForm', () => {
  it('does not send invalid input and says why', async () => {
    const onCreate = setup();
    const u = userEvent.setup();
    await u.type(screen.getByLabelText(/Username/), 'bad name');
    await u.type(screen.getByLabelText(/^Password/), 'short');
    await u.type(screen.getByLabelText(/Quota/), 'lots');
    await u.click(screen.getByRole('button', { name: 'Create user' }));
    expect(onCreate).not.toHaveBeenCalled();
    expect(screen.getByText(/Letters, digits/)).toBeInTheDocument();
    expect(screen.getByText(/At least 8 characters/)).toBeInTheDocument();
    expect(screen.getByText(/Enter a size/)).toBeInTheDocument();
    // The error is tied to its field for screen readers.
    expect(screen.getByLabelText(/Username/)).toHaveAttribute('aria-invalid', 'true');
  });

  it('sends a valid user and shows the generated password once', async () => {
    const onCreate = vi.fn().mockResolvedValue({
      id: 7, username: 'carol', role: 'user', quota_bytes: 1073741824, used_bytes: 0, usage: { current: 0, versions: 0, trash: 0, pending: 0 }, disabled: false,
      created: '2026-01-01T00:00:00Z', generated_password: 'Gen-Pass-123',
    });
    setup(onCreate);
    const u = userEvent.setup();
    await u.type(screen.getByLabelText(/Username/), 'carol');
    await u.type(screen.getByLabelText(/Quota/), '1 GiB');
    await u.keyboard('{Enter}');
    expect(onCreate).toHaveBeenCalledWith({ username: 'carol', role: 'user', quota_bytes: 1073741824 });
    expect(await screen.findByTestId('generated-password')).toHaveTextContent('Gen-Pass-123');
    expect(screen.getByLabelText(/Username/)).toHaveValue('');
  });

  it('shows the API error message', async () => {
    const onCreate = vi.fn().mockRejectedValue(new ApiError(409, 'conflict', 'a user named carol already exists'));
    setup(onCreate);
    const u = userEvent.setup();
    await u.type(screen.getByLabelText(/Username/), 'carol');
    await u.type(screen.getByLabelText(/^Password/), 'a good password');
    await u.click(screen.getByRole('button', { name: 'Create user' }));
    expect(await screen.findByRole('alert')).toHaveTextContent('a user named carol already exists');
    expect(onCreate).toHaveBeenCalledWith({ username: 'carol', role: 'user', password: 'a good password' });
  });

  it('creates a single sign-on account without a password', async () => {
    const onCreate = vi.fn().mockResolvedValue({
      id: 8, username: 'dave', role: 'user', quota_bytes: null, used_bytes: 0, usage: { current: 0, versions: 0, trash: 0, pending: 0 }, disabled: false,
      sharing: true, source: 'oidc', totp: false, last_login: null, created: '2026-01-01T00:00:00Z', generated_password: null,
    });
    render(
      // env="test": no transitions or portals, so the dropdown's options are in the DOM at once.
      <MantineProvider env="test">
        <CreateUserForm onCreate={onCreate} />
      </MantineProvider>,
    );
    const u = userEvent.setup();
    await u.type(screen.getByLabelText(/Username/), 'dave');
    await u.click(screen.getAllByLabelText('Signs in with')[0]);
    await u.click(await screen.findByRole('option', { name: /Single sign-on/ }));
    expect(screen.queryByLabelText(/^Password/)).not.toBeInTheDocument();
    await u.click(screen.getByRole('button', { name: 'Create user' }));
    expect(onCreate).toHaveBeenCalledWith({ username: 'dave', role: 'user', source: 'oidc' });
    expect(await screen.findByText('The user signs in with single sign-on.')).toBeInTheDocument();
  });
});
