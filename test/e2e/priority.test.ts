/**
 * Priority over the real local stack (issue 29 item 4): one flow-control key of parallelism 1
 * and a slow target (1,200 ms an answer). Four jobs of priority 1 fall due first, four of
 * priority 9 300 ms later. The first 1 takes the key's one slot (nothing else is due yet); every
 * slot after it goes to a 9 while one waits, although the other 1s were due earlier, and then
 * to the 1s. Without priority the 1s would all go first (due order). Each job succeeds once.
 *
 * The order is the receiver's own arrival order (one Node thread). The 300 ms between the due
 * times and the 1,200 ms a delivery holds the slot leave the 9s about 900 ms to reach the key
 * (alarm, queue, claim, ask) before the first slot frees.
 */
import { describe, expect, it, onTestFailed } from "vitest";
import { eventually, stackForFile } from "./harness.js";

const PORT = 18929;
const ROUTE = "/prioritized";
const HANDLER_MS = 1_200;
const EACH = 4;

const local = stackForFile({ port: PORT, routes: { [ROUTE]: { kind: "slow", ms: HANDLER_MS } } });
const { receiver, sink } = local;

describe("priority", () => {
  it("on a key of parallelism 1, the 9s waiting are delivered before the 1s due earlier; each once", async () => {
    onTestFailed(() => console.error(sink.text().slice(-6000)));
    const dueAt = Date.now() + 3_000;
    const flowControl = { key: "prioritized", parallelism: 1 };
    const job = (priority: number, at: number, i: number) => ({
      target: { url: `${receiver.url}${ROUTE}`, body: { priority, i } },
      runAt: new Date(at).toISOString(),
      flowControl,
      priority,
    });
    const lows = await local.api.createJobs(Array.from({ length: EACH }, (_, i) => job(1, dueAt, i)));
    const highs = await local.api.createJobs(Array.from({ length: EACH }, (_, i) => job(9, dueAt + 300, i)));
    expect(Date.now()).toBeLessThan(dueAt); // precondition: all accepted before any fell due
    expect(highs.every((j) => (j as unknown as { priority: number }).priority === 9)).toBe(true);
    const priorityOf = new Map([...lows.map((j) => [j.id, 1] as const), ...highs.map((j) => [j.id, 9] as const)]);

    await eventually(`all ${2 * EACH} delivered`, () => receiver.to(ROUTE).filter((r) => r.status === 200).length >= 2 * EACH, 60_000, 100);
    const arrivals = receiver.to(ROUTE).map((r) => priorityOf.get(r.jobId));
    // the first 1 had the slot alone; then every 9, then the other 1s
    expect(arrivals).toEqual([1, 9, 9, 9, 9, 1, 1, 1]);
    expect(new Set(receiver.to(ROUTE).map((r) => r.jobId)).size).toBe(2 * EACH); // none twice
  });
});
