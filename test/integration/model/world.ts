/**
 * The real system, driven one step at a time for the model-based test (model.test.ts): the
 * Worker's fetch, queue and scheduled handlers and the Durable Objects, in this isolate, on the
 * file's virtual clock. The harness plays everything around them:
 *
 * - the fire queue: the buckets' sends are captured (captureFireGroupsForFile: each message a group of executions, as the buckets send them) and the harness decides
 *   when each message reaches the consumer, drops one (lost) or copies it (duplicated); a message
 *   the consumer retries comes back with its attempts raised, and after max_retries goes to the
 *   dead-letter consumer, as wrangler.toml configures the queues;
 * - the targets: fetch to `/model/<run>/...` is answered by the job's script (a status, a
 *   Retry-After, or a hang the harness releases later), and every request is recorded with the
 *   virtual time it arrived;
 * - the platform's failures: a bucket restart (eviction: memory lost, storage kept), a bucket RPC
 *   that throws before it runs or after it ran (its answer lost), D1 down, alarms that run late
 *   (the clock moves without them);
 * - time: alarms run when the harness moves the clock to them; the consumer's short waits
 *   (scheduler.wait) move the clock instead of sleeping; heartbeat timers run when told to.
 *
 * One World per run of the property, each with a tenant of its own (API_KEYS in its env), so
 * runs share the buckets but never each other's jobs, lists or metrics.
 */
import {
  createExecutionContext,
  createMessageBatch,
  createScheduledController,
  evictDurableObject,
  getQueueResult,
  runDurableObjectAlarm,
  runInDurableObject,
  waitOnExecutionContext,
} from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterAll, beforeAll, vi } from "vitest";
import { bulkActionName } from "../../../src/actions/bulk-action";
import type { FireGroup } from "../../../src/bucket/protocol";
import { bucketOfJob } from "../../../src/core/bucketing";
import { pullQueueName } from "../../../src/core/pull";
import worker from "../../../src/platform/local-worker";
import { CONSUMER_TRIES } from "../../../src/protocol/fire";
import { assertDocumented } from "../conformance";
import { CONFIG, D1_PROTOTYPE, receiverUrl } from "../helpers";

/** wrangler.toml: a fire message is retried by the consumer at most this often, then dead-lettered (unit/wrangler-config.test.ts holds the two equal). */
export const MAX_RETRIES = CONSUMER_TRIES - 1;
/** the pull queue of every run's pull targets */
export const PULL_QUEUE = "model-q";
/** a throwing alarm is retried about this often by the platform, then dropped */
const ALARM_RETRIES = 6;
/** wrangler.toml: the fire consumers' max_batch_size. */
export const BATCH_SIZE = 6;

/** An API answer: its body's shape is checked against openapi.json (assertDocumented), so commands read it as they need. */
// biome-ignore lint/suspicious/noExplicitAny: checked against the OpenAPI document before any command reads it
export type ApiAnswer = { status: number; body: any };

export type Answer = { status: number; retryAfterS?: number } | { hang: true };

/** A request a callback's target received (an HTTP callback), or a handler Worker callback's delivery. */
export interface CallbackRequest {
  order: number;
  at: number;
  /** the job whose execution's outcome it tells (the name in its path) */
  jobName: string;
  kind: "success" | "failure";
  via: "http" | "worker";
  /** the callback's own webhook-id (its execution id) */
  webhookId: string;
  /** the outcome it tells */
  executionId: string;
  type: string;
  attempts: number;
  finishedAt: string | null;
  /** how it was answered (the handler Worker's: 200) */
  status: number;
}

/** An alert digest the tenant's alert target received. */
export interface Digest {
  at: number;
  webhookId: string;
  deadIds: string[];
  status: number;
}

/** A request a target received. */
export interface TargetRequest {
  /** its index in World.requests */
  seq: number;
  /** its place among every start (target requests and pull leases) */
  order: number;
  at: number;
  jobId: string;
  executionId: string;
  attempt: number;
  /** how it was answered: a status, or null while it hangs */
  status: number | null;
  flowKey: string | null;
  /** when its answer went back (null while it hangs) */
  answeredAt: number | null;
  /** the Retry-After it was answered with, in seconds */
  retryAfterS: number | null;
  /** requests of its flow-control key unanswered when it arrived, itself included */
  openAtArrival: number;
  /** the body it carried */
  body: string;
}

