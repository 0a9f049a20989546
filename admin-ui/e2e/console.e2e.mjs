// End-to-end: the console in Debian's chromium (playwright-core, no browser download) against a
// real gateway. Usage: node e2e/console.e2e.mjs BASE_URL ADMIN_PASSWORD
// Screenshots of each page go to e2e-artifacts/ (gitignored). Exits non-zero on the first failure.
import { join } from 'node:path';
import { artifacts, caller, check, launch, run, step, totp, watchCsp } from './harness.mjs';

const [base, adminPassword] = process.argv.slice(2);
if (!base || !adminPassword) {
  console.error('usage: node e2e/console.e2e.mjs BASE_URL ADMIN_PASSWORD');
  process.exit(2);
}

const USER = 'e2e-alice';
const PW1 = 'alice-password-1';
const PW2 = 'alice-password-2';

const call = caller(base);
async function login(username, password, device) {
  return call('POST', '/api/v1/auth/login', { json: { username, password, device } });
}

const browser = await launch();
const violations = [];
await run(browser, 'failure.png', violations, async (setPage) => {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = setPage(await ctx.newPage());
  page.setDefaultTimeout(30000);
  const shot = (name) => page.screenshot({ path: join(artifacts, `${name}.png`), fullPage: true });
  // The search is debounced: wait until the list shows only the matches, so a click does not
  // land on a row of the unfiltered list just as it is replaced.
  const searchUsers = async (q) => {
    await page.getByLabel('Search users').fill(q);
    await page.waitForFunction(
      (q) => {
        const names = [...document.querySelectorAll('table tbody tr td:first-child')].map((td) => td.textContent);
        return names.length > 0 && names.every((n) => n.includes(q));
      },
      q,
    );
  };

  // The gateway sends the console a strict CSP (gateway/src/browser.rs): anything it blocks
  // (an inline script, a style, a font, a data: image) is a console bug this run must catch.
  await watchCsp(ctx, page, violations);

  step('admin signs in');
  const first = await page.goto(`${base}/admin/`);
  const csp = (await first.allHeaders())['content-security-policy'] || '';
  check(csp.includes("frame-ancestors 'none'") && csp.includes("script-src 'self'"), `the console's CSP: ${csp}`);
  await page.getByLabel('Username').fill('admin');
  await page.getByLabel('Password', { exact: true }).fill('wrong password');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('alert').waitFor();
  await shot('01-sign-in-error');
  await page.getByLabel('Password', { exact: true }).fill(adminPassword);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Dashboard' }).waitFor();
  await page.getByText('ready', { exact: true }).waitFor();
  await shot('02-dashboard');

  step('admin creates a user');
  await page.getByRole('link', { name: 'Users' }).click();
  await page.getByRole('heading', { name: 'Users' }).waitFor();
  await page.getByRole('button', { name: 'New user' }).click();
  const form = page.getByRole('form', { name: 'Create user' });
  await form.getByLabel('Username').fill(USER);
  await form.getByLabel('Password', { exact: true }).fill(PW1);
  await form.getByLabel('Quota').fill('10 MiB');
  await shot('03-create-user');
  await form.getByRole('button', { name: 'Create user' }).click();
  await page.getByText(`Created ${USER}`).waitFor();
  await page.keyboard.press('Escape');
  await searchUsers('alice');
  await page.getByRole('link', { name: USER }).waitFor();
  await shot('04-users');

  step('the user logs in through the API and uploads a file');
  let r = await login(USER, PW1);
  check(r.status === 200, `login: ${r.status} ${r.text}`);
  let token = r.json().token;
  r = await call('PUT', '/api/v1/files/report.bin', { token, body: new Uint8Array(300000).fill(7) });
  check(r.status === 200 || r.status === 201, `upload: ${r.status} ${r.text}`);

  step('the admin sees the usage change');
  await page.getByRole('link', { name: USER }).click();
  await page.getByRole('heading', { name: USER }).waitFor();
  // Sizes in units, the quota field included (it was created as "10 MiB").
  await page.getByTestId('usage').filter({ hasText: '293 KiB of 10 MiB' }).waitFor();
  await page.getByTestId('usage-current').filter({ hasText: '293 KiB' }).waitFor();
  const quotaField = page.getByRole('form', { name: 'Quota and role' }).getByLabel('Quota');
  check((await quotaField.inputValue()) === '10 MiB', `the quota field: ${await quotaField.inputValue()}`);
  await page.getByTestId('usage-versions').filter({ hasText: '0 B' }).waitFor();
  await shot('05-user-page');

  step('the admin lowers the quota; the next upload is refused');
  await quotaField.fill('310 KB');
  await page.getByRole('button', { name: 'Save' }).click();
  await page.getByText('Quota and role saved.').waitFor();
  await page.getByTestId('usage').filter({ hasText: 'of 302.7 KiB' }).waitFor();
  r = await call('PUT', '/api/v1/files/second.bin', { token, body: new Uint8Array(100000).fill(9) });
  check(r.status === 413, `an upload over quota: ${r.status} ${r.text}`);

  step('the admin disables the user; their token stops working');
  await page.getByRole('button', { name: 'Disable user' }).click();
  await page.getByRole('button', { name: 'Enable user' }).waitFor();
  r = await call('GET', '/api/v1/me', { token });
  check(r.status === 401, `a disabled user's token: ${r.status} ${r.text}`);
  r = await login(USER, PW1);
  check(r.status === 401 || r.status === 403, `a disabled user's login: ${r.status} ${r.text}`);
  await shot('06-user-disabled');

  step('the admin enables the user and resets the password');
  await page.getByRole('button', { name: 'Enable user' }).click();
  await page.getByRole('button', { name: 'Disable user' }).waitFor();
  await page.getByLabel('New password').fill(PW2);
  await page.getByRole('button', { name: 'Reset password' }).click();
  await page.getByText('Password reset;').waitFor();
  r = await login(USER, PW1);
  check(r.status === 401, `the old password after a reset: ${r.status} ${r.text}`);
  r = await login(USER, PW2);
  check(r.status === 200, `the new password: ${r.status} ${r.text}`);
  await page.getByText('user_update').first().waitFor();
  // Audit details in words and units.
  await page.getByRole('cell', { name: 'quota 302.7 KiB', exact: true }).waitFor();
  await page.getByRole('cell', { name: 'role user, quota 10 MiB', exact: true }).waitFor();
  await shot('07-user-activity');

  step("the admin sees the user's devices and revokes one");
  r = await login(USER, PW2, 'alice-phone');
  check(r.status === 200, `login from the phone: ${r.status} ${r.text}`);
  const phone = r.json().token;
  r = await login(USER, PW2, 'alice-laptop');
  const laptop = r.json().token;
  await page.reload();
  const devices = page.getByRole('table', { name: 'Devices' });
  await devices.getByRole('cell', { name: 'alice-phone', exact: true }).waitFor();
  await devices.getByRole('cell', { name: 'alice-laptop', exact: true }).waitFor();
  // The client address each device signed in from (this script's: loopback).
  await devices.getByRole('cell', { name: '127.0.0.1', exact: true }).first().waitFor();
  await shot('07b-devices');
  await page.getByRole('button', { name: 'Revoke alice-phone' }).click();
  await page.getByText('alice-phone signed out.').waitFor();
  await devices.getByRole('cell', { name: 'alice-phone', exact: true }).waitFor({ state: 'detached' });
  r = await call('GET', '/api/v1/me', { token: phone });
  check(r.status === 401, `a revoked device's token: ${r.status} ${r.text}`);
  r = await call('GET', '/api/v1/me', { token: laptop });
  check(r.status === 200, `the other device after revoking one: ${r.status} ${r.text}`);

  step('the user list sorts by usage');
  await page.getByRole('link', { name: 'Users', exact: true }).click();
  await page.getByRole('heading', { name: 'Users' }).waitFor();
  await page.getByLabel('Sort by', { exact: true }).first().click();
  await page.getByRole('option', { name: 'Largest usage first' }).click();
  await page.getByRole('table').getByRole('row').nth(1).getByRole('link', { name: USER }).waitFor();
  await shot('07c-users-by-usage');

  step('the dashboard charts request rate and hit ratio over time');
  await page.getByRole('link', { name: 'Dashboard' }).click();
  await page.locator('[aria-label="Request rate over time"]').waitFor();
  await page.locator('[aria-label="Cache hit ratio and size over time"]').waitFor();
  // Every axis says what it counts.
  for (const label of ['requests per second', 'hit ratio', 'cache size', 'local time', 'user']) {
    await page.getByText(label, { exact: true }).first().waitFor();
  }
  // Size ticks carry their unit (storage by user: e2e-alice's 293 KiB puts the top at 300 KiB).
  await page.getByText('300 KiB', { exact: true }).first().waitFor();
  await shot('07d-dashboard-history');

  step('cache and audit pages');
  await page.getByRole('link', { name: 'Cache' }).click();
  await page.getByText('Hit ratio').waitFor();
  step("the admin warms a user's space, picking the user by name");
  const warm = page.getByRole('form', { name: 'Warm a folder' });
  await warm.getByLabel('User', { exact: true }).fill('e2e-al');
  await page.getByRole('option', { name: USER }).click();
  await warm.getByRole('button', { name: 'Warm' }).click();
  await warm.getByText('Done: 1 of 1 files, 293 KiB of 293 KiB').waitFor();
  await shot('08-cache');
  await page.getByRole('link', { name: 'Audit log' }).click();
  await page.getByLabel('Action').fill('user_create');
  await page.getByRole('button', { name: 'Filter' }).click();
  await page.getByRole('cell', { name: USER }).first().waitFor();
  await shot('09-audit');

  step('the admin makes a group and adds the user to it by name');
  await page.getByRole('link', { name: 'Groups' }).click();
  await page.getByRole('heading', { name: 'Groups' }).waitFor();
  await page.getByLabel('New group').fill('e2e-team');
  await page.getByRole('button', { name: 'Create group' }).click();
  await page.getByText('Group e2e-team created.').waitFor();
  const card = page.getByRole('region', { name: 'Group e2e-team' });
  await card.getByLabel('Add a member to e2e-team').fill('e2e-al');
  await page.getByRole('option', { name: USER }).click();
  await card.getByRole('button', { name: 'Add', exact: true }).click();
  await page.getByText(`${USER} added to e2e-team.`).waitFor();
  await card.getByText('1 member').waitFor();
  await shot('09b-groups');
  await card.getByRole('button', { name: `Remove ${USER} from e2e-team` }).click();
  await page.getByText(`${USER} removed from e2e-team.`).waitFor();
  await card.getByText('No members.').waitFor();

  step('the admin deletes the user with typed confirmation');
  await page.getByRole('link', { name: 'Users' }).click();
  await searchUsers('alice');
  await page.getByRole('link', { name: USER }).click();
  await page.getByRole('button', { name: 'Delete user…' }).click();
  const confirm = page.getByRole('button', { name: 'Delete permanently' });
  check(await confirm.isDisabled(), 'delete is enabled before typing the name');
  await page.getByLabel(`Type ${USER} to confirm`).fill(USER);
  await shot('10-delete-confirm');
  await confirm.click();
  await page.getByRole('heading', { name: 'Users' }).waitFor();
  r = await login(USER, PW2);
  check(r.status === 401, `a deleted user's login: ${r.status} ${r.text}`);

  step('narrow window');
  await page.setViewportSize({ width: 390, height: 800 });
  await page.getByRole('button', { name: 'Toggle navigation' }).click();
  await page.getByRole('link', { name: 'Dashboard' }).waitFor();
  await shot('11-narrow-nav');
  await page.setViewportSize({ width: 1280, height: 800 });

  step('an expired session goes back to sign-in with a message');
  const adminToken = await page.evaluate(() => sessionStorage.getItem('nimbus-admin-token'));
  await page.evaluate(() => sessionStorage.setItem('nimbus-admin-token', 'expired-token'));
  await page.getByRole('link', { name: 'Audit log' }).click();
  await page.getByText('Your session has expired').waitFor();
  await shot('12-session-expired');

  step('sign-out revokes the token');
  await page.getByLabel('Username').fill('admin');
  await page.getByLabel('Password', { exact: true }).fill(adminPassword);
  await page.getByRole('button', { name: 'Sign in' }).click();
  // Back where the session ended.
  await page.getByRole('heading', { name: 'Audit log' }).waitFor();
  const second = await page.evaluate(() => sessionStorage.getItem('nimbus-admin-token'));
  check(second && second !== adminToken, 'a new token after signing in again');
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByRole('button', { name: 'Sign in' }).waitFor();
  r = await call('GET', '/api/v1/me', { token: second });
  check(r.status === 401, `the token after sign-out: ${r.status} ${r.text}`);

  step('an administrator with two-factor sign-in is asked for the code, then reset');
  r = await login('admin', adminPassword);
  const boss = r.json().token;
  r = await call('POST', '/api/v1/admin/users', { token: boss, json: { username: 'e2e-carol', password: 'carol-password-1', role: 'admin' } });
  check(r.status === 201, `create carol: ${r.status} ${r.text}`);
  const carolId = r.json().id;
  r = await login('e2e-carol', 'carol-password-1');
  const carol = r.json().token;
  r = await call('POST', '/api/v1/auth/totp', { token: carol });
  check(r.status === 200, `enrol: ${r.status} ${r.text}`);
  const secret = r.json().secret;
  r = await call('POST', '/api/v1/auth/totp/confirm', { token: carol, json: { code: totp(secret) } });
  check(r.status === 200, `confirm: ${r.status} ${r.text}`);
  await page.getByLabel('Username').fill('e2e-carol');
  await page.getByLabel('Password', { exact: true }).fill('carol-password-1');
  await page.getByRole('button', { name: 'Sign in' }).click();
  const codeField = page.getByLabel('Two-factor code');
  await codeField.waitFor();
  await shot('13-two-factor-code');
  // The confirmation used the current step's code: the next one (clock drift) signs in once.
  await codeField.fill(totp(secret, 1));
  await page.getByRole('button', { name: 'Verify' }).click();
  // Signed in (back on the page the last session ended on).
  await page.getByRole('button', { name: 'Sign out', exact: true }).waitFor();
  // The users list shows the identity columns: source, two-factor, last sign-in.
  await page.goto(`${base}/admin/users`);
  await searchUsers('e2e-carol');
  const carolRow = page.locator('tr[data-user="e2e-carol"]');
  const carolCells = await carolRow.locator('td').allTextContents();
  const heads = await page.locator('table thead th').allTextContents();
  const cell = (h) => carolCells[heads.indexOf(h)];
  check(cell('Source') === 'local' && cell('Two-factor') === 'on', `carol's row: ${heads} / ${carolCells}`);
  // Signed in a moment ago (the browser's date format: some digits, never `never`).
  check(/\d/.test(cell('Last sign-in') ?? ''), `carol's last sign-in: ${cell('Last sign-in')}`);
  await shot('13b-users-identity');
  await page.goto(`${base}/admin/users/${carolId}`);
  await page.getByTestId('identity').getByText('two-factor sign-in on').waitFor();
  await page.getByRole('button', { name: 'Reset two-factor…' }).click();
  await shot('14-reset-two-factor');
  await page.getByRole('button', { name: 'Reset two-factor', exact: true }).click();
  await page.getByText('Two-factor sign-in reset').waitFor();
  await page.getByTestId('identity').getByText('no two-factor sign-in').waitFor();
  r = await login('e2e-carol', 'carol-password-1');
  check(r.status === 200, `password-only sign-in after the reset: ${r.status} ${r.text}`);
  await page.getByRole('button', { name: 'Sign out', exact: true }).click();
  await page.getByRole('button', { name: 'Sign in' }).waitFor();

  step('a non-admin sees the refusal page');
  r = await login('admin', adminPassword);
  const api = r.json().token;
  r = await call('POST', '/api/v1/admin/users', { token: api, json: { username: 'e2e-bob', password: 'bob-password-1', role: 'user' } });
  check(r.status === 201, `create bob: ${r.status} ${r.text}`);
  await page.getByLabel('Username').fill('e2e-bob');
  await page.getByLabel('Password', { exact: true }).fill('bob-password-1');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Not an administrator' }).waitFor();
  check((await page.getByRole('link', { name: 'Users' }).count()) === 0, 'a non-admin sees the console');
  await shot('15-not-admin');
});
