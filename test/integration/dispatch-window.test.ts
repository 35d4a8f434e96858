/**
 * The dispatch window and lost sends (issue 13): a bucket keeps only its window of unclaimed fire
 * messages in the queue, so messages the queue lost must not close it for good. A message
 * unclaimed for DISPATCH_TIMEOUT_MS stops counting, the bucket wakes by itself then, and due work
 * goes on (the lost ones are re-sent in their own turn, once overtaken).
 *
 * A file of its own: the windows start at their initial size here. Time: one file-wide virtual
 * clock; the fire queue is captured and nothing is claimed.
 */
import { describe, expect, it } from "vitest";
import type { FireMessage } from "../../src/bucket/protocol";
import { alarmOf, api, bucketStub, CONFIG, captureFiresForFile, fileClock, receiverUrl, runAlarm, uniquePath } from "./helpers";

const clock = fileClock(10 * 60_000);
const sent = captureFiresForFile();

describe("lost sends never close the window", () => {
  it("a message unclaimed for DISPATCH_TIMEOUT_MS stops counting: the bucket wakes by itself and sends what is due", async () => {
    const target = { url: `${receiverUrl()}${uniquePath()}` };
    const res = await api("/v1/jobs/batch", { method: "POST", body: { jobs: Array.from({ length: 160 }, () => ({ target })) } });
    expect(res.status).toBe(200);
    const buckets = Array.from({ length: CONFIG.BUCKETS }, (_, b) => b);
    for (const b of buckets) await runAlarm(bucketStub(b));
    // every bucket filled its window (160 over the file's buckets: more than 16 each) and the
    // queue lost every message: nothing is ever claimed
    const lost = sent.splice(0);
    const sentBy = (b: number, messages: FireMessage[]) => messages.filter((m) => m.bucket === b).length;
    for (const b of buckets) expect(sentBy(b, lost)).toBe(16);
    const bucket = bucketStub(0);
    // while the window is full, an alarm sends nothing new
    await runAlarm(bucket);
    expect(sent.filter((m) => m.bucket === 0)).toEqual([]);
    // the alarm is armed no later than the moment the unclaimed messages stop counting
    const reopensAt = clock.at + CONFIG.DISPATCH_TIMEOUT_MS + CONFIG.ALARM_QUANTUM_MS;
    const armed = await alarmOf(bucket);
    expect(armed).not.toBeNull();
    expect(armed!).toBeLessThanOrEqual(reopensAt);
    clock.travelTo(reopensAt);
    await runAlarm(bucket);
    // due work goes on: fresh messages for executions not sent before
    const lostIds = new Set(lost.map((m) => m.executionId));
    const next = sent.splice(0).filter((m) => m.bucket === 0);
    expect(next.length).toBeGreaterThan(0);
    expect(next.some((m) => !lostIds.has(m.executionId))).toBe(true);
  });
});