interface Queued {
  body: FireGroup;
  attempts: number;
}

interface Clock {
  readonly at: number;
  travelTo(at: number): void;
  advance(ms: number): void;
}

/** Which bucket RPCs fail and how: "before" (nothing ran) or "after" (it ran; its answer is lost). */
export type RpcFault = "before" | "after";

const realGetByName = env.BUCKET.getByName.bind(env.BUCKET);
export const bucketStub = (bucket: number) => realGetByName(`bucket-${bucket}`);

let current: World | null = null;
let runs = 0;

/**
 * Installs the file-wide interceptions once (fetch, scheduler.wait, the heartbeat timer, the
 * bucket namespace, D1); each routes to the World of the run in progress.
 */
export function installHarness(clock: Clock, sent: FireGroup[]): void {
  const heartbeatEvery = Math.max(100, Math.floor(CONFIG.LEASE_MS / 3));
  beforeAll(() => {
    const realFetch = globalThis.fetch;
    vi.spyOn(globalThis, "fetch").mockImplementation(async (input, init) => {
      const request = new Request(input, init);
      const path = new URL(request.url).pathname;
      if (!path.startsWith("/model/")) return realFetch(input, init);
      const world = current;
      if (!world || !path.startsWith(`/model/${world.run}/`)) return new Response("another run's target", { status: 200 });
      return world.answer(request);
    });
    // the consumer's short waits (a flow-control retry, gathering reports) move the clock
    vi.spyOn(scheduler, "wait").mockImplementation(async (ms: number) => {
      const until = Date.now() + ms;
      await new Promise((resolve) => setTimeout(resolve, 0));
      if (until > clock.at) {
        current?.waits.push({ from: clock.at, until });
        clock.travelTo(until);
      }
    });
    // the consumer's heartbeat timer runs only when the model says so (tickHeartbeats)
    const realSetInterval = globalThis.setInterval;
    const realClearInterval = globalThis.clearInterval;
    vi.spyOn(globalThis, "setInterval").mockImplementation(((handler: () => void, ms?: number, ...rest: unknown[]) => {
      if (ms !== heartbeatEvery) return (realSetInterval as (...args: unknown[]) => ReturnType<typeof setInterval>)(handler, ms, ...rest);
      const id = { heartbeat: handler };
      heartbeats.add(id);
      return id as unknown as ReturnType<typeof setInterval>;
    }) as typeof setInterval);
    vi.spyOn(globalThis, "clearInterval").mockImplementation(((id: unknown) => {
      if (heartbeats.has(id as { heartbeat: () => void })) heartbeats.delete(id as { heartbeat: () => void });
      else realClearInterval(id as Parameters<typeof clearInterval>[0]);
    }) as typeof clearInterval);
    // bucket RPCs of the system (the API, consumers, scanner, pull queues) go through the faults
    const namespace = env.BUCKET as unknown as { getByName(name: string): Record<string, unknown> };
    vi.spyOn(namespace, "getByName").mockImplementation((name: string) => {
      const real = realGetByName(name) as unknown as Record<string | symbol, (...args: unknown[]) => Promise<unknown>>;
      return new Proxy({} as Record<string, unknown>, {
        get(_target, prop) {
          if (prop === "then") return undefined;
          return async (...args: unknown[]) => {
            const fault = current?.rpcFaults.get(String(prop));
            if (fault === "before") throw new Error(`injected: bucket ${String(prop)} failed`);
            const result = await real[prop]!(...args);
            if (fault === "after") throw new Error(`injected: bucket ${String(prop)} answer lost`);
            return result;
          };
        },
      });
    });
    // D1 down: every statement and batch of every shard fails (the shards' bindings share a prototype)
    const down = () => {
      throw new Error("injected: D1 unavailable");
    };
    const realBatch = D1_PROTOTYPE.batch;
    const realPrepare = D1_PROTOTYPE.prepare;
    vi.spyOn(D1_PROTOTYPE, "batch").mockImplementation(async function (this: D1Database, statements: D1PreparedStatement[]) {
      return current?.d1Down ? down() : realBatch.call(this, statements);
    } as D1Database["batch"]);
    vi.spyOn(D1_PROTOTYPE, "prepare").mockImplementation(function (this: D1Database, query: string) {
      return current?.d1Down ? down() : realPrepare.call(this, query);
    });
    captured = sent;
  });
  afterAll(() => {
    vi.restoreAllMocks();
  });
  worldClock = clock;
}

