// The web app's routes, at the root of the gateway: /files/<path>, /trash, /settings,
// /settings/security. The gateway answers each of them with the app's index.html
// (gateway/src/api/mod.rs, web_app_routes: keep the two in step).
import { createRouter } from '../../src/router';

export const { navigate, useRoute } = createRouter('');

/** The security page (two-factor sign-in). */
export const SECURITY = '/settings/security';
