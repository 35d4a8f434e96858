// handler: N one-off jobs in pairs due at the same moments (T0 + leadMs + spreadMs * k/pairs):
// one of each pair targets the example handler Worker over its service binding (every local
// stack runs it: scripts/local-env.mjs), the other the bench's HTTP target. Both kinds' lag is
// read the same way, from the API (attempt 1's lagMs: start − due, at the claim), so the figures
// compare the two delivery paths on one stack at one time; the HTTP target's arrival lag is given too.
import { deliveryFigures, enqueueSequential } from "../lib/jobs.mjs";
import { withSession } from "../lib/session.mjs";
import { cpuMsPerDelivery, round, shuffle, sleep, summary, waitUntil } from "../lib/stats.mjs";

export async function handler(params, ctx) {
  const { n, leadMs = 5000, spreadMs = 10_000, drainTimeoutMs } = params;
  return withSession("handler", ctx, async ({ loadAvgAtStart, target, first, api, sampler, alive }) => {
    const pairs = Math.floor(n / 2);
    const total = pairs * 2;
    const url = `${target.url}/handler`;
    const isWorker = (i) => i % 2 === 0;
    sampler.mark("start");
    const t0 = Date.now();
    const due = new Float64Array(total);
    for (let i = 0; i < total; i++) due[i] = t0 + leadMs + Math.round((spreadMs * Math.floor(i / 2)) / pairs);
    const specOf = (i) =>
      isWorker(i) ? { target: { worker: "example", payload: { i } }, runAt: due[i] } : { target: { url, body: { i } }, runAt: due[i] };
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

    const lag = { worker: [], http: [] };
    let unreadable = 0;
    for (let i = 0; i < total; i++) {
      if (enq.ids[i] === null) continue;
      const res = await api.request("GET", `/v1/jobs/${enq.ids[i]}/executions`);
      const first = res.body?.executions?.[0]?.attempts?.[0];
      if (typeof first?.lagMs !== "number") unreadable += 1;
      else lag[isWorker(i) ? "worker" : "http"].push(first.lagMs);
    }
    const arrivals = deliveryFigures(target, due, total, { include: (i) => !isWorker(i) });
    const cpu = sampler.cpu("start", "end");
    return {
      scenario: "handler",
      params: { n: total, leadMs, spreadMs, drainTimeoutMs, settings: ctx.settings },
      enqueue: { refused: enq.refused, firstError: enq.firstError, ms: enq.endedAt - t0 },
      allSucceededWithinDeadline: allIn,
      claimLagMs: { serviceBinding: summary(lag.worker), http: summary(lag.http) },
      unreadable,
      httpArrival: arrivals.figures,
      loadAvgAtStart,
      runtime: {
        cpuMsPerDelivery: cpuMsPerDelivery(cpu, lag.worker.length + lag.http.length),
        wallSeconds: round((Date.now() - t0) / 1000, 1),
        stackStartMs: first.startMs,
      },
    };
  });
}
