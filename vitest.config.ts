import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import { cloudflareTest, type D1Migration, readD1Migrations } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";
import type { InlineConfig, Reporter } from "vitest/node";
import { asLocalRun, withShards } from "./scripts/local-env.mjs";

// Four projects: pure core in Node, the client package in Node, the Worker inside workerd (real local D1, Durable Objects,
// alarms, queues), and end-to-end tests against the real local stack over HTTP.

// The integration tests inject failures (a bucket that throws, a queue send that fails) and the
// Worker logs each on stderr as it would in production: expected outcomes, a dozen stack traces a
// run, which would bury a real failure. So an integration test's stderr is held and printed only
// if that test fails. Its stdout (the figures fuzz, rows and dispatch tests print) and every other
// project's output show as usual. Held only while this reporter runs (a --reporter on the command
// line replaces it, and then nothing is held).
const heldStderr = new Map<string, string[]>();
let holding = false;
const stderrOfFailedTests: Reporter = {
  onInit: () => {
    holding = true;
  },
  onTestCaseResult: (test) => {
    const held = heldStderr.get(test.id);
    heldStderr.delete(test.id);
    if (held && test.result().state === "failed") {
      process.stderr.write(`stderr | ${test.module.relativeModuleId} > ${test.fullName} (held until it failed)\n${held.join("")}\n`);
    }
  },
};
const holdIntegrationStderr: InlineConfig["onConsoleLog"] = (log, type, entity) => {
  if (!holding || type !== "stderr" || entity?.type !== "test" || !entity.project.name.startsWith("integration")) return;
  heldStderr.set(entity.id, [...(heldStderr.get(entity.id) ?? []), log]);
  return false;
};

/**
 * wrangler.toml with `shards` D1 shards (whatever it binds), run as every local run is (under the
 * local profile that enforces production's limits: scripts/local-env.mjs asLocalRun): written next to it, git-ignored, and
 * rewritten only when it changed.
 */
function configWithShards(shards: number): string {
  const file = path.join(import.meta.dirname, `.wrangler-test-${shards}.toml`);
  const text = asLocalRun(withShards(readFileSync(path.join(import.meta.dirname, "wrangler.toml"), "utf8"), shards));
  if (!existsSync(file) || readFileSync(file, "utf8") !== text) {
    writeFileSync(`${file}.${process.pid}.tmp`, text);
    renameSync(`${file}.${process.pid}.tmp`, file);
  }
  return file;
}

/**
 * The Worker inside workerd with real local D1 (`shards` databases, DB and DB_1..: db/shards.ts),
 * Durable Objects, alarms and queues. Every file of test/integration runs in each such project.
 */
function integrationProject(name: string, shards: number, migrations: D1Migration[]) {
  return {
    plugins: [
      cloudflareTest({
        wrangler: { configPath: configWithShards(shards) },
        miniflare: {
          bindings: {
            TEST_MIGRATIONS: migrations,
            TEST_SHARDS: String(shards),
            // the model-based test runs its full count in the 1-shard project, fewer sequences here
            ...(shards > 1 ? { MODEL_RUNS: "10" } : {}),
            API_KEYS: "acme:test-key-acme,acme:test-key-acme-2,globex:test-key-globex",
            WEBHOOK_SECRET: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            ALLOW_LOOPBACK_TARGETS: "true",
            BUCKETS: "4",
            // handler Workers: "test" granted to acme only; "unbound" names a binding this deployment lacks
            HANDLER_WORKERS: JSON.stringify({
              test: { binding: "TEST_HANDLER", tenants: ["acme"] },
              unbound: { binding: "NO_SUCH_BINDING", tenants: ["*"] },
            }),
          },
          serviceBindings: { TEST_HANDLER: { name: "test-handler", entrypoint: "Handler" } },
          workers: [
            {
              name: "test-handler",
              modules: true,
              scriptPath: "./test/support/handler-worker.mjs",
              compatibilityDate: "2026-11-01",
            },
          ],
        },
      }),
    ],
    test: {
      name,
      include: ["test/integration/**/*.test.ts"],
      setupFiles: ["./test/integration/apply-migrations.ts"],
      globalSetup: ["./test/integration/receiver-setup.ts"],
    },
  };
}

export default defineConfig(async () => {
  const migrations = await readD1Migrations(path.join(import.meta.dirname, "migrations"));
  return {
    test: {
      reporters: ["default", stderrOfFailedTests],
      onConsoleLog: holdIntegrationStderr,
      projects: [
        { test: { name: "unit", include: ["test/unit/**/*.test.ts"], environment: "node" } },
        // the client package's own tests (receiver helpers); its tests against the stack are e2e
        "packages/client/vitest.config.ts",
        "packages/handler/vitest.config.ts",
        // the integration suite with one D1 shard (a deployment that needs no more) and with several
        // (INTEGRATION_SHARDS, default 3)
        integrationProject("integration", 1, migrations),
        integrationProject("integration-shards", Number(process.env.INTEGRATION_SHARDS ?? 3), migrations),
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
