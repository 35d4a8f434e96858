/**
 * What wrangler.toml must keep, read by wrangler's own config reader: a fire consumer awaits its
 * deliveries (production keeps waitUntil work only ~30 s after a handler returns: issue 35 item 1),
 * so the production config has no queue_consumer_no_wait_for_wait_until; fetches of the scheduler's
 * own zone go through its front door (global_fetch_strictly_public, item 5); no fire batch is larger
 * than the connections one invocation may open (a delivery beyond them would wait behind a slow
 * one); the local profile's larger batches, its entry and flags. And that the console's static
 * assets (issue 16) can never answer in the API's place.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { unstable_readConfig } from "wrangler";
import { ROUTES } from "../../src/api/openapi";
import { ConfigSchema } from "../../src/config";
import { CONSUMER_TRIES } from "../../src/protocol/fire";

const wrangler = unstable_readConfig({ config: join(import.meta.dirname, "../../wrangler.toml") }, { hideWarnings: true });
const defaults = ConfigSchema.parse({});

describe("wrangler.toml", () => {
  it("leaves no delivery in a consumer's waitUntil, and fetches its own zone through the front door (issue 35 items 1, 5)", () => {
    expect(wrangler.compatibility_flags).not.toContain("queue_consumer_no_wait_for_wait_until");
    expect(wrangler.compatibility_flags).toContain("global_fetch_strictly_public");
    expect(wrangler.main).toMatch(/src\/index\.ts$/);
  });

  it("a local run runs the local profile's entry with its own flags, and only there (scripts/local-env.mjs asLocalRun)", async () => {
    const { asLocalRun, LOCAL_MAIN, LOCAL_COMPATIBILITY_FLAGS } = await import("../../scripts/local-env.mjs");
    const text = asLocalRun(readFileSync(join(import.meta.dirname, "../../wrangler.toml"), "utf8"));
    expect(text).toMatch(new RegExp(`^main = "${LOCAL_MAIN}"$`, "m"));
    const flags = JSON.parse(/^compatibility_flags = (\[.*\])$/m.exec(text)![1]!) as string[];
    expect(flags.sort()).toEqual([...new Set([...wrangler.compatibility_flags, ...LOCAL_COMPATIBILITY_FLAGS])].sort());
  });

  it("retries a fire message the consumer failed on CONSUMER_TRIES - 1 times, and updates busy objects deferred, within 300 s (issue 35 item 4)", () => {
    const fire = (wrangler.queues.consumers ?? []).filter((c: { queue: string }) => !c.queue.endsWith("-dlq"));
    for (const consumer of fire) expect(consumer.max_retries, consumer.queue).toBe(CONSUMER_TRIES - 1);
    expect(wrangler.durable_objects.code_update_strategy).toEqual({ mode: "deferred", max_delay: 300 });
  });

  it("gives every fire consumer no more executions per invocation than DELIVERY_CONCURRENCY: batches of one group of FIRE_GROUP_SIZE", () => {
    const fire = (wrangler.queues.consumers ?? []).filter((c: { queue: string }) => !c.queue.endsWith("-dlq"));
    expect(fire.length).toBeGreaterThan(0);
    expect(defaults.FIRE_GROUP_SIZE).toBeLessThanOrEqual(defaults.DELIVERY_CONCURRENCY);
    for (const consumer of fire)
      expect((consumer.max_batch_size ?? 10) * defaults.FIRE_GROUP_SIZE, consumer.queue).toBeLessThanOrEqual(defaults.DELIVERY_CONCURRENCY);
  });

  it("the local profile's config takes larger fire batches, and only there (scripts/local-env.mjs)", async () => {
    const { withLocalFireBatches, LOCAL_FIRE_BATCH } = await import("../../scripts/local-env.mjs");
    const text = readFileSync(join(import.meta.dirname, "../../wrangler.toml"), "utf8");
    const local = withLocalFireBatches(text);
    const sizes = [...local.matchAll(/queue = "([^"]+)"\nmax_batch_size = (\d+)/g)].map((m) => [m[1], Number(m[2])]);
    expect(sizes).toEqual([
      ["fire", LOCAL_FIRE_BATCH],
      ["fire-1", LOCAL_FIRE_BATCH],
      ["fire-2", LOCAL_FIRE_BATCH],
      ["fire-3", LOCAL_FIRE_BATCH],
      ["fire-dlq", 100],
    ]);
  });
});

describe("wrangler.toml [assets]: the console", () => {
  const assets = wrangler.assets!;
  const patterns: string[] = Array.isArray(assets.run_worker_first) ? assets.run_worker_first : [];
  /** run_worker_first's glob: `*` matches any characters, "/" included */
  const runsWorkerFirst = (path: string) =>
    patterns.some((p) => new RegExp(`^${p.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*")}$`).test(path));

  it("runs the Worker first for every route the API documents, and for /metrics", () => {
    const paths = [...ROUTES.map((r) => r.path.replace(/\{[^}]+\}/g, "x")), "/metrics"];
    expect(paths).toContain("/healthz");
    for (const path of paths) expect(runsWorkerFirst(path), path).toBe(true);
    expect(runsWorkerFirst("/console/app.js")).toBe(false);
  });

  it("serves only the console's directory: no file in public/ outside console/ but the header rules", () => {
    const directory = resolve(import.meta.dirname, "../..", assets.directory!);
    expect(readdirSync(directory).sort()).toEqual(["_headers", "console"]);
  });
});
