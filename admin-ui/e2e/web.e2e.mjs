// End-to-end: the users' web app in Debian's chromium (playwright-core, no browser download)
// against a real gateway. Usage: node e2e/web.e2e.mjs BASE_URL ADMIN_PASSWORD [SHOTS_DIR]
// Screenshots go to e2e-artifacts/web-* (gitignored), and the main screens also to SHOTS_DIR
// when given (docs/web). Exits non-zero on the first failure.
import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { artifacts, caller, check, launch, run, step, watchCsp } from './harness.mjs';

const [base, adminPassword, shotsDir] = process.argv.slice(2);
if (!base || !adminPassword) {
  console.error('usage: node e2e/web.e2e.mjs BASE_URL ADMIN_PASSWORD [SHOTS_DIR]');
  process.exit(2);
}
if (shotsDir) mkdirSync(shotsDir, { recursive: true });

const ALICE = 'web-alice';
const BOB = 'web-bob';
const PW = 'web-password-1';

const call = caller(base);

// A folder on disk to upload: two files, a subfolder, and an image and a text to preview.
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEElEQVR4nGP4z8AARAwQCgAf7gP9i18U1AAAAABJRU5ErkJggg==',
  'base64',
);
// `rate` samples of 8-bit mono silence as a WAV file (one second).
function wav(rate) {
  const b = Buffer.alloc(44 + rate, 128);
  b.write('RIFF', 0);
  b.writeUInt32LE(36 + rate, 4);
  b.write('WAVEfmt ', 8);
  b.writeUInt32LE(16, 16);
  b.writeUInt16LE(1, 20); // PCM
  b.writeUInt16LE(1, 22); // mono
  b.writeUInt32LE(rate, 24);
  b.writeUInt32LE(rate, 28); // bytes per second
  b.writeUInt16LE(1, 32);
  b.writeUInt16LE(8, 34);
  b.write('data', 36);
  b.writeUInt32LE(rate, 40);
  return b;
}
// A one-page PDF saying "Hello PDF".
const PDF = `%PDF-1.4
1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj
2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj
3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 200 200]/Contents 4 0 R/Resources<</Font<</F1 5 0 R>>>>>>endobj
4 0 obj<</Length 44>>stream
BT /F1 24 Tf 20 100 Td (Hello PDF) Tj ET
endstream endobj
5 0 obj<</Type/Font/Subtype/Type1/BaseFont/Helvetica>>endobj
trailer<</Root 1 0 R>>
%%EOF
`;
const tree = mkdtempSync(join(tmpdir(), 'nimbus-web-e2e-'));
const project = join(tree, 'Project');
mkdirSync(join(project, 'drafts'), { recursive: true });
writeFileSync(join(project, 'readme.txt'), 'hello from the web app\n');
writeFileSync(join(project, 'dot.png'), PNG);
writeFileSync(join(project, 'drafts', 'plan.md'), '# plan\nstep one\n');
const pictures = join(tree, 'Pictures');
mkdirSync(join(pictures, '2026'), { recursive: true });
writeFileSync(join(pictures, '2026', 'red.png'), PNG);

