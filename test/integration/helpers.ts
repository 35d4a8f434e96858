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
  type QueueResult,
  runDurableObjectAlarm,
  runInDurableObject,
  waitOnExecutionContext,
} from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { afterAll, beforeAll, expect, inject, type MockInstance, vi } from "vitest";
import type { Bucket } from "../../src/bucket/bucket";
import type { FireGroup, FireMessage, LiveExecution } from "../../src/bucket/protocol";
import { configOf } from "../../src/config";
import { type CallbackKind, callbackExecutionId } from "../../src/core/callback";
import { oneOffExecutionId, shardOfId } from "../../src/core/id";
import { keySlot } from "../../src/idempotency/key-claims";
import worker from "../../src/platform/local-worker";
import { assertDocumented } from "./conformance";

/** The settings the integration project runs with: src/config.ts's defaults under vitest.config.ts's bindings. */
export const CONFIG = configOf(env);

/** The flush delay the integration project runs with. */
export const FLUSH_DELAY_MS = CONFIG.FLUSH_DELAY_MS;

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
  const url = `http://scheduler${path}`;
  const response = await exports.default.fetch(url, { ...init, headers, body } as RequestInit);
  await assertDocumented(init.method ?? "GET", url, response);
  return response;
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

/** A job's D1 row (snake_case, as stored): the definition, and a one-off job's execution once terminal. */
export interface D1Job {
  tenant: string;
  id: string;
  bucket: number;
  status: string;
  version: number;
  synced: number;
  next_run_at: number | null;
  fired: number;
  run_status: string | null;
  attempts: number;
  last_http_status: number | null;
  last_error: string | null;
  dead_reason: string | null;
  finished_at: number | null;
  attempt_log: string | null;
  [column: string]: unknown;
}

export async function jobRow(jobId: string): Promise<D1Job | undefined> {
  return (await d1Of(jobId).prepare("SELECT * FROM jobs WHERE id = ?").bind(jobId).first<D1Job>()) ?? undefined;
}

/** A one-off job's execution: its id (derived from the job's), bucket and due time, from D1. */
export interface OneOffExecution {
  id: string;
  job_id: string;
  tenant: string;
  bucket: number;
  due_at: number;
}

export async function executionOf(jobId: string): Promise<OneOffExecution | undefined> {
  const job = await jobRow(jobId);
  if (!job) return undefined;
  return { id: oneOffExecutionId(jobId), job_id: jobId, tenant: job.tenant, bucket: job.bucket, due_at: job.next_run_at ?? 0 };
}

export function bucketStub(bucket: number) {
  return env.BUCKET.getByName(`bucket-${bucket}`);
}

type Stub = ReturnType<typeof bucketStub>;

/** What the bucket holds of an execution now (its live view), or undefined. */
export async function live(stub: Stub, executionId: string): Promise<LiveExecution | undefined> {
  return (await stub.inspect({ executionIds: [executionId] }))[0];
}

/** The bucket's durable row of an execution (snake_case), or undefined. */
export async function bucketRow(stub: Stub, executionId: string): Promise<Record<string, SqlStorageValue> | undefined> {
  return (await bucketSql(stub, "SELECT * FROM executions WHERE id = ?", executionId))[0];
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
 * returns what it did with each message (acked, retried) once its deliveries are done.
 */
export async function fire(bodies: unknown[], options: { queue?: string; attempts?: number } = {}): Promise<QueueResult> {
  return (await startFire(bodies, options)).done;
}

/**
 * Runs the Worker's queue handler on an explicit batch until it returns: what it acked by then
 * (the queue moves on at that point) and its deliveries, which run on in waitUntil. `env`: the
 * consumer's own settings (`{ ...env, NAME: "value" }`), else the project's.
 */
export async function startFire(
  bodies: unknown[],
  options: { queue?: string; attempts?: number; env?: Env } = {},
): Promise<{ ackedOnReturn: string[]; retried: RetriedMessage[]; done: Promise<QueueResult> }> {
  const batch = createMessageBatch(
    options.queue ?? "fire",
    bodies.map((body, i) => ({ id: `m${i}`, timestamp: Date.now(), attempts: options.attempts ?? 1, body })),
  );
  const acked: string[] = [];
  // the test platform's QueueResult lists retried messages without the delay they asked for
  const retried: RetriedMessage[] = [];
  for (const message of batch.messages) {
    const ack = message.ack.bind(message);
    message.ack = () => {
      acked.push(message.id);
      ack();
    };
    const retry = message.retry.bind(message);
    message.retry = (options?: QueueRetryOptions) => {
      retried.push({ msgId: message.id, delaySeconds: options?.delaySeconds });
      retry(options);
    };
  }
  const ctx = createExecutionContext();
  await worker.queue(batch, options.env ?? env, ctx);
  return { ackedOnReturn: [...acked], retried, done: getQueueResult(batch, ctx) };
}

/** A message the consumer retried, with the delay it asked for. */
export interface RetriedMessage {
  msgId: string;
  delaySeconds: number | undefined;
}

/** One request the loopback receiver got. */
export interface Received {
  path: string;
  method: string;
  headers: Record<string, string>;
  body: string;
  /** the body's exact bytes */
  bodyBase64: string;
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
     * Writes a bucket's finished outcomes and schedule changes to D1 on this clock: moves it past
     * the flush delay and runs the alarm (which is always armed while anything waits).
     */
    async flush(stub) {
      advance(FLUSH_DELAY_MS);
      await runAlarm(stub);
    },
  };
}

