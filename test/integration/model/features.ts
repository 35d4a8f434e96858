/**
 * The features of the README the model drives beside the lifecycle (issue 36): callbacks and
 * failure callbacks (to a URL or a handler Worker, pull jobs' too), priorities and PATCHes of them,
 * debounced creates (trailing and leading, two at once with one key), the tenant's alert target
 * (healthy or failing), and the history purges (the size watermark and the retention, with the
 * archive writing or failing). Each command says what the user must then see; the checks run after
 * every step (checkGroups, checkCallbackRequests) and at the end of a run (checkFeaturesAtEnd):
 *
 * - a callback is told once per outcome, under a webhook-id of its own (the same on its retries,
 *   another for another outcome), never for a job without one, and fires no callback itself;
 * - every group of HTTP deliveries is at most FIRE_GROUP_SIZE (the six connections it uses);
 * - a debounced key runs the payload of the last create it accepted (trailing) or its first (leading);
 * - every death after a healthy alert target was set reaches it in a digest;
 * - a dead letter listed is redrivable; a purged job's execution is in the archive; nothing
 *   stuck, callbacks included; a key replayed within the window never runs a job twice.
 */
import fc from "fast-check";
import { expect } from "vitest";
import { CONFIG } from "../helpers";
import type { World } from "./world";

/** What these checks read of a job of the model (model.ts JobModel: read here by shape, so the two do not import each other). */
export interface FeatureJob {
  id: string;
  name: string;
  pull: boolean;
  status: string;
  dueAt: number | null;
  dueAts: number[];
  callbacks: Callbacks;
  callbacksChanged: boolean;
  debounce: { key: string; mode: "trailing" | "leading"; payload: string | null } | null;
}

/** What these checks read of the model (model.ts Model). */
export interface FeatureRun {
  jobs: FeatureJob[];
  features: FeatureModel;
  pullStarts: { order: number; jobId: string }[];
}

export type CallbackVia = "http" | "worker";
export interface Callbacks {
  success: CallbackVia | null;
  failure: CallbackVia | null;
}
export const NO_CALLBACKS: Callbacks = { success: null, failure: null };

/** What a create gives a job beyond its target and time: callbacks and a priority. */
export interface Extras {
  callbacks: Callbacks;
  /** what its callbacks' targets answer, attempt by attempt (the last repeats) */
  callbackScript: number[];
  /** 0-9; 5 is the default and is sent as none */
  priority: number;
}
export const NO_EXTRAS: Extras = { callbacks: NO_CALLBACKS, callbackScript: [200], priority: 5 };

export const extrasArb: fc.Arbitrary<Extras> = fc.oneof(
  { weight: 3, arbitrary: fc.constant(NO_EXTRAS) },
  {
    weight: 2,
    arbitrary: fc.record({
      callbacks: fc.record({
        success: fc.constantFrom<CallbackVia | null>("http", "worker", null),
        failure: fc.constantFrom<CallbackVia | null>("http", "worker", null),
      }),
      callbackScript: fc.constantFrom<number[]>([200], [500, 200], [500]),
      priority: fc.constantFrom(0, 1, 5, 9),
    }),
  },
);

/** A create's fields for a job's extras (and the world told what its callbacks answer). */
export function extrasBody(r: World, name: string, extras: Extras): Record<string, unknown> {
  r.callbackScripts.set(name, extras.callbackScript);
  const target = (kind: "success" | "failure", via: CallbackVia | null) =>
    via === null ? undefined : via === "http" ? { url: r.callbackUrl(name, kind) } : { worker: "test" };
  const success = target("success", extras.callbacks.success);
  const failure = target("failure", extras.callbacks.failure);
  return {
    ...(success ? { callback: success } : {}),
    ...(failure ? { failureCallback: failure } : {}),
    ...(extras.priority === 5 ? {} : { priority: extras.priority }),
  };
}

// ---------------------------------------------------------------------------------------------
// after every step

