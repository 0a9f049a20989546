import { Anchor, Button, Divider, PasswordInput, Stack, TextInput } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { useState, type FormEvent } from 'react';
import { ApiError, api } from '../../../src/api/client';
import type { LoginRequest, LoginResponse } from '../../../src/api/types';
import { SignInFrame } from '../../../src/pages/SignIn';
import { describeError } from '../errors';

/** What `GET /api/v1/auth/methods` says (404 on gateways without single sign-on). */
interface Methods {
  oidc?: boolean;
}

/** The login body with the two-factor code (the `totp` field of the sign-in contract). */
type LoginWithCode = LoginRequest & { totp?: string };

export function SignIn({ notice, onSignedIn }: { notice: string | null; onSignedIn: (token: string) => void }) {
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [code, setCode] = useState('');
  const [needCode, setNeedCode] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const methods = useQuery({
    queryKey: ['auth-methods'],
    queryFn: async () => {
      try {
        return await api<Methods>('GET', '/api/v1/auth/methods');
      } catch {
        return {}; // not configured (404) or an older gateway: password sign-in only
      }
    },
    retry: false,
  });

  const submit = async (e?: FormEvent) => {
    e?.preventDefault();
    if (!username || !password) {
      setError('Enter your username and password.');
      return;
    }
    if (needCode && !code.trim()) {
      setError('Enter the 6-digit code from your authenticator app, or a recovery code.');
      return;
    }
    setBusy(true);
    setError(null);
    try {
      const body: LoginWithCode = { username, password, device: 'web app', ...(needCode ? { totp: code.trim() } : {}) };
      const r = await api<LoginResponse>('POST', '/api/v1/auth/login', body);
      onSignedIn(r.token);
    } catch (err) {
      if (err instanceof ApiError && err.status === 401 && err.rawCode === 'totp_required') {
        if (needCode) setError('That code is not right (or has expired). Try the current one.');
        setNeedCode(true);
        setCode('');
      } else if (err instanceof ApiError && err.code === 'unauthorized') {
        setError(needCode ? 'That code is not right (or has expired). Try the current one.' : 'Wrong username or password.');
      } else {
        setError(describeError(err));
      }
    } finally {
      setBusy(false);
    }
  };

  return (
    <SignInFrame title="Nimbus" notice={notice} error={error} onSubmit={submit}>
      {!needCode && (
        <>
          <TextInput label="Username" autoComplete="username" value={username} onChange={(e) => setUsername(e.currentTarget.value)} autoFocus />
          <PasswordInput label="Password" autoComplete="current-password" value={password} onChange={(e) => setPassword(e.currentTarget.value)} />
        </>
      )}
      {needCode && (
        <Stack gap="xs">
          <TextInput
            label="Code"
            description="Two-factor sign-in is on: enter the 6-digit code from your authenticator app, or one of your recovery codes."
            autoComplete="one-time-code"
            maxLength={64}
            autoFocus
            value={code}
            onChange={(e) => setCode(e.currentTarget.value)}
          />
          <Anchor component="button" type="button" size="sm" onClick={() => { setNeedCode(false); setError(null); }}>
            Back to username and password
          </Anchor>
        </Stack>
      )}
      <Button type="submit" loading={busy}>{needCode ? 'Verify' : 'Sign in'}</Button>
      {methods.data?.oidc && !needCode && (
        <>
          <Divider label="or" />
          <Button component="a" variant="default" href="/api/v1/auth/oidc/start?return=/">Sign in with single sign-on</Button>
        </>
      )}
    </SignInFrame>
  );
}
