// The desktop UI in Debian's chromium (playwright-core, no browser download) against the mock
// back end (src/mock.ts): the build in dist/ is served from a throwaway local HTTP server.
// Usage: node e2e/app.e2e.mjs  (after `npm run build`). Screenshots of the sign-in and main
// windows go to e2e-artifacts/ (gitignored). Exits non-zero on the first failure.
import { createReadStream, existsSync, mkdirSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:http';
import { dirname, extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, '..', 'dist');
const artifacts = join(here, '..', 'e2e-artifacts');
mkdirSync(artifacts, { recursive: true });
rmSync(join(artifacts, 'failure.png'), { force: true });
if (!existsSync(join(dist, 'index.html'))) {
  console.error('build the UI first: npm run build');
  process.exit(2);
}

// Must match src/mock.ts.
const USER = 'alice';
const PASSWORD = 'correct horse';
const FINGERPRINT_START = '3A:9F:10:C4';

const types = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.svg': 'image/svg+xml' };
const server = createServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://x');
  const rel = normalize(decodeURIComponent(url.pathname)).replace(/^(\.\.[/\\])+/, '');
  let file = join(dist, rel);
  if (!file.startsWith(dist) || !existsSync(file) || statSync(file).isDirectory()) file = join(dist, 'index.html');
  res.writeHead(200, { 'Content-Type': types[extname(file)] ?? 'application/octet-stream' });
  createReadStream(file).pipe(res);
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const base = `http://127.0.0.1:${server.address().port}/`;

function check(cond, msg) {
  if (!cond) throw new Error(`check failed: ${msg}`);
}
const step = (s) => console.log(`[e2e] ${s}`);

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
});
let page;
let failed = false;
try {
  const ctx = await browser.newContext({ viewport: { width: 720, height: 900 } });
  page = await ctx.newPage();
  page.setDefaultTimeout(30000);
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  const shot = (name) => page.screenshot({ path: join(artifacts, `${name}.png`), fullPage: true });

  step('sign-in window: wrong password');
  await page.goto(base);
  await page.getByLabel('Server address').fill('https://self-signed.example:8443');
  await page.getByLabel('Username').fill(USER);
  await page.getByRole('textbox', { name: 'Password' }).fill('wrong');
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  step('the self-signed certificate is shown by fingerprint');
  const prompt = page.getByRole('dialog', { name: 'Unknown certificate' });
  await prompt.waitFor();
  check((await prompt.getByTestId('fingerprint').textContent()).startsWith(FINGERPRINT_START), 'fingerprint shown');
  await shot('01-sign-in-certificate');
  await prompt.getByRole('button', { name: 'Trust and sign in' }).click();
  await page.getByRole('alert').waitFor();
  check((await page.getByRole('alert').textContent()).includes('wrong username or password'), 'bad password error');
  await shot('02-sign-in-error');

  step('sign in');
  await page.getByRole('textbox', { name: 'Password' }).fill(PASSWORD);
  // The certificate stays trusted: no second prompt.
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await page.getByText(`${USER} on https://self-signed.example:8443`).waitFor();
  await page.getByText('No keychain available').waitFor();

  step('mount');
  await page.getByRole('button', { name: 'Mount' }).click();
  await page.getByTestId('mount-location').waitFor();
  check((await page.getByTestId('mount-location').textContent()) === '/home/alice/Nimbus', 'mount location');
  check((await page.getByTestId('quota').textContent()).includes('of 10 GiB used'), 'quota shown');

  step('status from the drive: uploads, an error, a conflict, a refused change');
  await page.evaluate(() =>
    window.nimbusMock.simulate({
      activity: {
        pending_uploads: 2,
        uploads_in_flight: 1,
        commits_in_progress: 1,
        errors: ['report.pdf: quota exceeded'],
        conflicts: [{ path: '/notes.txt', copy: '/notes (conflict 2026-11-23 1700 laptop).txt' }],
        problems: [
          {
            path: '/plan.docx',
            reason: 'locked',
            message: 'Someone else has this file locked (open for editing on another computer).',
            detail: 'locked by someone else',
            since: '2026-11-26T09:00:00Z',
            attempts: 2,
            actions: ['retry', 'save_copy', 'discard'],
          },
        ],
      },
    }),
  );
  await page.getByLabel('Upload errors').waitFor();
  await page.getByLabel('Conflicts').waitFor();
  await page.getByRole('group', { name: 'Refused change /plan.docx' }).waitFor();
  check((await page.getByTestId('activity').textContent()).includes('2 file(s) waiting'), 'pending shown');
  await shot('03-main-window');

  step('a refused change saved as a copy');
  await page.getByRole('button', { name: 'Save a copy /plan.docx' }).click();
  await page.getByText(/saved this device's version of \/plan\.docx as/).waitFor();
  check((await page.getByLabel('Refused changes').count()) === 0, 'the refused change is gone');

  step('sign out is refused while uploads are pending, then retry clears them');
  await page.getByRole('button', { name: 'Sign out' }).click();
  const warn = page.getByRole('alertdialog', { name: 'Uploads pending' });
  await warn.waitFor();
  await shot('04-sign-out-pending');
  await warn.getByRole('button', { name: 'Cancel' }).click();
  await page.getByRole('button', { name: 'Retry' }).click();
  await page.getByText('Everything is uploaded.').waitFor();

  step('free up space, unmount, sign out');
  await page.getByRole('button', { name: 'Free up space' }).click();
  await page.getByText('0 B of 10 GiB').waitFor();
  await page.getByRole('button', { name: 'Unmount' }).click();
  await page.getByText('Not mounted').waitFor();
  await shot('05-main-unmounted');
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByRole('button', { name: 'Sign in', exact: true }).waitFor();
  await shot('06-signed-out');
  check(errors.length === 0, `page errors: ${errors.join('; ')}`);
  step('all steps passed');
} catch (e) {
  failed = true;
  console.error(e);
  if (page) await page.screenshot({ path: join(artifacts, 'failure.png'), fullPage: true }).catch(() => {});
} finally {
  await browser.close();
  server.close();
}
process.exit(failed ? 1 : 0);
