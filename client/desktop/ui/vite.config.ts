import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

// Tauri loads dist/ from disk (relative base); `npm run dev` serves the mock backend on :1420,
// the port tauri.conf.json's devUrl names.
export default defineConfig({
  base: './',
  plugins: [react()],
  clearScreen: false,
  server: { port: 1420, strictPort: true },
  build: { target: 'es2022' },
  test: {
    environment: 'jsdom',
    setupFiles: ['./src/test-setup.ts'],
    include: ['src/**/*.test.{ts,tsx}'],
    // Typing through user-event is slow on a busy 2-core machine.
    testTimeout: 60000,
  },
});