const browser = await launch();
const violations = [];
await run(browser, 'web-failure.png', violations, async (setPage) => {
  step('the administrator makes two users');
  let r = await call('POST', '/api/v1/auth/login', { json: { username: 'admin', password: adminPassword } });
  check(r.status === 200, `admin login: ${r.status} ${r.text}`);
  const admin = r.json().token;
  for (const username of [ALICE, BOB]) {
    r = await call('POST', '/api/v1/admin/users', { token: admin, json: { username, password: PW, role: 'user', quota_bytes: 200 * 1024 * 1024 } });
    check(r.status === 201, `create ${username}: ${r.status} ${r.text}`);
  }

  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 }, acceptDownloads: true });
  const page = setPage(await ctx.newPage());
  page.setDefaultTimeout(30000);
  const shot = async (name, doc) => {
    const path = join(artifacts, `web-${name}.png`);
    await page.screenshot({ path, fullPage: true });
    if (shotsDir && doc) copyFileSync(path, join(shotsDir, `${doc}.png`));
  };
  await watchCsp(ctx, page, violations);
  const nav = (name) => page.getByLabel('Main').getByRole('link', { name });
  const row = (name) => page.locator(`tr[data-entry="${name}"]`);
  // An entry's menu. A click that lands while the previous menu is still closing (Mantine's
  // transition) can leave this one shut: open it again then.
  const action = async (name, what) => {
    for (let attempt = 1; ; attempt++) {
      await page.getByRole('button', { name: `Actions for ${name}` }).click();
      try {
        await page.getByRole('menuitem', { name: what, exact: true }).click({ timeout: 5000 });
        return;
      } catch (e) {
        if (attempt === 3) throw e;
        await page.keyboard.press('Escape');
      }
    }
  };
  const signIn = async (username) => {
    await page.getByLabel('Username').fill(username);
    await page.getByLabel('Password', { exact: true }).fill(PW);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByTestId('whoami').filter({ hasText: username }).waitFor();
  };

  step('alice opens the app at / and signs in');
  const first = await page.goto(`${base}/`);
  const csp = (await first.allHeaders())['content-security-policy'] || '';
  check(csp.includes("'wasm-unsafe-eval'") && csp.includes("frame-ancestors 'none'") && !csp.includes('sandbox'), `the web app's CSP: ${csp}`);
  await page.getByLabel('Username').fill(ALICE);
  await page.getByLabel('Password', { exact: true }).fill('not her password');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('alert').filter({ hasText: 'Wrong username or password' }).waitFor();
  await shot('01-sign-in', 'sign-in');
  await page.getByLabel('Password', { exact: true }).fill(PW);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByTestId('whoami').filter({ hasText: ALICE }).waitFor();
  await page.getByText('This folder is empty').waitFor();

  step('alice drops a whole folder on the page, picks another with the folder picker, and drops a file');
  // A drop as the desktop makes it (Chromium's own drag input, with the folder's path): the
  // app walks the folder with webkitGetAsEntry.
  const cdp = await ctx.newCDPSession(page);
  const drag = { items: [], files: [project], dragOperationsMask: 1 };
  for (const type of ['dragEnter', 'dragOver', 'drop']) await cdp.send('Input.dispatchDragEvent', { type, x: 640, y: 400, data: drag });
  await row('Project').waitFor();
  await page.locator('[data-testid="upload-item"][data-phase="done"]').nth(2).waitFor();
  await page.getByTestId('folder-input').setInputFiles(pictures);
  await row('Pictures').waitFor();
  await page.locator('[data-testid="upload-item"][data-phase="done"]').nth(3).waitFor();
  // A drop as a browser makes it: a DataTransfer with a file, dispatched on the drop zone.
  const dt = await page.evaluateHandle(() => {
    const d = new DataTransfer();
    d.items.add(new File(['dropped bytes'], 'dropped.txt', { type: 'text/plain' }));
    return d;
  });
  await page.getByTestId('drop-zone').dispatchEvent('drop', { dataTransfer: dt });
  await row('dropped.txt').waitFor();
  r = await call('POST', '/api/v1/auth/login', { json: { username: ALICE, password: PW, device: 'e2e checks' } });
  const aliceApi = r.json().token;
  r = await call('GET', '/api/v1/files/Project/drafts/plan.md', { token: aliceApi });
  check(r.status === 200 && r.text === '# plan\nstep one\n', `the uploaded nested file: ${r.status} ${r.text}`);
  r = await call('GET', '/api/v1/files/Pictures/2026/red.png', { token: aliceApi });
  check(r.status === 200 && r.buf.equals(PNG), `the picked folder's file: ${r.status}`);
  r = await call('GET', '/api/v1/files/dropped.txt', { token: aliceApi });
  check(r.text === 'dropped bytes', `the dropped file: ${r.text}`);
  await shot('02-files', 'files');

  step('alice moves the dropped file into a folder picked in the move dialog');
  await action('dropped.txt', 'Move');
  await page.getByRole('dialog').getByRole('button', { name: 'Pictures', exact: true }).click();
  check((await page.getByRole('dialog').getByRole('textbox', { name: 'New path' }).inputValue()) === '/Pictures/dropped.txt', 'the picked place');
  await page.getByRole('dialog').getByRole('button', { name: 'Move', exact: true }).click();
  await page.getByRole('dialog').waitFor({ state: 'detached' });
  await row('dropped.txt').waitFor({ state: 'detached' });
  r = await call('GET', '/api/v1/files/Pictures/dropped.txt', { token: aliceApi });
  check(r.text === 'dropped bytes', `moved: ${r.status} ${r.text}`);

  step('an interrupted large upload resumes after a reload, sending only the missing blocks');
  // 9 MiB: three blocks of the gateway's 4 MiB. The second block's PUT is cut off.
  const big = randomBytes(9 * 1024 * 1024);
  let puts = 0;
  let held = 0;
  page.on('response', (resp) => {
    if (resp.request().method() === 'PUT' && resp.url().includes('/api/v1/blocks/') && resp.status() === 201) held++;
  });
  await page.route('**/api/v1/blocks/*', (route) => {
    if (route.request().method() === 'PUT' && ++puts === 2) return route.abort('connectionreset');
    return route.continue();
  });
  let chooser = page.waitForEvent('filechooser');
  await page.getByRole('button', { name: 'Upload files' }).click();
  await (await chooser).setFiles({ name: 'big.bin', mimeType: 'application/octet-stream', buffer: big });
  await page.locator('[data-testid="upload-item"][data-phase="failed"]').waitFor();
  await page.unroute('**/api/v1/blocks/*');
  const heldBefore = held;
  check(heldBefore >= 1 && heldBefore <= 2, `blocks that arrived before the cut: ${heldBefore}`);
  await page.reload();
  await page.getByText('Unfinished upload').waitFor();
  await shot('02b-resume', 'resume');
  held = 0;
  chooser = page.waitForEvent('filechooser');
  await page.getByRole('button', { name: 'Resume' }).click();
  await (await chooser).setFiles({ name: 'big.bin', mimeType: 'application/octet-stream', buffer: big });
  await page.locator('[data-testid="upload-item"][data-phase="done"]').waitFor();
  check(held === 3 - heldBefore, `the resume sent ${held} blocks, ${heldBefore} had arrived before`);
  check((await page.getByText('Unfinished upload').count()) === 0, 'the resumed upload is forgotten');
  r = await call('GET', '/api/v1/files/big.bin', { token: aliceApi });
  check(r.status === 200 && r.buf.equals(big), `the resumed file: ${r.status}, ${r.buf.length} bytes`);

  step('alice browses into the folder, sorts, and goes back by the breadcrumbs');
  await page.getByRole('button', { name: 'Project', exact: true }).click();
  await row('readme.txt').waitFor();
  check(new URL(page.url()).pathname === '/files/Project', `the route: ${page.url()}`);
  // The gateway's thumbnail of the image in the listing (fetched with the token, shown from a
  // blob: URL), the kind's icon for the text file.
  await page.waitForFunction(() => document.querySelector('tr[data-entry="dot.png"] img[data-thumbnail="dot.png"]')?.naturalWidth === 2);
  const thumbSrc = await page.locator('img[data-thumbnail="dot.png"]').getAttribute('src');
  check(thumbSrc.startsWith('blob:'), `the thumbnail's source: ${thumbSrc}`);
  check((await row('readme.txt').locator('img').count()) === 0, 'no thumbnail for a text file');
  check((await row('readme.txt').locator('[data-icon="file"]').count()) === 1, 'the text file shows its icon');
  await page.getByRole('button', { name: /^Size/ }).click();
  await page.getByRole('button', { name: /^Size/ }).click();
  const order = await page.locator('tr[data-entry]').evaluateAll((rows) => rows.map((r) => r.dataset.entry));
  check(order[0] === 'drafts' && order[1] === 'dot.png', `folders first, then the largest file: ${order}`);
  await page.reload();
  await row('readme.txt').waitFor();
  await page.getByLabel('Folder path').getByRole('link', { name: 'My files' }).click();
  await row('Pictures').waitFor();
  await page.getByRole('button', { name: 'Project', exact: true }).click();
  await row('readme.txt').waitFor();

  step('alice previews a text file, an image, a sound and a PDF');
  await page.getByRole('button', { name: 'readme.txt', exact: true }).click();
  await page.getByTestId('text-preview').filter({ hasText: 'hello from the web app' }).waitFor();
  await page.getByRole('button', { name: 'Close', exact: true }).click();
  await page.getByRole('button', { name: 'dot.png', exact: true }).click();
  const img = page.getByRole('img', { name: 'dot.png' });
  await img.waitFor();
  await page.waitForFunction(() => document.querySelector('img[alt="dot.png"]')?.naturalWidth === 2);
  await shot('03-preview', 'preview');
  await page.getByRole('button', { name: 'Close', exact: true }).click();
  // Audio from a blob: URL (media-src): a second of silence as a WAV the player can read.
  r = await call('PUT', '/api/v1/files/Project/tone.wav', { token: aliceApi, body: wav(8000) });
  check(r.status === 201, `put the WAV: ${r.status} ${r.text}`);
  await page.reload();
  await page.getByRole('button', { name: 'tone.wav', exact: true }).click();
  await page.waitForFunction(() => document.querySelector('audio[aria-label="tone.wav"]')?.duration === 1);
  await page.getByRole('button', { name: 'Close', exact: true }).click();
  // A PDF in a frame of the app's page (Chromium's viewer, from a blob: URL the CSP allows).
  r = await call('PUT', '/api/v1/files/Project/doc.pdf', { token: aliceApi, body: PDF });
  check(r.status === 201, `put the PDF: ${r.status} ${r.text}`);
  await page.reload();
  await page.getByRole('button', { name: 'doc.pdf', exact: true }).click();
  await page.waitForFunction(() => document.querySelector('iframe[title="doc.pdf"]')?.src.startsWith('blob:'));
  await page.getByRole('button', { name: 'Close', exact: true }).click();

  step('alice downloads a file');
  const [download] = await Promise.all([page.waitForEvent('download'), action('readme.txt', 'Download')]);
  check(download.suggestedFilename() === 'readme.txt', `download name: ${download.suggestedFilename()}`);
  const saved = await download.path();
  check(readFileSync(saved, 'utf8') === 'hello from the web app\n', 'the downloaded bytes');

  step('alice copies a file to another folder, and downloads a folder as a zip');
  await action('dot.png', 'Copy');
  await page.getByRole('dialog').getByRole('textbox', { name: 'New path' }).fill('/Project/drafts/dot copy.png');
  await page.getByRole('dialog').getByRole('button', { name: 'Copy', exact: true }).click();
  await page.getByRole('dialog').waitFor({ state: 'detached' });
  r = await call('GET', '/api/v1/files/Project/drafts/dot%20copy.png', { token: aliceApi });
  check(r.status === 200 && r.buf.equals(PNG), `the copy: ${r.status}`);
  const [zip] = await Promise.all([page.waitForEvent('download'), action('drafts', 'Download as zip')]);
  check(zip.suggestedFilename() === 'drafts.zip', `zip name: ${zip.suggestedFilename()}`);
  const zipBytes = readFileSync(await zip.path());
  check(zipBytes.subarray(0, 2).toString() === 'PK' && zipBytes.includes(Buffer.from('drafts/plan.md')), 'the zip holds the folder');

  step('alice renames a file, with F2 from the keyboard');
  await row('readme.txt').focus();
  await page.keyboard.press('F2');
  // The dialog focuses the name (selecting it without its extension) once it has opened.
  await page.waitForFunction(() => document.activeElement?.value === 'readme.txt');
  await page.getByRole('dialog').getByRole('textbox', { name: 'Name', exact: true }).fill('notes.txt');
  await page.getByRole('button', { name: 'Rename' }).click();
  await row('notes.txt').waitFor();
  check((await row('readme.txt').count()) === 0, 'the old name is gone');

  step('alice deletes a file to the trash and restores it from the trash page');
  await action('notes.txt', 'Delete');
  await page.getByText('notes.txt was moved to the trash.').waitFor();
  await nav('Trash').click();
  await page.locator('tr[data-entry="notes.txt"]').waitFor();
  await shot('04-trash', 'trash');
  await page.locator('tr[data-entry="notes.txt"]').getByRole('button', { name: 'Restore' }).click();
  await page.getByText('notes.txt is back at /Project/notes.txt.').waitFor();
  r = await call('GET', '/api/v1/files/Project/notes.txt', { token: aliceApi });
  check(r.status === 200, `restored: ${r.status}`);

  step('alice restores an older version');
  r = await call('PUT', '/api/v1/files/Project/notes.txt', { token: aliceApi, body: 'second version\n' });
  check(r.status === 200 || r.status === 201, `second version: ${r.status} ${r.text}`);
  await nav('My files').click();
  await page.getByRole('button', { name: 'Project', exact: true }).click();
  await action('notes.txt', 'Versions');
  await page.getByTestId('version-row').nth(1).waitFor();
  await page.getByTestId('version-row').nth(1).getByRole('button', { name: 'Restore' }).click();
  await page.getByTestId('version-row').nth(2).waitFor();
  r = await call('GET', '/api/v1/files/Project/notes.txt', { token: aliceApi });
  check(r.text === 'hello from the web app\n', `after the version restore: ${r.text}`);
  await page.keyboard.press('Escape');

  step('alice shares the folder with bob (can edit) and makes a password link');
  await nav('My files').click();
  await action('Project', 'Share');
  await page.getByRole('dialog').getByLabel('Username').fill(BOB);
  await page.getByRole('dialog').getByLabel('Permission').click();
  await page.getByRole('option', { name: 'Can edit' }).click();
  await page.getByRole('dialog').getByRole('button', { name: 'Share', exact: true }).click();
  await page.getByTestId('share-row').filter({ hasText: BOB }).waitFor();
  await page.getByRole('tab', { name: 'Links' }).click();
  await page.getByLabel('Password (optional)').fill('link-password-1');
  await page.getByRole('button', { name: 'Create link' }).click();
  const url = (await page.getByTestId('link-url').first().textContent()).trim();
  check(/\/s\/[A-Za-z0-9_-]{43}$/.test(url), `the link: ${url}`);
  await shot('05-share', 'share');
  await page.keyboard.press('Escape');

  step('alice shares the folder with a group of bob\'s too (read): bob keeps one entry, can edit');
  r = await call('POST', '/api/v1/admin/groups', { token: admin, json: { name: 'web-team' } });
  check(r.status === 201, `create the group: ${r.status} ${r.text}`);
  r = await call('POST', `/api/v1/admin/groups/${r.json().id}/members`, { token: admin, json: { username: BOB } });
  check(r.status === 201, `add bob: ${r.status} ${r.text}`);
  await action('Project', 'Share');
  await page.getByRole('dialog').getByText('A group', { exact: true }).click();
  await page.getByRole('dialog').getByLabel('Group name').fill('web-team');
  await page.getByRole('dialog').getByRole('button', { name: 'Share', exact: true }).click();
  await page.getByTestId('share-row').filter({ hasText: 'Group web-team' }).waitFor();
  await page.getByTestId('share-row').filter({ hasText: BOB }).waitFor();
  await page.keyboard.press('Escape');

  step('the link opens signed out, with its password (the page asks for it)');
  const visitor = await browser.newContext();
  const vp = await visitor.newPage();
  const resp = await vp.goto(url);
  check(resp.status() === 401, `the link page before the password: ${resp.status()}`);
  await vp.getByLabel('Password').fill('link-password-1');
  await vp.getByRole('button', { name: 'Open' }).click();
  await vp.getByText('dot.png').first().waitFor();
  await visitor.close();

  step('alice signs out; bob signs in and edits the shared folder');
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByRole('button', { name: 'Sign in' }).waitFor();
  r = await call('GET', '/api/v1/me', { token: await page.evaluate(() => sessionStorage.getItem('nimbus-token')) });
  check(r.status === 401, 'no session after sign-out');
  await signIn(BOB);
  await nav('Shared with me').click();
  await row('Project').waitFor();
  await page.getByText(`from ${ALICE}, can edit`).waitFor();
  await page.getByRole('button', { name: 'Project', exact: true }).click();
  await row('notes.txt').waitFor();
  await page.getByRole('button', { name: 'New folder' }).click();
  await page.getByRole('dialog').getByRole('textbox', { name: 'Name', exact: true }).fill('from bob');
  await page.getByRole('button', { name: 'Create' }).click();
  await row('from bob').waitFor();
  await shot('06-shared-with-me', 'shared-with-me');
  r = await call('GET', '/api/v1/stat/Project/from%20bob', { token: aliceApi });
  check(r.status === 200, `bob's folder is in alice's space: ${r.status} ${r.text}`);

  step('bob renames his own entry of the share; alice\'s folder keeps its name');
  await nav('Shared with me').click();
  await action('Project', 'Rename');
  await page.getByRole('dialog').getByRole('textbox', { name: 'Name', exact: true }).fill('Alice project');
  await page.getByRole('button', { name: 'Rename' }).click();
  await row('Alice project').waitFor();
  await page.getByText(`from ${ALICE}, can edit`).waitFor();
  r = await call('GET', '/api/v1/stat/Project', { token: aliceApi });
  check(r.status === 200, `alice's folder keeps its name: ${r.status} ${r.text}`);

  step('settings: bob makes an S3 key and sees his devices');
  await nav('Devices and keys').click();
  await page.getByTestId('device-row').filter({ hasText: 'this browser' }).waitFor();
  await page.getByRole('button', { name: 'Create key' }).click();
  await page.getByText('Secret access key (shown once)').waitFor();
  await page.getByRole('button', { name: 'Done' }).click();

  step('offline is said in words');
  await ctx.setOffline(true);
  await page.getByText('You are offline.').waitFor();
  await ctx.setOffline(false);
  await page.getByText('You are offline.').waitFor({ state: 'detached' });

  step('a phone-sized window');
  await page.setViewportSize({ width: 390, height: 844 });
  await page.getByRole('button', { name: 'Toggle navigation' }).click();
  await nav('My files').click();
  await page.getByRole('button', { name: 'Upload files' }).waitFor();
  await page.waitForTimeout(500); // the navigation drawer's closing animation, for the picture only
  await shot('07-phone', 'phone');

});
