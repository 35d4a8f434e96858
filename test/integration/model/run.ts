/**
 * One run of the model-based test (model.test.ts, interleavings.test.ts): the commands against the
 * real system, then the heal (every fault gone, the clock moved past every due time as production
 * would run it: a scan every minute, each alarm at its time, every message delivered) and the
 * checks of what the user must see at the end.
 */
import { Cron } from "croner";
import fc from "fast-check";
import { expect } from "vitest";
import { occurrenceId, oneOffExecutionId } from "../../../src/core/id";
import { CONFIG } from "../helpers";
import { checkDeadLettersRedrivable, checkFeaturesAtEnd, checkPurged } from "./features";
import { checkStarts, converge, FLOW_KEYS, type JobModel, leasePulls, Model, RETRY, reportPull, type Start, settleActions } from "./model";
import { World } from "./world";

/** the longest period of the model's schedules (CRONS: every 2 minutes) */
export const PHASE_PERIOD_MS = 120_000;

export interface RunOptions {
  /**
   * Where the run starts in the schedules' period: the clock first moves to the next whole hour
   * plus this, so a sequence meets cron occurrences and the minute's scan the same way whenever it
   * replays (a failure once depended on the time of day the file started: issue 36).
   */
  phaseMs?: number;
  verbose?: boolean;
  trace?: boolean;
  /** a kept sequence's own check of the end, beside the model's (before the run's jobs are canceled) */
  check?: (model: Model, world: World) => void | Promise<void>;
}

/** Runs `commands` in a fresh World, heals and checks the end; the World's jobs are canceled afterwards. */
export async function runSequence(
  commands: Iterable<fc.AsyncCommand<Model, World>>,
  { phaseMs = 0, verbose = false, trace = false, check }: RunOptions = {},
): Promise<{ model: Model; world: World }> {
  const model = new Model();
  model.trace = trace;
  const world = new World();
  const hour = 3_600_000;
  world.clock.travelTo((Math.floor(world.now / hour) + 1) * hour + phaseMs);
  const started = performance.now();
  try {
    await fc.asyncModelRun(() => ({ model, real: world }), commands);
    const healed = await heal(model, world, verbose);
    await checkEnd(model, world, healed);
    await check?.(model, world);
    if (verbose) {
      console.log(
        `run ${world.run}: ${model.steps.length} steps, ${model.jobs.length} jobs, ${world.requests.length} requests, ${Math.round(performance.now() - started)} ms`,
      );
    }
    return { model, world };
  } catch (error) {
    if (verbose)
      console.log(`run ${world.run} failed after ${Math.round(performance.now() - started)} ms: ${model.steps.join(", ")}\n${error}`);
    throw error;
  } finally {
    // the run's jobs never fire again: later runs share the buckets
    world.close();
    for (const job of model.jobs) await world.api("DELETE", `/v1/jobs/${job.id}`).catch(() => undefined);
  }
}

/** the states an execution ends in */
const TERMINAL = ["succeeded", "dead", "canceled"];
/** an attempt starts within this of its due time (the README's precision) */
const PRECISION_MS = 2_000;
/** the sync pass runs every minute: a job it hands over or a change it converges is in place by then */
const SCAN_PERIOD_MS = 60_000;
/** a lost dispatch nobody overtook is sent again after this (README "Poison messages") */
const LOST_DISPATCH_MS = 600_000;
/**
 * after the last due time, the heal runs this long: a sync pass, retries with their backoff and
 * hanging attempts' timeouts fit in it, and a few occurrences of every schedule; a lost dispatch
 * adds LOST_DISPATCH_MS
 */
const HEAL_TAIL_MS = 180_000;
/** a hanging target times out after the job's timeoutMs (30 s by default): the heal answers it then */
const TARGET_TIMEOUT_MS = 30_000;

interface Healed {
  healStart: number;
  horizon: number;
}