/** Every group the buckets sent: no more HTTP deliveries in one than one invocation's connections. */
export function checkGroups(m: FeatureRun, r: World): void {
  const pullExecutions = (id: string) => {
    const job = m.jobs.find((j) => j.pull && id.endsWith(j.id.slice(-16)));
    // a callback's id carries "o" or "i" after exe_: an HTTP or handler Worker delivery, whatever its parent is
    return job !== undefined && id[4] !== "o" && id[4] !== "i";
  };
  for (const group of r.groups.splice(0)) {
    const delivered = group.executions.filter((e) => !pullExecutions(e.executionId));
    expect(
      delivered.length <= CONFIG.FIRE_GROUP_SIZE || delivered.length === 0,
      `a group of ${group.executions.length} carried ${delivered.length} deliveries (callbacks of pull jobs among them?): more than the ${CONFIG.FIRE_GROUP_SIZE} connections of one invocation`,
    ).toBe(true);
  }
}

/** Callback deliveries so far: each tells an execution's outcome, never a callback's, under one webhook-id per outcome. */
export async function checkCallbackRequests(m: FeatureRun, r: World): Promise<void> {
  await r.collectWorkerCallbacks(new Map(m.jobs.map((j) => [j.id, j.name])));
  const idOf = new Map<string, string>();
  const outcomeOf = new Map<string, string>();
  for (const c of r.callbackRequests) {
    const job = m.jobs.find((j) => j.name === c.jobName);
    expect(job, `a callback for ${c.jobName}, a job this run never created`).toBeDefined();
    expect(c.executionId[4] === "o" || c.executionId[4] === "i", `${c.webhookId}: a callback told a callback's outcome`).toBe(false);
    expect(c.type, `${c.webhookId}: a ${c.kind} callback telling ${c.type}`).toBe(
      c.kind === "success" ? "execution.succeeded" : "execution.dead",
    );
    const outcome = `${c.executionId}|${c.kind}|${c.attempts}|${c.finishedAt}`;
    const seen = idOf.get(outcome);
    expect(seen === undefined || seen === c.webhookId, `${outcome}: told under two webhook-ids ${seen} and ${c.webhookId}`).toBe(true);
    idOf.set(outcome, c.webhookId);
    const told = outcomeOf.get(c.webhookId);
    expect(told === undefined || told === outcome, `${c.webhookId}: one webhook-id told two outcomes (${told}, ${outcome})`).toBe(true);
    outcomeOf.set(c.webhookId, outcome);
  }
}

// ---------------------------------------------------------------------------------------------
// commands (Step is model.ts's; these are built by it)

/** What the model keeps of the features. */
export interface FeatureModel {
  /** debounce keys: the job each window runs and the payload its delivery must carry */
  debounced: Map<string, { jobId: string; mode: "trailing" | "leading"; payloads: string[] }>;
  /** when a healthy alert target was set (null: none, or deleted); whether one ever failed */
  alerts: { healthySince: number | null; everFailing: boolean };
  /** purges run: when, and whether the archive took the history */
  purges: { at: number; order: number; archived: boolean }[];
  /** idempotent replays of a job that had finished or was purged: no start of it may follow */
  replays: { jobId: string; order: number }[];
}

export function newFeatureModel(): FeatureModel {
  return { debounced: new Map(), alerts: { healthySince: null, everFailing: false }, purges: [], replays: [] };
}

export const DEBOUNCE_KEYS = ["dk0", "dk1"] as const;

