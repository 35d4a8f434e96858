// Shared by the scenarios: job specs, sequential and paced batch enqueue, the creation and runtime
// figures of the paced scenarios (steady, mixed), and the delivery figures computed from what the
// target recorded (first arrival per job index vs its due time).
import { cpuMsPerDelivery, perSlot, round, sleep, summary } from "./stats.mjs";

export const CHUNK = 1000; // POST /v1/jobs/batch takes at most 1000 jobs

/** A one-off job to `url` due at `dueAt` (epoch ms) whose body carries its index. */
export function jobSpec(url, i, dueAt) {
  return { target: { url, body: { i } }, runAt: dueAt };
}

/**
 * Creates jobs `order[k]` (indexes) with `specOf(i)` in chunks of `chunk`, one request at a time.
 * Returns ids by index and per-request timings (the API's response time per batch).
 */
export async function enqueueSequential(api, order, specOf, n, chunk = CHUNK) {
  const ids = new Array(n).fill(null);
  const acceptedAt = new Float64Array(n);
  const batchMs = [];
  let refused = 0;
  let firstError = null;
  const startedAt = Date.now();
  for (let k = 0; k < order.length; k += chunk) {
    const slice = order.slice(k, k + chunk);
    let result;
    try {
      result = await api.createBatch(slice.map(specOf));
    } catch (error) {
      result = { ids: slice.map(() => null), refused: slice.length, error: String(error), sentAt: Date.now(), doneAt: Date.now() };
    }
    batchMs.push(result.doneAt - result.sentAt);
    refused += result.refused;
    firstError ??= result.error;
    slice.forEach((i, j) => {
      ids[i] = result.ids[j];
      acceptedAt[i] = result.doneAt;
    });
  }
  const endedAt = Date.now();
  return { ids, acceptedAt, batchMs, refused, firstError, startedAt, endedAt };
}

/** paced creation: one batch every PACE_TICK_MS, at most PACE_MAX_IN_FLIGHT requests outstanding */
export const PACE_TICK_MS = 100;
export const PACE_MAX_IN_FLIGHT = 4;

/**
 * Creates `rate` jobs per second for `seconds` (steady, mixed): every PACE_TICK_MS one
 * POST /v1/jobs/batch with that tick's share of indexes, each job due `leadMs` after its batch
 * is sent (`specOf(i, dueAt)` builds job i), at most PACE_MAX_IN_FLIGHT requests in flight.
 * Returns due times by index (Float64Array, 0 for a job never sent), what was created and
 * refused, the ticks that started over a tick late, per-request timings and the wall time.
 */
export async function createPaced(api, { rate, seconds, leadMs, specOf }) {
  const total = Math.round(rate * seconds);
  const due = new Float64Array(total);
  const batchMs = [];
  let refused = 0;
  let firstError = null;
  let created = 0;
  let inFlight = 0;
  let lateTicks = 0;
  const pending = new Set();
  const startedAt = Date.now();
  const ticks = Math.round((seconds * 1000) / PACE_TICK_MS);
  for (let k = 0; k < ticks; k++) {
    const tickAt = startedAt + k * PACE_TICK_MS;
    const wait = tickAt - Date.now();
    if (wait > 0) await sleep(wait);
    else if (wait < -PACE_TICK_MS) lateTicks += 1;
    while (inFlight >= PACE_MAX_IN_FLIGHT) await sleep(5);
    const from = Math.round((rate * k * PACE_TICK_MS) / 1000);
    const to = Math.round((rate * (k + 1) * PACE_TICK_MS) / 1000);
    if (to <= from) continue;
    const sentAt = Date.now();
    const specs = [];
    for (let i = from; i < to; i++) {
      due[i] = sentAt + leadMs;
      specs.push(specOf(i, due[i]));
    }
    inFlight += 1;
    const p = api
      .createBatch(specs)
      .then((res) => {
        batchMs.push(res.doneAt - res.sentAt);
        refused += res.refused;
        firstError ??= res.error;
        created += specs.length - res.refused;
      })
      .catch((error) => {
        refused += specs.length;
        firstError ??= String(error);
      })
      .finally(() => {
        inFlight -= 1;
        pending.delete(p);
      });
    pending.add(p);
  }
  await Promise.all([...pending]);
  const endedAt = Date.now();
  return { total, due, created, refused, firstError, lateTicks, batchMs, startedAt, endedAt };
}