/** Heals every fault and runs the system as production would until `horizon`: a scan every minute, each alarm at its time, every message delivered. */
export async function heal(m: Model, w: World, verbose = false): Promise<Healed> {
  w.rpcFaults.clear();
  w.d1Down = false;
  w.alertsHealthy = true;
  w.archiveFails = false;
  await w.releaseHangs(200);
  for (const key of m.pausedKeys) await w.api("POST", `/v1/flow-control/${key}/resume`);
  m.pausedKeys.clear();
  checkStarts(m, w);
  const healStart = w.now;
  const startedMs = performance.now();
  const lastDue = Math.max(healStart, ...m.jobs.map((j) => j.dueAt ?? 0));
  // a lost dispatch is sent again after LOST_DISPATCH_MS; every attempt may wait out a slow-down
  const horizon =
    lastDue +
    HEAL_TAIL_MS +
    (m.steps.some((s) => s.includes("DropMessage")) ? LOST_DISPATCH_MS : 0) +
    slowDownAllowance(m) +
    hangAllowance(m);
  let lastScanMinute = -1;
  let converged = false;
  const hangingSince = new Map<number, number>();
  let steps = 0;
  for (let step = 0; step < 2_000; step++, steps++) {
    const minute = Math.floor(w.now / SCAN_PERIOD_MS);
    if (minute !== lastScanMinute) {
      await w.scan();
      lastScanMinute = minute;
    }
    await w.runDueAlarms();
    // every change answered 202 has converged once the first scan and the alarms after it ran
    if (!converged) converge(m, w);
    converged = true;
    // pull workers poll beside the queue's consumer: they lease what the alarms offered before the
    // deliveries' short waits move the clock, and again after them
    await workPulls(m, w);
    for (let d = 0; d < 200 && w.queue.length > 0; d++) await w.deliver(6);
    await workPulls(m, w);
    // running attempts heartbeat; a hanging target times out
    await w.tickHeartbeats();
    for (const r of w.requests) if (r.status === null && !hangingSince.has(r.seq)) hangingSince.set(r.seq, w.now);
    for (const [seq] of hangingSince) if (w.requests[seq]!.status !== null) hangingSince.delete(seq);
    if ([...hangingSince.values()].some((since) => w.now - since >= TARGET_TIMEOUT_MS)) await w.releaseHangs(504);
    await settleActions(m, w);
    checkStarts(m, w);
    if (w.now >= horizon) break;
    const nextAlarm = (await w.nextAlarmAt()) ?? Number.POSITIVE_INFINITY;
    const nextTimeout = Math.min(...[...hangingSince.values()].map((since) => since + TARGET_TIMEOUT_MS));
    const next = Math.min(nextAlarm, (minute + 1) * SCAN_PERIOD_MS, nextTimeout, horizon);
    w.clock.travelTo(Math.max(w.now + 1, next));
  }
  expect(w.now, `the heal did not reach its horizon in ${steps} steps (an alarm that keeps waking?)`).toBeGreaterThanOrEqual(horizon);
  if (verbose)
    console.log(
      `heal: ${steps} steps over ${Math.round((horizon - healStart) / 1000)} s in ${Math.round(performance.now() - startedMs)} ms`,
    );
  return { healStart, horizon };
}

/** A pull worker leases what its queue offers and completes each lease. */
async function workPulls(m: Model, w: World): Promise<void> {
  if (!m.jobs.some((j) => j.pull)) return;
  for (const lease of await leasePulls(m, w, 100, 30_000)) await reportPull(m, w, lease, "complete");
}

interface AttemptJson {
  attempt: number;
  outcome: string;
  httpStatus: number | null;
}
interface ExecutionJson {
  id: string;
  jobId: string;
  dueAt: string;
  status: string;
  attempts: AttemptJson[];
  finishedAt: string | null;
  callbacks?: { kind: string; status: string; attempts: number }[];
}

/**
 * When the targets' origin was slowed down: a 429 or 503 with Retry-After holds every key-less job
 * of the tenant to that origin (all of this run's HTTP targets share one) for that long, at most
 * FLOW_WAIT_MAX_MS (README "Flow control").
 */
