/**
 * Pull workers against the real local stack over HTTP: jobs target a pull queue, and workers
 * made with the client package's runPullWorker lease them with long polling (one request per
 * waitMs while idle), heartbeat, and complete or fail them. Reports the lag from an execution's
 * due time to the moment a waiting worker holds its lease (the figure README and the closing
 * note quote), and proves a killed worker's execution is completed by another one after its
 * lease expires, with the dead worker's late report rejected.
 */
import { describe, expect, it, onTestFailed } from "vitest";
import { type PullLease, runPullWorker, SchedulerClient, SchedulerError } from "../../packages/client/src/index.ts";
import { percentile, report, settledExecution, sleep, stackForFile } from "./harness.js";

const PORT = 18920;

const local = stackForFile({ port: PORT });
const { sink } = local;

function clientOf(): SchedulerClient {
  return new SchedulerClient({ baseUrl: local.stack.url, apiKey: local.creds.apiKey, retry: { initialDelayMs: 50 } });
}

describe("pull workers over HTTP", () => {
  it("two long-polling workers lease 60 executions due over 6 s, each once, and complete them; lag from due time to lease", async () => {
    onTestFailed(() => console.error(sink.text().slice(-4000)));
    const client = clientOf();
    const queue = "encode";
    const count = 60;
    const start = Date.now() + 2_000;
    const jobs = await client.jobs.createMany(
      Array.from({ length: count }, (_, i) => ({
        target: { pull: queue, payload: { i } },
        runAt: new Date(start + i * 100).toISOString(),
      })),
    );
    expect(jobs.every((r) => r.status === 201)).toBe(true);

    const leasedAt = new Map<string, { at: number; dueAt: number }>();
    const stop = new AbortController();
    const worker = () =>
      runPullWorker({
        client: clientOf(),
        queue,
        concurrency: 4,
        waitMs: 20_000,
        signal: stop.signal,
        handle: async (lease: PullLease) => {
          const now = Date.now();
          expect(leasedAt.has(lease.executionId)).toBe(false); // leased once
          leasedAt.set(lease.executionId, { at: now, dueAt: Date.parse(lease.dueAt) });
          await sleep(20);
        },
      });
    const workers = [worker(), worker()];
    try {
      for (let i = 0; i < 200 && leasedAt.size < count; i++) await sleep(100);
    } finally {
      stop.abort();
      await Promise.all(workers);
    }
    expect(leasedAt.size).toBe(count);
    const lags = [...leasedAt.values()].map((l) => l.at - l.dueAt);
    const last = jobs.at(-1)!;
    const settled = await settledExecution(local.api, (last as { job: { id: string } }).job.id, "succeeded", 1, 10_000);
    expect(settled.attempts).toHaveLength(1);
    report("pull-lag", {
      executions: count,
      workers: 2,
      concurrency: 4,
      lagMs: { p50: percentile(lags, 50), p99: percentile(lags, 99), max: Math.max(...lags) },
    });
    // within the scheduler's 2-second promise (a worker was waiting)
    expect(percentile(lags, 99)).toBeLessThan(2_000);
  });

  it("a killed worker's lease expires and another worker completes the execution; the dead one's late report is a 409 stale_lease", async () => {
    onTestFailed(() => console.error(sink.text().slice(-4000)));
    const client = clientOf();
    const queue = "resize";
    const job = await client.jobs.create({ target: { pull: queue }, delay: "300ms", retry: { initialDelayMs: 200, jitter: 0 } });
    // worker 1 leases for 1 s and dies (never heartbeats or reports)
    let first: PullLease[] = [];
    for (let i = 0; i < 50 && first.length === 0; i++) first = await client.pull.lease(queue, { leaseMs: 1_000, waitMs: 2_000 });
    expect(first).toHaveLength(1);
    // worker 2 long-polls; it gets the execution once the lease expired and the retry is due
    let second: PullLease[] = [];
    for (let i = 0; i < 20 && second.length === 0; i++) second = await client.pull.lease(queue, { leaseMs: 10_000, waitMs: 5_000 });
    expect(second).toMatchObject([{ executionId: first[0]!.executionId, attempt: 2 }]);
    const late = await client.pull.complete(first[0]!.token).catch((error: unknown) => error);
    expect(late).toBeInstanceOf(SchedulerError);
    expect(late).toMatchObject({ status: 409, code: "stale_lease" });
    expect(await client.pull.complete(second[0]!.token)).toMatchObject({ status: "succeeded" });
    const e = await settledExecution(local.api, job.id, "succeeded", 2, 10_000);
    expect(e.attempts.map((a) => a.outcome)).toEqual(["lease_expired", "succeeded"]);
  });
});
