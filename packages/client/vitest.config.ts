import { defineConfig } from "vitest/config";

// A project of the root config (npm test) and runnable alone (npx vitest run --config
// packages/client/vitest.config.ts); root keeps include to this package's tests either way.
export default defineConfig({
  root: import.meta.dirname,
  test: { name: "client", include: ["test/**/*.test.ts"], environment: "node" },
});