function slowDownsOf(w: World, key: string | null = null): { from: number; until: number }[] {
  return w.requests.flatMap((r) => {
    const retryAfterS = r.retryAfterS ?? 0;
    if (r.flowKey !== key || r.answeredAt === null || (r.status !== 429 && r.status !== 503) || retryAfterS <= 0) return [];
    return [{ from: r.answeredAt, until: r.answeredAt + Math.min(retryAfterS * 1_000, CONFIG.FLOW_WAIT_MAX_MS) + 1_000 }];
  });
}

/**
 * How much longer an execution may take when its targets slow their origin down: each of its
 * attempts may wait the longest Retry-After any target gave (at most FLOW_WAIT_MAX_MS) plus its backoff.
 */
/** Whether a job's target answers 429 or 503 with a Retry-After at some attempt. */
function slowsDown(job: JobModel): boolean {
  return job.script.some((a) => "status" in a && (a.status === 429 || a.status === 503) && (a.retryAfterS ?? 0) > 0);
}

/**
 * How much longer an execution may take when its target hangs: each attempt may hang until the
 * target's timeout (the heal answers it then) and back off.
 */
function hangAllowance(m: Model): number {
  return m.jobs.some((j) => j.script.some((a) => "hang" in a)) ? RETRY.maxAttempts * (TARGET_TIMEOUT_MS + RETRY.maxDelayMs + 1_000) : 0;
}

function slowDownAllowance(m: Model): number {
  const retryAfterMs = Math.max(
    0,
    ...m.jobs.flatMap((j) =>
      j.script.map((a) => ("status" in a && (a.status === 429 || a.status === 503) ? (a.retryAfterS ?? 0) * 1_000 : 0)),
    ),
  );
  // the first attempt may wait for a slow-down begun before it, and each later one for the one its failure began
  return retryAfterMs === 0 ? 0 : (RETRY.maxAttempts + 1) * (Math.min(retryAfterMs, CONFIG.FLOW_WAIT_MAX_MS) + RETRY.maxDelayMs + 1_000);
}

/**
 * The latest an execution of `job` due at `at` may start: its due time, past any slow-down of its
 * origin, plus the precision, plus what the harness itself held the clock for a consumer's waits
 * meanwhile (World.waits: serial here, concurrent in production).
 */
function onTimeBy(job: JobModel, at: number, slowDowns: { from: number; until: number }[], w: World): number {
  let by = pastSlowDowns(job, at, slowDowns) + PRECISION_MS;
  for (const held of w.waits) if (held.until > at && held.from < by) by += held.until - Math.max(held.from, at);
  return by;
}

/** When a start due at `at` may go, past every slow-down of its key that holds at that time. */
function pastSlowDowns(job: JobModel, at: number, slowDowns: { from: number; until: number }[]): number {
  let start = at;
  if (!job.pull) {
    for (let moved = true; moved; ) {
      moved = false;
      for (const s of slowDowns) {
        if (start >= s.from && start < s.until) {
          start = s.until;
          moved = true;
        }
      }
    }
  }
  return start;
}

