// mixed: do slow targets make other jobs late? R jobs created per second for S seconds exactly as
// steady creates them (createPaced: a batch every 100 ms, each job due 5 s after it is sent); every
// 10th job (index % 10 == 0) targets a slow loopback target, the others a fast one (200 at once),
// each its own origin (its own port), as slow and fast services are: key-less jobs share a limit
// per origin (ORIGIN_PARALLELISM), which is not what this scenario measures. Variants, each on a fresh stack: `slow` (/slow answers 200 after slowMs, 5 s) and `hang`
// (/slow answers only after an hour, so the scheduler's timeout, the slow jobs' `timeoutMs`, ends
// every attempt: a retryable failure, so those jobs are retried with the default policy until the
// stack stops; the scenario does not wait for them beyond the drain). `held`: the fast jobs'
// first-delivery p99 lag <= 200 ms and none of them missing.
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
import { Target } from "../lib/target.mjs";

export const MIXED_VARIANTS = ["slow", "hang"];
/** every SLOW_EVERY-th job (index % SLOW_EVERY == 0) targets the slow path */
const SLOW_EVERY = 10;
const FAST_PATH = "/fast";
const SLOW_PATH = "/slow";
/** the hanging answer: past the longest job timeout (14 min, LIMITS.timeoutMs.max) and any run */
const HANG_MS = 3_600_000;
/** fast jobs' p99 first-delivery lag that still counts as unaffected */
const HELD_P99_MS = 200;

const isSlow = (i) => i % SLOW_EVERY === 0;

/**
 * Per class (fast or slow jobs): deliveryFigures over the class's jobs (lag of each job's first
 * arrival, delivered, missing (refused jobs included, as in steady), requests, the execution ids
 * that arrived more than once: webhook-id is stable across attempts), and what only mixed reports:
 * the class's answered requests and highest attempt. Returns the class's line (`figures`) and its
 * deliveryFigures (`d`).
 */
function classFigures(target, due, total, slow) {
  const include = (i) => isSlow(i) === slow;
  const d = deliveryFigures(target, due, total, { include });
  let answered = 0;
  let maxAttempt = 0;
  for (const a of target.arrivals) {
    if (!Number.isInteger(a.i) || a.i < 0 || a.i >= total || !include(a.i)) continue;
    if (a.answeredAt !== null) answered += 1;
    if (a.attempt > maxAttempt) maxAttempt = a.attempt;
  }
  const { delivered, missing, lagMs, over2s, early, requests, duplicates, extraDeliveries } = d.figures;
  return {
    d,
    figures: {
      jobs: d.jobs,
      delivered,
      missing,
      lagMs,
      over2s,
      early,
      requests,
      answered,
      maxAttempt,
      // a fast job answers 200 at once, so a repeat is a duplicate; a slow job's repeats are the
      // retries of its timed-out attempts (`hang`)
      ...(slow ? { retriedJobs: duplicates, retryRequests: extraDeliveries } : { duplicates, extraDeliveries }),
    },
  };
}

export async function mixedVariant(variant, params, ctx) {
  const { rate, seconds, leadMs = 5000, slowMs, slowTimeoutMs, drainTimeoutMs } = params;
  const slowAnswerMs = variant === "hang" ? HANG_MS : slowMs;
  return withSession(`mixed-${variant}`, ctx, async (session) => {
    // the slow origin records into the fast one's arrivals: one record for the figures
    const slowTarget = await new Target({ delayMs: slowAnswerMs, arrivals: session.target.arrivals }).listen();
    try {
      return await runVariant(session, slowTarget);
    } finally {
      await slowTarget.close();
    }
  });

  async function runVariant({ quiet, loadAvgAtStart, target, first, api, sampler, alive, schedulerFigures }, slowTarget) {
    const fastUrl = `${target.url}${FAST_PATH}`;
    const slowUrl = `${slowTarget.url}${SLOW_PATH}`;
    const specOf = (i, dueAt) => (isSlow(i) ? { ...jobSpec(slowUrl, i, dueAt), timeoutMs: slowTimeoutMs } : jobSpec(fastUrl, i, dueAt));
    sampler.mark("start");
    const pace = await createPaced(api, { rate, seconds, leadMs, specOf });
    const { total, due, refused, startedAt: start } = pace;
    sampler.mark("created");
    const lastDue = Math.max(...due);
    // every job's first request (a hanging job counts once its first attempt arrived), bounded
    const allIn = await waitUntil(() => !alive() || deliveredCount(target, total) >= total - refused, lastDue + drainTimeoutMs, 200);
    await sleep(1000);
    // `slow`: let the last slow answers finish, so the scheduler's counters include them (`hang`
    // answers never finish: its timed-out attempts are retried while the figures are read)
    if (variant === "slow")
      await waitUntil(() => !alive() || target.arrivals.every((a) => a.answeredAt !== null), Date.now() + slowMs + 2000, 200);
    sampler.mark("end");

    const fastClass = classFigures(target, due, total, false);
    const slowClass = classFigures(target, due, total, true);
    const fast = fastClass.figures;
    const slow = slowClass.figures;
    fast.lagP99By10s = lagP99ByWindow(due, fastClass.d.first, start + leadMs, lastDue, { include: (i) => !isSlow(i) });
    const creation = creationFigures(pace, seconds);
    const held = fast.lagMs.p99 !== null && fast.lagMs.p99 <= HELD_P99_MS && fast.missing === 0;
    const delivered = fast.delivered + slow.delivered;
    return {
      scenario: "mixed",
      variant,
      params: {
        variant,
        rate,
        seconds,
        leadMs,
        slowEvery: SLOW_EVERY,
        slowAnswerMs,
        slowTimeoutMs,
        heldP99Ms: HELD_P99_MS,
        tickMs: PACE_TICK_MS,
        maxInFlight: PACE_MAX_IN_FLIGHT,
        drainTimeoutMs,
        settings: ctx.settings,
      },
      held,
      ...creation.figures,
      fast,
      slow,
      unmatchedRequests: fastClass.d.figures.unmatchedRequests,
      allFirstDeliveriesWithinDeadline: allIn,
      quietBeforeStart: quiet,
      loadAvgAtStart,
      runtime: runtimeFigures(sampler, { delivered, createSeconds: creation.createSeconds, alive, stackStartMs: first.startMs }),
      scheduler: await schedulerFigures(),
    };
  }
}

/** Every variant in turn, each on a fresh stack; emits each variant's line, returns a summary line. */
export async function mixed(params, ctx, emit) {
  const results = [];
  for (const variant of params.variants) {
    const result = await mixedVariant(variant, params, ctx);
    results.push(result);
    emit?.(result);
  }
  return {
    scenario: "mixed-summary",
    params: { variants: params.variants, rate: params.rate, seconds: params.seconds, settings: ctx.settings },
    variants: results.map((r) => ({
      variant: r.variant,
      held: r.held,
      fastP50: r.fast.lagMs.p50,
      fastP99: r.fast.lagMs.p99,
      fastMax: r.fast.lagMs.max,
      fastMissing: r.fast.missing,
      fastDuplicates: r.fast.duplicates,
      slowP50: r.slow.lagMs.p50,
      slowP99: r.slow.lagMs.p99,
      slowMissing: r.slow.missing,
    })),
  };
}
