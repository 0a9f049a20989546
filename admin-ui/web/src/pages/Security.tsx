// Two-factor sign-in (TOTP) for the signed-in user: turn it on (a QR code and the key for an
// authenticator app, a first code to confirm, the recovery codes shown once) and off again
// (with a code), unless the administrator's policy covers the account (`totp_required`). The
// API: docs/IDENTITY.md, Two-factor sign-in. A sign-in that may only set it up (the
// administrator requires it: `totp_setup_required`) is brought here by App.tsx.
import { Alert, Anchor, Badge, Button, Code, CopyButton, Group, Stack, Text, TextInput, Title } from '@mantine/core';
import { useQuery, useQueryClient } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { ApiError, api } from '../../../src/api/client';
import type { Me, TotpEnrollment, TotpRecoveryCodes } from '../../../src/api/types';
import { QrCode } from '../../../src/QrCode';
import { QueryStatus } from '../components/QueryStatus';
import { saveBlob } from '../download';
import { describeError } from '../errors';

/** What went wrong with a two-factor call, in words; the rest as everywhere in the app. */
export function describeTotpError(e: unknown): string {
  if (e instanceof ApiError) {
    if (e.code === 'bad_request') return 'That code is not right (or was already used). Check that the clock of your phone is right, then enter the code it shows now.';
    if (e.code === 'forbidden') return 'Your administrator requires two-factor sign-in for your account, so it cannot be turned off.';
    if (e.code === 'conflict') return 'Two-factor sign-in changed meanwhile (in another window?). The page now shows how it is.';
  }
  return describeError(e);
}

/** The key as people type it from the screen: groups of four. */
export function groupKey(secret: string): string {
  return secret.replace(/(.{4})(?=.)/g, '$1 ');
}

export function SecurityPage() {
  const me = useQuery({ queryKey: ['me'], queryFn: () => api<Me>('GET', '/api/v1/me') });
  // Recovery codes stay on screen (after `me` says it is on) until the user says they kept them.
  const [codes, setCodes] = useState<string[] | null>(null);
  const [turnedOff, setTurnedOff] = useState(false);
  return (
    <Stack gap="md" maw={640}>
      <Title order={2}>Security</Title>
      <QueryStatus query={me} />
      {me.data?.totp_setup_required && !codes && (
        <Alert color="blue" role="status" title="Set up two-factor sign-in to continue">
          Your administrator requires two-factor sign-in for your account. Until it is on, this is the only page you can use.
        </Alert>
      )}
      {me.data && (
        <Stack gap="sm">
          <Group gap="xs">
            <Title order={3}>Two-factor sign-in</Title>
            <Badge color={me.data.totp ? 'green' : 'gray'} data-testid="totp-state">{me.data.totp ? 'On' : 'Off'}</Badge>
          </Group>
          <Text size="sm" c="dimmed">
            With two-factor sign-in, signing in takes your password and a code from an authenticator app on your phone
            (such as Aegis, Google Authenticator, Microsoft Authenticator or 1Password). App passwords and S3 keys keep working.
          </Text>
          {me.data.source !== 'local' && (
            <Text size="sm" c="dimmed">
              It applies to signing in with your password here. Single sign-on uses your organisation's own sign-in.
            </Text>
          )}
          {turnedOff && !me.data.totp && (
            <Alert color="yellow" role="status">Two-factor sign-in is off: your password alone signs you in.</Alert>
          )}
          {codes ? (
            <RecoveryCodes username={me.data.username} codes={codes} onDone={() => setCodes(null)} />
          ) : me.data.totp && me.data.totp_required ? (
            // The gateway would refuse (403): say why instead of offering it.
            <Text size="sm" data-testid="totp-required">
              Your administrator requires two-factor sign-in for your account, so it cannot be turned off.
            </Text>
          ) : me.data.totp ? (
            <TurnOff onOff={() => setTurnedOff(true)} />
          ) : (
            <Enrol onEnabled={(c) => { setTurnedOff(false); setCodes(c); }} />
          )}
        </Stack>
      )}
    </Stack>
  );
}

/** A code and its button; the field empties after each try (a code is good once). */
function CodeForm({ label, description, submit, busy, onSubmit }: {
  label: string;
  description: string;
  submit: string;
  busy: boolean;
  onSubmit: (code: string) => Promise<void>;
}) {
  const [code, setCode] = useState('');
  return (
    <form
      onSubmit={(e: FormEvent) => {
        e.preventDefault();
        void onSubmit(code).finally(() => setCode(''));
      }}
    >
      <Group align="flex-end">
        <TextInput label={label} description={description} autoComplete="one-time-code" value={code} onChange={(e) => setCode(e.currentTarget.value)} w={300} />
        <Button type="submit" loading={busy}>{submit}</Button>
      </Group>
    </form>
  );
}