/**
 * What steady and mixed report about a createPaced run (`pace`) of `seconds`: `figures`, the
 * creation fields of their line (achievedCreateRate, created, refused, firstError, lateTicks,
 * batchMs); `achieved`, jobs created per second (over the wall time, at least `seconds`);
 * `createSeconds`, the wall time of the creation.
 */
export function creationFigures(pace, seconds) {
  const { created, refused, firstError, lateTicks, batchMs, startedAt, endedAt } = pace;
  const createSeconds = (endedAt - startedAt) / 1000;
  const achieved = created / Math.max(createSeconds, seconds);
  return {
    achieved,
    createSeconds,
    figures: { achievedCreateRate: round(achieved, 0), created, refused, firstError, lateTicks, batchMs: summary(batchMs) },
  };
}

/**
 * The `runtime` block of steady and mixed, from the sampler's marks "start", "created" (the end of
 * the creation, `createSeconds` after the start) and "end": CPU per delivery (`delivered` jobs),
 * CPU seconds, the creation phase's CPU and utilisation, memory, processes, whether the stack
 * (`alive()`) still runs, the machine, and the stack's start time (`stackStartMs`).
 */
export function runtimeFigures(sampler, { delivered, createSeconds, alive, stackStartMs }) {
  return {
    cpuMsPerDelivery: cpuMsPerDelivery(sampler.cpu("start", "end"), delivered),
    cpuSeconds: sampler.cpu("start", "end"),
    cpuSecondsCreatePhase: sampler.cpu("start", "created"),
    cpuUtilisationCreatePhase: (() => {
      const c = sampler.cpu("start", "created");
      const all = Object.values(c).reduce((a, b) => a + b, 0);
      return round(all / createSeconds, 2);
    })(),
    peakRssMb: sampler.peakRssMb(),
    processes: sampler.processCounts(),
    stackAliveAtEnd: alive(),
    machine: sampler.machine("start", "end"),
    stackStartMs,
  };
}

/**
 * Delivery figures for jobs 0..n-1 with due times `due` (Float64Array): lag of the first arrival
 * per job, missing, duplicates by webhook-id (the execution id, stable across deliveries).
 * `include(i)`: only the jobs it accepts and their requests count (`first` holds only theirs; a
 * request of no job 0..n-1 then counts only in `unmatchedRequests`); `jobs` is how many it accepts.
 */
export function deliveryFigures(target, due, n, { include } = {}) {
  const accepts = include ?? (() => true);
  const first = new Float64Array(n).fill(Number.NaN);
  const perId = new Map();
  let requests = 0;
  let foreign = 0;
  for (const a of target.arrivals) {
    if (Number.isInteger(a.i) && a.i >= 0 && a.i < n) {
      if (!accepts(a.i)) continue;
      if (Number.isNaN(first[a.i]) || a.at < first[a.i]) first[a.i] = a.at;
    } else {
      foreign += 1;
      if (include) continue;
    }
    requests += 1;
    perId.set(a.id, (perId.get(a.id) ?? 0) + 1);
  }
  const lags = [];
  let jobs = 0;
  let early = 0;
  let over2s = 0;
  let lastArrival = -Infinity;
  let firstArrival = Infinity;
  for (let i = 0; i < n; i++) {
    if (!accepts(i)) continue;
    jobs += 1;
    if (Number.isNaN(first[i])) continue;
    const lag = first[i] - due[i];
    lags.push(lag);
    if (lag < 0) early += 1;
    if (lag > 2000) over2s += 1;
    if (first[i] > lastArrival) lastArrival = first[i];
    if (first[i] < firstArrival) firstArrival = first[i];
  }
  let duplicateIds = 0;
  let extraDeliveries = 0;
  for (const c of perId.values()) {
    if (c > 1) {
      duplicateIds += 1;
      extraDeliveries += c - 1;
    }
  }
  return {
    first,
    lags,
    jobs,
    figures: {
      delivered: lags.length,
      missing: jobs - lags.length,
      duplicates: duplicateIds,
      extraDeliveries,
      requests,
      unmatchedRequests: foreign,
      lagMs: summary(lags),
      over2s,
      early,
    },
    firstArrival: Number.isFinite(firstArrival) ? firstArrival : null,
    lastArrival: Number.isFinite(lastArrival) ? lastArrival : null,
  };
}

