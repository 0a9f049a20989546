// End-to-end: two-factor sign-in in the users' web app, Debian's chromium against a real gateway.
// Usage: node e2e/web-totp.e2e.mjs BASE_URL ADMIN_PASSWORD optional|required [SHOTS_DIR]
//   optional: the gateway runs without --require-totp. A user turns two-factor on from the
//     Security page (the QR code drawn in the page is read back, the key shown as text is what
//     this script's authenticator uses), keeps the recovery codes (downloaded), signs out, signs
//     in with password + code, then with a recovery code (once: the second time it is refused),
//     and turns it off with another recovery code.
//   required: the gateway runs with --require-totp all. A user's password sign-in lands on the
//     Security page and nowhere else until two-factor is on; then the whole app opens.
// Screenshots: e2e-artifacts/web-totp-*.png, and the enrolment also to SHOTS_DIR when given.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { decodeQR } from 'qr/decode.js';
import { artifacts, caller, check, launch, run, step, totp, watchCsp } from './harness.mjs';

const [base, adminPassword, mode, shotsDir] = process.argv.slice(2);
if (!base || !adminPassword || !['optional', 'required'].includes(mode)) {
  console.error('usage: node e2e/web-totp.e2e.mjs BASE_URL ADMIN_PASSWORD optional|required [SHOTS_DIR]');
  process.exit(2);
}
const USER = mode === 'optional' ? 'web-dana' : 'web-erin';
const PW = 'web-totp-password-1';
const call = caller(base);

/** An administrator's token; under --require-totp the administrator sets two-factor up first
 * (by the API, with this script's authenticator). */
async function adminToken() {
  let r = await call('POST', '/api/v1/auth/login', { json: { username: 'admin', password: adminPassword } });
  check(r.status === 200, `admin login: ${r.status} ${r.text}`);
  const { token, totp_setup_required: setup } = r.json();
  check(!!setup === (mode === 'required'), `admin sign-in: totp_setup_required ${setup} in mode ${mode}`);
  if (setup) {
    r = await call('POST', '/api/v1/auth/totp', { token });
    check(r.status === 200, `admin enrol: ${r.status} ${r.text}`);
    r = await call('POST', '/api/v1/auth/totp/confirm', { token, json: { code: totp(r.json().secret) } });
    check(r.status === 200, `admin confirm: ${r.status} ${r.text}`);
  }
  return token;
}

/** The QR code as the page drew it: the SVG painted onto a canvas in the browser, its pixels
 * read back here by the `qr` package's decoder (what a phone's camera does). */
async function scanQr(page) {
  const { width, height, data } = await page.getByTestId('qr-code').evaluate(async (svg) => {
    const url = URL.createObjectURL(new Blob([new XMLSerializer().serializeToString(svg)], { type: 'image/svg+xml' }));
    const img = new Image();
    await new Promise((ok, fail) => {
      img.onload = ok;
      img.onerror = fail;
      img.src = url;
    });
    const c = document.createElement('canvas');
    c.width = img.width;
    c.height = img.height;
    const g = c.getContext('2d');
    g.drawImage(img, 0, 0);
    URL.revokeObjectURL(url);
    return { width: c.width, height: c.height, data: Array.from(g.getImageData(0, 0, c.width, c.height).data) };
  });
  return decodeQR({ width, height, data: Uint8Array.from(data) }, { format: 'RGBA' });
}

