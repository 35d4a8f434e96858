/**
 * The reference model of the model-based test (model.test.ts) and its commands. The model is
 * what a user knows: which jobs were accepted (2xx), what each was last told (run time,
 * schedule, cancel, pause, resume: answered 200, applied; 202, durable and converging), and what
 * its target answers. It does not simulate the scheduler; it says what the user must see, and
 * each command checks it against what the real system did (World, world.ts):
 *
 * - a change answered 2xx is never undone: after a cancel or pause answered 200, no attempt of
 *   the job starts (a running one finishes); after a run time answered 200, none starts before it;
 * - every delivery carries its execution's one id (a one-off job's is named after the job, an
 *   occurrence's after its job and due time, which the job's schedule matches);
 * - a flow-control key's limits hold at the target: never more than `rate` starts in a window of
 *   `periodSeconds`, never more than `parallelism` requests unanswered at once.
 *
 * Liveness (every active job's due execution delivered within the documented bounds), metrics
 * and the final states are checked at the end of a run, after the harness healed every fault
 * and moved the clock past every due time (model.test.ts).
 */
import { Cron } from "croner";
import fc from "fast-check";
import { expect } from "vitest";
import { occurrenceId, oneOffExecutionId, timeOfId } from "../../../src/core/id";
import {
  type Callbacks,
  type CallbackVia,
  checkCallbackRequests,
  checkGroups,
  DEBOUNCE_KEYS,
  type Extras,
  extrasArb,
  extrasBody,
  type FeatureModel,
  NO_CALLBACKS,
  NO_EXTRAS,
  newFeatureModel,
  refreshDebounced,
} from "./features";
import { type Answer, type ApiAnswer, PULL_QUEUE, type RpcFault, type World } from "./world";

export const CRONS = ["*/30 * * * * *", "0 * * * * *", "15 */2 * * * *"] as const;
export const FLOW_KEYS = {
  rated: { key: "rated", rate: 2, periodSeconds: 1 },
  single: { key: "single", parallelism: 1 },
} as const;
export type FlowKeyName = keyof typeof FLOW_KEYS;
/** every job's retry policy: short, so a run sees attempts exhausted */
export const RETRY = { maxAttempts: 3, initialDelayMs: 1_000, maxDelayMs: 4_000, factor: 2, jitter: 0 };

export interface JobModel {
  name: string;
  id: string;
  recurring: boolean;
  pull: boolean;
  flowKey: FlowKeyName | null;
  script: Answer[];
  /** what the user was last told: active, paused, canceled; finished once a change said it was */
  status: "active" | "paused" | "canceled" | "finished";
  /** a one-off job's run time as last answered */
  dueAt: number | null;
  /** every run time it had: a 202 may still run at an older one until the sync pass */
  dueAts: number[];
  cron: string | null;
  crons: string[];
  /** the start order (World.order) when a cancel or pause took effect: no start of the job from there */
  stoppedAt: number | null;
  /** starts (target requests and pull leases) that must not come before this time, from that order on */
  notBefore: { order: number; at: number } | null;
  /** its last change was answered 202: it holds once the sync pass applied it (the heal's first scan) */
  converging: boolean;
  /** when its last 2xx change (or create) was answered */
  changedAt: number;
  /** its callbacks as last told (features.ts) */
  callbacks: Callbacks;
  /** a PATCH changed its callbacks: an outcome then may or may not have told one */
  callbacksChanged: boolean;
  /** its priority as last told (5: the default) */
  priority: number;
  /** a debounced job: its key and mode, and the payload its delivery must carry */
  debounce: { key: string; mode: "trailing" | "leading"; payload: string | null } | null;
  /**
   * the start order when its run time was last changed (sent): a start from then on at or after
   * the new run time is the run the change asked for, also when the change answered 202 and had
   * applied already (its answer lost), before the sync pass made notBefore bind
   */
  liveFrom?: number;
}

export interface PullLeaseModel {
  token: string;
  attempt: number;
  jobId: string;
  executionId: string;
  deadlineAt: number;
}

/** A start of an attempt the model saw: a target request or a pull lease. */
export interface Start {
  order: number;
  at: number;
  jobId: string;
  executionId: string;
  kind: "http" | "pull";
}

export class Model {
  readonly jobs: JobModel[] = [];
  readonly leases: PullLeaseModel[] = [];
  /** pull leases granted, as starts (target requests are the world's) */
  readonly pullStarts: Start[] = [];
  /** redrives answered 2xx (each takes one execution out of dead) */
  redrives = 0;
  /** successful pull completions answered 200, by execution id and attempt */
  readonly pullCompleted: { executionId: string; attempt: number }[] = [];
  readonly pausedKeys = new Set<string>();
  readonly usedKeys = new Set<FlowKeyName>();
  readonly idempotencyKeys: { key: string; body: unknown; jobName: string }[] = [];
  /** bulk actions started (their ids), checked at the end */
  readonly actions: { id: string; kind: string; jobIds: string[]; settled: boolean }[] = [];
  /** the number of target requests already checked */
  checkedSeq = 0;
  steps: string[] = [];
  /** print each step as it starts (MODEL_VERBOSE=2): a sequence that hangs shows where */
  trace = false;
  /** callbacks, debounce, alerts, purges (features.ts) */
  readonly features: FeatureModel = newFeatureModel();

  private names = 0;
  private payloads = 0;

  /** A payload unique in the run (a debounced create's body). */
  newPayload(): string {
    return `payload-${this.payloads++}`;
  }

  /** A job's name, unique in the run (two creates at once get two): its target path and idempotency key. */
  newName(): string {
    return `j${this.names++}`;
  }

  job(i: number): JobModel | undefined {
    return this.jobs.length === 0 ? undefined : this.jobs[i % this.jobs.length];
  }
}

type Real = World;
type Cmd = fc.AsyncCommand<Model, Real>;

// ---------------------------------------------------------------------------------------------
// what a job's target answers

