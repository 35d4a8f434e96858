/**
 * Rows a callback adds per execution (issue 29, README "Callbacks"), with rows.test.ts's meter
 * (the platform's own counters: DO cursor.rowsWritten, D1 meta.rows_written, setAlarm calls):
 * the same batch of one-off jobs delivered once and purged, without callbacks and with a
 * success callback that answers 200 at once. rows.test.ts itself stays as it is: a job without
 * callbacks writes what it wrote before.
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

describe("rows a callback adds per execution", () => {
  it("a success callback adds at most 4 rows per execution (its row in and out of the bucket, its outcome on the parent's D1 row)", async () => {
    const plain = await measure(50, async () => {
      await runJobs(50, "batch");
      await purgeAll();
    });
    const withCallback = await measure(50, async () => {
      const ids = await runJobs(50, "batch", uniquePath("ok"), { callback: { url: `${receiverUrl()}${uniquePath("ok")}` } });
      const told = await countAll(
        `SELECT count(*) AS n FROM jobs WHERE id IN (SELECT value FROM json_each(?)) AND json_extract(callbacks, '$[0].status') = 'succeeded'`,
        JSON.stringify(ids),
      );
      expect(told).toBe(50);
      await purgeAll();
    });
    const added = {
      doRows: Math.round((withCallback.doRows - plain.doRows) * 100) / 100,
      d1Rows: Math.round((withCallback.d1Rows - plain.d1Rows) * 100) / 100,
      total: Math.round((withCallback.total - plain.total) * 100) / 100,
      setAlarm: Math.round((withCallback.setAlarm - plain.setAlarm) * 100) / 100,
    };
    console.log(JSON.stringify({ rows: "one-off, batch of 50, without callbacks", ...plain }));
    console.log(JSON.stringify({ rows: "one-off, batch of 50, with a success callback", ...withCallback }));
    console.log(JSON.stringify({ rows: "added by the callback", ...added }));
    expect(withCallback.d1Unmetered).toBe(0);
    expect(added.total).toBeGreaterThan(0);
    expect(added.total).toBeLessThanOrEqual(4);
  });
});
