/**
 * The pure parts of `npm run bench:peers` (bench/peers, bench/lib): the signature BullMQ's worker
 * puts on each delivery (the same Standard Webhooks signature the scheduler sends, so the peer does
 * the same work), the workload both benches share, and the tables the README's figures come from.
 */
import { randomBytes } from "node:crypto";
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { count, durationRange, markdownTable, range } from "../../bench/lib/table.mjs";
import { burstLeadMs, DEFAULT_ENQUEUE_RATE, delayedDueAt, LEAD_MS, SPREAD_MS } from "../../bench/lib/workload.mjs";
import { findRedisServer, redisVersionOf } from "../../bench/peers/redis.mjs";
import { peersReport } from "../../bench/peers/report.mjs";
import { signedHeaders } from "../../bench/peers/webhook.mjs";

describe("the peer's webhook signature", () => {
  const secret = `whsec_${randomBytes(32).toString("base64")}`;
  const body = JSON.stringify({ i: 17 });

  it("verifies with the Standard Webhooks library, as the scheduler's deliveries do", () => {
    const headers = signedHeaders(secret, "job_17", Math.floor(Date.now() / 1000), body);
    expect(new Webhook(secret).verify(body, headers)).toEqual({ i: 17 });
    expect(headers["content-type"]).toBe("application/json");
  });

  it("does not verify under another secret, or for another body", () => {
    const headers = signedHeaders(secret, "job_17", Math.floor(Date.now() / 1000), body);
    const other = `whsec_${randomBytes(32).toString("base64")}`;
    expect(() => new Webhook(other).verify(body, headers)).toThrow();
    expect(() => new Webhook(secret).verify(JSON.stringify({ i: 18 }), headers)).toThrow();
  });
});

describe("the workload npm run bench and bench:peers share", () => {
  it("delayed: due times spread evenly over SPREAD_MS from LEAD_MS after the start", () => {
    const n = 1000;
    expect(delayedDueAt(1_000_000, 0, n)).toBe(1_000_000 + LEAD_MS);
    expect(delayedDueAt(1_000_000, n / 2, n)).toBe(1_000_000 + LEAD_MS + SPREAD_MS / 2);
    expect(delayedDueAt(1_000_000, n - 1, n)).toBe(1_000_000 + LEAD_MS + SPREAD_MS - SPREAD_MS / n); // one step before the end
  });

  it("burst: due once all are created at the expected rate, plus 2 s, and never sooner than LEAD_MS", () => {
    expect(burstLeadMs(20_000, DEFAULT_ENQUEUE_RATE)).toBe(7000); // 5 s of enqueue + 2 s
    expect(burstLeadMs(20_000, 50_000)).toBe(LEAD_MS); // 0.4 s of enqueue: the least lead
    expect(burstLeadMs(20_000, 3000)).toBe(6667 + 2000);
  });
});

describe("redis-server", () => {
  it("reads the version redis-server --version prints", () => {
    expect(redisVersionOf("Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=1")).toBe("7.0.15");
    expect(redisVersionOf("something else")).toBeNull();
  });

  it("refuses a REDIS_SERVER that does not exist, naming it", () => {
    expect(() => findRedisServer({ REDIS_SERVER: "/no/such/redis-server" })).toThrow("REDIS_SERVER=/no/such/redis-server");
  });
});

describe("table cells", () => {
  it("shows a range over the runs, or one value when they agree, and nothing without a value", () => {
    expect(range([1960, 1114, 1256], count)).toBe("1,114–1,960");
    expect(range([0, 0], count)).toBe("0");
    expect(range([0.784, 0.861], (v) => v.toFixed(2), "ms")).toBe("0.78–0.86 ms");
    expect(range([null, undefined, Number.NaN], count)).toBeNull();
  });

  it("shows durations in ms below a second, else in seconds, one unit per range", () => {
    expect(durationRange([88, 90])).toBe("88–90 ms");
    expect(durationRange([765, 1327])).toBe("0.77–1.33 s");
    expect(durationRange([6840, 6980])).toBe("6.84–6.98 s");
    expect(durationRange([15_900, 17_900])).toBe("15.9–17.9 s");
    expect(durationRange([2900])).toBe("2.90 s");
    expect(durationRange([])).toBeNull();
  });

  it("writes a Markdown table, a missing value as – and a | escaped", () => {
    expect(
      markdownTable(
        ["a", "b"],
        [
          [1, null],
          ["x|y", ""],
        ],
      ),
    ).toBe("| a | b |\n| --- | --- |\n| 1 | – |\n| x\\|y | – |");
  });
});

/** a bench:peers line with the fields the report reads */
function line(over: Record<string, unknown>) {
  return {
    peer: "bullmq",
    scenario: "burst",
    deliver: "http",
    params: { n: 20_000, leadMs: 7000 },
    versions: { bullmq: "6.7.0", ioredis: "5.11.1", redis: "7.0.15" },
    enqueue: { jobsPerSec: 30_000 },
    lagMs: { p50: 9000, p95: 15_000, p99: 16_000, max: 16_100 },
    over2s: 19_000,
    drainMs: 16_100,
    drainJobsPerSec: 1242,
    firstArrivalAfterDueMs: 150,
    missing: 0,
    duplicates: 0,
    runtime: { cpuMsPerDelivery: { all: 1.21 }, machine: { otherCpuSeconds: 1.5 } },
    machine: { cpus: 2, node: "v24.21.0" },
    at: "2026-12-03T10:00:00.000Z",
    ...over,
  };
}

describe("peersReport", () => {
  it("gives a row per peer and delivery mode with each figure's range over the runs", () => {
    const report = peersReport([
      line({}),
      line({ drainMs: 17_900, drainJobsPerSec: 1117, runtime: { cpuMsPerDelivery: { all: 1.38 }, machine: { otherCpuSeconds: 0.4 } } }),
      line({
        deliver: "none",
        drainMs: 2900,
        drainJobsPerSec: 6897,
        runtime: { cpuMsPerDelivery: { all: 0.4 }, machine: { otherCpuSeconds: 0.2 } },
      }),
    ]);
    const rows = report.split("\n").filter((l) => l.startsWith("| bullmq"));
    expect(rows).toEqual([
      "| bullmq | webhook (DELIVER=http) | 2 | 20,000 | 30,000 | 150 ms | 16.1–17.9 s | 1,117–1,242 | 16.0 s | 0 | 0 | 1.21–1.38 ms | 0.4–1.5 s |",
      "| bullmq | no-op handler | 1 | 20,000 | 30,000 | 150 ms | 2.90 s | 6,897 | 16.0 s | 0 | 0 | 0.40 ms | 0.2 s |",
    ]);
    expect(report).toContain("### burst");
    expect(report).not.toContain("### delayed");
    expect(report).toContain("bullmq 6.7.0, ioredis 5.11.1, redis 7.0.15");
  });

  it("leaves failed runs out of the table and names them", () => {
    const report = peersReport([line({ scenario: "delayed" }), { peer: "bullmq", scenario: "burst", deliver: "http", error: "boom" }]);
    expect(report).toContain("### delayed");
    expect(report).not.toContain("### burst");
    expect(report).toContain("1 run(s) failed: http burst");
  });
});
