/**
 * Shared helpers for the workerd integration tests: the API with a bearer key, D1 and bucket
 * reads, explicit queue consumption and the loopback receiver. Small and stable on purpose:
 * several test files import it.
 */
import {
  createExecutionContext,
  createMessageBatch,
  createScheduledController,
  getQueueResult,
  runDurableObjectAlarm,
  runInDurableObject,
  type QueueResult,
  waitOnExecutionContext,
} from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { afterAll, beforeAll, inject, onTestFinished, vi, type MockInstance } from "vitest";
import type { Bucket } from "../../src/bucket/bucket";
import worker from "../../src/index";
import type { FireMessage } from "../../src/env";

/** API keys configured in vitest.config.ts (tenant acme has two keys). */
export const KEYS = { acme: "test-key-acme", acme2: "test-key-acme-2", globex: "test-key-globex" } as const;

/**
 * Calls the Worker's fetch handler. A non-string body is sent as JSON; `key` null sends no
 * Authorization header.
 */
export async function api(
  path: string,
  init: Omit<RequestInit, "body"> & { body?: unknown } = {},
  key: string | null = KEYS.acme,
): Promise<Response> {
  const headers = new Headers(init.headers as HeadersInit | undefined);
  if (key !== null && !headers.has("authorization")) headers.set("authorization", `Bearer ${key}`);
  let body = init.body as BodyInit | null | undefined;
  if (body !== undefined && body !== null && typeof body !== "string") body = JSON.stringify(body);
  if (body !== undefined && body !== null && !headers.has("content-type")) headers.set("content-type", "application/json");
  return exports.default.fetch(`http://scheduler${path}`, { ...init, headers, body } as RequestInit);
}

/** A job as the API presents it (the fields tests read most). */
export interface JobJson {
  id: string;
  name: string | null;
  status: string;
  nextRunAt: string | null;
  createdAt: string;
  target: { url: string; method: string; headers: Record<string, string>; body: string | null };
  [field: string]: unknown;
}

/** POST /v1/jobs; throws unless the answer is 201. */
export async function createJob(body: unknown, key: string = KEYS.acme): Promise<JobJson> {
  const res = await api("/v1/jobs", { method: "POST", body }, key);
  if (res.status !== 201) throw new Error(`create answered ${res.status}: ${await res.text()}`);
  return (await res.json()) as JobJson;
}

/** A D1 executions row (snake_case, as stored). */
export interface D1Execution {
  id: string;
  job_id: string;
  tenant: string;
  bucket: number;
  time_bucket: number;
  due_at: number;
  status: string;
  attempts: number;
  last_http_status: number | null;
  last_error: string | null;
  dead_reason: string | null;
  finished_at: number | null;
  created_at: number;
  updated_at: number;
}

/** The first (earliest due) D1 execution of a job, or undefined. */
export async function executionOf(jobId: string): Promise<D1Execution | undefined> {
  return (
    (await env.DB.prepare("SELECT * FROM executions WHERE job_id = ? ORDER BY due_at LIMIT 1").bind(jobId).first<D1Execution>()) ??
    undefined
  );
}

/** D1 attempts of an execution, in attempt order. */
export async function attemptsOf(executionId: string): Promise<Record<string, unknown>[]> {
  const { results } = await env.DB.prepare("SELECT * FROM attempts WHERE execution_id = ? ORDER BY attempt").bind(executionId).all();
  return results;
}

export function bucketStub(bucket: number) {
  return env.BUCKET.getByName(`bucket-${bucket}`);
}

/** A bucket executions row (snake_case, as stored in the Durable Object). */
export interface BucketExecution {
  id: string;
  job_id: string;
  tenant: string;
  occurrence_at: number;
  status: string;
  due_at: number;
  attempt: number;
  budget_base: number;
  lease_token: string | null;
  lease_seq: number;
  lease_deadline_at: number | null;
  dispatch_deadline_at: number | null;
  dispatch_count: number;
  last_http_status: number | null;
  last_error: string | null;
  dead_reason: string | null;
  finished_at: number | null;
  version: number;
  dirty: number;
}

type Stub = ReturnType<typeof bucketStub>;

export async function bucketRow(stub: Stub, executionId: string): Promise<BucketExecution | undefined> {
  return runInDurableObject(stub, (_instance, state) =>
    state.storage.sql.exec("SELECT * FROM executions WHERE id = ?", executionId).toArray()[0] as BucketExecution | undefined,
  );
}

/** Bucket attempts of an execution, in attempt order. */
export async function bucketAttempts(stub: Stub, executionId: string): Promise<Record<string, unknown>[]> {
  return runInDurableObject(stub, (_instance, state) =>
    state.storage.sql.exec("SELECT * FROM attempts WHERE execution_id = ? ORDER BY attempt", executionId).toArray(),
  );
}

