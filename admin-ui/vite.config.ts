import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

// The console, served by the gateway at /admin; `npm run dev` proxies the API to a local gateway.
// The users' web app is the second build of this project: vite.web.config.ts. vitest runs both's tests.
export default defineConfig({
  base: '/admin/',
  plugins: [react()],
  server: { proxy: { '/api': 'http://127.0.0.1:8080', '/readyz': 'http://127.0.0.1:8080' } },
  test: {
    environment: 'jsdom',
    setupFiles: ['./src/test-setup.ts'],
    include: ['src/**/*.test.{ts,tsx}', 'web/src/**/*.test.{ts,tsx}'],
    // Typing through user-event is slow on a busy 2-core machine.
    testTimeout: 60000,
  },
});
