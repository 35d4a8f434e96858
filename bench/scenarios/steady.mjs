// steady: R jobs created per second for S seconds, in batches every 100 ms, each due 5 s after it
// is sent (absolute runAt). Rates are tried in increasing order, each on a fresh stack, stopping
// after the first that fails; the sustainable rate is the highest held with p99 lag < 2 s,
// nothing missing and the creation rate achieved (>= 95 % of R).
import {
  createPaced,
  creationFigures,
  deliveredCount,
  deliveryFigures,
  jobSpec,
  lagP99ByWindow,
  PACE_MAX_IN_FLIGHT,
  PACE_TICK_MS,
  runtimeFigures,
} from "../lib/jobs.mjs";
import { withSession } from "../lib/session.mjs";
import { sleep, waitUntil } from "../lib/stats.mjs";

export async function steadyRate(r, params, ctx) {
  const { seconds, leadMs = 5000, drainTimeoutMs } = params;
  return withSession(`steady-${r}`, ctx, async ({ quiet, loadAvgAtStart, target, first, api, sampler, alive, schedulerFigures }) => {
    const url = `${target.url}/steady`;
    sampler.mark("start");
    const specOf = (i, dueAt) => jobSpec(url, i, dueAt);
    const pace = await createPaced(api, { rate: r, seconds, leadMs, specOf });
    const { total, due, refused, startedAt: start } = pace;
    sampler.mark("created");
    const lastDue = Math.max(...due);
    const allIn = await waitUntil(() => !alive() || deliveredCount(target, total) >= total - refused, lastDue + drainTimeoutMs, 200);
    await sleep(1000);
    sampler.mark("end");
    const d = deliveryFigures(target, due, total);
    // p99 of lag per 10 s of due time: shows whether the runtime keeps up or falls behind
    const p99By10s = lagP99ByWindow(due, d.first, start + leadMs, lastDue);
    const creation = creationFigures(pace, seconds);
    const held =
      d.figures.lagMs.p99 !== null &&
      d.figures.lagMs.p99 < 2000 &&
      d.figures.missing === 0 &&
      refused === 0 &&
      creation.achieved >= 0.95 * r;
    return {
      scenario: "steady",
      params: { rate: r, seconds, leadMs, tickMs: PACE_TICK_MS, maxInFlight: PACE_MAX_IN_FLIGHT, drainTimeoutMs, settings: ctx.settings },
      held,
      ...creation.figures,
      ...d.figures,
      lagP99By10s: p99By10s,
      allDeliveredWithinDeadline: allIn,
      quietBeforeStart: quiet,
      loadAvgAtStart,
      runtime: runtimeFigures(sampler, {
        delivered: d.figures.delivered,
        createSeconds: creation.createSeconds,
        alive,
        stackStartMs: first.startMs,
      }),
      scheduler: await schedulerFigures(),
    };
  });
}

export async function steady(params, ctx, emit) {
  const results = [];
  let sustainable = null;
  for (const r of params.rates) {
    const result = await steadyRate(r, params, ctx);
    results.push(result);
    emit?.(result);
    if (!result.held) break;
    sustainable = r;
  }
  return {
    scenario: "steady-summary",
    params: { rates: params.rates, seconds: params.seconds, settings: ctx.settings },
    sustainableRate: sustainable,
    tried: results.map((r) => ({
      rate: r.params.rate,
      held: r.held,
      p50: r.lagMs.p50,
      p99: r.lagMs.p99,
      max: r.lagMs.max,
      delivered: r.delivered,
      missing: r.missing,
      achievedCreateRate: r.achievedCreateRate,
    })),
  };
}