/** Runs the Worker's cron handler as the trigger would, and waits for its waitUntil work. */
export async function runScan(): Promise<void> {
  const ctx = createExecutionContext();
  await worker.scheduled(createScheduledController({ scheduledTime: Date.now(), cron: "* * * * *" }), env, ctx);
  await waitOnExecutionContext(ctx);
}

/** The fire queue bindings FIRE_QUEUE_0..N-1 (a bucket sends to queue bucket % N), as the config reads them. */
export function fireQueues(): Queue<FireGroup>[] {
  return CONFIG.fireQueues;
}

/**
 * For a whole test file: every fire-queue sendBatch is captured instead of reaching the queue, so
 * nothing is consumed in the background; tests feed messages to the consumer themselves. Each
 * group the buckets send is captured as the single-execution messages (v1, which the consumer
 * still takes) of its executions, so a test follows one execution; captureFireGroupsForFile keeps
 * the groups.
 */
export function captureFiresForFile(): FireMessage[] {
  const sent: FireMessage[] = [];
  captureSends((group) => {
    for (const e of group.executions)
      sent.push({ v: 1, executionId: e.executionId, bucket: group.bucket, tenant: e.tenant, dueAt: e.dueAt });
  });
  return sent;
}

/** captureFiresForFile, keeping each message as the bucket sent it: a group. */
export function captureFireGroupsForFile(): FireGroup[] {
  const sent: FireGroup[] = [];
  captureSends((group) => sent.push(group));
  return sent;
}

function captureSends(take: (group: FireGroup) => void): void {
  beforeAll(() => {
    for (const queue of fireQueues()) {
      vi.spyOn(queue, "sendBatch").mockImplementation(async (messages) => {
        for (const m of messages) take(m.body);
        return { metadata: { metrics: { backlogCount: 0, backlogBytes: 0 } } };
      });
    }
  });
  afterAll(() => vi.restoreAllMocks());
}

/** Creates a one-off job (due now unless the body says otherwise) and locates its execution and bucket. */
export async function newExecution(body: Record<string, unknown>) {
  const job = await createJob(body);
  const exe = (await executionOf(job.id))!;
  const stub = bucketStub(exe.bucket);
  const view = async () => live(stub, exe.id);
  return { job, exe, stub, view, message: fireMessage(exe) };
}
export type Execution = Awaited<ReturnType<typeof newExecution>>;

/** The captured fire messages of one execution, oldest first. */
export function sentFor(sent: FireMessage[], executionId: string): FireMessage[] {
  return sent.filter((m) => m.executionId === executionId);
}

/** The captured fire messages of one execution, taken out of the capture. */
export function takeSent(sent: FireMessage[], executionId: string): FireMessage[] {
  const mine = sentFor(sent, executionId);
  for (const m of mine) sent.splice(sent.indexOf(m), 1);
  return mine;
}

/**
 * Moves the file's clock to the execution's due time (if later) and runs its bucket's alarm,
 * which must dispatch it; returns the fire message it sent.
 */
