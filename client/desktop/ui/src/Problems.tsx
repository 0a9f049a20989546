// The changes the server refused (quota, someone else's lock, a name taken on the server):
// each names the file and the reason, and offers what the drive can do about it. Discarding
// throws the person's work away, so it asks first.
import { Alert, Button, Group, Stack, Text } from '@mantine/core';
import { useState } from 'react';
import type { DriveProblem, ProblemAction, ProblemReason } from './generated/bindings';

const REASON: Record<ProblemReason, string> = {
  quota: 'Storage full',
  locked: 'Locked by someone else',
  name_conflict: 'Name taken on the server',
  invalid_name: 'Name refused',
  denied: 'Not allowed',
  failed: 'Refused',
};

export const ACTION_LABEL: Record<ProblemAction, string> = {
  retry: 'Retry',
  save_copy: 'Save a copy',
  discard: 'Discard',
};

/** The `busy` key of an action on a problem (the button that shows it is working). */
export function problemBusyKey(p: DriveProblem, a: ProblemAction): string {
  return `${a}:${p.path}`;
}

export function Problems({
  problems,
  busy,
  onResolve,
}: {
  problems: DriveProblem[];
  busy: string | null;
  onResolve: (p: DriveProblem, a: ProblemAction) => void;
}) {
  const [confirming, setConfirming] = useState<string | null>(null);
  if (problems.length === 0) return null;
  return (
    <Alert color="red" title="Changes the server refused" aria-label="Refused changes">
      <Text size="sm">These changes are kept on this computer until you choose what to do with them.</Text>
      <Stack gap="sm" mt="xs">
        {problems.map((p) => (
          <Stack key={p.path} gap={4} role="group" aria-label={`Refused change ${p.path}`}>
            <Text fw={600}>{p.path}</Text>
            <Text size="sm">
              {REASON[p.reason]}: {p.message}
            </Text>
            <Text size="xs" c="dimmed">
              Tried {p.attempts === 1 ? 'once' : `${p.attempts} times`} since {p.since}. The server said: {p.detail}
            </Text>
            {confirming === p.path ? (
              <Group gap="xs">
                <Text size="sm">Throw away your change to {p.path}?</Text>
                <Button
                  size="xs"
                  color="red"
                  aria-label={`Discard change to ${p.path}`}
                  onClick={() => {
                    setConfirming(null);
                    onResolve(p, 'discard');
                  }}
                >
                  Discard change
                </Button>
                <Button size="xs" variant="default" onClick={() => setConfirming(null)}>
                  Keep it
                </Button>
              </Group>
            ) : (
              <Group gap="xs">
                {p.actions.map((a) => (
                  <Button
                    key={a}
                    size="xs"
                    variant={a === 'discard' ? 'default' : 'filled'}
                    color={a === 'discard' ? 'red' : undefined}
                    aria-label={`${ACTION_LABEL[a]} ${p.path}`}
                    loading={busy === problemBusyKey(p, a)}
                    onClick={() => (a === 'discard' ? setConfirming(p.path) : onResolve(p, a))}
                  >
                    {ACTION_LABEL[a]}
                  </Button>
                ))}
              </Group>
            )}
          </Stack>
        ))}
      </Stack>
    </Alert>
  );
}
