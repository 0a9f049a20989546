// A real OpenID provider for the e2e tests (tests/tests/oidc.rs, docs/IDENTITY.md's worked
// example): `oidc-provider` (a certified implementation) on 127.0.0.1:PORT.
//
//   node provider.mjs PORT
//
// It prints `oidc-provider listening on http://127.0.0.1:PORT` once it accepts connections.
// The clients are set after start, because a test's gateway (whose redirect URI a client names)
// starts on a port of its own choosing:
//
//   POST /__test/setup   {"clients":[{"client_id","client_secret","redirect_uris":[...]}]}
//   POST /__test/tamper  {"mode":"none"|"signature"|"audience"|"expired"|"issuer"}
//
// `tamper` rewrites the ID token of the next token responses, for the tests that the gateway
// refuses one: `signature` changes the payload without re-signing; `audience`, `expired` and
// `issuer` re-sign a changed token with the provider's own key (so only that claim is wrong).
//
// Sign-in uses oidc-provider's development interactions: a login form (any password; the login
// names the account) and a consent form, both plain HTML forms a test drives by HTTP or in a
// browser. Accounts: the table below, and any other login as an account of that name.
import http from 'node:http';
import crypto from 'node:crypto';

import Provider from 'oidc-provider';
import * as jose from 'jose';

const port = Number(process.argv[2] || process.env.PORT || 0);
if (!Number.isInteger(port) || port <= 0) {
  console.error('usage: node provider.mjs PORT');
  process.exit(2);
}
const issuer = `http://127.0.0.1:${port}`;

// `groups` carries the admin mapping (`--oidc-admin-claim groups --oidc-admin-values
// nimbus-admins`). `mallory` has a username Nimbus refuses; `nousername` has none.
const ACCOUNTS = {
  alice: { preferred_username: 'alice', email: 'alice@example.test', groups: ['staff'] },
  carol: { preferred_username: 'carol', email: 'carol@example.test', groups: ['staff', 'nimbus-admins'] },
  mallory: { preferred_username: '../mallory', groups: [] },
  nousername: { groups: [] },
};

function claimsOf(id) {
  return ACCOUNTS[id] ?? { preferred_username: id, groups: [] };
}

const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const jwk = { ...privateKey.export({ format: 'jwk' }), kid: 'nimbus-test', use: 'sig', alg: 'RS256' };
const signingKey = await jose.importJWK(jwk, 'RS256');

let tamper = 'none';
let provider = null;

function makeProvider(clients) {
  const p = new Provider(issuer, {
    clients: clients.map((c) => ({
      client_id: c.client_id,
      client_secret: c.client_secret,
      redirect_uris: c.redirect_uris,
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
    })),
    jwks: { keys: [jwk] },
    cookies: { keys: [crypto.randomBytes(32).toString('hex')] },
    claims: { openid: ['sub'], profile: ['preferred_username', 'groups'], email: ['email'] },
    features: { devInteractions: { enabled: true } },
    pkce: { required: () => true },
    findAccount: async (_ctx, id) => ({
      accountId: id,
      claims: async () => ({ sub: id, ...claimsOf(id) }),
    }),
    // Claims asked for by scope go into the ID token too (the gateway reads only the ID token).
    conformIdTokenClaims: false,
  });
  // The tamper modes: rewrite the ID token of token responses.
  p.use(async (ctx, next) => {
    await next();
    if (ctx.path !== '/token' || tamper === 'none' || !ctx.body || typeof ctx.body.id_token !== 'string') return;
    ctx.body = { ...ctx.body, id_token: await rewrite(ctx.body.id_token) };
  });
  return p;
}

async function rewrite(idToken) {
  const [h, payload, sig] = idToken.split('.');
  const claims = JSON.parse(Buffer.from(payload, 'base64url').toString());
  if (tamper === 'signature') {
    claims.preferred_username = 'carol';
    claims.groups = ['nimbus-admins'];
    return `${h}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.${sig}`;
  }
  const now = Math.floor(Date.now() / 1000);
  if (tamper === 'audience') claims.aud = 'some-other-client';
  if (tamper === 'expired') {
    claims.iat = now - 7200;
    claims.exp = now - 3600;
  }
  if (tamper === 'issuer') claims.iss = 'http://127.0.0.1:1/elsewhere';
  return new jose.SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid: jwk.kid }).sign(signingKey);
}

async function readJson(req) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  return JSON.parse(Buffer.concat(chunks).toString() || '{}');
}

const server = http.createServer(async (req, res) => {
  try {
    if (req.url === '/__test/setup' && req.method === 'POST') {
      const body = await readJson(req);
      provider = makeProvider(body.clients ?? []);
      res.writeHead(204).end();
      return;
    }
    if (req.url === '/__test/tamper' && req.method === 'POST') {
      tamper = (await readJson(req)).mode ?? 'none';
      res.writeHead(204).end();
      return;
    }
    if (!provider) {
      res.writeHead(503, { 'content-type': 'text/plain' }).end('not set up yet: POST /__test/setup');
      return;
    }
    provider.callback()(req, res);
  } catch (e) {
    res.writeHead(500, { 'content-type': 'text/plain' }).end(String(e));
  }
});

server.listen(port, '127.0.0.1', () => {
  console.log(`oidc-provider listening on ${issuer}`);
});

for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => process.exit(0));