export async function dispatchNow(
  target: { stub: Stub; executionId: string },
  clock: { readonly at: number; travelTo(at: number): void },
  sent: FireMessage[],
): Promise<FireMessage> {
  const view = await live(target.stub, target.executionId);
  if (!view) throw new Error(`the bucket does not hold ${target.executionId}`);
  if (view.dueAt > clock.at) clock.travelTo(view.dueAt);
  const before = sentFor(sent, target.executionId).length;
  await runAlarm(target.stub);
  const state = (await live(target.stub, target.executionId))?.status;
  if (state !== "dispatched") throw new Error(`${target.executionId} is ${state} after the alarm, not dispatched`);
  const messages = sentFor(sent, target.executionId);
  if (messages.length !== before + 1) throw new Error(`the alarm sent ${messages.length - before} messages for ${target.executionId}`);
  return messages[messages.length - 1]!;
}

/** dispatchNow for a file's clock and captured sends: `dispatch(execution)`. */
export function dispatchOf(
  clock: { readonly at: number; travelTo(at: number): void },
  sent: FireMessage[],
): (e: Execution) => Promise<FireMessage> {
  return (e) => dispatchNow({ stub: e.stub, executionId: e.exe.id }, clock, sent);
}

/**
 * Moves the file's clock to the latest due time of these executions (if later) and runs each of
 * their buckets' alarm once, which must dispatch every one of them (several may share a bucket);
 * returns the fire message each was sent, in the order given.
 */
export async function dispatchAll(
  executions: Execution[],
  clock: { readonly at: number; travelTo(at: number): void },
  sent: FireMessage[],
): Promise<FireMessage[]> {
  const views = await Promise.all(executions.map((e) => e.view()));
  const before = executions.map((e) => sentFor(sent, e.exe.id).length);
  clock.travelTo(Math.max(clock.at, ...views.map((v) => v?.dueAt ?? 0)));
  for (const bucket of new Set(executions.map((e) => e.exe.bucket))) await runAlarm(bucketStub(bucket));
  return Promise.all(
    executions.map(async (e, i) => {
      const state = (await e.view())?.status;
      if (state !== "dispatched") throw new Error(`${e.exe.id} is ${state} after the alarm, not dispatched`);
      const messages = sentFor(sent, e.exe.id);
      if (messages.length !== before[i]! + 1) throw new Error(`the alarm sent ${messages.length - before[i]!} messages for ${e.exe.id}`);
      return messages[messages.length - 1]!;
    }),
  );
}

/**
 * Runs these buckets' alarms and hands what they send of `isMine` to `consume` (a consumer that
 * claims it), round after round, until `expected` messages were sent: a bucket sends only what its
 * dispatch window has room for, and the window grows as claims come back (core/dispatch-window.ts).
 * Returns the messages in the order sent. At most 500 rounds.
 */
export async function sendAndConsume(
  buckets: number[],
  sent: FireMessage[],
  isMine: (m: FireMessage) => boolean,
  expected: number,
  consume: (messages: FireMessage[]) => Promise<unknown>,
): Promise<FireMessage[]> {
  const all: FireMessage[] = [];
  for (let round = 0; round < 500 && all.length < expected; round++) {
    for (const bucket of buckets) await runAlarm(bucketStub(bucket));
    const messages = sent.filter(isMine);
    for (let i = sent.length - 1; i >= 0; i--) if (isMine(sent[i]!)) sent.splice(i, 1);
    if (messages.length > 0) await consume(messages);
    all.push(...messages);
  }
  return all;
}

/** Runs the bucket's alarm now, whether or not one is scheduled. */
export function runAlarm(stub: ReturnType<typeof bucketStub>): Promise<void> {
  return runInDurableObject(stub, (instance: Bucket) => instance.alarm());
}

/**
 * Runs the buckets' alarms as the platform would: the earliest armed one, at its time (moving the
 * file's clock there), then what it sent (captured by captureFiresForFile) through the consumer;
 * until no alarm is armed within `horizonMs`.
 */