/** Runs SQL inside a bucket (seed, backdate, inspect). */
export async function bucketSql<T = Record<string, SqlStorageValue>>(stub: Stub, query: string, ...args: SqlStorageValue[]): Promise<T[]> {
  return runInDurableObject(stub, (_instance, state) => state.storage.sql.exec(query, ...args).toArray() as T[]);
}

/** The bucket's scheduled alarm (epoch ms) or null. */
export async function alarmOf(stub: Stub): Promise<number | null> {
  return runInDurableObject(stub, (_instance, state) => state.storage.getAlarm());
}

/** The fire message the bucket would send for an execution. */
export function fireMessage(e: { id: string; bucket: number; tenant?: string; due_at?: number }): FireMessage {
  return { v: 1, executionId: e.id, bucket: e.bucket, tenant: e.tenant ?? "acme", dueAt: e.due_at ?? Date.now() };
}

/**
 * Runs the Worker's queue handler on an explicit batch (message ids "m0", "m1", ...) and
 * returns what it did with each message (acked, retried).
 */
export async function fire(bodies: unknown[], options: { queue?: string; attempts?: number } = {}): Promise<QueueResult> {
  const batch = createMessageBatch(
    options.queue ?? "fire",
    bodies.map((body, i) => ({ id: `m${i}`, timestamp: Date.now(), attempts: options.attempts ?? 1, body })),
  );
  const ctx = createExecutionContext();
  await worker.queue(batch, env);
  return getQueueResult(batch, ctx);
}

/** One request the loopback receiver got. */
export interface Received {
  path: string;
  method: string;
  headers: Record<string, string>;
  body: string;
  at: number;
}

export function receiverUrl(): string {
  return inject("receiverUrl");
}

/** A receiver path unique to one test: `/<kind>?t=<random>` (kind: ok, fail/500, hang/100, flaky/2). */
export function uniquePath(kind = "ok"): string {
  return `/${kind}?t=${crypto.randomUUID()}`;
}

/** Requests the receiver got whose path starts with `prefix`. */
export async function received(prefix: string): Promise<Received[]> {
  const res = await fetch(`${receiverUrl()}/__requests?path=${encodeURIComponent(prefix)}`);
  return (await res.json()) as Received[];
}

/** GET /v1/metrics counters of a tenant. */
export async function counters(key: string = KEYS.acme): Promise<Record<string, number>> {
  const res = await api("/v1/metrics", {}, key);
  return ((await res.json()) as { counters: Record<string, number> }).counters;
}

/**
 * Runs `fn` with Date.now() shifted `ms` ahead. The main Worker and its Durable Objects run in
 * the test isolate, so the shift applies to them too: lets a test pass a deadline or the
 * mirror delay without sleeping.
 */
export async function withClockAhead<T>(ms: number, fn: () => Promise<T>): Promise<T> {
  const real = Date.now.bind(Date);
  const spy = vi.spyOn(Date, "now").mockImplementation(() => real() + ms);
  try {
    return await fn();
  } finally {
    spy.mockRestore();
  }
}

/**
 * A file-wide virtual clock: from the file's beforeAll, Date.now() reads `at`, which starts
 * `headStartMs` ahead of the real clock and moves only when a test travels, and only forward
 * (alarms and the mirror delay assume time only grows). The Worker and its Durable Objects run
 * in the test isolate, so they read it too.
 */
export function fileClock(headStartMs: number): {
  readonly at: number;
  travelTo(at: number): void;
  advance(ms: number): void;
  flush(stub: Stub): Promise<void>;
} {
  let at = 0;
  let spy: MockInstance<() => number>;
  beforeAll(() => {
    at = Date.now() + headStartMs;
    spy = vi.spyOn(Date, "now").mockImplementation(() => at);
  });
  afterAll(() => spy.mockRestore());
  const travelTo = (to: number): void => {
    if (to < at) throw new Error(`the clock only moves forward (asked ${to - at} ms)`);
    at = to;
  };
  const advance = (ms: number): void => travelTo(at + ms);
  return {
    get at() {
      return at;
    },
    travelTo,
    advance,
    /**
     * Mirrors a bucket's changes (dirty rows and the outbox of far occurrences) to D1 on this
     * clock: moves it past the mirror delay and runs the alarm, until nothing is left to write.
     */
    async flush(stub) {
      for (let round = 0; round < 5; round++) {
        const [{ n }] = (await bucketSql<{ n: number }>(
          stub,
          `SELECT (SELECT count(*) FROM executions WHERE dirty = 1) + (SELECT count(*) FROM attempts WHERE dirty = 1)
             + (SELECT count(*) FROM outbox_pending) AS n`,
        )) as [{ n: number }];
        if (n === 0) return;
        advance(Number(env.MIRROR_DELAY_MS ?? 1_000));
        // dirty rows always arm the alarm
        if (!(await runDurableObjectAlarm(stub))) throw new Error("dirty bucket rows did not arm the alarm");
      }
      throw new Error("bucket rows still dirty after 5 alarm runs");
    },
  };
}

