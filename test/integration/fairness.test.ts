/**
 * Fairness between tenants (issue 13, item 4): a bucket keeps only its dispatch window of fire
 * messages in the first-in-first-out queue (core/dispatch-window.ts) and fills it in turns per
 * tenant (TenantDueQueues), so one tenant's backlog waits in the bucket and another tenant's due
 * job takes the next free slot instead of the place behind the whole backlog.
 *
 * Time: one file-wide virtual clock; the fire queue is captured, and claims are made here.
 */
import { describe, expect, it } from "vitest";
import type { FireMessage } from "../../src/bucket/protocol";
import { oneOffExecutionId } from "../../src/core/id";
import {
  api,
  bucketStub,
  CONFIG,
  captureFiresForFile,
  createJob,
  executionOf,
  fileClock,
  KEYS,
  receiverUrl,
  runAlarm,
  sendAndConsume,
  uniquePath,
} from "./helpers";

const clock = fileClock(10 * 60_000);
const sent = captureFiresForFile();
const BACKLOG = 800;

const claimAll = (messages: FireMessage[]) =>
  Promise.all(
    [...Map.groupBy(messages, (m) => m.bucket)].map(([bucket, ms]) =>
      bucketStub(bucket).claim(ms.map((m) => ({ executionId: m.executionId, dueAt: m.dueAt }))),
    ),
  );

describe("one tenant's backlog does not hold another tenant's jobs", () => {
  it("the backlog waits in its bucket; another tenant's later job is sent in the first send, and the backlog then drains whole", async () => {
    const runAt = new Date(clock.at + 60_000).toISOString();
    const target = { url: `${receiverUrl()}${uniquePath()}` };
    const backlogIds = new Set<string>();
    for (let i = 0; i < BACKLOG; i += 400) {
      const res = await api("/v1/jobs/batch", { method: "POST", body: { jobs: Array.from({ length: 400 }, () => ({ target, runAt })) } });
      expect(res.status).toBe(200);
      for (const r of ((await res.json()) as { results: { job: { id: string } }[] }).results) backlogIds.add(oneOffExecutionId(r.job.id));
    }
    // globex's job is due a second after all of acme's backlog
    const small = await createJob({ target, runAt: new Date(clock.at + 61_000).toISOString() }, KEYS.globex);
    const smallExe = (await executionOf(small.id))!;
    clock.travelTo(clock.at + 61_000);

    const buckets = Array.from({ length: CONFIG.BUCKETS }, (_, b) => b);
    await runAlarm(bucketStub(smallExe.bucket));
    const firstSend = sent.splice(0);
    // in due order the globex job would be sent after every acme job of its bucket (about 200)
    expect(firstSend.map((m) => m.executionId)).toContain(smallExe.id);
    // the queue got the window, not the backlog
    expect(firstSend.length).toBeLessThanOrEqual(16);
    await claimAll(firstSend);

    // the rest drains as claims come back (the window grows with them): each execution sent once
    const rest = await sendAndConsume(buckets, sent, () => true, BACKLOG + 1 - firstSend.length, claimAll);
    const ids = [...firstSend, ...rest].map((m) => m.executionId);
    expect(new Set(ids).size).toBe(ids.length);
    expect(new Set(ids)).toEqual(new Set([...backlogIds, smallExe.id]));
  });
});