const heartbeats = new Set<{ heartbeat: () => void }>();
let captured: FireGroup[] = [];
let worldClock: Clock;

export class World {
  readonly run = `r${++runs}_${crypto.randomUUID().slice(0, 8)}`;
  readonly tenant = `model-${this.run}`;
  readonly key = `key-${this.run}`;
  readonly env: Env;
  readonly clock: Clock;
  /** fire messages on their way: the queue, oldest first */
  readonly queue: Queued[] = [];
  /** every request a target of this run received, in arrival order */
  readonly requests: TargetRequest[] = [];
  /**
   * the clock's moves for the consumer's short waits: the harness runs one invocation at a time,
   * so an alarm due meanwhile runs after the wait, where production would run it on time
   */
  readonly waits: { from: number; until: number }[] = [];
  /** each job's answers, attempt by attempt (the last repeats) */
  readonly scripts = new Map<string, Answer[]>();
  readonly flowKeys = new Map<string, string>();
  readonly rpcFaults = new Map<string, RpcFault>();
  d1Down = false;
  restarts = 0;
  /** starts so far (target requests and pull leases): the model's clock of order */
  order = 0;
  private readonly alarmFailures = new Map<string, number>();
  /** bulk actions this run started (their alarms run with the buckets', and its pull queue's) */
  readonly actions: string[] = [];
  /** consumer invocations still running (a delivery hangs) */
  private readonly running = new Set<Promise<unknown>>();
  private readonly hanging: { request: TargetRequest; release: (answer: Response) => void }[] = [];
  private readonly seen = new Map<string, number>();
  /** what each callback's target answers, by job name (the last repeats): 200 unless a job says otherwise */
  readonly callbackScripts = new Map<string, number[]>();
  private readonly callbackSeen = new Map<string, number>();
  /** every request a callback target of this run received, and every handler Worker callback delivery */
  readonly callbackRequests: CallbackRequest[] = [];
  private readonly workerCallbacksSeen = new Set<string>();
  /** digests the run's alert target received; it answers 200 while healthy, else 500 */
  readonly digests: Digest[] = [];
  alertsHealthy = true;
  /** the history archive's writes fail (R2 down) */
  archiveFails = false;
  /** every group the buckets sent (the queue's messages as sent) */
  readonly groups: FireGroup[] = [];

  constructor() {
    const world = this;
    const archive = env.ARCHIVE!;
    this.env = {
      ...env,
      API_KEYS: `${this.tenant}:${this.key}`,
      // the test handler Worker for every tenant (callbacks to a handler Worker); "unbound" as the project's
      HANDLER_WORKERS: JSON.stringify({ test: { binding: "TEST_HANDLER", tenants: ["*"] } }),
      // the archive, whose writes fail while archiveFails
      ARCHIVE: new Proxy(archive, {
        get(target, property) {
          if (property === "put" && world.archiveFails) return () => Promise.reject(new Error("injected: R2 unavailable"));
          const value = Reflect.get(target, property, target);
          return typeof value === "function" ? value.bind(target) : value;
        },
      }),
    } as Env;
    this.clock = worldClock;
    current = this;
    captured.splice(0); // another run's sends are not this run's queue
  }

  get now(): number {
    return this.clock.at;
  }

  /** A target URL of this run for a job (its answers come from its script). */
  targetUrl(name: string): string {
    return `${receiverUrl()}/model/${this.run}/${name}`;
  }

  /** The URL of a job's callback of one kind (its answers come from callbackScripts). */
  callbackUrl(name: string, kind: "success" | "failure"): string {
    return `${receiverUrl()}/model/${this.run}/cb/${name}/${kind}`;
  }

  /** The run's alert target. */
  alertsUrl(): string {
    return `${receiverUrl()}/model/${this.run}/alerts`;
  }

