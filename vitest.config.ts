import path from "node:path";
import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";

// Three projects: pure core in Node, the Worker inside workerd (real local D1, Durable Objects,
// alarms, queues), and end-to-end tests against the real local stack over HTTP.
export default defineConfig(async () => {
  const migrations = await readD1Migrations(path.join(import.meta.dirname, "migrations"));
  return {
    test: {
      projects: [
        { test: { name: "unit", include: ["test/unit/**/*.test.ts"], environment: "node" } },
        {
          plugins: [
            cloudflareTest({
              wrangler: { configPath: "./wrangler.toml" },
              miniflare: {
                bindings: {
                  TEST_MIGRATIONS: migrations,
                  API_KEYS: "acme:test-key-acme,acme:test-key-acme-2,globex:test-key-globex",
                  WEBHOOK_SECRET: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                  ALLOW_LOOPBACK_TARGETS: "true",
                  BUCKETS: "4",
                },
              },
            }),
          ],
          test: {
            name: "integration",
            include: ["test/integration/**/*.test.ts"],
            setupFiles: ["./test/integration/apply-migrations.ts"],
            globalSetup: ["./test/integration/receiver-setup.ts"],
          },
        },
        {
          test: {
            name: "e2e",
            include: ["test/e2e/**/*.test.ts"],
            environment: "node",
            testTimeout: 240_000,
            hookTimeout: 120_000,
            fileParallelism: false,
          },
        },
      ],
    },
  };
});
