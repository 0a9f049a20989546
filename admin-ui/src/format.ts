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
  if (!m) throw new Error('Enter a size such as 10 GiB or 500 MB');
  const unit = (m[2] || 'b').toLowerCase();
  const mult = UNITS[unit];
  if (mult === undefined) throw new Error(`Unknown unit "${m[2]}": use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB`);
  const n = Math.round(parseFloat(m[1]) * mult);
  if (!Number.isSafeInteger(n)) throw new Error('That size is too large');
  return n;
}

const IEC = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

/** A size to read: 1024-based units, one decimal when it says something ("10 MiB", "1.5 GiB");
 * the gateway's audit details use the same form (nimbus_proto::size::format_size). */
export function formatSize(n: number | null | undefined): string {
  if (n === null || n === undefined) return 'unlimited';
  let v = n;
  let i = 0;
  while (v >= 1024 && i < IEC.length - 1) {
    v /= 1024;
    i++;
  }
  const r = Math.round(v * 10) / 10;
  return `${i === 0 || Number.isInteger(r) ? r.toFixed(0) : r.toFixed(1)} ${IEC[i]}`;
}

/** A size to edit: the shortest form that parseSize reads back to exactly `n` bytes ("10 GiB",
 * "500 MB", "1.5 KiB"), so that saving an untouched field changes nothing. */
export function formatSizeInput(n: number | null): string {
  if (n === null) return '';
  // Any exact form with a unit beats plain bytes; among those, the shortest number.
  let best: string | null = null;
  for (const [unit, mult] of Object.entries(UNITS)) {
    const v = n / mult;
    if (mult === 1 || v < 1) continue;
    for (const digits of [0, 1, 2]) {
      const num = String(Number(v.toFixed(digits)));
      if (parseSize(`${num} ${DISPLAY[unit]}`) === n && (best === null || num.length < best.indexOf(' '))) {
        best = `${num} ${DISPLAY[unit]}`;
      }
    }
  }
  return best ?? `${n} B`;
}

const DISPLAY: Record<string, string> = { b: 'B', kb: 'KB', mb: 'MB', gb: 'GB', tb: 'TB', kib: 'KiB', mib: 'MiB', gib: 'GiB', tib: 'TiB' };

/** The unit a chart of sizes up to `max` bytes is drawn in, and its size in bytes. */
export function sizeUnit(max: number): { unit: string; bytes: number } {
  let i = 0;
  while (max >= 1024 ** (i + 1) && i < IEC.length - 1) i++;
  return { unit: IEC[i], bytes: 1024 ** i };
}

/** An audit entry's detail as people read it. The gateway writes sizes that way; entries an
 * older gateway wrote say `quota Some(10485760)`, `quota None` or `quota 10485760 bytes`. */
export function auditDetail(detail: string | null): string {
  if (detail === null) return '';
  return detail
    .replace(/\bquota None\b/g, 'quota removed (unlimited)')
    .replace(/\bSome\((\d+)\)/g, (_, n) => formatSize(Number(n)))
    .replace(/\b(\d+) bytes\b/g, (_, n) => formatSize(Number(n)))
    .replace(/\bdevice "([^"]*)" \(token \d+\)/g, 'device: $1');
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
