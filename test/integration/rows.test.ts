/**
 * Rows written per execution, counted by the platform's own counters (DESIGN.md "Ownership and
 * cost"): every Durable Object SQL cursor's `rowsWritten` (read after the caller consumed it) and
 * every D1 result's `meta.rows_written`, index entries included, plus `setAlarm` calls (billed as
 * a row each). The budget: a one-off job created in a batch and delivered once writes at most 8
 * rows in total, its purge included. Driven through the real paths on the file-wide clock: API ->
 * bucket -> fire queue consumer -> loopback 200 -> outcome to D1 -> history purge.
 * The other shapes (single create, cron occurrence, one retry) are measured and printed.
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  api,
  bucketStub,
  CONFIG,
  captureFiresForFile,
  countAll,
  createJob,
  deliverAll,
  fileClock,
  receiverUrl,
  runScan,
  uniquePath,
} from "./helpers";

const BUCKETS = CONFIG.BUCKETS;
const HISTORY_RETENTION_MS = CONFIG.HISTORY_RETENTION_MS;
// an hour ahead of the real clock: the platform never fires an alarm on its own during the file
const clock = fileClock(3_600_000);
const sent = captureFiresForFile();

/** What the platform bills while `count` is on: rows written (DO, D1), alarms set. */
const meter = { on: false, doRows: 0, d1Rows: 0, alarms: 0, d1Unmetered: 0 };

beforeAll(async () => {
  // D1: every statement and batch the Worker and the buckets run (they share this isolate)
  const dbProto = Object.getPrototypeOf(env.DB) as D1Database;
  const stmtProto = Object.getPrototypeOf(env.DB.prepare("SELECT 1")) as D1PreparedStatement;
  const batch = dbProto.batch;
  dbProto.batch = async function (this: D1Database, statements: D1PreparedStatement[]) {
    const results = await batch.call(this, statements);
    if (meter.on) for (const r of results) meter.d1Rows += r.meta.rows_written ?? 0;
    return results;
  } as typeof batch;
  for (const method of ["run", "all"] as const) {
    const original = stmtProto[method] as (...args: unknown[]) => Promise<D1Result>;
    (stmtProto as unknown as Record<string, unknown>)[method] = async function (this: D1PreparedStatement, ...args: unknown[]) {
      const result = await original.apply(this, args);
      if (meter.on) meter.d1Rows += result.meta.rows_written ?? 0;
      return result;
    };
  }
  for (const method of ["raw", "first"] as const) {
    const original = stmtProto[method] as (...args: unknown[]) => Promise<unknown>;
    (stmtProto as unknown as Record<string, unknown>)[method] = async function (this: D1PreparedStatement, ...args: unknown[]) {
      // raw() and first() return no meta: a write through them would go uncounted
      const text = (this as unknown as { statement?: string }).statement ?? "";
      if (meter.on && !/^\s*(SELECT|WITH)\b/i.test(text)) meter.d1Unmetered += 1;
      return original.apply(this, args);
    };
  }
  // every bucket: warm it (migrations, epoch, counter rows exist), then meter its SQL and alarms
  await runJobs(4 * BUCKETS, "batch");
  for (let b = 0; b < BUCKETS; b++) {
    await runInDurableObject(bucketStub(b), (_instance, state) => {
      const sql = state.storage.sql;
      const exec = sql.exec.bind(sql);
      sql.exec = ((query: string, ...bindings: SqlStorageValue[]) => {
        const cursor = exec(query, ...bindings);
        if (meter.on) pending.push(cursor);
        return cursor;
      }) as typeof sql.exec;
      const setAlarm = state.storage.setAlarm.bind(state.storage);
      state.storage.setAlarm = (async (at: number | Date, options?: DurableObjectSetAlarmOptions) => {
        if (meter.on) meter.alarms += 1;
        return setAlarm(at, options);
      }) as typeof state.storage.setAlarm;
    });
  }
});
afterAll(() => undefined);

/** DO cursors of the metered window: their rowsWritten is final once consumed. */
const pending: SqlStorageCursor<Record<string, SqlStorageValue>>[] = [];

function settleDoRows(): void {
  for (const cursor of pending.splice(0)) meter.doRows += cursor.rowsWritten;
}

/** Creates `n` one-off jobs due now and runs them to D1: alarm -> consumer -> outcome flush. */
async function runJobs(
  n: number,
  how: "batch" | "single",
  path = uniquePath("ok"),
  extra: Record<string, unknown> = {},
): Promise<string[]> {
  const body = (i: number) => ({ target: { url: `${receiverUrl()}${path}&i=${i}`, method: "POST" }, ...extra });
  let ids: string[];
  if (how === "batch") {
    const res = await api("/v1/jobs/batch", { method: "POST", body: { jobs: Array.from({ length: n }, (_, i) => body(i)) } });
    ids = ((await res.json()) as { results: { job: { id: string } }[] }).results.map((r) => r.job.id);
  } else {
    ids = [];
    for (let i = 0; i < n; i++) ids.push((await createJob(body(i))).id);
  }
  await deliverAll(clock, sent);
  return ids;
}