const answerArb: fc.Arbitrary<Answer> = fc.oneof(
  { weight: 6, arbitrary: fc.constant({ status: 200 }) },
  { weight: 2, arbitrary: fc.constant({ status: 500 }) },
  { weight: 1, arbitrary: fc.constant({ status: 404 }) },
  {
    weight: 2,
    arbitrary: fc.record({
      status: fc.constantFrom(429, 503),
      // any Retry-After: a few seconds, or a year
      retryAfterS: fc.oneof({ weight: 9, arbitrary: fc.integer({ min: 0, max: 20 }) }, { weight: 1, arbitrary: fc.constant(31_536_000) }),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ hang: true as const }) },
);
const scriptArb = fc.array(answerArb, { minLength: 1, maxLength: 3 });

// ---------------------------------------------------------------------------------------------
// online checks: after every command, over what happened during it

/** Every start since the last check: not after a stop answered 200, not before its run time, with its execution's id. */
export function checkStarts(model: Model, world: Real): void {
  const starts: Start[] = [
    ...world.requests
      .slice(model.checkedSeq)
      .map((r) => ({ order: r.order, at: r.at, jobId: r.jobId, executionId: r.executionId, kind: "http" as const })),
  ];
  model.checkedSeq = world.requests.length;
  for (const s of starts) checkStart(model, s);
  checkFlowLimits(world);
}

export function checkStart(model: Model, s: Start): void {
  const job = model.jobs.find((j) => j.id === s.jobId);
  if (!job) return; // not a job this run created (can't be: targets are per run)
  const where = `${job.name} (${job.id}) ${s.kind} start #${s.order} at +${s.at - (job.dueAt ?? s.at)} ms`;
  expect(job.stoppedAt === null || s.order < job.stoppedAt, `${where}: started after its cancel or pause took effect`).toBe(true);
  if (job.recurring) {
    const at = timeOfId(s.executionId);
    expect(
      at !== undefined && s.executionId === occurrenceId(job.id, at),
      `${where}: ${s.executionId} is not an occurrence of the job`,
    ).toBe(true);
    const matches = job.crons.some((cron) => new Cron(cron, { timezone: "UTC" }).nextRun(new Date(at! - 1))?.getTime() === at);
    expect(matches, `${where}: occurrence at ${new Date(at!).toISOString()} matches none of its schedules ${job.crons}`).toBe(true);
    expect(s.at >= at!, `${where}: occurrence started ${at! - s.at} ms before its due time`).toBe(true);
  } else {
    expect(s.executionId, `${where}: webhook-id`).toBe(oneOffExecutionId(job.id));
    if (job.notBefore && s.order >= job.notBefore.order) {
      expect(s.at >= job.notBefore.at, `${where}: started ${job.notBefore.at - s.at} ms before its run time`).toBe(true);
    }
  }
}

/** A key's limits, as the target sees them: starts per window, requests unanswered at once. */
function checkFlowLimits(world: Real): void {
  for (const [name, spec] of Object.entries(FLOW_KEYS)) {
    const mine = world.requests.filter((r) => r.flowKey === name);
    if (mine.length === 0) continue;
    if ("rate" in spec) {
      const periodMs = spec.periodSeconds * 1_000;
      for (const r of mine) {
        const inWindow = mine.filter((o) => o.at > r.at - periodMs && o.at <= r.at && o.seq <= r.seq).length;
        expect(inWindow, `key ${name}: ${inWindow} starts in the ${periodMs} ms before #${r.seq}`).toBeLessThanOrEqual(spec.rate);
      }
    }
    if ("parallelism" in spec) {
      for (const r of mine) {
        expect(r.openAtArrival, `key ${name}: ${r.openAtArrival} requests unanswered at #${r.seq}`).toBeLessThanOrEqual(spec.parallelism);
      }
    }
  }
}

/**
 * A bulk action changes each job as its single request would, when its page runs (an alarm, in
 * whichever step ran it): once it is done, the model applies it to each job it did not refuse,
 * after the step's other changes (one that ran before it would have made it refuse the job), and
 * its promises bind from the end of that step.
 */
export async function settleActions(m: Model, r: Real): Promise<void> {
  for (const action of m.actions) {
    if (action.settled) continue;
    const res = await r.api("GET", `/v1/actions/${action.id}`);
    if (res.status !== 200 || res.body.status !== "done") continue;
    action.settled = true;
    const refused = new Set((res.body.failures as { id: string }[]).map((f) => f.id));
    for (const job of m.jobs.filter((j) => action.jobIds.includes(j.id) && !refused.has(j.id))) {
      if (action.kind === "cancel" && (job.status === "active" || job.status === "paused")) stop(job, "canceled", 200, r);
      else if (action.kind === "pause" && job.recurring && job.status === "active") stop(job, "paused", 200, r);
      else if (action.kind === "resume" && job.recurring && job.status === "paused") {
        job.status = "active";
        job.stoppedAt = null;
      } else continue;
      job.changedAt = r.now;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// commands

abstract class Step implements Cmd {
  check(_m: Readonly<Model>): boolean {
    return true;
  }
  async run(m: Model, r: Real): Promise<void> {
    m.steps.push(this.toString());
    if (m.trace) console.log(`step ${m.steps.length}: ${this}`);
    // a step that never ends is a defect too (a deadlock, an await nothing resolves): it fails the run
    let timer: ReturnType<typeof setTimeout> | undefined;
    const hung = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`step ${m.steps.length} (${this}) did not end in ${STEP_TIMEOUT_MS} ms`)), STEP_TIMEOUT_MS);
    });
    try {
      await Promise.race([this.act(m, r), hung]);
    } finally {
      clearTimeout(timer);
    }
    await settleActions(m, r);
    checkStarts(m, r);
    checkGroups(m, r);
    await checkCallbackRequests(m, r);
  }
  abstract act(m: Model, r: Real): Promise<void>;
  abstract toString(): string;
}

function jobBody(
  r: Real,
  spec: { name: string; pull: boolean; flowKey: FlowKeyName | null; extras?: Extras; body?: string },
  when: Record<string, unknown>,
) {
  const target = spec.pull
    ? { pull: PULL_QUEUE, payload: { job: spec.name } }
    : { url: r.targetUrl(spec.name), ...(spec.body === undefined ? {} : { body: spec.body }) };
  return {
    name: spec.name,
    target,
    retry: RETRY,
    ...(spec.flowKey ? { flowControl: FLOW_KEYS[spec.flowKey] } : {}),
    ...extrasBody(r, spec.name, spec.extras ?? NO_EXTRAS),
    ...when,
  };
}

