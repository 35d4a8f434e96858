/**
 * Claims across a deploy (issue 35 item 4). For up to the deferred code update's max_delay (300 s,
 * wrangler's default: test/contract/README.md) a busy bucket runs the previous release's code, so a
 * claim of the consumer now may throw (a method the old object lacks, an argument it rejects) or not
 * be answered at all; then the bucket is reset and answers. The consumer must keep retrying for
 * longer than that, or the execution dies as poison, never having run.
 *
 * The fire queue is driven here as the platform drives it: each delivery of a message is a run of
 * the real consumer with its `attempts`; a retried message comes back after the delay the consumer
 * asked for (the virtual clock moves by it); past the fire queue's max_retries (read from
 * wrangler.toml) it goes to the dead-letter consumer instead. Both ways a claim fails are held to
 * it: the bucket's claim RPC throws (the whole message is retried), and the bucket answers `failed`
 * for the execution (it goes on alone in a new message: consumer/fire.ts passOn, CONSUMER_TRIES).
 *
 * These fail with the settings of 35be0c9 (delays 2, 4, 8 s, max_retries 3, CONSUMER_TRIES 4: the
 * execution is dead 14 s into the deploy) until the retries outlast the deferred update.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { Bucket } from "../../src/bucket/bucket";
import type { ClaimResult, ExecutionRef, FireGroup } from "../../src/bucket/protocol";
import { CONSUMER_TRIES } from "../../src/protocol/fire";
import wranglerToml from "../../wrangler.toml?raw";
import { counters, fileClock, fireQueues, jobRow, newExecution, received, receiverUrl, runAlarm, startFire, uniquePath } from "./helpers";

/** How long a bucket may run the previous release's code after a deploy: wrangler's default max_delay, in seconds. */
const DEFERRED_UPDATE_S = 300;
/** Deliveries followed here at most (bounded loops): far more than any sane max_retries. */
const MAX_DELIVERIES = 100;

const clock = fileClock(60 * 60_000);

/** Every fire-queue send, with the delay it asked for (the consumer's passOn sends delayed messages). */
const sent: { body: FireGroup; delaySeconds: number }[] = [];
beforeAll(() => {
  for (const queue of fireQueues()) {
    vi.spyOn(queue, "sendBatch").mockImplementation(async (messages, options) => {
      for (const m of messages) sent.push({ body: m.body, delaySeconds: m.delaySeconds ?? options?.delaySeconds ?? 0 });
      return { metadata: { metrics: { backlogCount: 0, backlogBytes: 0 } } };
    });
  }
});
afterAll(() => vi.restoreAllMocks());

/** The fire queues' max_retries as wrangler.toml sets them (the smallest, if they differ). */
function fireQueueMaxRetries(): number {
  const retries = wranglerToml
    .split("[[queues.consumers]]")
    .slice(1)
    .filter((block) => /^\s*queue\s*=\s*"fire(-\d+)?"/m.test(block))
    .map((block) => Number(/^\s*max_retries\s*=\s*(\d+)/m.exec(block)?.[1] ?? 3)); // the platform's default is 3
  if (retries.length === 0) throw new Error("wrangler.toml has no fire queue consumer");
  return Math.min(...retries);
}

/** A job due now, dispatched by its bucket's alarm: the group it sent. */
async function dispatched() {
  const path = uniquePath();
  const e = await newExecution({ target: { url: `${receiverUrl()}${path}` } });
  clock.travelTo(Math.max(clock.at, (await e.view())!.dueAt));
  sent.length = 0;
  await runAlarm(e.stub);
  const group = sent.find((s) => s.body.executions.some((x) => x.executionId === e.exe.id))?.body;
  if (!group) throw new Error("the alarm did not dispatch it");
  sent.length = 0;
  return { e, path, group };
}

