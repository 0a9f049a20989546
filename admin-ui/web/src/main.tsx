import '@mantine/core/styles.css';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { session, setSessionKey } from '../../src/api/client';
import { App } from './App';
import { takeSsoResult } from '../../src/sso';

// Its own session, apart from the console's on the same origin.
setSessionKey('nimbus-token');
// Single sign-on ends here with the session in the address's fragment (src/sso.ts).
const sso = takeSsoResult();
if (sso.token) session.set(sso.token);

const root = document.getElementById('root');
if (root) createRoot(root).render(<StrictMode><App /></StrictMode>);
