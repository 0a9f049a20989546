import { Alert, Anchor, Button, Center, Code, Divider, Paper, PasswordInput, Stack, Text, TextInput, Title } from '@mantine/core';
import { useEffect, useState, type FormEvent, type ReactNode } from 'react';
import { ApiError, api, errorMessage, session } from '../api/client';
import type { AuthMethods, LoginResponse, TotpEnrollment, TotpRecoveryCodes } from '../api/types';
import { QrCode } from '../QrCode';
import { SSO_START } from '../sso';

export function SignIn({
  notice,
  ssoError = null,
  onSignedIn,
}: {
  notice: string | null;
  /** Why the single sign-on that brought the browser back failed (`#sso_error`). */
  ssoError?: string | null;
  onSignedIn: (token: string) => void;
}) {
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  // Two-factor: asked for once the gateway answers `totp_required` to the password.
  const [needCode, setNeedCode] = useState(false);
  const [code, setCode] = useState('');
  // A sign-in that may only set up two-factor (the gateway requires it): its token.
  const [setupToken, setSetupToken] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(ssoError ? `Single sign-on failed: ${ssoError}` : null);
  // The button shows only where the gateway offers single sign-on.
  const [sso, setSso] = useState(false);
  useEffect(() => {
    let live = true;
    api<AuthMethods>('GET', '/api/v1/auth/methods')
      .then((m) => live && setSso(m.oidc))
      .catch(() => {
        /* an older gateway without the route: passwords only */
      });
    return () => {
      live = false;
    };
  }, []);
  const [busy, setBusy] = useState(false);

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    if (!username || !password) {
      setError('Enter your username and password.');
      return;
    }
    if (needCode && !code.trim()) {
      setError('Enter the code from your authenticator app, or a recovery code.');
      return;
    }
    setBusy(true);
    setError(null);
    try {
      const body = { username, password, device: 'admin console', ...(needCode ? { totp: code.trim() } : {}) };
      const r = await api<LoginResponse>('POST', '/api/v1/auth/login', body);
      if (r.totp_setup_required) setSetupToken(r.token);
      else onSignedIn(r.token);
    } catch (err) {
      if (err instanceof ApiError && err.code === 'totp_required') {
        setNeedCode(true);
      } else {
        setError(needCode && err instanceof ApiError && err.code === 'unauthorized'
          ? 'That code is not right (or was already used). Try the next one.'
          : errorMessage(err));
      }
      setCode('');
    } finally {
      setBusy(false);
    }
  };

  if (setupToken) return <TotpSetup token={setupToken} onDone={() => onSignedIn(setupToken)} />;

  return (
    <SignInFrame title="Nimbus admin" notice={notice} error={error} onSubmit={submit}>
      <TextInput label="Username" autoComplete="username" value={username} readOnly={needCode} onChange={(e) => setUsername(e.currentTarget.value)} data-autofocus autoFocus={!needCode} />
      <PasswordInput label="Password" autoComplete="current-password" value={password} readOnly={needCode} onChange={(e) => setPassword(e.currentTarget.value)} />
      {needCode && (
        <TextInput
          label="Two-factor code"
          description="The 6-digit code from your authenticator app, or one of your recovery codes."
          autoComplete="one-time-code"
          inputMode="numeric"
          value={code}
          onChange={(e) => setCode(e.currentTarget.value)}
          autoFocus
        />
      )}
      <Button type="submit" loading={busy}>{needCode ? 'Verify' : 'Sign in'}</Button>
      {sso && !needCode && (
        <>
          <Divider label="or" labelPosition="center" />
          <Button variant="default" component="a" href={SSO_START}>
            Sign in with single sign-on
          </Button>
        </>
      )}
    </SignInFrame>
  );
}

/** The sign-in page of both front ends (the web app's is web/src/pages/SignIn.tsx): a form in
 * a card, the notice (why the session ended) and the error above its fields. */
