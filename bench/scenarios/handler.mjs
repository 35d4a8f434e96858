// handler: N one-off jobs in threes due at the same moments (T0 + leadMs + spreadMs * k/threes):
// one of each three targets the example handler Worker over its service binding (every local
// stack runs it: scripts/local-env.mjs), one the bench's HTTP target, one a pull queue that two
// long-polling pull workers (the client package's runPullWorker, concurrency 8 each) lease from.
// All kinds' lag is read the same way, from the API (attempt 1's lagMs: start − due, at the claim,
// or for a pull target at the lease), so the figures compare the three delivery paths on one
// stack at one time; the HTTP target's arrival lag is given too.
import { runPullWorker, SchedulerClient } from "../../packages/client/src/index.ts";
import { deliveryFigures, enqueueSequential } from "../lib/jobs.mjs";
import { withSession } from "../lib/session.mjs";
import { cpuMsPerDelivery, round, shuffle, sleep, summary, waitUntil } from "../lib/stats.mjs";

export async function handler(params, ctx) {
  const { n, leadMs = 5000, spreadMs = 10_000, drainTimeoutMs } = params;
  return withSession("handler", ctx, async ({ loadAvgAtStart, target, first, api, sampler, alive, creds }) => {
    const threes = Math.floor(n / 3);
    const total = threes * 3;
    const url = `${target.url}/handler`;
    const kindOf = (i) => ["worker", "http", "pull"][i % 3];
    const stopPulling = new AbortController();
    const pullClient = new SchedulerClient({ baseUrl: first.stack.url, apiKey: creds.apiKey });
    const pullWorkers = Array.from({ length: 2 }, () =>
      runPullWorker({
        client: pullClient,
        queue: "bench",
        concurrency: 8,
        waitMs: 20_000,
        signal: stopPulling.signal,
        handle: async () => {},
      }),
    );
    sampler.mark("start");
    const t0 = Date.now();
    const due = new Float64Array(total);
    for (let i = 0; i < total; i++) due[i] = t0 + leadMs + Math.round((spreadMs * Math.floor(i / 3)) / threes);
    const targetOf = (i) =>
      ({ worker: { worker: "example", payload: { i } }, http: { url, body: { i } }, pull: { pull: "bench", payload: { i } } })[kindOf(i)];
    const specOf = (i) => ({ target: targetOf(i), runAt: due[i] });
    const order = shuffle(
      Array.from({ length: total }, (_, i) => i),
      42,
    );
    const enq = await enqueueSequential(api, order, specOf, total);
    const succeeded = async () => (await api.request("GET", "/v1/metrics")).body?.counters?.succeeded_total ?? 0;
    const lastDue = t0 + leadMs + spreadMs;
    const allIn = await waitUntil(async () => !alive() || (await succeeded()) >= total - enq.refused, lastDue + drainTimeoutMs, 500);
    await sleep(1500); // the attempts reach D1 with the bucket's next flush
    sampler.mark("end");
    stopPulling.abort();
    await Promise.all(pullWorkers);

    const lag = { worker: [], http: [], pull: [] };
    let unreadable = 0;
    for (let i = 0; i < total; i++) {
      if (enq.ids[i] === null) continue;
      const res = await api.request("GET", `/v1/jobs/${enq.ids[i]}/executions`);
      const first = res.body?.executions?.[0]?.attempts?.[0];
      if (typeof first?.lagMs !== "number") unreadable += 1;
      else lag[kindOf(i)].push(first.lagMs);
    }
    const arrivals = deliveryFigures(target, due, total, { include: (i) => kindOf(i) === "http" });
    const cpu = sampler.cpu("start", "end");
    return {
      scenario: "handler",
      params: { n: total, leadMs, spreadMs, drainTimeoutMs, settings: ctx.settings },
      enqueue: { refused: enq.refused, firstError: enq.firstError, ms: enq.endedAt - t0 },
      allSucceededWithinDeadline: allIn,
      claimLagMs: { serviceBinding: summary(lag.worker), http: summary(lag.http), pullWorker: summary(lag.pull) },
      unreadable,
      httpArrival: arrivals.figures,
      loadAvgAtStart,
      runtime: {
        cpuMsPerDelivery: cpuMsPerDelivery(cpu, lag.worker.length + lag.http.length + lag.pull.length),
        wallSeconds: round((Date.now() - t0) / 1000, 1),
        stackStartMs: first.startMs,
      },
    };
  });
}