function accept(
  m: Model,
  r: Real,
  body: { id: string },
  spec: Omit<
    JobModel,
    "id" | "status" | "stoppedAt" | "converging" | "changedAt" | "notBefore" | "callbacks" | "callbacksChanged" | "priority" | "debounce"
  > &
    Partial<Pick<JobModel, "callbacks" | "priority" | "debounce">>,
): JobModel {
  const job: JobModel = {
    callbacks: NO_CALLBACKS,
    callbacksChanged: false,
    priority: 5,
    debounce: null,
    ...spec,
    id: body.id,
    status: "active",
    stoppedAt: null,
    notBefore: spec.dueAt === null ? null : { order: 0, at: spec.dueAt },
    converging: false,
    changedAt: r.now,
  };
  m.jobs.push(job);
  r.scripts.set(job.id, spec.pull ? [{ status: 200 }] : spec.script);
  if (spec.flowKey) {
    r.flowKeys.set(job.id, spec.flowKey);
    m.usedKeys.add(spec.flowKey);
  }
  return job;
}

const MAX_JOBS = 10;
/** real time a step may take before it counts as hung */
const STEP_TIMEOUT_MS = 60_000;

export class CreateOneOff extends Step {
  constructor(
    readonly delayMs: number,
    readonly script: Answer[],
    readonly flowKey: FlowKeyName | null,
    readonly pull: boolean,
    readonly idempotency: { reuse: number } | null,
    readonly extras: Extras = NO_EXTRAS,
  ) {
    super();
  }
  override check(m: Readonly<Model>): boolean {
    return m.jobs.length < MAX_JOBS;
  }
  async act(m: Model, r: Real): Promise<void> {
    const name = m.newName();
    const runAt = Math.ceil((r.now + this.delayMs) / 1000) * 1000;
    const reused =
      this.idempotency && m.idempotencyKeys.length > 0 ? m.idempotencyKeys[this.idempotency.reuse % m.idempotencyKeys.length] : undefined;
    const body =
      reused?.body ??
      jobBody(r, { name, pull: this.pull, flowKey: this.flowKey, extras: this.extras }, { runAt: new Date(runAt).toISOString() });
    const key = reused?.key ?? (this.idempotency ? `idem-${name}` : undefined);
    const original = reused ? m.jobs.find((j) => j.name === reused.jobName) : undefined;
    // a replay of a job that finished, or that a purge took: it must not run again (features.ts)
    const before = original ? await r.api("GET", `/v1/jobs/${original.id}`) : undefined;
    const res = await r.api("POST", "/v1/jobs", body, key ? { "idempotency-key": key } : {});
    if (reused) {
      // the same key and request: the original job, never a second one
      if (res.status === 200) expect(res.body.id).toBe(original?.id);
      else expect([409, 500, 503], `a replay answered ${res.status}: ${JSON.stringify(res.body)}`).toContain(res.status);
      if (original && before && (before.status === 404 || ["completed", "canceled"].includes(before.body?.status))) {
        if (res.status === 200) expect(res.body.status, `${original.name}: a replay after it ended answered it active`).not.toBe("active");
        m.features.replays.push({ jobId: original.id, order: r.order });
      }
      return;
    }
    if (res.status !== 201) {
      expect([500, 503], `create answered ${res.status}: ${JSON.stringify(res.body)}`).toContain(res.status);
      return;
    }
    accept(m, r, res.body, {
      name,
      recurring: false,
      pull: this.pull,
      flowKey: this.flowKey,
      script: this.script,
      dueAt: runAt,
      dueAts: [runAt],
      cron: null,
      crons: [],
      callbacks: this.extras.callbacks,
      priority: this.extras.priority,
    });
    if (key) m.idempotencyKeys.push({ key, body, jobName: name });
  }
  toString(): string {
    return `CreateOneOff(+${this.delayMs}ms, ${JSON.stringify(this.script)}, key=${this.flowKey}, pull=${this.pull}, idem=${JSON.stringify(this.idempotency)}${this.extras === NO_EXTRAS ? "" : `, ${JSON.stringify(this.extras)}`})`;
  }
}

export class CreateRecurring extends Step {
  constructor(
    readonly cron: string,
    readonly script: Answer[],
    readonly pull: boolean,
    readonly extras: Extras = NO_EXTRAS,
  ) {
    super();
  }
  override check(m: Readonly<Model>): boolean {
    return m.jobs.length < MAX_JOBS;
  }
  async act(m: Model, r: Real): Promise<void> {
    const name = m.newName();
    const res = await r.api(
      "POST",
      "/v1/jobs",
      jobBody(r, { name, pull: this.pull, flowKey: null, extras: this.extras }, { cron: this.cron }),
    );
    if (res.status !== 201) {
      expect([500, 503], `create answered ${res.status}: ${JSON.stringify(res.body)}`).toContain(res.status);
      return;
    }
    accept(m, r, res.body, {
      name,
      recurring: true,
      pull: this.pull,
      flowKey: null,
      script: this.script,
      dueAt: null,
      dueAts: [],
      cron: this.cron,
      crons: [this.cron],
      callbacks: this.extras.callbacks,
      priority: this.extras.priority,
    });
  }
  toString(): string {
    return `CreateRecurring(${this.cron}, ${JSON.stringify(this.script)}, pull=${this.pull}${this.extras === NO_EXTRAS ? "" : `, ${JSON.stringify(this.extras)}`})`;
  }
}