export function SignInFrame({
  title,
  notice,
  error,
  onSubmit,
  children,
}: {
  title: string;
  notice: string | null;
  error: string | null;
  onSubmit: (e: FormEvent) => void;
  children: ReactNode;
}) {
  return (
    <Center mih="100vh" p="md">
      <Paper withBorder p="xl" w={380} maw="100%" component="main">
        <form onSubmit={onSubmit} aria-label="Sign in">
          <Stack>
            <Title order={2}>{title}</Title>
            {notice && <Alert color="yellow" role="status">{notice}</Alert>}
            {error && <Alert color="red" role="alert">{error}</Alert>}
            {children}
          </Stack>
        </form>
      </Paper>
    </Center>
  );
}

/** The gateway requires two-factor sign-in and this account has none yet: the sign-in's token
 * may only set it up. Shows the secret, takes a first code, then shows the recovery codes once. */
export function TotpSetup({ token, onDone }: { token: string; onDone: () => void }) {
  const [enrol, setEnrol] = useState<TotpEnrollment | null>(null);
  const [code, setCode] = useState('');
  const [codes, setCodes] = useState<string[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  // The calls go out with this sign-in's token (kept in the session, as after any sign-in).
  const call = async <T,>(method: string, path: string, body?: unknown) => {
    session.set(token);
    return api<T>(method, path, body);
  };
  const start = async () => {
    setBusy(true);
    setError(null);
    try {
      setEnrol(await call<TotpEnrollment>('POST', '/api/v1/auth/totp'));
    } catch (e) {
      setError(errorMessage(e));
    } finally {
      setBusy(false);
    }
  };
  const confirm = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const r = await call<TotpRecoveryCodes>('POST', '/api/v1/auth/totp/confirm', { code: code.trim() });
      setCodes(r.recovery_codes);
    } catch (err) {
      setError(errorMessage(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <Center mih="100vh" p="md">
      <Paper withBorder p="xl" w={460} maw="100%" component="main">
        <Stack>
          <Title order={2}>Set up two-factor sign-in</Title>
          {error && <Alert color="red" role="alert">{error}</Alert>}
          {!enrol && (
            <>
              <Text>This gateway requires two-factor sign-in for your account. Set it up to continue.</Text>
              <Button onClick={start} loading={busy}>Set up</Button>
            </>
          )}
          {enrol && !codes && (
            <form onSubmit={confirm} aria-label="Confirm two-factor">
              <Stack>
                <Text size="sm">Scan the QR code with your authenticator app, or add this key by hand (or open the link on the phone), then enter the code it shows.</Text>
                <QrCode value={enrol.otpauth_url} label="QR code for your authenticator app" />
                <Code data-testid="totp-secret">{enrol.secret}</Code>
                <Text size="xs" style={{ wordBreak: 'break-all' }}><a href={enrol.otpauth_url}>{enrol.otpauth_url}</a></Text>
                <TextInput label="Code" autoComplete="one-time-code" inputMode="numeric" value={code} onChange={(e) => setCode(e.currentTarget.value)} />
                <Button type="submit" loading={busy}>Turn on</Button>
              </Stack>
            </form>
          )}
          {codes && (
            <>
              <Text>Two-factor sign-in is on. Keep these recovery codes somewhere safe: each signs in once without the app. They are shown only now.</Text>
              <Code block data-testid="recovery-codes">{codes.join('\n')}</Code>
              <Button onClick={onDone}>Continue</Button>
            </>
          )}
        </Stack>
      </Paper>
    </Center>
  );
}

export function NotAdmin({ username, onSignOut }: { username: string; onSignOut: () => void }) {
  return (
    <Center mih="100vh" p="md">
      <Paper withBorder p="xl" w={420} maw="100%" component="main">
        <Stack>
          <Title order={2}>Not an administrator</Title>
          <Text>
            You are signed in as <b>{username}</b>, which is not an administrator account. The admin console is only
            for administrators; your files are in the <Anchor href="/">web app</Anchor>, the Nimbus drive and the CLI.
          </Text>
          <Button onClick={onSignOut}>Sign out</Button>
        </Stack>
      </Paper>
    </Center>
  );
}
