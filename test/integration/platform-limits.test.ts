/**
 * What production enforces and workerd does not (issue 35, docs/platform-limits.md), held here
 * under the local profile (src/platform/profile.ts), which every integration test runs:
 * - item 1: a delivery slower than the ~30 s production keeps a handler's waitUntil work completes
 *   and reports in the invocation that claimed it (HTTP targets and handler Workers): the profile
 *   cuts waitUntil work PLATFORM_WAIT_UNTIL_MS after its handler returns (scaled here from 30 s to
 *   300 ms against targets of 1.2 s, the same ratio's meaning: slower than the cut);
 * - item 8: with LOCATION_HINT set, every Durable Object is got with it (created there, whoever
 *   calls first), and a hint D1 does not take is refused;
 * - the profile itself: it refuses what production refuses (SQL bound parameters and statement
 *   bytes, a seventh fetch waits for one of six connections, I/O after the cut), and records it even
 *   where the code catches the error.
 *
 * Time: one file-wide virtual clock for the buckets; the targets' hang is real (the receiver's
 * /hang/<ms>, the test handler's sleepMs). The fire queue is captured: tests feed the consumer.
 */

import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { ConfigSchema } from "../../src/config";
import { runAsInvocation, takeViolations } from "../../src/platform/invocations";
import worker from "../../src/platform/local-worker";
import { limitedEnv } from "../../src/platform/profile";
import { captureFiresForFile, dispatchOf, fileClock, KEYS, newExecution, receiverUrl, startFire, uniquePath } from "./helpers";

const clock = fileClock(10 * 60_000);
const sent = captureFiresForFile();
const dispatch = dispatchOf(clock, sent);

/** The consumer's env with production's waitUntil window scaled to 300 ms. */
const scaledCut = { ...env, PLATFORM_WAIT_UNTIL_MS: "300" } as Env;
const SLOWER_THAN_THE_CUT_MS = 1_200;

describe("item 1: a delivery outlives no invocation", () => {
  it("an HTTP target slower than production's waitUntil window succeeds on its first attempt, reported by the invocation that claimed it", async () => {
    const e = await newExecution({ target: { url: `${receiverUrl()}${uniquePath(`hang/${SLOWER_THAN_THE_CUT_MS}`)}` } });
    const run = await startFire([await dispatch(e)], { env: scaledCut });
    await run.done;
    expect(takeViolations()).toEqual([]);
    expect(await e.view()).toMatchObject({ status: "succeeded", attempts: 1, lastHttpStatus: 200 });
  });

  it("so does a handler Worker slower than it", async () => {
    const e = await newExecution({ target: { worker: "test", payload: { sleepMs: SLOWER_THAN_THE_CUT_MS } } });
    const run = await startFire([await dispatch(e)], { env: scaledCut });
    await run.done;
    expect(takeViolations()).toEqual([]);
    expect(await e.view()).toMatchObject({ status: "succeeded", attempts: 1 });
  });
});

describe("item 8: placement", () => {
  it("gets every object with LOCATION_HINT, so it is created there whoever calls it first", async () => {
    const hinted = { ...env, LOCATION_HINT: "weur" } as Env;
    const buckets = vi.spyOn(env.BUCKET, "getByName");
    const keys = vi.spyOn(env.IDEMPOTENCY_KEYS, "getByName");
    try {
      const ctx = createExecutionContext();
      const res = await worker.fetch(
        new Request("http://scheduler/v1/jobs", {
          method: "POST",
          headers: { authorization: `Bearer ${KEYS.acme}`, "content-type": "application/json", "idempotency-key": crypto.randomUUID() },
          body: JSON.stringify({ target: { url: `${receiverUrl()}${uniquePath()}` } }),
        }),
        hinted,
        ctx,
      );
      await waitOnExecutionContext(ctx);
      expect(res.status).toBe(201);
      expect(buckets.mock.calls.length).toBeGreaterThan(0);
      expect(keys.mock.calls.length).toBeGreaterThan(0);
      for (const [, options] of [...buckets.mock.calls, ...keys.mock.calls]) expect(options).toEqual({ locationHint: "weur" });
    } finally {
      buckets.mockRestore();
      keys.mockRestore();
    }
  });

  it("takes only a hint D1 takes too (the shards are created there)", () => {
    expect(ConfigSchema.safeParse({ LOCATION_HINT: "weur" }).success).toBe(true);
    expect(ConfigSchema.safeParse({ LOCATION_HINT: "sam" }).success).toBe(false);
  });
});

describe("the local profile refuses what production refuses", () => {
  it("a D1 statement with 101 bound parameters, and one of more than 100 KB", async () => {
    const limited = limitedEnv(env);
    const params = Array.from({ length: 101 }, (_, i) => i);
    expect(() => limited.DB.prepare(`SELECT 1 WHERE 1 IN (${params.map(() => "?").join(",")})`).bind(...params)).toThrow(
      /bound parameters/,
    );
    expect(() => limited.DB.prepare(`SELECT '${"x".repeat(100_001)}'`)).toThrow(/statement size/);
    expect(takeViolations().map((v) => v.limit)).toEqual(["SQL bound parameters", "SQL statement size"]);
  });

  it("a seventh fetch of one invocation waits until one of six has its response headers", async () => {
    const slow = `${receiverUrl()}${uniquePath("hang/400")}`;
    const fast = `${receiverUrl()}${uniquePath()}`;
    const answered: string[] = [];
    await runAsInvocation("test", () =>
      Promise.all(
        [...Array.from({ length: 6 }, (_, i) => `${slow}&i=${i}`), fast].map(async (url) => {
          await fetch(url);
          answered.push(url === fast ? "fast" : "slow");
        }),
      ),
    );
    // with a free connection the fast target would answer long before the slow ones
    expect(answered[0]).toBe("slow");
    expect(takeViolations()).toEqual([]);
  });
});
