import '@mantine/core/styles.css';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { App } from './App';
import { backend } from './backend';

// The browser build runs on the mock; expose it so the Playwright test can make the drive
// "do" things (pending uploads, errors, conflicts) that only a real mount would.
const b = backend();
if (b.kind === 'mock') (window as unknown as { nimbusMock: unknown }).nimbusMock = b;

const root = document.getElementById('root');
if (root) createRoot(root).render(<StrictMode><App /></StrictMode>);
