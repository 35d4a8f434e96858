/**
 * Delivery groups (README "Delivery groups"): a fire message carries what one alarm pass sends of
 * a bucket, claimed with one RPC and reported per bucket; everything per execution stays per
 * execution (lease, token, fencing, webhook-id, retries, dead letter). Time: one file-wide virtual
 * clock; the fire queue is captured as the groups the buckets send, and the tests feed them to the
 * consumer and the dead-letter consumer.
 */
import { evictDurableObject, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { Bucket } from "../../src/bucket/bucket";
import type { ClaimResult, CompletionReport, FireGroup, LeaseGrant } from "../../src/bucket/protocol";
import { CONSUMER_TRIES } from "../../src/protocol/fire";
import {
  api,
  bucketSql,
  bucketStub,
  CONFIG,
  captureFireGroupsForFile,
  counters,
  createJob,
  type Execution,
  executionOf,
  fileClock,
  fire,
  jobRow,
  KEYS,
  live,
  newExecution,
  received,
  receiverUrl,
  runAlarm,
  uniquePath,
} from "./helpers";

const clock = fileClock(10 * 60_000);
const groups = captureFireGroupsForFile();

type Exe = Execution & { path: string };

/**
 * `n` one-off jobs due now that share a bucket, each delivered to its own receiver path (jobs
 * that land elsewhere are canceled before any alarm runs).
 */
async function sameBucket(n: number): Promise<{ bucket: number; exes: Exe[] }> {
  const byBucket = new Map<number, Exe[]>();
  for (let i = 0; i < 16 * n; i++) {
    const path = uniquePath();
    const e = { ...(await newExecution({ target: { url: `${receiverUrl()}${path}` } })), path };
    const list = byBucket.get(e.exe.bucket) ?? [];
    list.push(e);
    byBucket.set(e.exe.bucket, list);
    if (list.length === n) {
      for (const [b, others] of byBucket)
        if (b !== e.exe.bucket) for (const o of others) expect((await api(`/v1/jobs/${o.job.id}`, { method: "DELETE" })).status).toBe(200);
      return { bucket: e.exe.bucket, exes: list };
    }
  }
  throw new Error(`no ${n} jobs landed in one bucket`);
}

/** Runs the bucket's alarm and takes the groups it sent. */
async function alarmSends(e: Exe): Promise<FireGroup[]> {
  groups.splice(0);
  await runAlarm(e.stub);
  return groups.splice(0).filter((g) => g.bucket === e.exe.bucket);
}

const statusOf = async (e: Exe) => (await live(e.stub, e.exe.id))?.status;
const delta = (a: Record<string, number>, b: Record<string, number>, name: string) => (b[name] ?? 0) - (a[name] ?? 0);

describe("delivery groups", () => {
  it("sends what one alarm pass fires of a bucket as one message, claimed with one RPC; each execution keeps its own lease, token and webhook-id", async () => {
    const { exes } = await sameBucket(CONFIG.FIRE_GROUP_SIZE);
    const start = await counters();
    const sent = await alarmSends(exes[0]!);
    expect(sent).toHaveLength(1);
    // counted as billed: one queue message for the group, each execution fired
    const dispatched = await counters();
    expect(delta(start, dispatched, "fire_messages_total")).toBe(1);
    expect(delta(start, dispatched, "fired_total")).toBe(exes.length);
    expect(sent[0]!.v).toBe(2);
    expect(sent[0]!.executions.map((x) => x.executionId).sort()).toEqual(exes.map((e) => e.exe.id).sort());

    const claim = vi.spyOn(Bucket.prototype, "claim");
    const complete = vi.spyOn(Bucket.prototype, "complete");
    try {
      const result = await fire(sent);
      expect(result.explicitAcks).toEqual(["m0"]);
      expect(claim).toHaveBeenCalledTimes(1);
      expect(claim.mock.calls[0]![0]).toHaveLength(exes.length);
      const leases = (await claim.mock.results[0]!.value) as ClaimResult[];
      const granted = leases.filter((l): l is LeaseGrant => l.ok);
      expect(granted).toHaveLength(exes.length);
      expect(new Set(granted.map((l) => l.token)).size).toBe(exes.length);
      expect(new Set(granted.map((l) => l.seq)).size).toBe(exes.length);
      // every execution reported exactly once, in as few RPCs as the deliveries' timing allows
      const reported = complete.mock.calls.flatMap(([reports]) => reports.map((r) => r.executionId));
      expect(reported.sort()).toEqual(exes.map((e) => e.exe.id).sort());
      expect(complete.mock.calls.length).toBeLessThanOrEqual(exes.length);
    } finally {
      claim.mockRestore();
      complete.mockRestore();
    }
    for (const e of exes) {
      const requests = await received(e.path);
      expect(requests).toHaveLength(1);
      expect(requests[0]!.headers["webhook-id"]).toBe(e.exe.id);
      expect(await statusOf(e)).toBe("succeeded");
    }
    await clock.flush(exes[0]!.stub);
    for (const e of exes) expect((await jobRow(e.job.id))?.run_status).toBe("succeeded");
  });

  it("splits a pass into groups of FIRE_GROUP_SIZE", async () => {
    const { exes } = await sameBucket(CONFIG.FIRE_GROUP_SIZE + 2);
    const sent = await alarmSends(exes[0]!);
    expect(sent.map((g) => g.executions.length)).toEqual([CONFIG.FIRE_GROUP_SIZE, 2]);
    const result = await fire(sent);
    expect(result.explicitAcks.sort()).toEqual(["m0", "m1"]);
    for (const e of exes) expect(await received(e.path)).toHaveLength(1);
    await clock.flush(exes[0]!.stub);
  });

  it("one execution whose claim fails never harms the others of its group: they run once, it goes on alone in a message of its own, and only it ends dead as poison", async () => {
    const { exes } = await sameBucket(3);
    const [bad, ...healthy] = exes as [Exe, ...Exe[]];
    // its stored spec is unreadable: its claim throws, every time
    await bucketSql(bad.stub, "UPDATE executions SET spec = 'not json' WHERE id = ?", bad.exe.id);
    const sent = await alarmSends(bad);
    expect(sent).toHaveLength(1);
    const start = await counters();

    // the group is acked (its healthy executions are leased); the failed one is passed on alone
    expect((await fire(sent)).explicitAcks).toEqual(["m0"]);
    let passed = groups.splice(0);
    const badRef = sent[0]!.executions.find((x) => x.executionId === bad.exe.id)!;
    expect(passed).toEqual([{ v: 2, bucket: bad.exe.bucket, executions: [badRef], tries: 1 }]);
    for (const e of healthy) {
      expect(await received(e.path)).toHaveLength(1);
      expect(await statusOf(e)).toBe("succeeded");
    }
    expect(await statusOf(bad)).toBe("dispatched");

    // it fails again each time, counting its tries; at CONSUMER_TRIES it is marked dead as poison
    for (let tries = 2; tries < CONSUMER_TRIES; tries++) {
      expect((await fire(passed)).explicitAcks).toEqual(["m0"]);
      const next = groups.splice(0);
      expect(next).toEqual([{ ...passed[0]!, tries }]);
      passed = next;
    }
    expect((await fire(passed)).explicitAcks).toEqual(["m0"]);
    expect(groups.splice(0)).toEqual([]);
    expect(await statusOf(bad)).toBe("dead");
    for (const e of healthy) expect(await statusOf(e)).toBe("succeeded");
    // the messages passed on are billed like any other
    expect(delta(start, await counters(), "fire_messages_total")).toBe(CONSUMER_TRIES - 1);
    await clock.flush(bad.stub);
    expect(await jobRow(bad.job.id)).toMatchObject({ run_status: "dead", dead_reason: "poison" });
    for (const e of healthy) expect((await jobRow(e.job.id))?.run_status).toBe("succeeded");
  });

  it("a group whose bucket cannot be reached is retried whole, and the dead-letter queue judges each of its executions", async () => {
    const { exes } = await sameBucket(2);
    const sent = await alarmSends(exes[0]!);
    const claim = vi.spyOn(Bucket.prototype, "claim").mockRejectedValue(new Error("bucket unavailable"));
    try {
      expect((await fire(sent)).retryMessages.map((m) => m.msgId)).toEqual(["m0"]);
    } finally {
      claim.mockRestore();
    }
    // meanwhile one of them was claimed by a copy and finished: the dead letter kills only the other
    const [done, stuck] = exes as [Exe, Exe];
    const lone = sent[0]!.executions.find((x) => x.executionId === done.exe.id)!;
    expect((await fire([{ ...sent[0]!, executions: [lone] }])).explicitAcks).toEqual(["m0"]);
    expect((await fire(sent, { queue: "fire-dlq" })).explicitAcks).toEqual(["m0"]);
    expect(await statusOf(done)).toBe("succeeded");
    expect(await statusOf(stuck)).toBe("dead");
    await clock.flush(done.stub);
  });

  it("a redelivered group is suppressed per execution: while running, once finished, and once its outcomes are in D1", async () => {
    const { exes } = await sameBucket(3);
    const sent = await alarmSends(exes[0]!);
    // one of the group is claimed first by another copy (a duplicate delivery racing the group)
    const lone = sent[0]!.executions[0]!;
    const start = await counters();
    expect((await fire([{ ...sent[0]!, executions: [lone] }])).explicitAcks).toEqual(["m0"]);
    const group = await fire(sent);
    expect(group.explicitAcks).toEqual(["m0"]);
    expect(delta(start, await counters(), "duplicates_suppressed_total")).toBe(1);
    for (const e of exes) expect(await received(e.path)).toHaveLength(1);

    const finished = await counters();
    expect((await fire(sent)).explicitAcks).toEqual(["m0"]);
    expect(delta(finished, await counters(), "duplicates_suppressed_total")).toBe(exes.length);
    await clock.flush(exes[0]!.stub);
    const flushed = await counters();
    expect((await fire(sent)).explicitAcks).toEqual(["m0"]);
    expect(delta(flushed, await counters(), "duplicates_suppressed_total")).toBe(exes.length);
    for (const e of exes) {
      expect(await received(e.path)).toHaveLength(1);
      expect((await jobRow(e.job.id))?.run_status).toBe("succeeded");
    }
  });

  it("a group split across a bucket restart loses nothing: what was reported stays done, what was not runs again with the same webhook-id, and the old reports are stale", async () => {
    const { exes } = await sameBucket(4);
    const sent = await alarmSends(exes[0]!);
    expect(sent).toHaveLength(1);
    const unreported = new Set(exes.slice(2).map((e) => e.exe.id));
    const lost: CompletionReport[] = [];
    const realComplete = Bucket.prototype.complete;
    const complete = vi.spyOn(Bucket.prototype, "complete").mockImplementation(async function (this: Bucket, reports) {
      lost.push(...reports.filter((r) => unreported.has(r.executionId)));
      return realComplete.call(
        this,
        reports.filter((r) => !unreported.has(r.executionId)),
      );
    });
    try {
      expect((await fire(sent)).explicitAcks).toEqual(["m0"]);
    } finally {
      complete.mockRestore();
    }
    expect(lost).toHaveLength(2);
    await clock.flush(exes[0]!.stub); // the two reported outcomes reach D1 and leave the bucket
    const stub = exes[0]!.stub;
    await runInDurableObject(stub, () => undefined);
    await evictDurableObject(stub);

    expect((await stub.complete(lost)).map((r) => r.ok)).toEqual([false, false]);
    for (const e of exes) expect(await statusOf(e)).toBe(unreported.has(e.exe.id) ? "scheduled" : undefined);
    const again = await alarmSends(exes[0]!);
    expect(again.flatMap((g) => g.executions.map((x) => x.executionId)).sort()).toEqual([...unreported].sort());
    expect((await fire(again)).explicitAcks).toEqual(["m0"]);
    await clock.flush(stub);
    for (const e of exes) {
      const requests = await received(e.path);
      expect(requests).toHaveLength(unreported.has(e.exe.id) ? 2 : 1);
      for (const r of requests) expect(r.headers["webhook-id"]).toBe(e.exe.id);
      expect((await jobRow(e.job.id))?.run_status).toBe("succeeded");
    }
  });

  it("takes the single-execution messages of earlier versions (v1) still queued at an upgrade", async () => {
    const { exes } = await sameBucket(1);
    const [group] = await alarmSends(exes[0]!);
    const x = group!.executions[0]!;
    const result = await fire([{ v: 1, executionId: x.executionId, bucket: group!.bucket, tenant: x.tenant, dueAt: x.dueAt }]);
    expect(result.explicitAcks).toEqual(["m0"]);
    expect(await received(exes[0]!.path)).toHaveLength(1);
    await clock.flush(exes[0]!.stub);
  });

  it("acks and counts a malformed group: empty, or one execution malformed", async () => {
    const malformed = async () =>
      (await bucketStub(0).metrics()).counters.filter((c) => c.name === "malformed_messages_total").reduce((sum, c) => sum + c.value, 0);
    const before = await malformed();
    const result = await fire([
      { v: 2, bucket: 0, executions: [] },
      { v: 2, bucket: 0, executions: [{ executionId: "nope", tenant: "acme", dueAt: 1 }] },
    ]);
    expect(result.explicitAcks.sort()).toEqual(["m0", "m1"]);
    expect(result.retryMessages).toEqual([]);
    expect((await malformed()) - before).toBe(2);
  });
});

// ---- groups mixing kinds and tenants (found by review: a whole group retried to the dead-letter
// queue killed its healthy siblings; now only what the consumer failed on goes on, alone)

type Made = { jobId: string; id: string; bucket: number; key: string };

async function make(body: Record<string, unknown>, key: string): Promise<Made> {
  const job = await createJob(body, key);
  const exe = (await executionOf(job.id))!;
  return { jobId: job.id, id: exe.id, bucket: exe.bucket, key };
}

/** One job of each kind, all in one bucket; the others are deleted before any alarm. */
async function oneBucket(kinds: { body: () => Record<string, unknown>; key: string }[]): Promise<Made[]> {
  const byBucket = new Map<number, Made[][]>();
  for (let round = 0; round < 40; round++) {
    for (const [k, kind] of kinds.entries()) {
      const m = await make(kind.body(), kind.key);
      const slots = byBucket.get(m.bucket) ?? kinds.map(() => []);
      slots[k]!.push(m);
      byBucket.set(m.bucket, slots);
    }
    for (const slots of byBucket.values()) {
      if (!slots.every((x) => x.length > 0)) continue;
      const chosen = slots.map((x) => x[0]!);
      for (const all of byBucket.values())
        for (const m of all.flat())
          if (!chosen.includes(m)) expect((await api(`/v1/jobs/${m.jobId}`, { method: "DELETE" }, m.key)).status).toBe(200);
      return chosen;
    }
  }
  throw new Error("no bucket got one of each kind");
}

async function leasePull(queue: string, key: string): Promise<string[]> {
  const res = await api(`/v1/pull/${queue}/lease`, { method: "POST", body: { max: 5 } }, key);
  expect(res.status).toBe(200);
  return ((await res.json()) as { leases: { executionId: string }[] }).leases.map((l) => l.executionId);
}

/** Feeds a bucket's passed-on group back until the consumer gives up on it (CONSUMER_TRIES). */
async function failUntilPoisoned(bucket: number): Promise<void> {
  for (let i = 0; i < CONSUMER_TRIES; i++) {
    const passed = groups.splice(0).filter((g) => g.bucket === bucket);
    if (passed.length === 0) return;
    expect((await fire(passed)).explicitAcks).toEqual(passed.map((_g, j) => `m${j}`));
  }
  throw new Error("still passed on after CONSUMER_TRIES");
}

let queues = 0;
const queueName = (prefix: string) => `${prefix}-${++queues}`;

describe("delivery groups mixing kinds and tenants", () => {
  it("a pull execution held by its queue stays offered when a sibling's claim keeps failing; a worker leases it", async () => {
    const queue = queueName("rq");
    const [offered, bad] = await oneBucket([
      { body: () => ({ target: { pull: queue } }), key: KEYS.acme },
      { body: () => ({ target: { url: `${receiverUrl()}${uniquePath()}` } }), key: KEYS.acme },
    ]);
    const stub = bucketStub(offered!.bucket);
    await bucketSql(stub, "UPDATE executions SET spec = 'not json' WHERE id = ?", bad!.id);
    groups.splice(0);
    await runAlarm(stub);
    // a pull offer and a delivery share a group when the bucket does not know the offer's kind
    // (a restart since it applied the job): one message of both, as such a bucket sends it
    const sent = [
      {
        v: 2 as const,
        bucket: offered!.bucket,
        executions: groups.splice(0).flatMap((g) => (g.bucket === offered!.bucket ? g.executions : [])),
      },
    ];
    expect(sent[0]!.executions.map((x) => x.executionId).sort()).toEqual([offered!.id, bad!.id].sort());
    expect((await fire(sent)).explicitAcks).toEqual(["m0"]);
    await failUntilPoisoned(offered!.bucket);
    expect((await live(stub, bad!.id))?.status).toBe("dead");
    expect((await live(stub, offered!.id))?.status).toBe("dispatched");
    expect(await leasePull(queue, KEYS.acme)).toEqual([offered!.id]);
  });

  it("another tenant's pull queue refusing its offer never touches this tenant's held offer; the refused one is offered again when its queue is back", async () => {
    const mine = queueName("mine");
    const theirs = queueName("theirs");
    const [acmeOffer, globexOffer] = await oneBucket([
      { body: () => ({ target: { pull: mine } }), key: KEYS.acme },
      { body: () => ({ target: { pull: theirs } }), key: KEYS.globex },
    ]);
    const stub = bucketStub(acmeOffer!.bucket);
    groups.splice(0);
    await runAlarm(stub);
    const sent = groups.splice(0).filter((g) => g.bucket === acmeOffer!.bucket);
    expect(sent).toHaveLength(1); // both pull offers: one group
    expect(sent[0]!.executions.map((x) => x.tenant).sort()).toEqual(["acme", "globex"]);
    const real = env.PULL_QUEUE.getByName.bind(env.PULL_QUEUE);
    const spy = vi.spyOn(env.PULL_QUEUE, "getByName").mockImplementation((name: string) => {
      if (name.startsWith("globex")) return { offer: () => Promise.reject(new Error("overloaded")) } as unknown as ReturnType<typeof real>;
      return real(name);
    });
    try {
      expect((await fire(sent)).explicitAcks).toEqual(["m0"]);
    } finally {
      spy.mockRestore();
    }
    const passed = groups.splice(0);
    expect(passed).toEqual([
      { v: 2, bucket: acmeOffer!.bucket, executions: [expect.objectContaining({ executionId: globexOffer!.id })], tries: 1 },
    ]);
    expect(await leasePull(mine, KEYS.acme)).toEqual([acmeOffer!.id]);
    // globex's queue is back: the passed-on group is offered and held
    expect((await fire(passed)).explicitAcks).toEqual(["m0"]);
    expect(groups.splice(0)).toEqual([]);
    expect(await leasePull(theirs, KEYS.globex)).toEqual([globexOffer!.id]);
  });

  it("puts pull targets' executions in groups of FIRE_GROUP_SIZE_PULL (offers open no connection) and the others in groups of FIRE_GROUP_SIZE", async () => {
    const queue = queueName("big");
    const pulls = CONFIG.FIRE_GROUP_SIZE + 2;
    const kinds = [
      ...Array.from({ length: pulls }, () => ({ body: () => ({ target: { pull: queue } }), key: KEYS.acme })),
      { body: () => ({ target: { url: `${receiverUrl()}${uniquePath()}` } }), key: KEYS.acme },
    ];
    const made = await oneBucket(kinds);
    const stub = bucketStub(made[0]!.bucket);
    groups.splice(0);
    await runAlarm(stub);
    const sent = groups.splice(0).filter((g) => g.bucket === made[0]!.bucket);
    const pullIds = made.slice(0, pulls).map((m) => m.id);
    expect(sent.map((g) => g.executions.map((x) => x.executionId).sort())).toEqual([[made[pulls]!.id], [...pullIds].sort()]);
    expect(CONFIG.FIRE_GROUP_SIZE_PULL).toBeGreaterThanOrEqual(pulls);
    expect((await fire(sent)).explicitAcks).toEqual(["m0", "m1"]);
    // every offer held by its queue: workers lease all of them
    const leased: string[] = [];
    for (let i = 0; i < 4 && leased.length < pulls; i++) leased.push(...(await leasePull(queue, KEYS.acme)));
    expect(leased.sort()).toEqual([...pullIds].sort());
  });

  it("after a bucket restart, a sibling whose success had not reached D1 runs again, never killed by the failing one", async () => {
    const path = uniquePath();
    const [healthy, bad] = await oneBucket([
      { body: () => ({ target: { url: `${receiverUrl()}${path}` } }), key: KEYS.acme },
      { body: () => ({ target: { url: `${receiverUrl()}${uniquePath()}` } }), key: KEYS.acme },
    ]);
    const stub = bucketStub(healthy!.bucket);
    await bucketSql(stub, "UPDATE executions SET spec = 'not json' WHERE id = ?", bad!.id);
    groups.splice(0);
    await runAlarm(stub);
    const sent = groups.splice(0).filter((g) => g.bucket === healthy!.bucket);
    expect((await fire(sent)).explicitAcks).toEqual(["m0"]);
    expect((await live(stub, healthy!.id))?.status).toBe("succeeded"); // delivered, not flushed yet
    await runInDurableObject(stub, () => undefined);
    await evictDurableObject(stub);
    await failUntilPoisoned(healthy!.bucket);
    expect((await live(stub, bad!.id))?.status).toBe("dead");
    expect((await live(stub, healthy!.id))?.status).toBe("scheduled"); // runs again: a duplicate, never a loss
    groups.splice(0);
    await runAlarm(stub);
    const again = groups.splice(0).filter((g) => g.bucket === healthy!.bucket);
    expect(again.flatMap((g) => g.executions.map((x) => x.executionId))).toContain(healthy!.id);
    expect((await fire(again)).explicitAcks).toHaveLength(again.length);
    expect(await received(path)).toHaveLength(2);
    expect((await live(stub, healthy!.id))?.status).toBe("succeeded");
  });
});