/** Several one-off jobs in one request (POST /v1/jobs/batch), with a flow-control key or none. */
export class CreateBatch extends Step {
  constructor(
    readonly delaysMs: number[],
    readonly flowKey: FlowKeyName | null = null,
  ) {
    super();
  }
  override check(m: Readonly<Model>): boolean {
    return m.jobs.length + this.delaysMs.length <= MAX_JOBS;
  }
  async act(m: Model, r: Real): Promise<void> {
    const specs = this.delaysMs.map((delayMs) => {
      const name = m.newName();
      const runAt = Math.ceil((r.now + delayMs) / 1000) * 1000;
      return { name, runAt, body: jobBody(r, { name, pull: false, flowKey: this.flowKey }, { runAt: new Date(runAt).toISOString() }) };
    });
    const res = await r.api("POST", "/v1/jobs/batch", { jobs: specs.map((s) => s.body) });
    if (res.status !== 200) {
      expect([500, 503]).toContain(res.status);
      return;
    }
    for (const [i, result] of (res.body.results as { status: number; job?: { id: string } }[]).entries()) {
      if (result.status !== 201) continue;
      const s = specs[i]!;
      accept(m, r, result.job!, {
        name: s.name,
        recurring: false,
        pull: false,
        flowKey: this.flowKey,
        script: [{ status: 200 }],
        dueAt: s.runAt,
        dueAts: [s.runAt],
        cron: null,
        crons: [],
      });
    }
  }
  toString(): string {
    return `CreateBatch(${JSON.stringify(this.delaysMs)}, key=${this.flowKey})`;
  }
}

/** The model after a change the API answered: 200 applies it now, 202 once the sync pass ran. */
function changed(job: JobModel, status: number, r: Real): boolean {
  if (status !== 200 && status !== 202) return false;
  job.changedAt = r.now;
  job.converging = status === 202;
  return true;
}

/** What a 409 says of the job: it finished (a one-off job's execution ended), or it is already canceled. */
function refused(job: JobModel, res: ApiAnswer): void {
  expect(res.status, `unexpected answer ${res.status}: ${JSON.stringify(res.body)}`).toBeOneOf([404, 409, 500, 503]);
  expect(res.status, `a job of this tenant answered 404`).not.toBe(404);
  if (
    res.status === 409 &&
    job.status === "active" &&
    !job.recurring &&
    ["not_changeable", "not_cancelable"].includes(res.body?.error?.code)
  ) {
    job.status = "finished";
  }
}

export class PatchRunAt extends Step {
  constructor(
    readonly jobIndex: number,
    readonly choice: { back: number } | { delayMs: number },
  ) {
    super();
  }
  override check(m: Readonly<Model>): boolean {
    return m.jobs.some((j) => !j.recurring && j.status === "active");
  }
  async act(m: Model, r: Real): Promise<void> {
    const oneOffs = m.jobs.filter((j) => !j.recurring && j.status === "active");
    const job = oneOffs[this.jobIndex % oneOffs.length]!;
    // back and forth: an earlier run time of the job again, or a new one
    const runAt =
      "back" in this.choice ? job.dueAts[this.choice.back % job.dueAts.length]! : Math.ceil((r.now + this.choice.delayMs) / 1000) * 1000;
    const sentAt = r.order;
    const res = await r.api("PATCH", `/v1/jobs/${job.id}`, { runAt: new Date(runAt).toISOString() });
    if (!changed(job, res.status, r)) return refused(job, res);
    job.liveFrom = sentAt;
    job.dueAt = runAt;
    if (!job.dueAts.includes(runAt)) job.dueAts.push(runAt);
    // a 200 binds from the answer on; a 202 only once the sync pass applied it (converge)
    job.notBefore = res.status === 200 ? { order: r.order, at: runAt } : null;
  }
  toString(): string {
    return `PatchRunAt(${this.jobIndex}, ${JSON.stringify(this.choice)})`;
  }
}

/** A job that can still be changed: active or paused. */
function isLive(j: JobModel): boolean {
  return j.status === "active" || j.status === "paused";
}

/** The live job a command's index names (wrapping), for commands whose check found one. */
function liveJob(m: Model, index: number): JobModel {
  const live = m.jobs.filter(isLive);
  return live[index % live.length]!;
}

export class PatchName extends Step {
  constructor(readonly jobIndex: number) {
    super();
  }
  override check(m: Readonly<Model>): boolean {
    return m.jobs.some(isLive);
  }
  async act(m: Model, r: Real): Promise<void> {
    const job = liveJob(m, this.jobIndex);
    const res = await r.api("PATCH", `/v1/jobs/${job.id}`, { name: `${job.name}-renamed-${m.steps.length}` });
    if (!changed(job, res.status, r)) refused(job, res);
  }
  toString(): string {
    return `PatchName(${this.jobIndex})`;
  }
}

export class PatchCron extends Step {
  constructor(
    readonly jobIndex: number,
    readonly cron: string,
  ) {
    super();
  }
  override check(m: Readonly<Model>): boolean {
    return m.jobs.some((j) => j.recurring && isLive(j));
  }
  async act(m: Model, r: Real): Promise<void> {
    const live = m.jobs.filter((j) => j.recurring && isLive(j));
    const job = live[this.jobIndex % live.length]!;
    const res = await r.api("PATCH", `/v1/jobs/${job.id}`, { cron: this.cron });
    if (!changed(job, res.status, r)) return refused(job, res);
    job.cron = this.cron;
    if (!job.crons.includes(this.cron)) job.crons.push(this.cron);
  }
  toString(): string {
    return `PatchCron(${this.jobIndex}, ${this.cron})`;
  }
}

export class Cancel extends Step {
  constructor(readonly jobIndex: number) {
    super();
  }
  override check(m: Readonly<Model>): boolean {
    return m.jobs.length > 0;
  }
  async act(m: Model, r: Real): Promise<void> {
    const job = m.job(this.jobIndex)!;
    const res = await r.api("DELETE", `/v1/jobs/${job.id}`);
    if (!changed(job, res.status, r)) return refused(job, res);
    stop(job, "canceled", res.status, r);
  }
  toString(): string {
    return `Cancel(${this.jobIndex})`;
  }
}

function stop(job: JobModel, status: "canceled" | "paused", answer: number, r: Real): void {
  job.status = status;
  if (answer === 200) job.stoppedAt = r.order;
}

/** The heal's first scan applied every change answered 202: from here they bind. */
export function converge(m: Model, r: Real): void {
  for (const job of m.jobs) {
    if (!job.converging) continue;
    job.converging = false;
    if (job.status === "canceled" || job.status === "paused") job.stoppedAt ??= r.order;
    if (!job.recurring && job.dueAt !== null && job.status === "active") job.notBefore = { order: r.order, at: job.dueAt };
  }
}