/** lagP99ByWindow's window of due time (the lines' `lagP99By10s`) */
const WINDOW_MS = 10_000;

/**
 * p99 of first-arrival lag per WINDOW_MS of due time, from `from` up to `to` (epoch ms), over the
 * jobs `include(i)` accepts: shows whether the runtime keeps up or falls behind over a run.
 */
export function lagP99ByWindow(due, first, from, to, { include = () => true } = {}) {
  const out = [];
  for (let start = from; start < to; start += WINDOW_MS) {
    const window = [];
    for (let i = 0; i < due.length; i++)
      if (due[i] >= start && due[i] < start + WINDOW_MS && !Number.isNaN(first[i]) && include(i)) window.push(first[i] - due[i]);
    out.push(summary(window).p99);
  }
  return out;
}

/** Arrivals per second from `from` (the completions per second figure). */
export function arrivalsPerSecond(target, from) {
  return perSlot(
    target.arrivals.map((a) => a.at),
    from,
    1000,
  );
}

/** Jobs with a first arrival, counted fast while waiting. */
export function deliveredCount(target, n) {
  let count = 0;
  const seen = new Uint8Array(n);
  for (const a of target.arrivals) {
    if (Number.isInteger(a.i) && a.i >= 0 && a.i < n && seen[a.i] === 0) {
      seen[a.i] = 1;
      count += 1;
    }
  }
  return count;
}

/**
 * Per-stage timing of a sample of jobs, from the scheduler's own record (GET /v1/jobs/:id/executions):
 * claimLag = attempt startedAt (the claim in the bucket) - due; deliver = target arrival - startedAt.
 * Read after the run (outcomes reach D1 within FLUSH_DELAY_MS).
 */
export async function stageSample(api, ids, due, first, sampleSize) {
  const candidates = [];
  for (let i = 0; i < ids.length; i++) if (ids[i] && !Number.isNaN(first[i])) candidates.push(i);
  if (candidates.length === 0 || sampleSize <= 0) return null;
  const step = Math.max(1, Math.floor(candidates.length / sampleSize));
  const picked = [];
  for (let k = 0; k < candidates.length && picked.length < sampleSize; k += step) picked.push(candidates[k]);
  await sleep(1500); // let the mirror reach D1
  const claimLag = [];
  const deliver = [];
  const scheduledDueShift = [];
  let errors = 0;
  let next = 0;
  const worker = async () => {
    while (next < picked.length) {
      const i = picked[next++];
      try {
        const res = await api.executions(ids[i]);
        const attempt = res.body?.executions?.[0]?.attempts?.[0];
        if (res.status !== 200 || !attempt?.startedAt) {
          errors += 1;
          continue;
        }
        const startedAt = Date.parse(attempt.startedAt);
        const dueAt = Date.parse(attempt.dueAt);
        claimLag.push(startedAt - due[i]);
        deliver.push(first[i] - startedAt);
        scheduledDueShift.push(dueAt - due[i]);
      } catch {
        errors += 1;
      }
    }
  };
  await Promise.all([worker(), worker(), worker(), worker()]);
  return {
    sampled: picked.length,
    errors,
    claimLagMs: summary(claimLag),
    claimToArrivalMs: summary(deliver),
    /** > 0 when a job was accepted after its requested runAt (the API moves dueAt to now) */
    dueShiftMs: summary(scheduledDueShift),
  };
}

export function rate(count, ms) {
  return ms > 0 ? round((count * 1000) / ms, 0) : null;
}
