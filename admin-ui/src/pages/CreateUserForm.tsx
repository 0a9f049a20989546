import { Alert, Button, Code, PasswordInput, Select, Stack, Text, TextInput } from '@mantine/core';
import { useState, type FormEvent } from 'react';
import { errorMessage } from '../api/client';
import type { CreatedUser, Role } from '../api/types';
import { parseSize, passwordError, usernameError } from '../format';

export interface NewUser {
  username: string;
  password?: string;
  quota_bytes?: number;
  role: Role;
  /** `oidc`: signs in only through single sign-on (no password). */
  source?: 'oidc';
}

/** Validates before sending; shows the generated password once. */
export function CreateUserForm({ onCreate }: { onCreate: (u: NewUser) => Promise<CreatedUser> }) {
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [quota, setQuota] = useState('');
  const [role, setRole] = useState<Role>('user');
  const [sso, setSso] = useState(false);
  const [errors, setErrors] = useState<Record<string, string | null>>({});
  const [apiError, setApiError] = useState<string | null>(null);
  const [created, setCreated] = useState<CreatedUser | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    let quotaBytes: number | null = null;
    let quotaErr: string | null = null;
    try {
      quotaBytes = parseSize(quota);
    } catch (err) {
      quotaErr = errorMessage(err);
    }
    const errs = { username: usernameError(username), password: sso ? null : passwordError(password), quota: quotaErr };
    setErrors(errs);
    if (Object.values(errs).some(Boolean)) return;
    setBusy(true);
    setApiError(null);
    try {
      const req: NewUser = { username, role };
      if (sso) req.source = 'oidc';
      else if (password) req.password = password;
      if (quotaBytes !== null) req.quota_bytes = quotaBytes;
      const u = await onCreate(req);
      setCreated(u);
      setUsername('');
      setPassword('');
      setQuota('');
    } catch (err) {
      setApiError(errorMessage(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <form onSubmit={submit} aria-label="Create user" noValidate>
      <Stack>
        {apiError && <Alert color="red" role="alert">{apiError}</Alert>}
        {created && (
          <Alert color="green" role="status" title={`Created ${created.username}`}>
            {created.generated_password ? (
              <Text>
                Generated password (shown only once): <Code data-testid="generated-password">{created.generated_password}</Code>
              </Text>
            ) : created.source === 'oidc' ? (
              <Text>The user signs in with single sign-on.</Text>
            ) : (
              <Text>The user can sign in with the password you chose.</Text>
            )}
          </Alert>
        )}
        <TextInput label="Username" required value={username} error={errors.username} onChange={(e) => setUsername(e.currentTarget.value)} />
        <Select
          label="Signs in with"
          data={[
            { value: 'password', label: 'A password' },
            { value: 'oidc', label: 'Single sign-on (identity provider)' },
          ]}
          value={sso ? 'oidc' : 'password'}
          allowDeselect={false}
          onChange={(v) => setSso(v === 'oidc')}
        />
        {!sso && (
          <PasswordInput
            label="Password"
            description="Leave empty to generate one"
            value={password}
            error={errors.password}
            onChange={(e) => setPassword(e.currentTarget.value)}
          />
        )}
        <TextInput label="Quota" description="e.g. 10 GiB; empty for the default" value={quota} error={errors.quota} onChange={(e) => setQuota(e.currentTarget.value)} />
        <Select
          label="Role"
          data={[
            { value: 'user', label: 'User' },
            { value: 'admin', label: 'Administrator' },
          ]}
          value={role}
          allowDeselect={false}
          onChange={(v) => setRole((v as Role) ?? 'user')}
        />
        <Button type="submit" loading={busy}>Create user</Button>
      </Stack>
    </form>
  );
}
