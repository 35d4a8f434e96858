/**
 * The pure parts of `npm run bench:floor` (bench/floor/shapes.mjs, bench/lib/shape.mjs): the
 * shapes it takes (FLOOR_SHAPES), the shapes it measures by default (the local stack's and
 * production's, read from wrangler.toml as wrangler reads it), and its table.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { unstable_readConfig } from "wrangler";
import { distinctShapes, floorReport, parseShapes, shapeLabel } from "../../bench/floor/shapes.mjs";
import { shapeOf } from "../../bench/lib/shape.mjs";
import { LOCAL_FIRE_BATCH, withLocalFireBatches } from "../../scripts/local-env.mjs";

describe("FLOOR_SHAPES", () => {
  it('takes [consumerBatch, executionsPerMessage] pairs and ["direct", k]', () => {
    expect(parseShapes('[[10,10],[1,6],["direct",6]]')).toEqual([
      { kind: "queue", consumerBatch: 10, executionsPerMessage: 10 },
      { kind: "queue", consumerBatch: 1, executionsPerMessage: 6 },
      { kind: "direct", perAlarmStep: 6 },
    ]);
  });

  it.each([
    ["not JSON", "10,10", "must be JSON"],
    ["an empty list", "[]", "non-empty list"],
    ["a bare number", "[10]", "must list pairs"],
    ["a batch over the platform's 100", "[[101,1]]", "consumer batch of 1..100"],
    ["a batch of 0", "[[0,1]]", "consumer batch of 1..100"],
    ["executions per message over FIRE_GROUP_SIZE's 100", "[[10,101]]", "1..100 executions per message"],
    ["a fraction", "[[10,1.5]]", "1..100 executions per message"],
    ["an unknown kind", '[["alarm",6]]', 'or "direct"'],
  ])("refuses %s, naming FLOOR_SHAPES", (_what, text, why) => {
    expect(() => parseShapes(text)).toThrow("FLOOR_SHAPES");
    expect(() => parseShapes(text)).toThrow(why);
  });

  it("measures a shape once when the local stack's and production's are the same", () => {
    expect(distinctShapes(parseShapes("[[10,10],[1,6],[10,10]]"))).toEqual(parseShapes("[[10,10],[1,6]]"));
  });
});

describe("the default shapes: read from wrangler.toml", () => {
  const path = join(import.meta.dirname, "../../wrangler.toml");
  const text = readFileSync(path, "utf8");
  const settings = { FIRE_GROUP_SIZE: 6, DELIVERY_CONCURRENCY: 6 };

  it("production's consumer batch is the fire consumer's max_batch_size as wrangler reads it", () => {
    const wrangler = unstable_readConfig({ config: path }, { hideWarnings: true });
    const fire = wrangler.queues.consumers?.find((c: { queue: string }) => c.queue === "fire");
    expect(fire?.max_batch_size).toBeDefined();
    expect(shapeOf(text, settings)).toEqual({
      consumerBatch: fire?.max_batch_size,
      executionsPerMessage: 6,
      deliveryConcurrency: 6,
      floorShape: [fire?.max_batch_size, 6],
    });
  });

  it("the local stack's is the local config's batch (LOCAL_FIRE_BATCH)", () => {
    expect(shapeOf(withLocalFireBatches(text), { ...settings, FIRE_GROUP_SIZE: 10 }).floorShape).toEqual([LOCAL_FIRE_BATCH, 10]);
  });
});

describe("floorReport", () => {
  const line = (over: Record<string, unknown>) => ({
    shape: { kind: "queue", consumerBatch: 10, executionsPerMessage: 10 },
    label: "the local stack's",
    delivery: "http",
    delivered: 10_000,
    perSecond: 1290,
    cpuMsPerDelivery: { workerd: 0.705, stack: 0.75 },
    runtime: { machine: { otherCpuSeconds: 0.3 } },
    versions: { wrangler: "4.156.2" },
    machine: { cpus: 2, node: "v24.21.0" },
    at: "2026-12-03T10:00:00.000Z",
    ...over,
  });

  it("gives a row per shape and delivery, with each figure's range over the runs", () => {
    const report = floorReport([
      line({}),
      line({ perSecond: 1100, cpuMsPerDelivery: { workerd: 0.8, stack: 0.85 } }),
      line({ shape: { kind: "direct", perAlarmStep: 6 }, label: "", delivery: "binding", perSecond: 2000 }),
    ]);
    const rows = report.split("\n").filter((l) => l.startsWith("| consumer") || l.startsWith("| from"));
    expect(rows).toEqual([
      "| consumer batch 10 × 10 per message | the local stack's | HTTP POST | 2 | 10,000 | 1,100–1,290 | 0.705–0.800 ms | 0.750–0.850 ms | 0.3 s |",
      "| from a Durable Object's alarm, 6 at a time | – | service binding (RPC) | 1 | 10,000 | 2,000 | 0.705 ms | 0.750 ms | 0.3 s |",
    ]);
    expect(report).toContain("wrangler 4.156.2");
  });

  it("names the shape in words", () => {
    expect(shapeLabel({ kind: "queue", consumerBatch: 1, executionsPerMessage: 6 })).toBe("consumer batch 1 × 6 per message");
  });
});
