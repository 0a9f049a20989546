import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

// The users' web app (web/), served by the gateway at `/`; it shares src/api and src/format.ts
// with the console. `npm run dev:web` proxies the API to a local gateway.
export default defineConfig({
  root: 'web',
  base: '/',
  plugins: [react()],
  build: { outDir: '../dist-web', emptyOutDir: true },
  server: { port: 5174, proxy: { '/api': 'http://127.0.0.1:8080', '/s/': 'http://127.0.0.1:8080' } },
});
