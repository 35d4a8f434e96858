/**
 * Isolation (issue 13, item 1): a slow or hanging target delays only its own executions. The
 * consumer acks a batch once its executions are claimed and delivers in waitUntil; with the
 * queue_consumer_no_wait_for_wait_until flag (wrangler.toml) the queue hands out the next batch
 * while a target still hangs, and the lease, heartbeated, keeps the hanging attempt alive.
 *
 * Time: one file-wide virtual clock for the buckets; the targets' hang is real (the receiver's
 * /hang/<ms>). The fire queue is captured for the file: tests feed the consumer themselves.
 */
import { describe, expect, it, onTestFinished, vi } from "vitest";
import {
  captureFiresForFile,
  dispatchAll,
  dispatchOf,
  fileClock,
  fire,
  newExecution,
  received,
  receiverUrl,
  startFire,
  uniquePath,
} from "./helpers";

const clock = fileClock(10 * 60_000);
const sent = captureFiresForFile();
const dispatch = dispatchOf(clock, sent);

const HANG_MS = 1_500;

describe("a slow target holds only its own execution", () => {
  it("acks a batch once its executions are claimed; a later batch's target is reached and its outcome recorded while the earlier target still hangs", async () => {
    const hangPath = uniquePath(`hang/${HANG_MS}`);
    const slow = await newExecution({ target: { url: `${receiverUrl()}${hangPath}` } });
    const slowMessage = await dispatch(slow);
    const fast = await newExecution({ target: { url: `${receiverUrl()}${uniquePath()}` } });
    const fastMessage = await dispatch(fast);

    const slowBatch = await startFire([slowMessage]);
    // the handler has returned (the queue may move on): the message is acked, the attempt runs
    expect(slowBatch.ackedOnReturn).toEqual(["m0"]);
    expect((await slow.view())?.status).toBe("running");

    const fastBatch = await startFire([fastMessage]);
    expect(fastBatch.ackedOnReturn).toEqual(["m0"]);
    await fastBatch.done;
    expect((await fast.view())?.status).toBe("succeeded");
    // the slow target was called and has not answered yet
    expect(await received(hangPath)).toHaveLength(1);
    expect((await slow.view())?.status).toBe("running");

    await slowBatch.done;
    expect((await slow.view())?.status).toBe("succeeded");
  });
});

describe("what a batch's deliveries tell their bucket and keys travels together", () => {
  it("deliveries that end together report to their bucket in one complete request, not one for the first and one for the rest", async () => {
    const executions = [];
    for (let i = 0; i < 8; i++) {
      const url = `${receiverUrl()}${uniquePath()}`;
      executions.push({ url, ...(await newExecution({ target: { url } })) });
    }
    const messages = await dispatchAll(executions, clock, sent);
    // the bucket holding the most of them (8 over the file's buckets: at least 2 share one)
    const byBucket = Map.groupBy(executions, (e) => e.exe.bucket);
    const [, most] = [...byBucket].sort((a, b) => b[1].length - a[1].length)[0]!;
    expect(most.length).toBeGreaterThanOrEqual(2);
    const stub = most[0]!.stub;
    // that bucket's targets answer together, once all of them were asked (at most 250 ms of real
    // time: a loaded machine must not spread the ends past the consumer's gathering), the others at once
    const theirs = new Set(most.map((e) => e.url));
    let asked = 0;
    let answerAll = () => {};
    const together = new Promise<void>((resolve) => {
      answerAll = resolve;
      setTimeout(resolve, 250);
    });
    const target = vi.spyOn(globalThis, "fetch").mockImplementation(async (input) => {
      if (theirs.has(new Request(input).url)) {
        if (++asked === theirs.size) answerAll();
        await together;
      }
      return new Response("ok");
    });
    onTestFinished(() => target.mockRestore());
    const requests = async () => (await stub.metrics()).counters.find((c) => c.name === "do_requests_total")?.value ?? 0;
    const before = await requests();
    await fire(messages);
    // one claim, one complete, and the second metrics read itself
    expect((await requests()) - before).toBe(3);
    for (const e of most) expect((await e.view())?.status).toBe("succeeded");
  });
});
