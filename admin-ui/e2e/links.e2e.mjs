// End-to-end: public link pages (`/s/{token}`) in Debian's chromium, signed out: a password
// link's page asks for the password in a form (wrong ones said so, then throttled), opens with
// the right one and downloads; a file drop's page takes files through its upload form and says
// in words when a name is taken. Usage: node e2e/links.e2e.mjs BASE_URL ADMIN_PASSWORD
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { caller, check, launch, run, step, watchCsp } from './harness.mjs';

const [base, adminPassword] = process.argv.slice(2);
if (!base || !adminPassword) {
  console.error('usage: node e2e/links.e2e.mjs BASE_URL ADMIN_PASSWORD');
  process.exit(2);
}
const call = caller(base);
const OWNER = 'links-owner';
const PW = 'links-password-1';

let r = await call('POST', '/api/v1/auth/login', { json: { username: 'admin', password: adminPassword } });
check(r.status === 200, `admin login: ${r.status} ${r.text}`);
const admin = r.json().token;
r = await call('POST', '/api/v1/admin/users', { token: admin, json: { username: OWNER, password: PW, role: 'user' } });
check(r.status === 201, `create ${OWNER}: ${r.status} ${r.text}`);
r = await call('POST', '/api/v1/auth/login', { json: { username: OWNER, password: PW } });
const owner = r.json().token;
r = await call('PUT', '/api/v1/files/report.txt', { token: owner, body: 'the quarterly report\n' });
check(r.status === 201, `upload: ${r.status}`);
r = await call('POST', '/api/v1/dirs/Drop', { token: owner });
check(r.status === 201, `mkdir: ${r.status}`);
r = await call('PUT', '/api/v1/files/Drop/taken.txt', { token: owner, body: 'already here' });
check(r.status === 201, `upload: ${r.status}`);
const link = async (body) => {
  const res = await call('POST', '/api/v1/links', { token: owner, json: body });
  check(res.status === 201, `link: ${res.status} ${res.text}`);
  return res.json();
};
const guarded = await link({ path: '/report.txt', mode: 'view', password: 'correct horse battery' });
const drop = await link({ path: '/Drop', mode: 'upload', password: 'drop password 1' });
const other = await link({ path: '/report.txt', mode: 'view', password: 'another password' });

const files = mkdtempSync(join(tmpdir(), 'nimbus-links-e2e-'));
writeFileSync(join(files, 'notes.txt'), 'notes from a visitor\n');
writeFileSync(join(files, 'photo.bin'), Buffer.alloc(70000, 7));
writeFileSync(join(files, 'taken.txt'), 'a visitor must not replace this');

const browser = await launch();
const violations = [];
await run(browser, 'links-failure.png', violations, async (setPage) => {
  const ctx = await browser.newContext({ acceptDownloads: true });
  const page = await ctx.newPage();
  setPage(page);
  await watchCsp(ctx, page, violations);

  step('a password link asks for its password in the page, not in a browser prompt');
  let resp = await page.goto(`${base}/s/${guarded.token}`);
  check(resp.status() === 401, `before the password: ${resp.status()}`);
  check(!resp.headers()['www-authenticate'], 'no Basic prompt over the page');
  await page.getByText('This link is protected by a password.').waitFor();

  step('a wrong password is said so');
  await page.getByLabel('Password').fill('not the password');
  await page.getByRole('button', { name: 'Open' }).click();
  await page.getByText('Wrong password; try again.').waitFor();
  check((await page.title()) === 'Password required', await page.title());

  step('the right one opens the page, and the download');
  await page.getByLabel('Password').fill('correct horse battery');
  await page.getByRole('button', { name: 'Open' }).click();
  await page.getByRole('heading', { name: 'report.txt' }).waitFor();
  const [download] = await Promise.all([
    page.waitForEvent('download'),
    page.getByRole('link', { name: 'Download' }).click(),
  ]);
  const got = readFileSync(await download.path(), 'utf8');
  check(got === 'the quarterly report\n', `downloaded: ${JSON.stringify(got)}`);
  // The cookie opens this link only.
  resp = await page.goto(`${base}/s/${other.token}`);
  check(resp.status() === 401, `another link: ${resp.status()}`);

  step('repeated wrong passwords are throttled, with a clear message');
  let throttled = false;
  for (let i = 0; i < 8 && !throttled; i++) {
    await page.getByLabel('Password').fill(`wrong ${i}`);
    const [answer] = await Promise.all([
      page.waitForResponse((x) => x.url().endsWith(`/s/${other.token}`) && x.request().method() === 'POST'),
      page.getByRole('button', { name: 'Open' }).click(),
    ]);
    throttled = answer.status() === 429;
  }
  check(throttled, 'no 429 after 8 wrong passwords');
  await page.getByText(/too many failed attempts.*try again in \d+ seconds/).waitFor();

  step('a file drop asks for its password, then shows an upload form, never its contents');
  resp = await page.goto(`${base}/s/${drop.token}`);
  check(resp.status() === 401, `the drop before the password: ${resp.status()}`);
  await page.getByLabel('Password').fill('drop password 1');
  await page.getByRole('button', { name: 'Open' }).click();
  await page.getByText('A file drop: you can add files here').waitFor();
  check(!(await page.content()).includes('taken.txt'), 'the drop lists its contents');
  await page.getByLabel('Files to add').setInputFiles([join(files, 'notes.txt'), join(files, 'photo.bin')]);
  const [added] = await Promise.all([
    page.waitForResponse((x) => x.url().endsWith(`/s/${drop.token}/upload`)),
    page.getByRole('button', { name: 'Upload' }).click(),
  ]);
  check(added.status() === 201, `upload: ${added.status()}`);
  await page.getByText('Added notes.txt').first().waitFor();
  await page.getByText('Added photo.bin').first().waitFor();

  step('a taken name is refused in words (409), the others added, nothing replaced');
  await page.getByLabel('Files to add').setInputFiles([join(files, 'taken.txt')]);
  const [refused] = await Promise.all([
    page.waitForResponse((x) => x.url().endsWith(`/s/${drop.token}/upload`)),
    page.getByRole('button', { name: 'Upload' }).click(),
  ]);
  check(refused.status() === 409, `a taken name: ${refused.status()}`);
  await page.getByText('is already there; choose another name').first().waitFor();

  step('what the visitor added is in the owner\'s folder; what was there is unchanged');
  r = await call('GET', '/api/v1/files/Drop/notes.txt', { token: owner });
  check(r.status === 200 && r.text === 'notes from a visitor\n', `notes: ${r.status} ${r.text}`);
  r = await call('GET', '/api/v1/files/Drop/photo.bin', { token: owner });
  check(r.status === 200 && r.buf.length === 70000, `photo: ${r.status} ${r.buf.length}`);
  r = await call('GET', '/api/v1/files/Drop/taken.txt', { token: owner });
  check(r.text === 'already here', `taken.txt was replaced: ${r.text}`);
  await ctx.close();
});