  /** Calls the API as this run's tenant; the answer is held to the OpenAPI document (so its body is read loosely here). */
  async api(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<ApiAnswer> {
    const init: RequestInit = { method, headers: { authorization: `Bearer ${this.key}`, ...headers } };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      (init.headers as Record<string, string>)["content-type"] = "application/json";
    }
    const url = `http://scheduler${path}`;
    const ctx = createExecutionContext();
    const response = await worker.fetch(new Request(url, init), this.env, ctx);
    await waitOnExecutionContext(ctx);
    await assertDocumented(method, url, response);
    const text = await response.text();
    this.collect();
    return { status: response.status, body: text ? JSON.parse(text) : null };
  }

  /** Moves what the buckets sent into the queue. */
  collect(): void {
    for (const body of captured.splice(0)) {
      this.groups.push(body);
      this.queue.push({ body, attempts: 1 });
    }
  }

  /**
   * Runs the consumer on the first `count` messages (a batch at most BATCH_SIZE); returns once
   * every delivery has been answered, except those that hang (they run on).
   */
  async deliver(count: number): Promise<void> {
    this.collect();
    const taken = this.queue.splice(0, Math.min(count, BATCH_SIZE));
    if (taken.length === 0) return;
    const batch = createMessageBatch(
      "fire",
      taken.map((q, i) => ({ id: `m${i}`, timestamp: this.now, attempts: q.attempts, body: q.body })),
    );
    const retried = new Set<string>();
    for (const message of batch.messages) {
      const retry = message.retry.bind(message);
      message.retry = (options?: QueueRetryOptions) => {
        retried.add(message.id);
        retry(options);
      };
    }
    const before = this.hanging.length;
    const ctx = createExecutionContext();
    await worker.queue(batch, this.env, ctx);
    // a retried message comes back (its delay is the queue's: the harness delivers it when asked)
    for (const [i, message] of batch.messages.entries()) {
      if (!retried.has(message.id)) continue;
      const q = taken[i]!;
      if (q.attempts > MAX_RETRIES) await this.deadLetter(q.body);
      else this.queue.push({ body: q.body, attempts: q.attempts + 1 });
    }
    const done = getQueueResult(batch, ctx);
    this.running.add(done);
    void done.finally(() => this.running.delete(done));
    await this.settle(done, before);
    this.collect();
  }

  /** The dead-letter consumer on one message the fire queue gave up on. */
  private async deadLetter(body: FireGroup): Promise<void> {
    const batch = createMessageBatch("fire-dlq", [{ id: "d0", timestamp: this.now, attempts: 1, body }]);
    const ctx = createExecutionContext();
    await worker.queue(batch, this.env, ctx);
    await getQueueResult(batch, ctx);
  }

  /** Waits until the invocation is done, or only hanging deliveries of it remain and their neighbours reported. */
  private async settle(done: Promise<unknown>, hangingBefore: number): Promise<void> {
    let finished = false;
    void done.then(
      () => {
        finished = true;
      },
      () => {
        finished = true;
      },
    );
    for (let i = 0; i < 200 && !finished; i++) {
      await new Promise((resolve) => setTimeout(resolve, i < 20 ? 0 : 5));
      // a new hang: give the others time to report (their round trips are real, the waits virtual)
      if (this.hanging.length > hangingBefore && i >= 40) break;
    }
  }

  /** Answers every hanging request (a late answer), then lets their consumers report. */
  async releaseHangs(status = 200): Promise<void> {
    const hanging = this.hanging.splice(0);
    for (const h of hanging) {
      h.request.status = status;
      h.request.answeredAt = this.now;
      h.release(new Response("late", { status }));
    }
    if (hanging.length === 0) return;
    for (let i = 0; i < 200 && this.running.size > 0; i++) await new Promise((resolve) => setTimeout(resolve, i < 20 ? 0 : 5));
    this.collect();
  }

  get hangingCount(): number {
    return this.hanging.length;
  }