/** After creates of a key: its window's job and the payload it holds now (GET: the order two concurrent replacements took). */
export async function refreshDebounced(m: FeatureRun, r: World, key: string): Promise<void> {
  const window = m.features.debounced.get(key);
  if (!window) return;
  const res = await r.api("GET", `/v1/jobs/${window.jobId}`);
  if (res.status !== 200) return;
  const job = m.jobs.find((j) => j.id === window.jobId);
  const body = (res.body.target as { body?: string | null }).body ?? null;
  if (job && body !== null && job.debounce) {
    expect(window.payloads, `key ${key}: the job holds a payload no create sent`).toContain(body);
    job.debounce.payload = body;
    if (res.body.nextRunAt) {
      const at = Date.parse(res.body.nextRunAt as string);
      if (job.status === "active" && job.dueAt !== at) {
        job.dueAt = at;
        if (!job.dueAts.includes(at)) job.dueAts.push(at);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// at the end of a run

interface ExecutionJson {
  id: string;
  jobId: string;
  status: string;
  finishedAt: string | null;
  callbacks?: { kind: string; status: string; attempts: number }[];
}

/**
 * What the features promise once everything healed. `originHeld`: a recurring target keeps slowing
 * its origin down (run.ts checkEnd), so an HTTP callback to that origin, like every key-less
 * delivery there, has no bound on when it is told (README, Flow control); a handler Worker's has.
 */
export async function checkFeaturesAtEnd(
  m: FeatureRun,
  r: World,
  executions: ExecutionJson[],
  finishBy: number,
  originHeld: boolean,
): Promise<void> {
  await checkCallbackRequests(m, r);
  for (const e of executions) {
    const job = m.jobs.find((j) => j.id === e.jobId);
    if (!job || (e.status !== "succeeded" && e.status !== "dead")) continue;
    const kind = e.status === "succeeded" ? "success" : "failure";
    const via = job.callbacks[kind];
    const told = r.callbackRequests.filter((c) => c.executionId === e.id && c.kind === kind);
    const where = `${job.name}: ${e.id} ${e.status}`;
    // a callback's state is on the execution once its outcome landed; nothing stays scheduled
    const finished = e.finishedAt !== null && Date.parse(e.finishedAt) < finishBy;
    const unbounded = (k: string) => originHeld && job.callbacks[k as keyof typeof job.callbacks] === "http";
    for (const c of e.callbacks ?? [])
      if (finished && !unbounded(c.kind)) expect(c.status, `${where}: its ${c.kind} callback is stuck`).not.toBe("scheduled");
    if (job.callbacksChanged) continue; // a PATCH while it ran: either answer holds
    if (via === null) {
      expect(told, `${where}: a ${kind} callback it does not have was told`).toEqual([]);
      continue;
    }
    if (!finished || unbounded(kind)) continue;
    expect(told.length, `${where}: its ${kind} callback (${via}) was never told`).toBeGreaterThan(0);
    expect(
      (e.callbacks ?? []).some((c) => c.kind === kind),
      `${where}: the execution does not show its ${kind} callback`,
    ).toBe(true);
  }

  // a debounced job's deliveries carry the payload its key last accepted
  for (const job of m.jobs) {
    if (!job.debounce?.payload) continue;
    for (const req of r.requests.filter((q) => q.jobId === job.id))
      expect(req.body, `${job.name} (debounce ${job.debounce.key}): delivered a payload it no longer held`).toBe(job.debounce.payload);
  }

  // every death after a healthy alert target was set reaches it
  const { healthySince, everFailing } = m.features.alerts;
  if (healthySince !== null && !everFailing) {
    const digested = new Set(r.digests.filter((d) => d.status === 200).flatMap((d) => d.deadIds));
    for (const e of executions) {
      if (e.status !== "dead" || e.finishedAt === null) continue;
      const at = Date.parse(e.finishedAt);
      if (at <= healthySince + 1_000 || at >= finishBy) continue;
      expect(digested.has(e.id), `${e.id} died at ${e.finishedAt}: no digest told the alert target`).toBe(true);
    }
  }

  // a key replayed within the window never runs its job again
  const starts = r.requests.map((q) => ({ order: q.order, jobId: q.jobId }));
  for (const replay of m.features.replays) {
    const again = [...starts, ...m.pullStarts].filter((s) => s.jobId === replay.jobId && s.order > replay.order);
    expect(again.length, `${replay.jobId}: ran again after a replay of its idempotency key`).toBe(0);
  }
}

/** A job the purges may have taken: its GET answers 404, and then the archive must have its execution. */
export async function checkPurged(m: FeatureRun, r: World, job: FeatureJob, executionId: string): Promise<void> {
  const archivedPurge = m.features.purges.some((p) => p.archived);
  expect(m.features.purges.length > 0, `${job.name} (${job.id}): the job is gone without a purge`).toBe(true);
  if (!archivedPurge) return;
  const res = await r.api("GET", `/v1/executions/${executionId}`);
  expect(res.status, `${job.name}: purged, and its execution ${executionId} is not in the archive`).toBe(200);
}

/** Every dead letter the DLQ lists can be redriven (run last: it changes what it redrives). */
export async function checkDeadLettersRedrivable(r: World): Promise<void> {
  const dlq = await r.api("GET", "/v1/dlq?limit=100");
  expect(dlq.status).toBe(200);
  for (const dead of dlq.body.executions as { id: string }[]) {
    const res = await r.api("POST", `/v1/executions/${dead.id}/redrive`);
    expect([202, 409], `${dead.id} is listed in the DLQ, and its redrive answered ${res.status}: ${JSON.stringify(res.body)}`).toContain(
      res.status,
    );
  }
}
