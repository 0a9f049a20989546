// End-to-end: single sign-on into the console and the web app in Debian's chromium (playwright-core) against a
// real gateway configured with the tests' OpenID provider (tests/oidc-provider; run by
// tests/tests/oidc.rs with `--oidc-provision auto` and `groups`/`nimbus-admins` for admins).
// Usage: node e2e/sso.e2e.mjs BASE_URL. Screenshots go to e2e-artifacts/sso-*.png.
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const [base] = process.argv.slice(2);
if (!base) {
  console.error('usage: node e2e/sso.e2e.mjs BASE_URL');
  process.exit(2);
}
const artifacts = join(dirname(fileURLToPath(import.meta.url)), '..', 'e2e-artifacts');
mkdirSync(artifacts, { recursive: true });

function check(cond, msg) {
  if (!cond) throw new Error(`check failed: ${msg}`);
}
const step = (s) => console.log(`[e2e] ${s}`);

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
});
let page;
const violations = [];
try {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  page = await ctx.newPage();
  page.setDefaultTimeout(30000);
  const shot = (name) => page.screenshot({ path: join(artifacts, `sso-${name}.png`), fullPage: true });
  // Only the console's own pages must keep its CSP (the provider's pages are the provider's).
  page.on('console', (m) => {
    if (/Content Security Policy/i.test(m.text()) && page.url().startsWith(base)) violations.push(m.text());
  });

  // At the provider: oidc-provider's development login form (any password), then consent.
  const atProvider = async (login) => {
    await page.locator('input[name="login"]').fill(login);
    await page.locator('input[name="password"]').fill('any password');
    await page.getByRole('button', { name: 'Sign-in' }).click();
    await page.getByRole('button', { name: 'Continue' }).click();
  };

  step('the sign-in page offers single sign-on');
  await page.goto(`${base}/admin/`);
  await page.getByRole('link', { name: 'Sign in with single sign-on' }).click();
  await page.locator('input[name="login"]').waitFor();
  check(!page.url().startsWith(base), `the browser went to the provider: ${page.url()}`);
  await shot('01-provider-login');

  step('carol (groups: nimbus-admins) signs in and lands in the console');
  await atProvider('carol');
  await page.getByRole('button', { name: 'Sign out' }).waitFor();
  await page.getByText('carol', { exact: true }).first().waitFor();
  check(!page.url().includes('#'), `the token was cleared from the address: ${page.url()}`);
  const token = await page.evaluate(() => sessionStorage.getItem('nimbus-admin-token'));
  check(token && token.startsWith('nmb_'), 'the console keeps the token as its session');
  let r = await fetch(`${base}/api/v1/me`, { headers: { Authorization: `Bearer ${token}` } });
  const me = await r.json();
  check(me.username === 'carol' && me.role === 'admin' && me.source === 'oidc', `me: ${JSON.stringify(me)}`);
  await shot('02-console');

  step('sign-out ends the Nimbus session');
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByRole('link', { name: 'Sign in with single sign-on' }).waitFor();
  r = await fetch(`${base}/api/v1/me`, { headers: { Authorization: `Bearer ${token}` } });
  check(r.status === 401, `the token after sign-out: ${r.status}`);

  step('a refused sign-in comes back with the reason');
  // The provider still has carol's session: sign in again picks her; a fresh context is a new person.
  const ctx2 = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  page = await ctx2.newPage();
  page.setDefaultTimeout(30000);
  await page.goto(`${base}/admin/`);
  await page.getByRole('link', { name: 'Sign in with single sign-on' }).click();
  await atProvider('mallory');
  const alert = page.getByRole('alert');
  await alert.waitFor();
  const text = await alert.textContent();
  check(/Single sign-on failed: .*not a valid Nimbus username/.test(text), `the alert: ${text}`);
  check(!page.url().includes('#'), `the error was cleared from the address: ${page.url()}`);
  await shot('03-refused');

  step('alice signs in to the web app (not the console) and lands in her files');
  const ctx3 = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  page = await ctx3.newPage();
  page.setDefaultTimeout(30000);
  await page.goto(`${base}/`);
  await page.getByRole('link', { name: 'Sign in with single sign-on' }).click();
  await page.locator('input[name="login"]').waitFor();
  check(!page.url().startsWith(base), `the browser went to the provider: ${page.url()}`);
  await atProvider('alice');
  await page.getByRole('button', { name: 'Upload files' }).waitFor();
  check(new URL(page.url()).pathname === '/', `back in the web app: ${page.url()}`);
  check(!page.url().includes('#'), `the token was cleared from the address: ${page.url()}`);
  const webToken = await page.evaluate(() => sessionStorage.getItem('nimbus-token'));
  check(webToken && webToken.startsWith('nmb_'), 'the web app keeps the token as its session');
  r = await fetch(`${base}/api/v1/me`, { headers: { Authorization: `Bearer ${webToken}` } });
  const alice = await r.json();
  check(alice.username === 'alice' && alice.role === 'user' && alice.source === 'oidc', `me: ${JSON.stringify(alice)}`);
  await shot('04-web-app');
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByRole('link', { name: 'Sign in with single sign-on' }).waitFor();
  r = await fetch(`${base}/api/v1/me`, { headers: { Authorization: `Bearer ${webToken}` } });
  check(r.status === 401, `the web app's token after sign-out: ${r.status}`);

  check(violations.length === 0, `the console broke its CSP:\n${violations.join('\n')}`);
  console.log('[e2e] all steps passed');
} catch (e) {
  if (page) await page.screenshot({ path: join(artifacts, 'sso-failure.png'), fullPage: true }).catch(() => {});
  console.error(`[e2e] FAILED: ${e.stack || e}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