export class Pause extends Step {
  constructor(readonly jobIndex: number) {
    super();
  }
  override check(m: Readonly<Model>): boolean {
    return m.jobs.some((j) => j.recurring && j.status === "active");
  }
  async act(m: Model, r: Real): Promise<void> {
    const live = m.jobs.filter((j) => j.recurring && j.status === "active");
    const job = live[this.jobIndex % live.length]!;
    const res = await r.api("POST", `/v1/jobs/${job.id}/pause`);
    if (!changed(job, res.status, r)) return refused(job, res);
    stop(job, "paused", res.status, r);
  }
  toString(): string {
    return `Pause(${this.jobIndex})`;
  }
}

export class Resume extends Step {
  constructor(readonly jobIndex: number) {
    super();
  }
  override check(m: Readonly<Model>): boolean {
    return m.jobs.some((j) => j.recurring && j.status === "paused");
  }
  async act(m: Model, r: Real): Promise<void> {
    const paused = m.jobs.filter((j) => j.recurring && j.status === "paused");
    const job = paused[this.jobIndex % paused.length]!;
    const res = await r.api("POST", `/v1/jobs/${job.id}/resume`);
    if (!changed(job, res.status, r)) return refused(job, res);
    job.status = "active";
    job.stoppedAt = null;
  }
  toString(): string {
    return `Resume(${this.jobIndex})`;
  }
}

export class Redrive extends Step {
  constructor(readonly pick: number) {
    super();
  }
  async act(m: Model, r: Real): Promise<void> {
    const dlq = await r.api("GET", "/v1/dlq?limit=100");
    if (dlq.status !== 200 || dlq.body.executions.length === 0) return;
    const dead = dlq.body.executions[this.pick % dlq.body.executions.length] as { id: string; jobId: string };
    const job = m.jobs.find((j) => j.id === dead.jobId);
    const res = await r.api("POST", `/v1/executions/${dead.id}/redrive`);
    if (res.status === 202) {
      m.redrives += 1;
      if (job && !job.recurring && job.status === "finished") job.status = "active";
      if (job) job.changedAt = r.now;
      return;
    }
    expect([409, 500, 503], `redrive answered ${res.status}: ${JSON.stringify(res.body)}`).toContain(res.status);
  }
  toString(): string {
    return `Redrive(${this.pick})`;
  }
}

export class Bulk extends Step {
  constructor(
    readonly kind: "cancel" | "pause" | "resume",
    readonly picks: number[],
  ) {
    super();
  }
  override check(m: Readonly<Model>): boolean {
    return m.jobs.length > 0;
  }
  async act(m: Model, r: Real): Promise<void> {
    const jobs = [...new Set(this.picks.map((p) => m.job(p)!))];
    const res = await r.api("POST", `/v1/jobs/${this.kind}`, { ids: jobs.map((j) => j.id) });
    if (res.status !== 202) {
      expect([500, 503], `bulk ${this.kind} answered ${res.status}: ${JSON.stringify(res.body)}`).toContain(res.status);
      return;
    }
    // each job changes when the action's page runs (an alarm): settleActions applies it then
    m.actions.push({ id: res.body.id, kind: this.kind, jobIds: jobs.map((j) => j.id), settled: false });
    r.actions.push(res.body.id);
  }
  toString(): string {
    return `Bulk(${this.kind}, ${JSON.stringify(this.picks)})`;
  }
}

/** Time passes; alarms armed meanwhile run at the end (on time) or not yet (late: a later Advance runs them). */
export class Advance extends Step {
  constructor(
    readonly ms: number,
    readonly runAlarms: boolean,
  ) {
    super();
  }
  async act(_m: Model, r: Real): Promise<void> {
    if (!this.runAlarms) {
      r.clock.advance(this.ms);
      return;
    }
    // alarm by alarm, each at its time, as the platform runs them
    const until = r.now + this.ms;
    for (let i = 0; i < 50; i++) {
      const next = await r.nextAlarmAt();
      if (next === null || next > until) break;
      if (next > r.now) r.clock.travelTo(next);
      await r.runDueAlarms();
    }
    if (until > r.now) r.clock.travelTo(until);
  }
  toString(): string {
    return `Advance(${this.ms}, alarms=${this.runAlarms})`;
  }
}

export class Deliver extends Step {
  constructor(readonly count: number) {
    super();
  }
  async act(_m: Model, r: Real): Promise<void> {
    await r.deliver(this.count);
  }
  toString(): string {
    return `Deliver(${this.count})`;
  }
}

export class DropMessage extends Step {
  constructor(readonly i: number) {
    super();
  }
  async act(_m: Model, r: Real): Promise<void> {
    r.drop(this.i);
  }
  toString(): string {
    return `DropMessage(${this.i})`;
  }
}

export class DuplicateMessage extends Step {
  constructor(readonly i: number) {
    super();
  }
  async act(_m: Model, r: Real): Promise<void> {
    r.duplicate(this.i);
  }
  toString(): string {
    return `DuplicateMessage(${this.i})`;
  }
}

/** The bucket of the i-th job restarts (or bucket i, with no job yet): its memory is lost, its storage kept. */
export class RestartBucket extends Step {
  constructor(readonly jobIndex: number) {
    super();
  }
  async act(m: Model, r: Real): Promise<void> {
    const job = m.job(this.jobIndex);
    await r.restart(job ? r.bucketOf(job.id) : this.jobIndex % 4);
  }
  toString(): string {
    return `RestartBucket(${this.jobIndex})`;
  }
}

export class Scan extends Step {
  async act(_m: Model, r: Real): Promise<void> {
    await r.scan();
  }
  toString(): string {
    return "Scan()";
  }
}

export class FailRpc extends Step {
  constructor(
    readonly method: string,
    readonly fault: RpcFault | null,
  ) {
    super();
  }
  async act(_m: Model, r: Real): Promise<void> {
    if (this.fault === null) r.rpcFaults.delete(this.method);
    else r.rpcFaults.set(this.method, this.fault);
  }
  toString(): string {
    return `FailRpc(${this.method}, ${this.fault})`;
  }
}

export class D1Down extends Step {
  constructor(readonly down: boolean) {
    super();
  }
  async act(_m: Model, r: Real): Promise<void> {
    r.d1Down = this.down;
  }
  toString(): string {
    return `D1Down(${this.down})`;
  }
}

