import '@mantine/core/styles.css';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { session, setSessionKey } from '../../src/api/client';
import { App } from './App';
import { takeSsoToken } from './sso';

// Its own session, apart from the console's on the same origin.
setSessionKey('nimbus-token');
takeSsoToken(session.set);

const root = document.getElementById('root');
if (root) createRoot(root).render(<StrictMode><App /></StrictMode>);
