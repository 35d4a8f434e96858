/**
 * What a deploy's reset of a bucket costs (issue 35 item 4): a busy bucket that does not hibernate
 * within the deferred code update's max_delay is reset (docs: durable-objects/deployments/
 * durable-objects-code-updates), and a reset loses what the bucket keeps in memory: leases and
 * dispatches (DESIGN.md "Ownership and cost": transient states live in memory, fenced by the epoch
 * the bucket raises when it starts). Measured here on one bucket with N executions running (leased,
 * their targets answering slowly) and M dispatched but not yet claimed, reset as leases.test.ts
 * restarts a bucket (evictDurableObject: the instance goes, its storage stays), then everything
 * driven to its end: the deliveries each execution's target got.
 *
 * Proves (and prints): each running execution is delivered once more (its first delivery's report
 * is a stale lease after the reset, invariant 3), each dispatched one exactly once (its message,
 * still queued, and the bucket's new dispatch are one delivery between them, invariant 7), nothing
 * is lost (invariant 4) and none dies: re-deliveries per reset = executions running at the reset.
 */
import { evictDurableObject } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import type { FireGroup } from "../../src/bucket/protocol";
import {
  alarmOf,
  bucketStub,
  CONFIG,
  captureFireGroupsForFile,
  counters,
  createJob,
  executionOf,
  fileClock,
  fire,
  jobRow,
  live,
  received,
  receiverUrl,
  runAlarm,
  startFire,
  uniquePath,
} from "./helpers";

const clock = fileClock(60 * 60_000);
const sent = captureFireGroupsForFile();

/** The slow target of the running executions: real milliseconds each delivery hangs (the reset happens meanwhile). */
const HANG_MS = 800;
const GROUP = CONFIG.FIRE_GROUP_SIZE;

interface Tracked {
  jobId: string;
  executionId: string;
  path: string;
}

/** Jobs due now until one bucket holds `count` of them (job ids land in buckets at random): that bucket and those jobs. */
async function jobsInOneBucket(count: number): Promise<{ bucket: number; jobs: Tracked[] }> {
  const byBucket = new Map<number, Tracked[]>();
  for (let i = 0; i < 50 * count; i++) {
    const path = uniquePath(`hang/${HANG_MS}`);
    const job = await createJob({ target: { url: `${receiverUrl()}${path}` } });
    const exe = (await executionOf(job.id))!;
    const mine = byBucket.get(exe.bucket) ?? [];
    mine.push({ jobId: job.id, executionId: exe.id, path });
    byBucket.set(exe.bucket, mine);
    if (mine.length === count) return { bucket: exe.bucket, jobs: mine };
  }
  throw new Error(`no bucket got ${count} jobs`);
}

/** Waits (bounded) until each of these paths has had a request: the deliveries have started. */
async function started(paths: string[]): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const got = await Promise.all(paths.map(async (p) => (await received(p)).length));
    if (got.every((n) => n > 0)) return;
    await scheduler.wait(10);
  }
  throw new Error("the deliveries did not start");
}

describe("a bucket reset by a deploy while executions run (issue 35 item 4)", () => {
  it(`re-delivers each execution that was running (${GROUP} of them) once, each dispatched one (${GROUP}) never; nothing lost, nothing dead`, async () => {
    const { bucket, jobs } = await jobsInOneBucket(2 * GROUP);
    const stub = bucketStub(bucket);
    const ids = new Set(jobs.map((j) => j.executionId));
    const before = await counters();

    // one alarm sends them all: two groups, one claimed by a consumer whose targets hang, one left queued
    clock.travelTo(Math.max(clock.at, ...(await Promise.all(jobs.map(async (j) => (await live(stub, j.executionId))!.dueAt)))));
    sent.length = 0;
    await runAlarm(stub);
    const groups = sent.splice(0).filter((g) => g.executions.some((e) => ids.has(e.executionId)));
    expect(groups.map((g) => g.executions.length)).toEqual([GROUP, GROUP]);
    const [runningGroup, queuedGroup] = groups as [FireGroup, FireGroup];
    const running = jobs.filter((j) => runningGroup.executions.some((e) => e.executionId === j.executionId));
    const dispatched = jobs.filter((j) => queuedGroup.executions.some((e) => e.executionId === j.executionId));
    const consumer = await startFire([runningGroup]);
    expect(consumer.ackedOnReturn).toEqual(["m0"]);
    await started(running.map((j) => j.path));
    const states = async (list: Tracked[]) => Promise.all(list.map(async (j) => (await live(stub, j.executionId))?.status));
    expect(await states(running)).toEqual(running.map(() => "running"));
    expect(await states(dispatched)).toEqual(dispatched.map(() => "dispatched"));

    // the deploy's reset: memory goes (leases, dispatches), storage stays
    await evictDurableObject(stub);
    await consumer.done; // the first deliveries end; their reports are stale now
    // the queued message is still in the queue and is delivered after the reset
    expect((await fire([queuedGroup])).explicitAcks).toEqual(["m0"]);

    // everything driven to its end: the restarted bucket's alarms, what they send, the consumer
    for (let step = 0; step < 50; step++) {
      const left = (await Promise.all(jobs.map(async (j) => (await live(stub, j.executionId))?.status))).filter((s) => s !== "succeeded");
      if (left.length === 0) break;
      const at = await alarmOf(stub);
      if (at !== null && at > clock.at) clock.travelTo(at);
      sent.length = 0;
      await runAlarm(stub);
      const mine = sent.splice(0).filter((g) => g.executions.some((e) => ids.has(e.executionId)));
      if (mine.length > 0) await fire(mine);
    }
    await clock.flush(stub);
    expect(new Set(await Promise.all(jobs.map(async (j) => (await jobRow(j.jobId))?.run_status)))).toEqual(new Set(["succeeded"]));

    const deliveries = async (list: Tracked[]) => Promise.all(list.map(async (j) => (await received(j.path)).length));
    const after = await counters();
    const delta = (name: string) => (after[name] ?? 0) - (before[name] ?? 0);
    const figures = {
      running: running.length,
      dispatched: dispatched.length,
      deliveriesOfRunning: await deliveries(running),
      deliveriesOfDispatched: await deliveries(dispatched),
      staleLeaseRejects: delta("stale_lease_rejects_total"),
      duplicatesSuppressed: delta("duplicates_suppressed_total"),
      dead: delta("dead_total"),
    };
    console.log(`deploy reset: ${JSON.stringify(figures)}`);
    expect(figures).toMatchObject({
      deliveriesOfRunning: running.map(() => 2),
      deliveriesOfDispatched: dispatched.map(() => 1),
      dead: 0,
    });
    // each first delivery's report came after the reset: rejected as stale, never applied
    expect(figures.staleLeaseRejects).toBe(running.length);
  }, 60_000);
});
