/**
 * Priority (issue 29 item 4) where due executions wait their turn, through the real buckets,
 * consumer, FlowKey and PullQueue objects and the API: within a tenant the 9s go before the 1s
 * due earlier, and a 1 that waited past its bound ((9 - 1) x PRIORITY_AGING_MS) goes before
 * newer 9s. Priority never makes one go before its due time, and tenants keep their turns (the
 * bucket's takeDue; test/integration/fairness.test.ts is unchanged). The pure rule is
 * test/unit/priority.test.ts.
 *
 * - the bucket's dispatch order (TenantDueQueues): what each bucket sends, drained with claims;
 * - a flow-control key of parallelism 1: the order deliveries reach the target (real hangs);
 * - a pull queue: the order a worker leases offers.
 * And the API: priority on create and PATCH (0-9, a 400 naming the field), shown on GET, stored
 * in the spec only when not 5.
 *
 * Time: one file-wide virtual clock; the fire queue is captured, tests feed the consumer.
 */
import { evictDurableObject, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { Bucket } from "../../src/bucket/bucket";
import type { FireMessage } from "../../src/bucket/protocol";
import { oneOffExecutionId } from "../../src/core/id";
import { PRIORITY_AGING_MS } from "../../src/core/priority";
import { pullQueueName } from "../../src/core/pull";
import { PULL_QUEUE_MIGRATIONS } from "../../src/pull/offers";
import type { PullQueue } from "../../src/pull/pull-queue";
import { applyMigrations } from "../../src/sqlite-migrations";
import {
  api,
  bucketStub,
  CONFIG,
  captureFiresForFile,
  createJob,
  dispatchAll,
  type Execution,
  executionOf,
  fileClock,
  fire,
  jobRow,
  KEYS,
  newExecution,
  received,
  receiverUrl,
  runAlarm,
  startFire,
  uniquePath,
} from "./helpers";

const clock = fileClock(10 * 60_000);
const sent = captureFiresForFile();
/** how long a priority-1 execution waits before nothing newer goes before it */
const BOUND_1 = 8 * PRIORITY_AGING_MS;
const buckets = Array.from({ length: CONFIG.BUCKETS }, (_, b) => b);

const claimAll = (messages: FireMessage[]) =>
  Promise.all(
    [...Map.groupBy(messages, (m) => m.bucket)].map(([bucket, ms]) =>
      bucketStub(bucket).claim(ms.map((m) => ({ executionId: m.executionId, dueAt: m.dueAt }))),
    ),
  );

/** Creates `n` jobs in one batch; returns their execution ids and buckets. */
async function batch(
  n: number,
  job: Record<string, unknown>,
  key: string = KEYS.acme,
): Promise<{ jobId: string; id: string; bucket: number }[]> {
  const res = await api("/v1/jobs/batch", { method: "POST", body: { jobs: Array.from({ length: n }, () => job) } }, key);
  expect(res.status).toBe(200);
  const ids = ((await res.json()) as { results: { job: { id: string } }[] }).results.map((r) => r.job.id);
  return Promise.all(ids.map(async (jobId) => ({ jobId, id: oneOffExecutionId(jobId), bucket: (await executionOf(jobId))!.bucket })));
}

/**
 * At least `atLeast` jobs like `job` in `bucket` (a job's bucket is its random id's: batches of 8
 * until enough landed there, at most 40 batches), only those of that bucket.
 */
async function inBucket(
  bucket: number,
  atLeast: number,
  job: Record<string, unknown>,
): Promise<{ jobId: string; id: string; bucket: number }[]> {
  const found: { jobId: string; id: string; bucket: number }[] = [];
  for (let i = 0; i < 40 && found.length < atLeast; i++) found.push(...(await batch(8, job)).filter((e) => e.bucket === bucket));
  expect(found.length).toBeGreaterThanOrEqual(atLeast);
  return found;
}

/**
 * Every bucket's sends, each claimed at once (whatever it is: an earlier test's leftovers must not
 * fill a window), until every one of `ids` went out or nothing more is sent: the order `ids` were sent.
 */
async function drained(ids: Set<string>): Promise<string[]> {
  const order: string[] = [];
  for (let round = 0; round < 200 && order.length < ids.size; round++) {
    for (const b of buckets) await runAlarm(bucketStub(b));
    const messages = sent.splice(0);
    if (messages.length > 0) await claimAll(messages);
    order.push(...messages.map((m) => m.executionId).filter((id) => ids.has(id)));
  }
  return order;
}

describe("the bucket's dispatch order", () => {
  it("within a tenant its 9s are sent before its 1s due earlier; another tenant's 0 still gets its turn", async () => {
    const target = { url: `${receiverUrl()}${uniquePath()}` };
    const at = clock.at + 30_000;
    const lows = await batch(60, { target, runAt: new Date(at).toISOString(), priority: 1 });
    const highs = await batch(60, { target, runAt: new Date(at + 10).toISOString(), priority: 9 });
    const other = await batch(1, { target, runAt: new Date(at + 20).toISOString(), priority: 0 }, KEYS.globex);
    clock.travelTo(at + 20);
    const all = [...lows, ...highs, ...other];
    const order = await drained(new Set(all.map((e) => e.id)));
    expect(new Set(order)).toEqual(new Set(all.map((e) => e.id)));
    const highIds = new Set(highs.map((e) => e.id));
    for (const b of buckets) {
      const mine = order.filter((id) => all.find((e) => e.id === id)!.bucket === b && id !== other[0]!.id);
      const lastHigh = mine.findLastIndex((id) => highIds.has(id));
      const firstLow = mine.findIndex((id) => !highIds.has(id));
      // in due order every 1 of the bucket would go first
      if (lastHigh >= 0 && firstLow >= 0) expect(lastHigh).toBeLessThan(firstLow);
    }
    // tenants' turns: globex's one job is not held behind acme's 9s (fairness.test.ts proves the rest)
    const otherBucket = other[0]!.bucket;
    const inItsBucket = order.filter((id) => all.find((e) => e.id === id)!.bucket === otherBucket);
    expect(inItsBucket.indexOf(other[0]!.id)).toBeLessThanOrEqual(1);
  });

  it("a 1 that waited past its bound is sent before newer 9s; one that waited less still after them; none before its due time", async () => {
    const target = { url: `${receiverUrl()}${uniquePath()}` };
    const start = clock.at + 30_000;
    const old = await batch(8, { target, runAt: new Date(start).toISOString(), priority: 1 });
    const bucket = old[0]!.bucket;
    const oldLow = old[0]!;
    const others = old.slice(1).map((e) => e.id);
    clock.travelTo(start + BOUND_1 - 30_000);
    // a younger 1 of the same bucket, and 9s due after both
    const young = (await inBucket(bucket, 1, { target, runAt: new Date(clock.at).toISOString(), priority: 1 }))[0]!;
    const highs = await inBucket(bucket, 3, { target, runAt: new Date(start + BOUND_1 - 1_000).toISOString(), priority: 9 });
    // a 9 not due yet is not sent however high
    const future = await batch(1, { target, runAt: new Date(start + BOUND_1 + 60_000).toISOString(), priority: 9 });
    expect(highs.length).toBeGreaterThan(2);
    clock.travelTo(start + BOUND_1);
    // the other 1s of the first batch (other buckets, or waited as long) are drained too
    const ids = new Set([oldLow.id, young.id, ...highs.map((e) => e.id), ...others]);
    const order = (await drained(ids)).filter((id) => id === oldLow.id || id === young.id || highs.some((h) => h.id === id));
    expect(order[0]).toBe(oldLow.id);
    expect(order.at(-1)).toBe(young.id);
    expect(order).toHaveLength(highs.length + 2);
    expect((await bucketStub(future[0]!.bucket).inspect({ executionIds: [future[0]!.id] }))[0]?.status).toBe("scheduled");
  });
});

describe("the bucket's dispatch order after a restart", () => {
  it("a restarted bucket reads its jobs' priorities back with their rows: one-off and recurring 9s still go before 1s due earlier", async () => {
    const target = { url: `${receiverUrl()}${uniquePath()}` };
    const at = clock.at + 30_000;
    const lows = await batch(24, { target, runAt: new Date(at).toISOString(), priority: 1 });
    const highs = await batch(24, { target, runAt: new Date(at + 10).toISOString(), priority: 9 });
    // a recurring 9: its priority is in its schedule's spec, not in its occurrence's row
    const recurring = await createJob({ target, cron: "* * * * *", priority: 9 });
    for (const b of buckets) await evictDurableObject(bucketStub(b));
    clock.travelTo(Math.max(at + 20, clock.at));
    const all = [...lows, ...highs];
    const order = await drained(new Set(all.map((e) => e.id)));
    const highIds = new Set(highs.map((e) => e.id));
    for (const b of buckets) {
      const mine = order.filter((id) => all.find((e) => e.id === id)!.bucket === b);
      const lastHigh = mine.findLastIndex((id) => highIds.has(id));
      const firstLow = mine.findIndex((id) => !highIds.has(id));
      if (lastHigh >= 0 && firstLow >= 0) expect(lastHigh).toBeLessThan(firstLow);
    }
    const recurringBucket = (await jobRow(recurring.id))!.bucket;
    const loaded = await runInDurableObject(bucketStub(recurringBucket), (instance: Bucket) =>
      (instance as unknown as { s: { executions: { priorityOf(jobId: string): number } } }).s.executions.priorityOf(recurring.id),
    );
    expect(loaded).toBe(9);
    await api(`/v1/jobs/${recurring.id}`, { method: "DELETE" });
  });
});

describe("a flow-control key of parallelism 1", () => {
  /** The order the target got the deliveries of `path`: which job each was (by its query's i). */
  async function arrivalOrder(path: string): Promise<string[]> {
    return (await received(path)).sort((a, b) => a.at - b.at).map((r) => new URL(r.path, "http://x").searchParams.get("i")!);
  }

  async function job(key: string, path: string, name: string, priority: number, runAt?: number): Promise<Execution> {
    return newExecution({
      target: { url: `${receiverUrl()}${path}&i=${name}` },
      flowControl: { key, parallelism: 1 },
      priority,
      ...(runAt === undefined ? {} : { runAt: new Date(runAt).toISOString() }),
    });
  }

  it("the 9s waiting for the key are delivered before a 1 due earlier", async () => {
    const path = uniquePath("hang/200");
    // three at most: a fourth would wait longer than the consumer holds a wait (it goes back to its bucket)
    const lows = [await job("prio-a", path, "low", 1)];
    clock.advance(1_000);
    const highs = [await job("prio-a", path, "high-0", 9), await job("prio-a", path, "high-1", 9)];
    const messages = await dispatchAll([...lows, ...highs], clock, sent);
    await (await startFire(messages)).done;
    // the two of a priority are due at the same time: either of them first
    const order = await arrivalOrder(path);
    expect(order.slice(0, 2).sort()).toEqual(["high-0", "high-1"]);
    expect(order.slice(2)).toEqual(["low"]);
  });

  it("a 1 that waited past its bound is delivered before newer 9s", async () => {
    const path = uniquePath("hang/200");
    const low = await job("prio-b", path, "low", 1, clock.at + 1_000);
    clock.travelTo(clock.at + 1_000 + BOUND_1);
    const highs = [await job("prio-b", path, "high-0", 9), await job("prio-b", path, "high-1", 9)];
    const messages = await dispatchAll([low, ...highs], clock, sent);
    await (await startFire(messages)).done;
    const order = await arrivalOrder(path);
    expect(order[0]).toBe("low");
    expect(order.slice(1).sort()).toEqual(["high-0", "high-1"]);
  });
});

describe("a pull queue", () => {
  async function offer(queue: string, priority: number): Promise<Execution> {
    await claimAll(sent.splice(0)); // an earlier test's leftovers must not fill the bucket's window
    clock.advance(1); // each due at a time of its own: ties would go by id
    const e = await newExecution({ target: { pull: queue, payload: null }, priority });
    const [message] = await dispatchAll([e], clock, sent);
    expect((await fire([message])).explicitAcks).toEqual(["m0"]);
    return e;
  }

  async function leaseOne(queue: string): Promise<string | undefined> {
    const res = await api(`/v1/pull/${queue}/lease`, { method: "POST", body: { max: 1 } });
    expect(res.status).toBe(200);
    return ((await res.json()) as { leases: { executionId: string }[] }).leases[0]?.executionId;
  }

  it("hands the 9s offered to workers before the 1s offered earlier", async () => {
    const lows = [await offer("prio-a", 1), await offer("prio-a", 1)];
    clock.advance(1_000);
    const highs = [await offer("prio-a", 9), await offer("prio-a", 9)];
    const leased = [];
    for (let i = 0; i < 4; i++) leased.push(await leaseOne("prio-a"));
    expect(leased).toEqual([...highs, ...lows].map((e) => e.exe.id));
    // still 2 rows an execution in the queue (offered, taken): priority leads the key, no index added
    const rows = await runInDurableObject(env.PULL_QUEUE.getByName(pullQueueName("acme", "prio-a")), (q: PullQueue) => q.rowsWritten);
    expect(rows).toBe(2 * 4);
  });

  it("hands out a 1 that waited past its bound before newer 9s", async () => {
    const low = await offer("prio-b", 1);
    clock.advance(BOUND_1);
    const highs = [await offer("prio-b", 9), await offer("prio-b", 9)];
    const leased = [];
    for (let i = 0; i < 3; i++) leased.push(await leaseOne("prio-b"));
    expect(leased).toEqual([low, ...highs].map((e) => e.exe.id));
  });
});

describe("a pull queue holding offers from before priorities", () => {
  it("keeps them through its migration, at the default priority, and hands them out", async () => {
    const stub = env.PULL_QUEUE.getByName(pullQueueName("acme", "prio-migrated"));
    const rows = await runInDurableObject(stub, (_q: PullQueue, state) => {
      const sql = state.storage.sql;
      // the queue as migration 1 left it, holding an offer
      sql.exec("DROP TABLE offers");
      sql.exec(PULL_QUEUE_MIGRATIONS[0]!.sql);
      sql.exec("INSERT INTO offers VALUES (?, ?, ?)", 1_000, "exe_before", 2);
      sql.exec("DELETE FROM schema_migrations WHERE id > 1");
      applyMigrations(sql, PULL_QUEUE_MIGRATIONS);
      return sql.exec("SELECT priority, due_at, execution_id, bucket FROM offers").toArray();
    });
    expect(rows).toEqual([{ priority: 5, due_at: 1_000, execution_id: "exe_before", bucket: 2 }]);
  });
});

describe("the API", () => {
  it("takes priority on create and PATCH and shows it (5 when not given); the spec stores it only when not 5", async () => {
    const target = { url: `${receiverUrl()}${uniquePath()}` };
    const plain = await createJob({ target, delay: "1h" });
    expect(plain.priority).toBe(5);
    expect(JSON.parse(String((await jobRow(plain.id))!.spec))).not.toHaveProperty("priority");

    const urgent = await createJob({ target, delay: "1h", priority: 9 });
    expect(urgent.priority).toBe(9);
    expect(JSON.parse(String((await jobRow(urgent.id))!.spec)).priority).toBe(9);
    const shown = await api(`/v1/jobs/${urgent.id}`);
    expect(((await shown.json()) as { priority: number }).priority).toBe(9);

    const patched = await api(`/v1/jobs/${urgent.id}`, { method: "PATCH", body: { priority: 0 } });
    expect(patched.status).toBe(200);
    expect(((await patched.json()) as { priority: number }).priority).toBe(0);
    // a PATCH of something else keeps it
    const renamed = await api(`/v1/jobs/${urgent.id}`, { method: "PATCH", body: { name: "renamed" } });
    expect(((await renamed.json()) as { priority: number }).priority).toBe(0);
  });

  it("an idempotent repeat: priority 5 is the same request as none; another priority is another request (409)", async () => {
    const body = { target: { url: `${receiverUrl()}/ok` }, delay: "1h", idempotencyKey: `prio-${crypto.randomUUID()}` };
    const first = await api("/v1/jobs", { method: "POST", body });
    expect(first.status).toBe(201);
    const same = await api("/v1/jobs", { method: "POST", body: { ...body, priority: 5 } });
    expect(same.status).toBe(200);
    const other = await api("/v1/jobs", { method: "POST", body: { ...body, priority: 9 } });
    expect(other.status).toBe(409);
  });

  it.each([10, -1, 2.5, "9"])("refuses priority %j with a 400 naming the field", async (priority) => {
    const res = await api("/v1/jobs", { method: "POST", body: { target: { url: `${receiverUrl()}/ok` }, priority } });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { field: string } }).error.field).toBe("priority");
  });

  it("a PATCH of priority reorders an execution already waiting in its bucket", async () => {
    const target = { url: `${receiverUrl()}${uniquePath()}` };
    const at = clock.at + 30_000;
    const lows = await batch(12, { target, runAt: new Date(at).toISOString(), priority: 1 });
    const highs = await batch(12, { target, runAt: new Date(at).toISOString(), priority: 9 });
    // a 1 that shares its bucket with another 1 (12 in 8 buckets: there is one)
    const raised = lows.find((e) => lows.some((o) => o !== e && o.bucket === e.bucket))!;
    const bucket = raised.bucket;
    const res = await api(`/v1/jobs/${raised.jobId}`, { method: "PATCH", body: { priority: 9 } });
    expect(res.status).toBe(200);
    clock.travelTo(at + 1);
    const all = [...lows, ...highs];
    const order = (await drained(new Set(all.map((e) => e.id)))).filter((id) => all.find((e) => e.id === id)!.bucket === bucket);
    const lowIds = new Set(lows.map((e) => e.id).filter((id) => id !== raised.id));
    // the raised one goes with the 9s, before every 1 of its bucket, once
    expect(order.filter((id) => id === raised.id)).toHaveLength(1);
    expect(order.indexOf(raised.id)).toBeLessThan(order.findIndex((id) => lowIds.has(id)));
  });
});