export class ReleaseHangs extends Step {
  constructor(readonly status: number) {
    super();
  }
  override check(_m: Readonly<Model>): boolean {
    return true;
  }
  async act(_m: Model, r: Real): Promise<void> {
    await r.releaseHangs(this.status);
  }
  toString(): string {
    return `ReleaseHangs(${this.status})`;
  }
}

export class TickHeartbeats extends Step {
  async act(_m: Model, r: Real): Promise<void> {
    await r.tickHeartbeats();
  }
  toString(): string {
    return "TickHeartbeats()";
  }
}

export class PullLease extends Step {
  constructor(
    readonly max: number,
    readonly leaseMs: number,
  ) {
    super();
  }
  override check(m: Readonly<Model>): boolean {
    return m.jobs.some((j) => j.pull);
  }
  async act(m: Model, r: Real): Promise<void> {
    await leasePulls(m, r, this.max, this.leaseMs);
  }
  toString(): string {
    return `PullLease(${this.max}, ${this.leaseMs})`;
  }
}

/** A pull worker leases; each lease is a start, checked like a target request. */
export async function leasePulls(m: Model, r: Real, max: number, leaseMs: number): Promise<PullLeaseModel[]> {
  const res = await r.api("POST", `/v1/pull/${PULL_QUEUE}/lease`, { max, leaseMs, waitMs: 0 });
  if (res.status !== 200) {
    expect([500, 503], `lease answered ${res.status}: ${JSON.stringify(res.body)}`).toContain(res.status);
    return [];
  }
  const leases: PullLeaseModel[] = [];
  for (const l of res.body.leases as { token: string; executionId: string; jobId: string; attempt: number; leaseDeadlineAt: string }[]) {
    const lease = {
      token: l.token,
      attempt: l.attempt,
      jobId: l.jobId,
      executionId: l.executionId,
      deadlineAt: Date.parse(l.leaseDeadlineAt),
    };
    leases.push(lease);
    m.leases.push(lease);
    const start: Start = { order: r.order++, at: r.now, jobId: l.jobId, executionId: l.executionId, kind: "pull" };
    m.pullStarts.push(start);
    checkStart(m, start);
  }
  return leases;
}

export class PullReport extends Step {
  constructor(
    readonly pick: number,
    readonly report: "complete" | "fail" | "heartbeat",
  ) {
    super();
  }
  override check(m: Readonly<Model>): boolean {
    return m.leases.length > 0;
  }
  async act(m: Model, r: Real): Promise<void> {
    const lease = m.leases[this.pick % m.leases.length]!;
    await reportPull(m, r, lease, this.report);
  }
  toString(): string {
    return `PullReport(${this.pick}, ${this.report})`;
  }
}

export async function reportPull(m: Model, r: Real, lease: PullLeaseModel, report: "complete" | "fail" | "heartbeat"): Promise<void> {
  const body = report === "fail" ? { retryable: true, error: "model worker failed" } : undefined;
  const res = await r.api("POST", `/v1/pull/leases/${lease.token}/${report}`, body);
  if (report !== "heartbeat" && res.status !== 500 && res.status !== 503) m.leases.splice(m.leases.indexOf(lease), 1);
  if (res.status === 200 && report === "complete") {
    m.pullCompleted.push({ executionId: lease.executionId, attempt: lease.attempt });
  }
  expect([200, 409, 500, 503], `pull ${report} answered ${res.status}: ${JSON.stringify(res.body)}`).toContain(res.status);
}

export class FlowPause extends Step {
  constructor(
    readonly key: FlowKeyName,
    readonly paused: boolean,
  ) {
    super();
  }
  async act(m: Model, r: Real): Promise<void> {
    const res = await r.api("POST", `/v1/flow-control/${this.key}/${this.paused ? "pause" : "resume"}`);
    if (res.status !== 200) return;
    if (this.paused) m.pausedKeys.add(this.key);
    else m.pausedKeys.delete(this.key);
  }
  toString(): string {
    return `FlowPause(${this.key}, ${this.paused})`;
  }
}

/** A job's priority is PATCHed: a 200 means its bucket (and a pull queue's order) holds it. */
export class PatchPriority extends Step {
  constructor(
    readonly jobIndex: number,
    readonly priority: number,
  ) {
    super();
  }
  override check(m: Readonly<Model>): boolean {
    return m.jobs.some(isLive);
  }
  async act(m: Model, r: Real): Promise<void> {
    const job = liveJob(m, this.jobIndex);
    const res = await r.api("PATCH", `/v1/jobs/${job.id}`, { priority: this.priority });
    if (!changed(job, res.status, r)) return refused(job, res);
    job.priority = this.priority;
  }
  toString(): string {
    return `PatchPriority(${this.jobIndex}, ${this.priority})`;
  }
}

/** A job's callback of one kind is added, moved to a handler Worker, or removed (null). */
export class PatchCallback extends Step {
  constructor(
    readonly jobIndex: number,
    readonly kind: "success" | "failure",
    readonly via: CallbackVia | null,
  ) {
    super();
  }
  override check(m: Readonly<Model>): boolean {
    return m.jobs.some(isLive);
  }
  async act(m: Model, r: Real): Promise<void> {
    const job = liveJob(m, this.jobIndex);
    const field = this.kind === "success" ? "callback" : "failureCallback";
    const target = this.via === null ? null : this.via === "http" ? { url: r.callbackUrl(job.name, this.kind) } : { worker: "test" };
    const res = await r.api("PATCH", `/v1/jobs/${job.id}`, { [field]: target });
    if (!changed(job, res.status, r)) return refused(job, res);
    job.callbacks = { ...job.callbacks, [this.kind]: this.via };
    job.callbacksChanged = true;
  }
  toString(): string {
    return `PatchCallback(${this.jobIndex}, ${this.kind}, ${this.via})`;
  }
}