/** Off → pending (the QR code and key) → on (the recovery codes, handed to the page). */
function Enrol({ onEnabled }: { onEnabled: (codes: string[]) => void }) {
  const qc = useQueryClient();
  const [enrolment, setEnrolment] = useState<TotpEnrollment | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const start = async () => {
    setBusy(true);
    setError(null);
    try {
      setEnrolment(await api<TotpEnrollment>('POST', '/api/v1/auth/totp'));
    } catch (e) {
      setError(describeTotpError(e));
      if (e instanceof ApiError && e.code === 'conflict') void qc.invalidateQueries({ queryKey: ['me'] });
    } finally {
      setBusy(false);
    }
  };
  const confirm = async (code: string) => {
    const c = code.replace(/\s/g, '');
    if (!/^\d{6}$/.test(c)) return setError('Enter the 6-digit code your authenticator app shows for Nimbus.');
    setBusy(true);
    setError(null);
    try {
      const r = await api<TotpRecoveryCodes>('POST', '/api/v1/auth/totp/confirm', { code: c });
      onEnabled(r.recovery_codes);
      // `me` now says it is on (and a set-up-only sign-in is a full one).
      void qc.invalidateQueries();
    } catch (e) {
      setError(describeTotpError(e));
    } finally {
      setBusy(false);
    }
  };

  return (
    <Stack gap="sm">
      {error && <Alert color="red" role="alert">{error}</Alert>}
      {!enrolment ? (
        <Group>
          <Button onClick={start} loading={busy}>Turn on two-factor sign-in</Button>
        </Group>
      ) : (
        <>
          <Text size="sm">1. Scan this QR code with your authenticator app.</Text>
          <QrCode value={enrolment.otpauth_url} label="QR code for your authenticator app" />
          <Text size="sm">Cannot scan it? Add an account by hand, time-based, with this key:</Text>
          <Group gap="xs" wrap="nowrap">
            <Code fz="md" style={{ wordBreak: 'break-all' }} data-testid="totp-secret" data-secret={enrolment.secret}>
              {groupKey(enrolment.secret)}
            </Code>
            <CopyButton value={enrolment.secret}>
              {({ copied, copy }) => <Button size="xs" variant="light" onClick={copy}>{copied ? 'Copied' : 'Copy key'}</Button>}
            </CopyButton>
          </Group>
          <Text size="xs" c="dimmed">
            On the phone itself, <Anchor href={enrolment.otpauth_url} size="xs">open this link</Anchor> to add it to an authenticator app.
          </Text>
          <Text size="sm">2. Enter the code the app shows, to check that it works.</Text>
          <CodeForm label="Code from the app" description="6 digits; a new one every 30 seconds" submit="Turn on" busy={busy} onSubmit={confirm} />
        </>
      )}
    </Stack>
  );
}

/** Shown once, right after turning it on: the gateway keeps only their hashes. */
function RecoveryCodes({ username, codes, onDone }: { username: string; codes: string[]; onDone: () => void }) {
  const text = codes.join('\n');
  return (
    <Stack gap="sm">
      <Alert color="green" role="status" title="Two-factor sign-in is on">
        From now on, signing in asks for a code from your authenticator app.
      </Alert>
      <Text size="sm">
        <b>Recovery codes.</b> If you lose your phone, each of these signs you in once instead of a code. Keep them
        somewhere safe (a password manager, a printout): they are shown only now.
      </Text>
      <Code block data-testid="recovery-codes">{text}</Code>
      <Group>
        <CopyButton value={text}>
          {({ copied, copy }) => <Button variant="light" onClick={copy}>{copied ? 'Copied' : 'Copy codes'}</Button>}
        </CopyButton>
        <Button variant="light" onClick={() => saveBlob(new Blob([`${text}\n`], { type: 'text/plain' }), `nimbus-recovery-codes-${username}.txt`)}>
          Download
        </Button>
        <Button onClick={onDone}>I have kept them</Button>
      </Group>
    </Stack>
  );
}

function TurnOff({ onOff }: { onOff: () => void }) {
  const qc = useQueryClient();
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (code: string) => {
    if (!code.trim()) return setError('Enter the current code from your authenticator app, or a recovery code.');
    setBusy(true);
    setError(null);
    try {
      await api('DELETE', '/api/v1/auth/totp', { code: code.trim() });
      onOff();
      void qc.invalidateQueries({ queryKey: ['me'] });
    } catch (e) {
      setError(describeTotpError(e));
      if (e instanceof ApiError && e.code === 'conflict') void qc.invalidateQueries({ queryKey: ['me'] });
    } finally {
      setBusy(false);
    }
  };
  return (
    <Stack gap="sm">
      <Text size="sm">To turn it off, confirm with a code. Your unused recovery codes stop working too.</Text>
      {error && <Alert color="red" role="alert">{error}</Alert>}
      <CodeForm label="Code" description="From your authenticator app, or a recovery code" submit="Turn off" busy={busy} onSubmit={submit} />
    </Stack>
  );
}