  /** The heartbeat timers of running consumers fire once. */
  async tickHeartbeats(): Promise<void> {
    for (const h of [...heartbeats]) h.heartbeat();
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setTimeout(resolve, 0));
  }

  /** A callback's or the alert target's answer (their paths are /cb/<job>/<kind> and /alerts), or null for a job's target. */
  private async answerOther(request: Request, rest: string[]): Promise<Response | null> {
    if (rest[0] === "alerts") {
      const body = (await request.json()) as { executions?: { executionId: string }[] };
      const status = this.alertsHealthy ? 200 : 500;
      this.digests.push({
        at: this.now,
        webhookId: request.headers.get("webhook-id") ?? "",
        deadIds: (body.executions ?? []).map((d) => d.executionId),
        status,
      });
      return new Response(`digest ${status}`, { status });
    }
    if (rest[0] !== "cb") return null;
    const [, jobName = "", kind = "success"] = rest;
    const webhookId = request.headers.get("webhook-id") ?? "";
    const n = this.callbackSeen.get(webhookId) ?? 0;
    this.callbackSeen.set(webhookId, n + 1);
    const script = this.callbackScripts.get(jobName) ?? [200];
    const status = script[Math.min(n, script.length - 1)]!;
    const body = (await request.json()) as { executionId: string; type: string; attempts: number; finishedAt: string | null };
    this.callbackRequests.push({
      order: this.order++,
      at: this.now,
      jobName,
      kind: kind as "success" | "failure",
      via: "http",
      webhookId,
      executionId: body.executionId,
      type: body.type,
      attempts: body.attempts,
      finishedAt: body.finishedAt,
      status,
    });
    return new Response(`callback ${status}`, { status });
  }

  /** Handler Worker callbacks delivered since the last look, as callback requests (the test handler keeps every delivery). */
  async collectWorkerCallbacks(jobNames: Map<string, string>): Promise<void> {
    const calls = (await (env as unknown as { TEST_HANDLER: { calls(): Promise<unknown[]> } }).TEST_HANDLER.calls()) as {
      executionId: string;
      jobId: string;
      payload?: { type?: string; executionId?: string; attempts?: number; finishedAt?: string | null };
    }[];
    for (const call of calls) {
      const name = jobNames.get(call.jobId);
      const kind = call.executionId[4] === "o" ? "success" : call.executionId[4] === "i" ? "failure" : null;
      const key = `${call.executionId}|${calls.indexOf(call)}`;
      if (!name || !kind || this.workerCallbacksSeen.has(key)) continue;
      this.workerCallbacksSeen.add(key);
      this.callbackRequests.push({
        order: this.order++,
        at: this.now,
        jobName: name,
        kind,
        via: "worker",
        webhookId: call.executionId,
        executionId: call.payload?.executionId ?? "",
        type: call.payload?.type ?? "",
        attempts: call.payload?.attempts ?? 0,
        finishedAt: call.payload?.finishedAt ?? null,
        status: 200,
      });
    }
  }

  /** A target's answer to one request, by its job's script. */
  async answer(request: Request): Promise<Response> {
    const rest = new URL(request.url).pathname.split("/").slice(3);
    const other = await this.answerOther(request, rest);
    if (other) return other;
    const jobId = request.headers.get("x-scheduler-job-id") ?? "";
    const body = await request.text();
    const n = this.seen.get(jobId) ?? 0;
    this.seen.set(jobId, n + 1);
    const script = this.scripts.get(jobId) ?? [{ status: 200 }];
    const answer = script[Math.min(n, script.length - 1)]!;
    const record: TargetRequest = {
      seq: this.requests.length,
      order: this.order++,
      at: this.now,
      jobId,
      executionId: request.headers.get("webhook-id") ?? "",
      attempt: Number(request.headers.get("x-scheduler-attempt")),
      status: "hang" in answer ? null : answer.status,
      flowKey: this.flowKeys.get(jobId) ?? null,
      answeredAt: "hang" in answer ? null : this.now,
      retryAfterS: "hang" in answer ? null : (answer.retryAfterS ?? null),
      openAtArrival: 1 + this.hanging.filter((h) => h.request.flowKey !== null && h.request.flowKey === this.flowKeys.get(jobId)).length,
      body,
    };
    this.requests.push(record);
    if ("hang" in answer) return new Promise((release) => this.hanging.push({ request: record, release }));
    const headers: Record<string, string> = answer.retryAfterS === undefined ? {} : { "retry-after": String(answer.retryAfterS) };
    return new Response(`answer ${answer.status}`, { status: answer.status, headers });
  }

  /** Drops the i-th message (lost). */
  drop(i: number): FireGroup | undefined {
    this.collect();
    return this.queue.splice(i % Math.max(1, this.queue.length), 1)[0]?.body;
  }

  /** Copies the i-th message (a duplicate delivery). */
  duplicate(i: number): void {
    this.collect();
    const q = this.queue[i % Math.max(1, this.queue.length)];
    if (q) this.queue.push({ ...q });
  }

  /** A job's bucket (from its id alone). */
  bucketOf(jobId: string): number {
    return bucketOfJob(jobId, CONFIG.BUCKETS);
  }

  /** Evicts a bucket: its memory goes, its storage and alarm stay (a restart). */
  async restart(bucket: number): Promise<void> {
    const stub = bucketStub(bucket);
    await runInDurableObject(stub, () => undefined); // running, so it can be evicted
    // two restarts at once: the second finds it already gone, which is a restart too
    await evictDurableObject(stub).catch((error: unknown) => {
      if (!String(error).includes("not currently running")) throw error;
    });
    this.restarts += 1;
    this.collect();
  }

  /**
   * The cron trigger's scan, as production runs it every minute; `settings` (a purge: a history
   * watermark or retention this run sets) apply to this scan alone.
   */
  async scan(settings: Record<string, string> = {}): Promise<void> {
    const ctx = createExecutionContext();
    const scanEnv = Object.keys(settings).length === 0 ? this.env : ({ ...this.env, ...settings } as Env);
    await worker.scheduled(createScheduledController({ scheduledTime: this.now, cron: "* * * * *" }), scanEnv, ctx);
    await waitOnExecutionContext(ctx);
    this.collect();
  }

  /** Every Durable Object alarm armed at or before now runs, earliest first (buckets and bulk actions). */
  async runDueAlarms(): Promise<number> {
    let ran = 0;
    for (let round = 0; round < 20; round++) {
      const due = (await this.alarms()).filter((a) => a.at <= this.now).sort((a, b) => a.at - b.at);
      if (due.length === 0) break;
      for (const a of due) {
        await this.runAlarm(a.stub);
        ran += 1;
      }
      this.collect();
    }
    return ran;
  }

  /**
   * One alarm, as the platform runs it: one that throws is retried with a growing delay, at most
   * ALARM_RETRIES times, then dropped (DESIGN.md, "Alarms").
   */
  private async runAlarm(stub: DurableObjectStub): Promise<void> {
    const key = stub.id.toString();
    try {
      await runDurableObjectAlarm(stub);
      this.alarmFailures.delete(key);
    } catch (error) {
      const failures = (this.alarmFailures.get(key) ?? 0) + 1;
      this.alarmFailures.set(key, failures);
      if (failures > ALARM_RETRIES) return;
      const at = this.now + 2 ** failures * 1_000;
      await runInDurableObject(stub, async (_instance, state) => {
        if ((await state.storage.getAlarm()) === null) await state.storage.setAlarm(at);
      });
      void error;
    }
  }

  /** The earliest alarm armed after now, or null. */
  async nextAlarmAt(): Promise<number | null> {
    const later = (await this.alarms()).map((a) => a.at);
    return later.length === 0 ? null : Math.min(...later);
  }

  private async alarms(): Promise<{ stub: DurableObjectStub; at: number }[]> {
    const stubs: DurableObjectStub[] = [];
    for (let b = 0; b < CONFIG.BUCKETS; b++) stubs.push(bucketStub(b));
    for (const id of this.actions) stubs.push(env.BULK_ACTION.getByName(bulkActionName(this.tenant, id)));
    stubs.push(env.PULL_QUEUE.getByName(pullQueueName(this.tenant, PULL_QUEUE)));
    // the tenant's alerts: its digests go by alarm
    stubs.push(env.ALERTS.getByName(this.tenant));
    const armed = await Promise.all(
      stubs.map(async (stub) => ({ stub, at: await runInDurableObject(stub, (_instance, state) => state.storage.getAlarm()) })),
    );
    return armed.filter((a): a is { stub: DurableObjectStub; at: number } => a.at !== null);
  }

  /** Ends the run: nothing of it answers or fails any more. */
  close(): void {
    this.rpcFaults.clear();
    this.d1Down = false;
    for (const h of this.hanging.splice(0)) h.release(new Response("run over", { status: 200 }));
    if (current === this) current = null;
  }
}
