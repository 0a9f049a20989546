import { render, screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { beforeEach, describe, expect, it } from 'vitest';
import { App } from './App';
import { setBackend } from './backend';
import type { DriveProblem } from './generated/bindings';
import { MOCK_FINGERPRINT, MOCK_NO_SSO, MOCK_PASSWORD, MOCK_USER, MockBackend } from './mock';

let mock: MockBackend;

beforeEach(() => {
  mock = new MockBackend();
  mock.delay = 0;
  setBackend(mock);
});

async function signIn(server: string, password = MOCK_PASSWORD) {
  const user = userEvent.setup();
  render(<App />);
  await user.type(await screen.findByLabelText(/Server address/), server);
  await user.type(screen.getByLabelText(/Username/), MOCK_USER);
  await user.type(screen.getByLabelText(/Password/), password);
  await user.click(screen.getByRole('button', { name: 'Sign in' }));
  return user;
}

describe('sign-in window', () => {
  it('shows a wrong password as an error and stays on the form', async () => {
    await signIn('https://nimbus.example.com', 'nope');
    expect(await screen.findByRole('alert')).toHaveTextContent(/wrong username or password/);
    expect(screen.getByRole('button', { name: 'Sign in' })).toBeInTheDocument();
  });

  it('asks to trust a self-signed certificate by fingerprint before signing in', async () => {
    const user = await signIn('https://self-signed.example:8443');
    const prompt = await screen.findByRole('dialog', { name: 'Unknown certificate' });
    expect(within(prompt).getByTestId('fingerprint')).toHaveTextContent(MOCK_FINGERPRINT);
    expect((await mock.getStatus()).account).toBeNull();
    await user.click(within(prompt).getByRole('button', { name: 'Trust and sign in' }));
    expect(await screen.findByRole('heading', { name: 'Nimbus Drive' })).toBeInTheDocument();
    expect(await screen.findByText(`${MOCK_USER} on https://self-signed.example:8443`)).toBeInTheDocument();
    expect((await mock.getStatus()).account?.certificate_fingerprint).toBe(MOCK_FINGERPRINT);
  });
});

describe('single sign-on', () => {
  async function sso(server: string) {
    const user = userEvent.setup();
    render(<App />);
    await user.type(await screen.findByLabelText(/Server address/), server);
    await user.click(screen.getByRole('button', { name: 'Sign in with SSO' }));
    return user;
  }

  it('needs only the server address, says to continue in the browser, and signs in', async () => {
    mock.delay = 50;
    await sso('https://nimbus.example.com');
    expect(await screen.findByRole('status')).toHaveTextContent('Continue in your browser');
    expect(await screen.findByText(`${MOCK_USER} on https://nimbus.example.com`)).toBeInTheDocument();
  });

  it('asks for the server address first', async () => {
    const user = userEvent.setup();
    render(<App />);
    await user.click(await screen.findByRole('button', { name: 'Sign in with SSO' }));
    expect(await screen.findByRole('alert')).toHaveTextContent('Enter the server address first.');
    expect((await mock.getStatus()).account).toBeNull();
  });

  it('goes on with single sign-on after trusting a self-signed certificate', async () => {
    const user = await sso('https://self-signed.example:8443');
    const prompt = await screen.findByRole('dialog', { name: 'Unknown certificate' });
    await user.click(within(prompt).getByRole('button', { name: 'Trust and sign in' }));
    expect(await screen.findByText(`${MOCK_USER} on https://self-signed.example:8443`)).toBeInTheDocument();
  });

  it('says so when the server offers no single sign-on', async () => {
    await sso(`https://${MOCK_NO_SSO}.example.com`);
    expect(await screen.findByRole('alert')).toHaveTextContent('does not offer single sign-on');
    expect(screen.getByRole('button', { name: 'Sign in with SSO' })).toBeInTheDocument();
  });
});

describe('main window', () => {
  it('mounts, shows status from events, frees the cache, unmounts', async () => {
    const user = await signIn('https://nimbus.example.com');
    expect(await screen.findByLabelText('Token storage note')).toHaveTextContent(/file only you can read/);
    expect(screen.getByTestId('quota')).toHaveTextContent('3.2 GiB of 10 GiB used');
    expect(screen.getByLabelText('Connection')).toHaveTextContent('Online');
    await user.click(screen.getByRole('button', { name: 'Mount' }));
    expect(await screen.findByTestId('mount-location')).toHaveTextContent('/home/alice/Nimbus');
    expect(screen.getByLabelText('Drive state')).toHaveTextContent('Mounted');
    expect(screen.getByTestId('cache')).toHaveTextContent('734 MiB of 10 GiB');

    mock.simulate({
      connectivity: 'offline',
      activity: {
        pending_uploads: 2,
        uploads_in_flight: 1,
        commits_in_progress: 0,
        errors: ['report.pdf: quota exceeded'],
        conflicts: [{ path: '/notes.txt', copy: '/notes (conflict 2026-11-23 1700 laptop).txt' }],
        problems: [],
      },
    });
    expect(await screen.findByText(/2 file\(s\) waiting to upload, 1 uploading now/)).toBeInTheDocument();
    expect(screen.getByLabelText('Connection')).toHaveTextContent('Offline');
    expect(screen.getByLabelText('Upload errors')).toHaveTextContent('report.pdf: quota exceeded');
    expect(screen.getByLabelText('Conflicts')).toHaveTextContent(
      '/notes.txt was changed elsewhere too; your version is saved as /notes (conflict 2026-11-23 1700 laptop).txt',
    );
    await user.click(screen.getByRole('button', { name: 'Retry' }));
    await waitFor(() => expect(screen.queryByLabelText('Upload errors')).not.toBeInTheDocument());

    await user.click(screen.getByRole('button', { name: 'Free up space' }));
    await waitFor(() => expect(screen.getByTestId('cache')).toHaveTextContent('0 B of 10 GiB'));
    await user.click(screen.getByRole('button', { name: 'Unmount' }));
    expect(await screen.findByText('Not mounted')).toBeInTheDocument();
  });

  it('warns before signing out with pending uploads and signs out only when told to', async () => {
    const user = await signIn('https://nimbus.example.com');
    await user.click(await screen.findByRole('button', { name: 'Mount' }));
    await screen.findByTestId('mount-location');
    mock.simulate({
      activity: {
        pending_uploads: 3,
        uploads_in_flight: 0,
        commits_in_progress: 0,
        errors: [],
        conflicts: [],
        problems: [],
      },
    });
    await user.click(screen.getByRole('button', { name: 'Sign out' }));
    const warn = await screen.findByRole('alertdialog', { name: 'Uploads pending' });
    expect(warn).toHaveTextContent('3 file(s) are not on the server yet');
    expect((await mock.getStatus()).account).not.toBeNull();
    await user.click(within(warn).getByRole('button', { name: 'Sign out anyway' }));
    expect(await screen.findByRole('button', { name: 'Sign in' })).toBeInTheDocument();
  });

  it('names each refused change with its reason and resolves it by retry, copy or discard', async () => {
    const user = await signIn('https://nimbus.example.com');
    await user.click(await screen.findByRole('button', { name: 'Mount' }));
    await screen.findByTestId('mount-location');
    const problem = (path: string, reason: DriveProblem['reason'], message: string, detail: string): DriveProblem => ({
      path,
      reason,
      message,
      detail,
      since: '2026-11-26T09:00:00Z',
      attempts: 3,
      actions: ['retry', 'save_copy', 'discard'],
    });
    mock.refuseRetries = true;
    mock.simulate({
      activity: {
        pending_uploads: 2,
        uploads_in_flight: 0,
        commits_in_progress: 0,
        errors: [],
        conflicts: [],
        problems: [
          problem('/plan.docx', 'locked', 'Someone else has this file locked.', 'locked by someone else'),
          problem('/report.pdf', 'quota', 'Your storage space is full.', 'quota exceeded'),
        ],
      },
    });
    const report = await screen.findByRole('group', { name: 'Refused change /report.pdf' });
    expect(report).toHaveTextContent('Storage full: Your storage space is full.');
    expect(report).toHaveTextContent('Tried 3 times since 2026-11-26T09:00:00Z. The server said: quota exceeded');
    const plan = screen.getByRole('group', { name: 'Refused change /plan.docx' });
    expect(plan).toHaveTextContent('Locked by someone else');

    // Still full: the retry fails, says why, and the change stays listed.
    await user.click(within(report).getByRole('button', { name: 'Retry /report.pdf' }));
    expect(await screen.findByRole('alert', { name: 'That did not work' })).toHaveTextContent('quota exceeded');
    expect(screen.getByRole('group', { name: 'Refused change /report.pdf' })).toBeInTheDocument();

    await user.click(within(plan).getByRole('button', { name: 'Save a copy /plan.docx' }));
    expect(await screen.findByText(/saved this device's version of \/plan.docx as \/plan \(copy /)).toBeInTheDocument();
    await waitFor(() => expect(screen.queryByRole('group', { name: 'Refused change /plan.docx' })).not.toBeInTheDocument());

    // Discard asks first; "Keep it" changes nothing.
    await user.click(within(report).getByRole('button', { name: 'Discard /report.pdf' }));
    await user.click(within(report).getByRole('button', { name: 'Keep it' }));
    expect((await mock.getStatus()).activity.problems).toHaveLength(1);
    await user.click(within(report).getByRole('button', { name: 'Discard /report.pdf' }));
    await user.click(within(report).getByRole('button', { name: 'Discard change to /report.pdf' }));
    await waitFor(() => expect(screen.queryByLabelText('Refused changes')).not.toBeInTheDocument());
    expect(await screen.findByText("discarded this device's change to /report.pdf")).toBeInTheDocument();
  });
});