/** Until `answersAt` (the reset), the bucket's claims fail as `how` says; then they are answered as usual. */
function claimsFailUntil(answersAt: number, how: "throws" | "failed") {
  const claim = Bucket.prototype.claim;
  return vi.spyOn(Bucket.prototype, "claim").mockImplementation(async function (this: Bucket, refs: ExecutionRef[]) {
    if (Date.now() >= answersAt) return claim.call(this, refs);
    if (how === "throws") throw new Error("Durable Object reset because its code was updated.");
    return refs.map((r): ClaimResult => ({ ok: false, executionId: r.executionId, code: "failed" }));
  });
}

describe(`a bucket that cannot claim for the ${DEFERRED_UPDATE_S} s of a deferred code update, then can (issue 35 item 4)`, () => {
  it("its claim RPC throws meanwhile: the message is retried until the bucket answers, then delivered once; nothing dead", async () => {
    const { e, path, group } = await dispatched();
    const spy = claimsFailUntil(clock.at + DEFERRED_UPDATE_S * 1_000, "throws");
    const before = await counters();
    const maxRetries = fireQueueMaxRetries();
    const delays: number[] = [];
    let deadLettered = false;
    try {
      for (let attempts = 1; attempts <= MAX_DELIVERIES; attempts++) {
        const run = await startFire([group], { attempts });
        const result = await run.done;
        if (result.explicitAcks.includes("m0")) break;
        const retried = run.retried.find((m) => m.msgId === "m0");
        expect(retried, `delivery ${attempts} was neither acked nor retried`).toBeDefined();
        if (attempts > maxRetries) {
          // the queue gives up on it: the dead-letter queue's consumer judges it
          deadLettered = true;
          await (await startFire([group], { queue: "fire-dlq" })).done;
          break;
        }
        delays.push(retried!.delaySeconds ?? 0);
        clock.advance((retried!.delaySeconds ?? 0) * 1_000);
      }
    } finally {
      spy.mockRestore();
    }
    await clock.flush(e.stub);
    const waited = delays.reduce((a, b) => a + b, 0);
    expect({ deadLettered, runStatus: (await jobRow(e.job.id))?.run_status }, `retried after ${delays.join(", ")} s (${waited} s)`).toEqual(
      {
        deadLettered: false,
        runStatus: "succeeded",
      },
    );
    expect(await received(path)).toHaveLength(1);
    expect(((await counters()).dead_total ?? 0) - (before.dead_total ?? 0)).toBe(0);
  });

  it("it answers `failed` for the execution meanwhile: passed on alone until the bucket answers, then delivered once; nothing dead", async () => {
    const { e, path, group } = await dispatched();
    const spy = claimsFailUntil(clock.at + DEFERRED_UPDATE_S * 1_000, "failed");
    const before = await counters();
    const delays: number[] = [];
    let message: FireGroup | undefined = group;
    try {
      for (let delivery = 1; message && delivery <= MAX_DELIVERIES; delivery++) {
        sent.length = 0;
        const result = await (await startFire([message])).done;
        expect(result.explicitAcks, `delivery ${delivery}`).toEqual(["m0"]); // claimed, or passed on in a new message
        const next = sent.find((s) => s.body.executions.some((x) => x.executionId === e.exe.id));
        message = next?.body;
        if (next) {
          delays.push(next.delaySeconds);
          clock.advance(next.delaySeconds * 1_000);
        }
      }
    } finally {
      spy.mockRestore();
    }
    await clock.flush(e.stub);
    const row = await jobRow(e.job.id);
    expect(
      { runStatus: row?.run_status, deadReason: row?.dead_reason },
      `passed on after ${delays.join(", ")} s (${delays.reduce((a, b) => a + b, 0)} s), CONSUMER_TRIES ${CONSUMER_TRIES}`,
    ).toEqual({ runStatus: "succeeded", deadReason: null });
    expect(await received(path)).toHaveLength(1);
    expect(((await counters()).dead_total ?? 0) - (before.dead_total ?? 0)).toBe(0);
  });
});
