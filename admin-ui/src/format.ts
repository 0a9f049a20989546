// Sizes as people write them ("10 GiB", "500MB") and back.
const UNITS: Record<string, number> = {
  b: 1,
  kb: 1e3,
  mb: 1e6,
  gb: 1e9,
  tb: 1e12,
  kib: 1024,
  mib: 1024 ** 2,
  gib: 1024 ** 3,
  tib: 1024 ** 4,
};

/** Parses a quota; empty means unlimited (null). Throws a message on bad input. */
export function parseSize(input: string): number | null {
  const s = input.trim();
  if (s === '' || s.toLowerCase() === 'unlimited') return null;
  const m = /^(\d+(?:\.\d+)?)\s*([a-zA-Z]*)$/.exec(s);
  if (!m) throw new Error('Enter a size such as 10 GiB, 500 MB or 1048576');
  const unit = (m[2] || 'b').toLowerCase();
  const mult = UNITS[unit];
  if (mult === undefined) throw new Error(`Unknown unit "${m[2]}": use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB`);
  const n = Math.round(parseFloat(m[1]) * mult);
  if (!Number.isSafeInteger(n)) throw new Error('That size is too large');
  return n;
}

export function formatSize(n: number | null | undefined): string {
  if (n === null || n === undefined) return 'unlimited';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i === 0 ? v : v.toFixed(1)} ${units[i]}`;
}

/** Mirrors the gateway's username rule closely enough to catch typos before sending. */
export function usernameError(u: string): string | null {
  if (u.trim() === '') return 'Username is required';
  if (u.length > 64) return 'At most 64 characters';
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(u)) return 'Letters, digits, dot, dash and underscore; start with a letter or digit';
  return null;
}

export function passwordError(p: string): string | null {
  if (p !== '' && p.length < 8) return 'At least 8 characters (or leave empty to generate one)';
  return null;
}