/** A debounced create: a new job and window (201), or the window's job replaced or absorbed (200). */
export class CreateDebounced extends Step {
  constructor(
    readonly keyIndex: number,
    readonly mode: "trailing" | "leading",
    readonly delayS: number,
  ) {
    super();
  }
  override check(m: Readonly<Model>): boolean {
    return m.jobs.length < MAX_JOBS;
  }
  async act(m: Model, r: Real): Promise<void> {
    const key = `${DEBOUNCE_KEYS[this.keyIndex % DEBOUNCE_KEYS.length]}-${this.mode}`;
    const name = m.newName();
    const payload = m.newPayload();
    const body = jobBody(
      r,
      { name, pull: false, flowKey: null, body: payload },
      { debounce: { key, delay: `${this.delayS}s`, mode: this.mode } },
    );
    const res = await r.api("POST", "/v1/jobs", body);
    if (res.status === 201) {
      const dueAt = Date.parse(res.body.nextRunAt as string);
      const job = accept(m, r, res.body, {
        name,
        recurring: false,
        pull: false,
        flowKey: null,
        script: [{ status: 200 }],
        dueAt,
        dueAts: [dueAt],
        cron: null,
        crons: [],
        debounce: { key, mode: this.mode, payload },
      });
      m.features.debounced.set(key, { jobId: job.id, mode: this.mode, payloads: [payload] });
      return;
    }
    if (res.status === 200) {
      const window = m.features.debounced.get(key);
      expect(window?.jobId, `key ${key}: a 200 named a job that is not its window's`).toBe(res.body.id);
      if (!window) return;
      const job = m.jobs.find((j) => j.id === window.jobId)!;
      const debounce = res.body.debounce as { replaced?: boolean; absorbed?: boolean };
      if (this.mode === "trailing") {
        expect(debounce.replaced, `key ${key}: a trailing create answered 200 without replacing`).toBe(true);
        window.payloads.push(payload);
        // the replacement's run time binds from its answer on (a PATCH of the run time)
        job.changedAt = r.now;
      } else {
        expect(debounce.absorbed, `key ${key}: a leading create answered 200 without being absorbed`).toBe(true);
      }
      await refreshDebounced(m, r, key);
      if (this.mode === "trailing" && job.dueAt !== null) job.notBefore = { order: r.order, at: job.dueAt };
      return;
    }
    expect([500, 503], `debounced create answered ${res.status}: ${JSON.stringify(res.body)}`).toContain(res.status);
  }
  toString(): string {
    return `CreateDebounced(${this.keyIndex}, ${this.mode}, ${this.delayS}s)`;
  }
}

/** The tenant's alert target: one that answers 200, one that answers 500, or none. */
export class SetAlerts extends Step {
  constructor(readonly mode: "healthy" | "failing" | "none") {
    super();
  }
  async act(m: Model, r: Real): Promise<void> {
    const alerts = m.features.alerts;
    if (this.mode === "none") {
      const res = await r.api("DELETE", "/v1/alerts");
      expect([204, 500, 503]).toContain(res.status);
      if (res.status === 204) alerts.healthySince = null;
      return;
    }
    r.alertsHealthy = this.mode === "healthy";
    const res = await r.api("PUT", "/v1/alerts", { url: r.alertsUrl() });
    expect([200, 500, 503], `PUT /v1/alerts answered ${res.status}: ${JSON.stringify(res.body)}`).toContain(res.status);
    if (this.mode === "failing") alerts.everFailing = true;
    else if (res.status === 200) alerts.healthySince ??= r.now;
  }
  toString(): string {
    return `SetAlerts(${this.mode})`;
  }
}

/**
 * The scan purges history now: every finished job and occurrence (the size watermark at 1 byte,
 * or a retention of 1 ms: dead letters past it go too), through the archive, whose writes may fail.
 */
export class Purge extends Step {
  constructor(
    readonly kind: "watermark" | "retention",
    readonly archiveFails: boolean,
  ) {
    super();
  }
  async act(m: Model, r: Real): Promise<void> {
    r.archiveFails = this.archiveFails;
    try {
      await r.scan(this.kind === "watermark" ? { HISTORY_MAX_BYTES: "1" } : { HISTORY_RETENTION_MS: "1" });
    } finally {
      r.archiveFails = false;
    }
    m.features.purges.push({ at: r.now, order: r.order, archived: !this.archiveFails });
  }
  toString(): string {
    return `Purge(${this.kind}, archiveFails=${this.archiveFails})`;
  }
}

/** Two steps at once (their awaits interleave in the isolate, as two requests would). */
export class Together extends Step {
  constructor(
    readonly a: Step,
    readonly b: Step,
  ) {
    super();
  }
  override check(m: Readonly<Model>): boolean {
    return this.a.check(m) && this.b.check(m);
  }
  async act(m: Model, r: Real): Promise<void> {
    await Promise.all([this.a.act(m, r), this.b.act(m, r)]);
  }
  toString(): string {
    return `Together(${this.a}, ${this.b})`;
  }
}

// ---------------------------------------------------------------------------------------------
// the command arbitraries

const NEAR_MS = fc.integer({ min: 0, max: 60_000 });
/** within the lookahead (180 s) but after the first minute: held by its bucket, due during the heal */
const MID_MS = fc.integer({ min: 60_000, max: 170_000 });
/** beyond the lookahead (180 s): the job waits in D1 for the sync pass */
const FAR_MS = fc.integer({ min: 200_000, max: 400_000 });
const flowKeyArb = fc.oneof(
  { weight: 4, arbitrary: fc.constant(null) },
  { weight: 1, arbitrary: fc.constantFrom<FlowKeyName>("rated", "single") },
);
/** true or false, with these weights */
function weighted(trueWeight: number, falseWeight: number): fc.Arbitrary<boolean> {
  return fc.oneof({ weight: trueWeight, arbitrary: fc.constant(true) }, { weight: falseWeight, arbitrary: fc.constant(false) });
}
const RPC_METHODS = ["applyJobs", "claim", "complete", "pullWindow", "heartbeat", "redrive", "leaseOffered"] as const;