async function purgeAll(): Promise<void> {
  clock.advance(HISTORY_RETENTION_MS + 60_000);
  await runScan();
}

async function measure(executions: number, run: () => Promise<void>) {
  settleDoRows();
  Object.assign(meter, { doRows: 0, d1Rows: 0, alarms: 0, d1Unmetered: 0, on: true });
  await run();
  meter.on = false;
  settleDoRows();
  const per = (n: number) => Math.round((n / executions) * 100) / 100;
  return {
    doRows: per(meter.doRows),
    d1Rows: per(meter.d1Rows),
    total: per(meter.doRows + meter.d1Rows),
    setAlarm: per(meter.alarms),
    d1Unmetered: meter.d1Unmetered,
  };
}

describe("rows written per execution (DESIGN.md: at most 8 for a one-off job, purge included)", () => {
  it("a one-off job created in a batch of 100 and delivered once writes at most 8 rows, DO and D1 together", async () => {
    const result = await measure(100, async () => {
      const ids = await runJobs(100, "batch");
      expect(ids).toHaveLength(100);
      const delivered = await countAll(
        "SELECT count(*) AS n FROM jobs WHERE id IN (SELECT value FROM json_each(?)) AND status = 'completed' AND run_status = 'succeeded'",
        JSON.stringify(ids),
      );
      expect(delivered).toBe(100);
      await purgeAll();
      const left = await countAll("SELECT count(*) AS n FROM jobs WHERE id IN (SELECT value FROM json_each(?))", JSON.stringify(ids));
      expect(left).toBe(0); // the purge is part of the budget
    });
    console.log(JSON.stringify({ rows: "one-off, batch of 100", ...result }));
    expect(result.d1Unmetered).toBe(0);
    expect(result.total).toBeLessThanOrEqual(8);
  });

  it("measures a one-off job created alone", async () => {
    const result = await measure(10, async () => {
      await runJobs(10, "single");
      await purgeAll();
    });
    console.log(JSON.stringify({ rows: "one-off, single create", ...result }));
    expect(result.total).toBeGreaterThan(0);
  });

  it("a job created inside a W3C trace writes the same rows as one without (issue 29: trace context adds none)", async () => {
    const plain = await measure(20, async () => {
      await runJobs(20, "batch");
      await purgeAll();
    });
    const traced = await measure(20, async () => {
      await runJobs(20, "batch", uniquePath("ok"), { trace: { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" } });
      await purgeAll();
    });
    console.log(JSON.stringify({ rows: "one-off with trace context", ...traced }));
    expect(traced.d1Rows).toBe(plain.d1Rows);
    // the bucket's rows vary a little with how alarm passes group a batch; a row per execution more would show
    expect(Math.abs(traced.doRows - plain.doRows)).toBeLessThan(0.5);
  });

  it("measures a retried attempt (500, then 200)", async () => {
    const result = await measure(10, async () => {
      await runJobs(10, "batch", uniquePath("flaky/1"), { retry: { initialDelayMs: 1000, jitter: 0 } });
      await purgeAll();
    });
    console.log(JSON.stringify({ rows: "one-off, one retry", ...result }));
    expect(result.total).toBeGreaterThan(0);
  });

  it("measures a recurring occurrence (every 2 s)", async () => {
    const job = await createJob({ target: { url: `${receiverUrl()}${uniquePath("ok")}`, method: "POST" }, cron: "*/2 * * * * *" });
    await deliverAll(clock, sent, 4_000); // the first occurrences: steady state after them
    const result = await measure(10, async () => {
      await deliverAll(clock, sent, 20_000); // ten occurrences, 2 s apart
    });
    console.log(JSON.stringify({ rows: "recurring occurrence (purge not included)", ...result }));
    await api(`/v1/jobs/${job.id}`, { method: "DELETE" });
    expect(result.total).toBeGreaterThan(0);
  });

  it("priority (issue 29) adds no row: a batch of 100 with priority 9 writes what one without writes", async () => {
    const run = (extra: Record<string, unknown>) =>
      measure(100, async () => {
        await runJobs(100, "batch", uniquePath("ok"), extra);
        await purgeAll();
      });
    const plain = await run({});
    const prioritized = await run({ priority: 9 });
    console.log(JSON.stringify({ rows: "one-off, batch of 100, priority 9", ...prioritized, without: plain.total }));
    // the same statements write the same rows (priority is a field of the spec, which is written
    // anyway); the counters' flushes and alarms vary by a few tenths from one run to the next
    expect(prioritized.d1Unmetered).toBe(0);
    expect(prioritized.total).toBeLessThanOrEqual(8);
    expect(Math.abs(prioritized.total - plain.total)).toBeLessThanOrEqual(0.3);
  });
});