export async function deliverAll(
  clock: { readonly at: number; travelTo(at: number): void },
  sent: FireMessage[],
  horizonMs = 15_000,
): Promise<void> {
  const until = clock.at + horizonMs;
  for (let step = 0; step < 200; step++) {
    let next: { bucket: number; at: number } | null = null;
    for (let b = 0; b < CONFIG.BUCKETS; b++) {
      const at = await runInDurableObject(bucketStub(b), (_i, state) => state.storage.getAlarm());
      if (at !== null && (next === null || at < next.at)) next = { bucket: b, at };
    }
    if (next === null || next.at > until) return;
    if (next.at > clock.at) clock.travelTo(next.at);
    await runDurableObjectAlarm(bucketStub(next.bucket));
    const messages = sent.splice(0);
    if (messages.length > 0) await fire(messages);
  }
  throw new Error("alarms kept coming for 200 steps");
}

/** The object holding a tenant's idempotency key (idempotency/idempotency-keys.ts). */
export function idempotencyKeysStub(tenant: string, key: string) {
  return env.IDEMPOTENCY_KEYS.getByName(`${tenant}\n${keySlot(key)}`);
}

/** Runs SQL in the object that holds a tenant's idempotency key (backdate, inspect). */
export async function keySql<T = Record<string, SqlStorageValue>>(tenant: string, key: string, query: string, ...args: SqlStorageValue[]) {
  return runInDurableObject(
    idempotencyKeysStub(tenant, key),
    (_instance, state) => state.storage.sql.exec(query, ...args).toArray() as T[],
  );
}

/** The D1 database of the shard a job's or execution's id names (db/shards.ts). */
export function d1Of(id: string): D1Database {
  const shard = shardOfId(id) ?? 0;
  return (env as unknown as Record<string, D1Database>)[shard === 0 ? "DB" : `DB_${shard}`]!;
}

/** Every D1 shard this project binds (vitest.config.ts: one, or three). */
export function everyD1(): D1Database[] {
  return Array.from(
    { length: Number(env.TEST_SHARDS) },
    (_, i) => (env as unknown as Record<string, D1Database>)[i === 0 ? "DB" : `DB_${i}`]!,
  );
}

/** A query on every shard: their rows, one after another (shard 0's first). */
export async function allShards<T = Record<string, unknown>>(query: string, ...binds: unknown[]): Promise<T[]> {
  const parts = await Promise.all(
    everyD1().map((d1) =>
      d1
        .prepare(query)
        .bind(...binds)
        .all<T>(),
    ),
  );
  return parts.flatMap((p) => p.results);
}

/** A `SELECT count(*) AS n ...` on every shard, summed. */
export async function countAll(query: string, ...binds: unknown[]): Promise<number> {
  return (await allShards<{ n: number }>(query, ...binds)).reduce((sum, r) => sum + r.n, 0);
}

/** The prototype every D1 binding (every shard) shares: a spy on it sees every shard's calls. */
export const D1_PROTOTYPE = Object.getPrototypeOf(env.DB) as D1Database;

/** Spies on a method of every D1 shard at once (restore it with mockRestore). */
export function spyOnD1<K extends "batch" | "prepare">(method: K) {
  return vi.spyOn(D1_PROTOTYPE, method);
}

/**
 * Until restored, every D1 batch of any shard goes through `intercept`, which may run the real
 * batch with `run` (on the shard it was for).
 */
export function interceptD1Batch(
  intercept: (statements: D1PreparedStatement[], run: (statements: D1PreparedStatement[]) => Promise<D1Result[]>) => Promise<D1Result[]>,
) {
  const original = D1_PROTOTYPE.batch;
  return spyOnD1("batch").mockImplementation(function (this: D1Database, statements: D1PreparedStatement[]) {
    return intercept(statements, (s) => original.call(this, s) as Promise<D1Result[]>);
  } as D1Database["batch"]);
}

/** An execution as GET /v1/executions/:id answers it (200 expected). */
export async function executionJson(id: string): Promise<Record<string, unknown>> {
  const res = await api(`/v1/executions/${id}`);
  expect(res.status).toBe(200);
  return (await res.json()) as Record<string, unknown>;
}

/** The id of the callback an execution's latest outcome fired (core/callback.ts: its id, attempts and finish time then). */
export async function callbackIdOf(parentId: string, kind: CallbackKind): Promise<string> {
  const view = await executionJson(parentId);
  return callbackExecutionId(parentId, kind, { attempts: view.attempts as number, finishedAt: Date.parse(view.finishedAt as string) });
}