/** What users and the platform do, each with how often it comes (out of the sum). */
const simpleSteps: fc.WeightedArbitrary<Step>[] = [
  {
    weight: 3,
    arbitrary: fc
      .record({
        delay: fc.oneof(NEAR_MS, MID_MS, FAR_MS),
        script: scriptArb,
        flowKey: flowKeyArb,
        pull: weighted(1, 6),
        idem: fc.option(fc.record({ reuse: fc.nat(5) }), { freq: 4 }),
        extras: extrasArb,
      })
      // flow control is refused on a pull target (its workers set the pace)
      .map((s) => new CreateOneOff(s.delay, s.script, s.pull ? null : s.flowKey, s.pull, s.idem, s.extras)),
  },
  {
    weight: 2,
    arbitrary: fc
      .record({ cron: fc.constantFrom(...CRONS), script: scriptArb, pull: weighted(1, 4), extras: extrasArb })
      .map((s) => new CreateRecurring(s.cron, s.script, s.pull, s.extras)),
  },
  {
    weight: 1,
    arbitrary: fc
      .record({
        // apart, or all due at the same moment (a backlog for a key)
        delays: fc.oneof(
          fc.array(fc.oneof(NEAR_MS, MID_MS, FAR_MS), { minLength: 2, maxLength: 4 }),
          fc.tuple(fc.oneof(NEAR_MS, MID_MS, FAR_MS), fc.integer({ min: 2, max: 4 })).map(([d, n]) => Array.from({ length: n }, () => d)),
        ),
        flowKey: flowKeyArb,
      })
      .map((s) => new CreateBatch(s.delays, s.flowKey)),
  },
  {
    weight: 2,
    arbitrary: fc
      .record({
        job: fc.nat(7),
        choice: fc.oneof(fc.record({ back: fc.nat(3) }), fc.record({ delayMs: fc.oneof(NEAR_MS, MID_MS, FAR_MS) })),
      })
      .map((s) => new PatchRunAt(s.job, s.choice)),
  },
  { weight: 1, arbitrary: fc.nat(7).map((j) => new PatchName(j)) },
  { weight: 1, arbitrary: fc.record({ job: fc.nat(7), cron: fc.constantFrom(...CRONS) }).map((s) => new PatchCron(s.job, s.cron)) },
  { weight: 1, arbitrary: fc.nat(7).map((j) => new Cancel(j)) },
  { weight: 1, arbitrary: fc.nat(7).map((j) => new Pause(j)) },
  { weight: 1, arbitrary: fc.nat(7).map((j) => new Resume(j)) },
  { weight: 1, arbitrary: fc.nat(7).map((p) => new Redrive(p)) },
  {
    weight: 1,
    arbitrary: fc
      .record({
        kind: fc.constantFrom("cancel", "pause", "resume") as fc.Arbitrary<"cancel" | "pause" | "resume">,
        picks: fc.array(fc.nat(7), { minLength: 1, maxLength: 3 }),
      })
      .map((s) => new Bulk(s.kind, s.picks)),
  },
  {
    weight: 4,
    arbitrary: fc
      .record({ ms: fc.oneof(fc.integer({ min: 0, max: 5_000 }), fc.integer({ min: 5_000, max: 90_000 })), alarms: weighted(4, 1) })
      .map((s) => new Advance(s.ms, s.alarms)),
  },
  { weight: 4, arbitrary: fc.integer({ min: 1, max: 6 }).map((n) => new Deliver(n)) },
  { weight: 1, arbitrary: fc.nat(10).map((i) => new DropMessage(i)) },
  { weight: 1, arbitrary: fc.nat(10).map((i) => new DuplicateMessage(i)) },
  { weight: 1, arbitrary: fc.nat(7).map((j) => new RestartBucket(j)) },
  { weight: 1, arbitrary: fc.constant(new Scan()) },
  {
    weight: 1,
    arbitrary: fc
      .record({ method: fc.constantFrom(...RPC_METHODS), fault: fc.constantFrom<RpcFault | null>("before", "after", null) })
      .map((s) => new FailRpc(s.method, s.fault)),
  },
  { weight: 1, arbitrary: fc.boolean().map((d) => new D1Down(d)) },
  { weight: 1, arbitrary: fc.constantFrom(200, 503).map((s) => new ReleaseHangs(s)) },
  { weight: 1, arbitrary: fc.constant(new TickHeartbeats()) },
  {
    weight: 2,
    arbitrary: fc
      .record({ max: fc.integer({ min: 1, max: 3 }), leaseMs: fc.constantFrom(1_000, 5_000, 30_000) })
      .map((s) => new PullLease(s.max, s.leaseMs)),
  },
  {
    weight: 2,
    arbitrary: fc
      .record({
        pick: fc.nat(5),
        report: fc.constantFrom("complete", "fail", "heartbeat") as fc.Arbitrary<"complete" | "fail" | "heartbeat">,
      })
      .map((s) => new PullReport(s.pick, s.report)),
  },
  {
    weight: 1,
    arbitrary: fc
      .record({ key: fc.constantFrom<FlowKeyName>("rated", "single"), paused: fc.boolean() })
      .map((s) => new FlowPause(s.key, s.paused)),
  },
  // the features (features.ts)
  { weight: 1, arbitrary: fc.record({ job: fc.nat(7), p: fc.constantFrom(0, 1, 5, 9) }).map((s) => new PatchPriority(s.job, s.p)) },
  {
    weight: 1,
    arbitrary: fc
      .record({
        job: fc.nat(7),
        kind: fc.constantFrom<"success" | "failure">("success", "failure"),
        via: fc.constantFrom<CallbackVia | null>("http", "worker", null),
      })
      .map((s) => new PatchCallback(s.job, s.kind, s.via)),
  },
  {
    weight: 2,
    arbitrary: fc
      .record({ key: fc.nat(1), mode: fc.constantFrom<"trailing" | "leading">("trailing", "leading"), delayS: fc.constantFrom(2, 10, 60) })
      .map((s) => new CreateDebounced(s.key, s.mode, s.delayS)),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom<"healthy" | "failing" | "none">("healthy", "healthy", "failing", "none").map((x) => new SetAlerts(x)),
  },
  {
    weight: 1,
    arbitrary: fc
      .record({ kind: fc.constantFrom<"watermark" | "retention">("watermark", "retention"), fails: weighted(1, 3) })
      .map((s) => new Purge(s.kind, s.fails)),
  },
];

/** The commands of one run: the simple ones, and pairs of them at once. */
export function commandsArb(maxCommands: number): fc.Arbitrary<Iterable<Cmd>> {
  const simple = fc.oneof(...simpleSteps);
  const together = fc.tuple(simple, simple).map(([a, b]) => new Together(a, b) as Step);
  return fc.commands([simple, simple, simple, simple, simple, together], { maxCommands, size: "max" });
}
