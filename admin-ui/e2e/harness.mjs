// What the browser tests (console.e2e.mjs, web.e2e.mjs, ...) share: Debian's chromium through
// playwright-core (no browser download; CHROMIUM= overrides), the API called directly, the
// Content-Security-Policy violations a page reports, an authenticator app (`totp`, RFC 6238),
// and the run's end (a failure screenshot, a non-zero exit).
import { createHmac } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

export const artifacts = join(dirname(fileURLToPath(import.meta.url)), '..', 'e2e-artifacts');
mkdirSync(artifacts, { recursive: true });

export function check(cond, msg) {
  if (!cond) throw new Error(`check failed: ${msg}`);
}

export const step = (s) => console.log(`[e2e] ${s}`);

/** A caller of the gateway's API at `base`: `{status, headers, buf, text, json()}`. */
export function caller(base) {
  return async (method, path, { token, json, body, headers: extra } = {}) => {
    const headers = { ...extra };
    if (token) headers.Authorization = `Bearer ${token}`;
    if (json !== undefined) headers['Content-Type'] = 'application/json';
    const r = await fetch(base + path, { method, headers, body: json !== undefined ? JSON.stringify(json) : body });
    const buf = Buffer.from(await r.arrayBuffer());
    return { status: r.status, headers: r.headers, buf, text: buf.toString(), json: () => JSON.parse(buf.toString()) };
  };
}

export function launch() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
}

/** Collects into `violations` every CSP violation the pages of `ctx` report (the console's
 * messages, and the `securitypolicyviolation` events an init script logs). */
export async function watchCsp(ctx, page, violations) {
  page.on('console', (m) => {
    if (/Content Security Policy/i.test(m.text())) violations.push(m.text());
  });
  await ctx.addInitScript(() => {
    document.addEventListener('securitypolicyviolation', (e) =>
      console.error(`Content Security Policy violation: ${e.violatedDirective} ${e.blockedURI}`),
    );
  });
}

/** Runs the test `body`, then reports: all passed, or the failure with a screenshot
 * (`failureShot` in artifacts) and the CSP violations; the browser is closed either way. */
export async function run(browser, failureShot, violations, body) {
  let page;
  try {
    await body((p) => (page = p));
    check(violations.length === 0, `the page broke its CSP:\n${violations.join('\n')}`);
    console.log('[e2e] all steps passed');
  } catch (e) {
    if (page) await page.screenshot({ path: join(artifacts, failureShot), fullPage: true }).catch(() => {});
    console.error(`[e2e] FAILED: ${e.stack || e}`);
    if (violations.length) console.error(`[e2e] CSP violations:\n${violations.join('\n')}`);
    process.exitCode = 1;
  } finally {
    await browser.close();
  }
}

/** An authenticator app: the RFC 6238 code (HMAC-SHA1, 6 digits, 30 s) of the base32 `secret`
 * now, or `offsetSteps` 30-second steps away. */
export function totp(secret, offsetSteps = 0) {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  const key = [];
  let bits = 0;
  let val = 0;
  for (const c of secret.replace(/=+$/, '')) {
    val = ((val << 5) | alphabet.indexOf(c)) & 0xfff;
    bits += 5;
    if (bits >= 8) {
      key.push((val >>> (bits - 8)) & 0xff);
      bits -= 8;
    }
  }
  const msg = Buffer.alloc(8);
  msg.writeBigUInt64BE(BigInt(Math.floor(Date.now() / 30000) + offsetSteps));
  const h = createHmac('sha1', Buffer.from(key)).update(msg).digest();
  const o = h[h.length - 1] & 15;
  return String((h.readUInt32BE(o) & 0x7fffffff) % 1e6).padStart(6, '0');
}