/** Runs the Worker's cron handler as the trigger would, and waits for its waitUntil work. */
export async function runScan(): Promise<void> {
  const ctx = createExecutionContext();
  await worker.scheduled(createScheduledController({ scheduledTime: Date.now(), cron: "* * * * *" }), env, ctx);
  await waitOnExecutionContext(ctx);
}

/**
 * Captures what the buckets send to the fire queues (FIRE_QUEUE_0..N-1) instead of sending it,
 * until the current test ends. The Durable Objects share the test's bindings (same isolate), so
 * this keeps the real queue consumer from taking messages in the background: the test then
 * drives consumption itself with fire(captured.messages).
 */
export function captureFires(): { messages: FireMessage[] } {
  const captured = { messages: [] as FireMessage[] };
  // what a real send answers, so callers that read the response keep working
  const metadata = { metrics: { backlogCount: 0, backlogBytes: 0 } };
  for (let i = 0; env[`FIRE_QUEUE_${i}`] !== undefined; i++) {
    const queue = env[`FIRE_QUEUE_${i}`]!;
    const batch = vi.spyOn(queue, "sendBatch").mockImplementation(async (messages) => {
      for (const m of messages) captured.messages.push(m.body);
      return { metadata };
    });
    const single = vi.spyOn(queue, "send").mockImplementation(async (body) => {
      captured.messages.push(body);
      return { metadata };
    });
    onTestFinished(() => {
      batch.mockRestore();
      single.mockRestore();
    });
  }
  return captured;
}

/**
 * Writes a bucket's changed rows to D1 now: runs its alarm at the time it is armed for (the
 * mirror waits MIRROR_DELAY_MS after the last flush) with the clock shifted there instead of
 * sleeping, until no execution or attempt row is dirty. The alarm may also run on its own in
 * the background meanwhile; either way the rows are mirrored when this returns.
 */
export async function flushMirror(stub: Stub): Promise<void> {
  for (let round = 0; round < 5; round++) {
    const [{ n }] = (await bucketSql<{ n: number }>(
      stub,
      "SELECT (SELECT count(*) FROM executions WHERE dirty = 1) + (SELECT count(*) FROM attempts WHERE dirty = 1) AS n",
    )) as [{ n: number }];
    if (n === 0) return;
    const at = await alarmOf(stub); // null while a background run is in progress: just go round again
    await withClockAhead(Math.max(0, (at ?? 0) - Date.now()), () => runDurableObjectAlarm(stub));
  }
  throw new Error("bucket rows still dirty after 5 alarm runs");
}

/**
 * For a whole test file: every fire-queue sendBatch is captured instead of reaching the queue, so
 * nothing is consumed in the background; tests feed messages to the consumer themselves.
 */
export function captureFiresForFile(): FireMessage[] {
  const sent: FireMessage[] = [];
  beforeAll(() => {
    vi.spyOn(env.FIRE_QUEUE_0!, "sendBatch").mockImplementation(async (messages) => {
      for (const m of messages) sent.push(m.body);
      return { metadata: { metrics: { backlogCount: 0, backlogBytes: 0 } } };
    });
  });
  afterAll(() => vi.restoreAllMocks());
  return sent;
}

/** Creates a job (due now unless the body says otherwise) and locates its execution and bucket. */
export async function newExecution(body: Record<string, unknown>) {
  const job = await createJob(body);
  const exe = (await executionOf(job.id))!;
  const stub = bucketStub(exe.bucket);
  const row = async () => (await bucketRow(stub, exe.id))!;
  const set = (assignments: string, ...args: SqlStorageValue[]) =>
    bucketSql(stub, `UPDATE executions SET ${assignments} WHERE id = ?`, ...args, exe.id);
  return { job, exe, stub, row, set, message: fireMessage(exe) };
}
export type Execution = Awaited<ReturnType<typeof newExecution>>;

/** Runs the bucket's alarm now, whether or not one is scheduled. */
export function runAlarm(stub: ReturnType<typeof bucketStub>): Promise<void> {
  return runInDurableObject(stub, (instance: Bucket) => instance.alarm());
}
