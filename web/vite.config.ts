import { defineConfig } from 'vite';

export default defineConfig({
  // The dev server's dependency pre-bundling moves lightwire's modules and breaks the
  // `new URL('./worker.js', import.meta.url)` paths of its worker and wasm (see pkg/README.md).
  optimizeDeps: { exclude: ['lightwire'] },
  // `lightwire` is `file:../pkg`, a link: let the dev server read the package's files there.
  server: { fs: { allow: ['.', '../pkg'] } },
  build: { target: 'es2022' },
});