/** What the user must see once everything healed (the promises of the README's Guarantees). */
export async function checkEnd(m: Model, w: World, h: Healed): Promise<void> {
  const starts: Start[] = [
    ...w.requests.map((r) => ({ order: r.order, at: r.at, jobId: r.jobId, executionId: r.executionId, kind: "http" as const })),
    ...m.pullStarts,
  ];
  const executions: ExecutionJson[] = [];
  const slowDowns = slowDownsOf(w);
  let truncated = false;
  // a recurring target that keeps answering 429/503 with Retry-After keeps slowing its origin
  // down, window after window, as long as it runs: the key-less jobs to that origin (all of this
  // run's HTTP targets) have no bound then (README, Flow control), only the safety checks
  const originHeld = m.jobs.some((j) => j.recurring && !j.pull && j.flowKey === null && j.status === "active" && slowsDown(j));
  const finishBy = h.horizon - 60_000 - slowDownAllowance(m) - hangAllowance(m);
  for (const job of m.jobs) {
    const res = await w.api("GET", `/v1/jobs/${job.id}`);
    // a finished job may have been purged (features.ts Purge): then its execution is in the archive
    if (res.status === 404 && !job.recurring) {
      await checkPurged(m, w, job, oneOffExecutionId(job.id));
      continue;
    }
    expect(res.status, `${job.name} (${job.id})`).toBe(200);
    const listed = await w.api("GET", `/v1/jobs/${job.id}/executions`);
    expect(listed.status).toBe(200);
    const mine = listed.body.executions as ExecutionJson[];
    executions.push(...mine);
    if (mine.length >= 100) truncated = true;
    const where = `${job.name} (${job.id}, ${job.recurring ? job.cron : `due ${new Date(job.dueAt!).toISOString()}`})`;
    const jobStarts = starts.filter((s) => s.jobId === job.id);

    if (originHeld && !job.pull && job.flowKey === null) continue;
    // nothing stuck: every execution due before the horizon's tail ended
    const unfinished = mine.filter((e) => Date.parse(e.dueAt) < finishBy && !TERMINAL.includes(e.status));
    expect(
      unfinished.map((e) => `${e.id} ${e.status} due ${e.dueAt}`),
      `${where}: executions stuck`,
    ).toEqual([]);

    if (!job.recurring) {
      if (job.status === "active" || job.status === "finished") {
        expect(res.body.status, `${where}: the job`).toBe("completed");
        expect(["succeeded", "dead"], `${where}: its execution ${mine[0]?.status}`).toContain(mine[0]?.status);
        // on time: a job due well after the heal began, changed before it, starts within the precision
        const dueAt = job.dueAt!;
        const from = job.liveFrom ?? job.notBefore?.order ?? 0;
        const after = jobStarts.filter((s) => s.order >= from);
        const first = after.find((s) => s.at >= dueAt) ?? after[0];
        expect(first, `${where}: never started`).toBeDefined();
        const bound =
          job.flowKey !== null
            ? h.horizon
            : dueAt > h.healStart + SCAN_PERIOD_MS + 5_000
              ? onTimeBy(job, dueAt, slowDowns, w)
              : Math.max(onTimeBy(job, dueAt, slowDowns, w), h.healStart) + LOST_DISPATCH_MS + SCAN_PERIOD_MS;
        expect(first!.at - dueAt, `${where}: started ${first!.at - dueAt} ms after its due time`).toBeLessThanOrEqual(bound - dueAt);
        // a key limited by rate starts its backlog at that rate: a start waits only for the others that took the slots before it
        if (job.flowKey === "rated" && dueAt > h.healStart + SCAN_PERIOD_MS + 5_000) {
          const { rate, periodSeconds } = FLOW_KEYS.rated;
          const spacingMs = (periodSeconds * 1_000) / rate;
          const from = pastSlowDowns(job, dueAt, slowDownsOf(w, "rated"));
          const ahead = w.requests.filter(
            (r) => r.flowKey === "rated" && r.at >= from - periodSeconds * 1_000 && r.order < first!.order,
          ).length;
          expect(first!.at - from, `${where}: waited for its rate slot behind ${ahead} starts`).toBeLessThanOrEqual(
            (ahead + 1) * spacingMs + PRECISION_MS,
          );
        }
      } else if (job.status === "canceled") {
        expect(res.body.status, `${where}: the job`).toBe("canceled");
      }
    } else if (job.status === "active") {
      expect(res.body.status, `${where}: the job`).toBe("active");
      // every occurrence due well inside the heal starts on time
      const from = Math.max(h.healStart, job.changedAt) + SCAN_PERIOD_MS + 5_000;
      const cron = new Cron(job.cron!, { timezone: "UTC" });
      for (
        let at = cron.nextRun(new Date(from))?.getTime();
        at !== undefined && at < h.horizon - 15_000;
        at = cron.nextRun(new Date(at))?.getTime()
      ) {
        // held by a slow-down of its origin past the horizon (another target keeps renewing it): not yet due to start
        const by = onTimeBy(job, at, slowDowns, w);
        if (by > h.horizon - 15_000) continue;
        const id = occurrenceId(job.id, at);
        const first = jobStarts.find((s) => s.executionId === id);
        expect(first, `${where}: occurrence ${new Date(at).toISOString()} never started`).toBeDefined();
        expect(first!.at - at, `${where}: occurrence ${new Date(at).toISOString()} started late`).toBeLessThanOrEqual(by - at);
      }
    } else {
      expect(res.body.status, `${where}: the job`).toBe(job.status);
    }
  }

  // bulk actions ran to the end and changed each job exactly as a single request would
  for (const action of m.actions) {
    const res = await w.api("GET", `/v1/actions/${action.id}`);
    expect(res.status).toBe(200);
    expect(res.body.status, `action ${action.kind} ${action.id}`).toBe("done");
    const refusals: { id: string; code: string }[] = [];
    for (const f of res.body.failures as { id: string; code: string }[]) {
      if (REFUSALS[action.kind]!.includes(f.code)) continue;
      // a finished job a purge removed before the action's page ran: a single request would answer 404 too
      if (f.code === "not_found" && m.features.purges.length > 0 && (await w.api("GET", `/v1/jobs/${f.id}`)).status === 404) continue;
      refusals.push(f);
    }
    expect(refusals, `action ${action.kind}: failures a single request would not have`).toEqual([]);
  }

  // what the logs say happened happened at the targets: a success is a 2xx (or a pull completion)
  for (const e of executions) {
    const job = m.jobs.find((j) => j.id === e.jobId)!;
    for (const a of e.attempts) {
      if (a.outcome !== "succeeded") continue;
      const seen = job.pull
        ? m.pullCompleted.some((c) => c.executionId === e.id && c.attempt === a.attempt)
        : w.requests.some(
            (r) => r.executionId === e.id && r.attempt === a.attempt && r.status !== null && r.status >= 200 && r.status < 300,
          );
      expect(seen, `${job.name}: ${e.id} attempt ${a.attempt} logged as succeeded, but its target never answered 2xx to it`).toBe(true);
    }
  }

  // the features' promises: callbacks, debounce, alerts, replays (features.ts)
  await checkFeaturesAtEnd(m, w, executions, finishBy, originHeld);

  // the metrics count what the API shows (a restart may lose or repeat up to COUNTER_WRITE_MS of counts)
  // (and a job's list shows its latest 100: a long heal of a recurring job may hold more; a purge
  // takes executions out of the lists, not out of the counters)
  if (w.restarts === 0 && !truncated && m.features.purges.length === 0) {
    const metrics = await w.api("GET", "/v1/metrics");
    const counters = metrics.body.counters as Record<string, number>;
    const attempts = executions.flatMap((e) => e.attempts);
    const count = (name: string) => counters[name] ?? 0;
    const expected = {
      succeeded_total: attempts.filter((a) => a.outcome === "succeeded").length,
      failed_attempts_total: attempts.filter((a) => a.outcome !== "succeeded").length,
      lease_expired_total: attempts.filter((a) => a.outcome === "lease_expired").length,
      dead_total: executions.filter((e) => e.status === "dead").length + m.redrives,
      canceled_total: executions.filter((e) => e.status === "canceled").length,
      redrive_total: m.redrives,
    };
    const actual = Object.fromEntries(Object.keys(expected).map((name) => [name, count(name)]));
    // an execution still under way (one an origin's slow-down holds past the horizon) shows the
    // attempts its last write to D1 carried, while the counters count each attempt as it ends: for
    // the attempts' counters the API's figure is then a floor
    if (executions.some((e) => !TERMINAL.includes(e.status))) {
      for (const name of ["failed_attempts_total", "lease_expired_total"] as const) {
        expect(actual[name], `the metrics: ${name}, with executions under way`).toBeGreaterThanOrEqual(expected[name]);
        actual[name] = expected[name];
      }
    }
    expect(actual, "the metrics").toEqual(expected);
  }

  // last, as it redrives: every dead letter listed can be redriven
  await checkDeadLettersRedrivable(w);
}

/** The refusals a bulk action may count per job: what the single request would answer. */
const REFUSALS: Record<string, string[]> = {
  cancel: ["not_cancelable"],
  pause: ["not_recurring", "not_active"],
  resume: ["not_recurring", "not_paused"],
};