const browser = await launch();
const violations = [];
await run(browser, `web-totp-${mode}-failure.png`, violations, async (setPage) => {
  step(`the administrator makes ${USER}`);
  const admin = await adminToken();
  let r = await call('POST', '/api/v1/admin/users', { token: admin, json: { username: USER, password: PW, role: 'user' } });
  check(r.status === 201, `create ${USER}: ${r.status} ${r.text}`);

  const ctx = await browser.newContext({ viewport: { width: 1280, height: 860 }, acceptDownloads: true });
  const page = await ctx.newPage();
  setPage(page);
  await watchCsp(ctx, page, violations);
  const shot = async (name, docName) => {
    await page.screenshot({ path: join(artifacts, `web-totp-${name}.png`), fullPage: true });
    if (shotsDir && docName) await page.screenshot({ path: join(shotsDir, `${docName}.png`) });
  };
  const signIn = async (code) => {
    await page.getByLabel('Username').fill(USER);
    await page.getByLabel('Password', { exact: true }).fill(PW);
    await page.getByRole('button', { name: 'Sign in' }).click();
    if (code === undefined) return;
    await page.getByLabel('Code', { exact: true }).fill(code);
    await page.getByRole('button', { name: 'Verify' }).click();
  };
  const signOut = async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('button', { name: 'Sign in' }).waitFor();
  };
  const state = (s) => page.getByTestId('totp-state').getByText(s, { exact: true }).waitFor();

  await page.goto(`${base}/`);
  await signIn();
  if (mode === 'optional') {
    await page.getByTestId('whoami').waitFor();
    step('the Security page: two-factor is off');
    await page.getByRole('link', { name: 'Security' }).click();
    await page.waitForURL(`${base}/settings/security`);
  } else {
    step('a sign-in that may only set two-factor up lands on the Security page, and stays there');
    await page.waitForURL(`${base}/settings/security`);
    await page.getByText('Set up two-factor sign-in to continue').waitFor();
    const links = await page.getByRole('navigation', { name: 'Main' }).getByRole('link').allTextContents();
    check(links.join('|') === 'Security', `only Security in the navigation: ${links}`);
    await page.goto(`${base}/files`);
    await page.waitForURL(`${base}/settings/security`);
    await shot('required');
  }
  await state('Off');

  step('turn it on: the QR code, the key as text, a first code');
  await page.getByRole('button', { name: 'Turn on two-factor sign-in' }).click();
  await page.getByRole('img', { name: 'QR code for your authenticator app' }).waitFor();
  const secret = await page.getByTestId('totp-secret').getAttribute('data-secret');
  check(/^[A-Z2-7]{16,}$/.test(secret || ''), `a base32 key: ${secret}`);
  const shown = (await page.getByTestId('totp-secret').textContent()).replace(/\s/g, '');
  check(shown === secret, `the key as shown (${shown}) is the key (${secret})`);
  const scanned = await scanQr(page);
  check(scanned.startsWith(`otpauth://totp/Nimbus:${USER}?`) && scanned.includes(`secret=${secret}`), `the QR code says ${scanned}`);
  const href = await page.getByRole('link', { name: 'open this link' }).getAttribute('href');
  check(href === scanned, `the link (${href}) is what the QR code says`);
  await shot('enrol', 'security');
  // A wrong code first: said in words, nothing turned on.
  const near = [-1, 0, 1].map((o) => totp(secret, o));
  const wrong = ['111111', '222222', '333333', '444444'].find((c) => !near.includes(c));
  await page.getByLabel('Code from the app').fill(wrong);
  await page.getByRole('button', { name: 'Turn on' }).click();
  await page.getByRole('alert').getByText('That code is not right').waitFor();
  await page.getByLabel('Code from the app').fill(totp(secret));
  await page.getByRole('button', { name: 'Turn on' }).click();
  const codesBox = page.getByTestId('recovery-codes');
  await codesBox.waitFor();
  const codes = (await codesBox.textContent()).trim().split(/\s+/);
  check(codes.length >= 8 && codes.every((c) => /^[a-z0-9]{4}(-[a-z0-9]{4})+$/i.test(c)), `recovery codes: ${codes}`);
  await state('On');
  const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Download' }).click()]);
  check(download.suggestedFilename() === `nimbus-recovery-codes-${USER}.txt`, `file name ${download.suggestedFilename()}`);
  const saved = readFileSync(await download.path(), 'utf8').trim().split('\n');
  check(saved.join(' ') === codes.join(' '), `the downloaded codes: ${saved}`);
  await shot('recovery-codes', 'recovery-codes');
  await page.getByRole('button', { name: 'I have kept them' }).click();
  check((await codesBox.count()) === 0, 'the recovery codes are gone once kept');
  if (mode === 'optional') await page.getByRole('button', { name: 'Turn off' }).waitFor();

  if (mode === 'required') {
    step('two-factor on: the whole app opens with the same sign-in');
    await page.getByRole('link', { name: 'My files' }).click();
    await page.waitForURL(`${base}/files`);
    await page.getByRole('button', { name: 'Upload files' }).waitFor();
    const token = await page.evaluate(() => Object.values(sessionStorage).find((v) => v.startsWith('nmb_')));
    r = await call('GET', '/api/v1/dirs/', { token });
    check(r.status === 200, `the page's token is a full one now: ${r.status} ${r.text}`);
    step('the policy covers this account: no Turn off, a sentence saying why');
    await page.getByRole('link', { name: 'Security' }).click();
    await state('On');
    await page.getByTestId('totp-required').getByText('Your administrator requires two-factor sign-in').waitFor();
    check((await page.getByRole('button', { name: 'Turn off' }).count()) === 0, 'no Turn off button under --require-totp');
    check((await page.getByLabel('Code', { exact: true }).count()) === 0, 'no code field to turn it off');
    r = await call('GET', '/api/v1/me', { token });
    check(r.status === 200 && r.json().totp_required === true, `/me says totp_required: ${r.status} ${r.text}`);
    // The server refuses anyway, whatever a page offers.
    r = await call('DELETE', '/api/v1/auth/totp', { token, json: { code: codes[0] } });
    check(r.status === 403, `turning it off under the policy: ${r.status} ${r.text}`);
    await shot('required-on');
    return;
  }

  step('sign out, then sign in with password and code');
  await signOut();
  // The confirmation used this step's code: the next one (clock drift) signs in.
  await signIn(totp(secret, 1));
  await page.getByTestId('whoami').waitFor();
  await signOut();

  step('a recovery code signs in once');
  await signIn(codes[0]);
  await page.getByTestId('whoami').waitFor();
  await signOut();
  await signIn(codes[0]);
  await page.getByRole('alert').getByText('That code is not right').waitFor();
  await shot('recovery-used');
  await page.getByRole('button', { name: 'Back to username and password' }).click();
  await signIn(codes[1]);
  await page.getByTestId('whoami').waitFor();

  step('turn it off with another recovery code');
  await page.getByRole('link', { name: 'Security' }).click();
  await state('On');
  await page.getByLabel('Code', { exact: true }).fill(codes[2]);
  await page.getByRole('button', { name: 'Turn off' }).click();
  await page.getByText('your password alone signs you in').waitFor();
  await state('Off');
  r = await call('POST', '/api/v1/auth/login', { json: { username: USER, password: PW } });
  check(r.status === 200 && !r.json().totp_setup_required, `password-only sign-in after turning it off: ${r.status} ${r.text}`);
});
