import { defineConfig } from "vitest/config";

// A project of the root config (npm test) and runnable alone (npx vitest run --config
// packages/handler/vitest.config.ts). Node is enough: the tests drive runHandler (src/run.ts),
// which ScheduledHandler's deliver is a shell over, so nothing imports "cloudflare:workers".
export default defineConfig({
  root: import.meta.dirname,
  test: { name: "handler", include: ["test/**/*.test.ts"], environment: "node" },
});
