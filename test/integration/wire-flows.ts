/**
 * Real flows that cross every part of the wire (src/protocol/wire.ts), and the tap that watches them:
 * every fire message the consumer is given and every RPC each Durable Object receives (its
 * arguments and its answer, at the object, as they crossed). The same flows serve three purposes:
 * - record: the events of this release's code, written to test/contract/<release>/samples.json
 *   (wire-record.test.ts);
 * - check: each event of the code now validated against a previous release's JSON Schemas, i.e.
 *   what the previous release would read (contract.test.ts, part b);
 * - replay: each message and each RPC the flow makes replaced by the previous release's recorded
 *   one (its ids, tokens and times bound to the live flow's), so the code now receives exactly what
 *   the previous release sent and answers its callers as the previous release answered; its
 *   outcome (ok, code, status, ...) must be the recorded one and the flow must still end as it did
 *   (contract.test.ts, part a).
 * Calls an object makes to its own methods (`this.view()`) are not on the wire and are not tapped.
 * Each flow uses jobs and names of its own, and drives its executions to their end.
 */
import { createExecutionContext, runDurableObjectAlarm, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterAll, beforeAll, expect, vi } from "vitest";
import { BulkAction } from "../../src/actions/bulk-action";
import { Alerts } from "../../src/alerts/alerts";
import { Bucket } from "../../src/bucket/bucket";
import { DebounceKeys } from "../../src/debounce/debounce-keys";
import { FlowKey } from "../../src/flow/flow-key";
import { IdempotencyKeys } from "../../src/idempotency/idempotency-keys";
import worker from "../../src/platform/local-worker";
import { type ObjectName, RPCS, type WireJsonSchema } from "../../src/protocol/wire";
import { PullQueue } from "../../src/pull/pull-queue";
import { validate } from "../contract/json-schema";
import { NEW_RPCS_CALLERS_DO_WITHOUT, type RpcEvent, type WireEvent } from "../contract/previous";
import {
  api,
  bucketStub,
  createJob,
  type Execution,
  type fileClock,
  fire,
  fireQueues,
  interceptD1Batch,
  jobRow,
  KEYS,
  live,
  newExecution,
  received,
  receiverUrl,
  runAlarm,
  runScan,
  uniquePath,
} from "./helpers";

export type TapMode =
  | { kind: "record" }
  | { kind: "check"; previous: WireJsonSchema }
  /** `noOutcome`: RPCs whose answers are not compared (their figures depend on what the file ran before) */
  | { kind: "replay"; tape: WireEvent[]; noOutcome?: readonly string[] };

const CLASSES: Record<ObjectName, { prototype: object }> = {
  Bucket,
  PullQueue,
  FlowKey,
  IdempotencyKeys,
  DebounceKeys,
  Alerts,
  BulkAction,
};

/** One flow's run under the tap: its events, what broke, and what of a replayed tape was used. */
export class TapRun {
  readonly events: WireEvent[] = [];
  readonly problems: string[] = [];
  readonly seen = new Set<string>();
  private readonly tape: Map<string, WireEvent[]>;

  constructor(readonly mode: TapMode) {
    this.tape = Map.groupBy(mode.kind === "replay" ? mode.tape : [], keyOf);
  }

  /** The recorded events of a replayed tape that the flow never reached. */
  unreplayed(): string[] {
    return [...this.tape].flatMap(([key, events]) => (events.length > 0 ? [`${key} x${events.length}`] : []));
  }

  take(key: string): WireEvent | undefined {
    return this.tape.get(key)?.shift();
  }
}

function keyOf(e: WireEvent): string {
  return e.kind === "rpc" ? `${e.object}.${e.method}` : `message ${e.queue}`;
}

/** What crossed, as JSON: undefined fields are dropped, as a JSON reader sees them. */
function asJson<T>(value: T): T {
  return value === undefined ? value : (JSON.parse(JSON.stringify(value)) as T);
}

/**
 * A recorded value with the live flow's identities: where the live value at the same place is an
 * id, a token, a URL, a name, JSON text (bound inside) or a time, it is taken; everything else
 * (which fields there are, enum words, counts, settings) stays as recorded. Top-level number
 * arguments are a bucket or a `now`: taken.
 */
function rebindArgs(recorded: unknown[], liveArgs: unknown[]): unknown[] {
  return recorded.map((value, i) =>
    typeof value === "number" && typeof liveArgs[i] === "number" ? liveArgs[i] : rebind(value, liveArgs[i], i),
  );
}

const IDENTITY_NUMBERS = new Set(["bucket", "seq", "shard"]);

function rebind(recorded: unknown, liveValue: unknown, key: string | number | null = null): unknown {
  if (typeof recorded === "string" && typeof liveValue === "string") {
    const inner = [jsonTextOf(recorded), jsonTextOf(liveValue)];
    if (inner[0] !== undefined && inner[1] !== undefined) return JSON.stringify(rebind(inner[0], inner[1], key));
    return /^[A-Za-z_]{1,20}$/.test(recorded) ? recorded : liveValue; // a bare word is an enum value or a tenant
  }
  if (typeof recorded === "number" && typeof liveValue === "number")
    return (typeof key === "string" && IDENTITY_NUMBERS.has(key)) || Math.abs(recorded) >= 1e12 ? liveValue : recorded;
  if (Array.isArray(recorded))
    return recorded.map((v, i) => (Array.isArray(liveValue) && i < liveValue.length ? rebind(v, liveValue[i], i) : v));
  if (isRecord(recorded))
    return Object.fromEntries(
      Object.entries(recorded).map(([k, v]) => [k, isRecord(liveValue) && k in liveValue ? rebind(v, liveValue[k], k) : v]),
    );
  return recorded;
}

function jsonTextOf(text: string): unknown {
  if (!text.startsWith("{") && !text.startsWith("[")) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

const DISCRIMINATORS = new Set(["ok", "code", "status", "granted", "kind", "canceled", "reused", "failure", "paused", "limitsFrom"]);

/** What an answer says happened (ok, code, status, ... at every depth, and how many of each list), without ids or times. */
function outcomeOf(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(outcomeOf);
  if (typeof value === "boolean") return value;
  if (!isRecord(value)) return null;
  const kept: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    if (DISCRIMINATORS.has(k) && (v === null || typeof v !== "object")) kept[k] = v;
    else if (typeof v === "object" && v !== null) kept[k] = outcomeOf(v);
  }
  return kept;
}

/**
 * The tap for a whole test file: every RPC of the wire's objects and every fire-queue send. Sends are
 * captured, never consumed in the background: flows hand them to the consumer (Flow.consume).
 */
export function installWireTap(): { begin(mode: TapMode): TapRun; end(): void; sent: unknown[] } {
  let run: TapRun | null = null;
  const sent: unknown[] = [];
  beforeAll(() => {
    for (const queue of fireQueues()) {
      vi.spyOn(queue, "sendBatch").mockImplementation(async (messages) => {
        for (const m of messages) sent.push(m.body);
        return { metadata: { metrics: { backlogCount: 0, backlogBytes: 0 } } };
      });
    }
    for (const [object, methods] of Object.entries(RPCS) as [ObjectName, Record<string, unknown>][]) {
      const prototype = CLASSES[object].prototype as Record<string, (...args: unknown[]) => Promise<unknown>>;
      const originals = new Map(Object.keys(methods).map((m) => [m, prototype[m]!]));
      // the object's own calls to its methods go to the originals: only what crosses the wire is tapped
      const inners = new WeakMap<object, object>();
      const innerOf = (self: object) => {
        let inner = inners.get(self);
        if (!inner) {
          inner = new Proxy(self, {
            get: (target, prop, receiver) => originals.get(prop as string) ?? Reflect.get(target, prop, receiver),
          });
          inners.set(self, inner);
        }
        return inner;
      };
      for (const method of Object.keys(methods)) {
        const original = originals.get(method)!;
        vi.spyOn(prototype, method).mockImplementation(async function (this: object, ...args: unknown[]) {
          const tap = run;
          if (!tap) return original.apply(innerOf(this), args);
          return tapped(tap, object, method, (a) => original.apply(innerOf(this), a), args);
        });
      }
    }
  });
  afterAll(() => vi.restoreAllMocks());
  return {
    begin(mode) {
      run = new TapRun(mode);
      sent.length = 0;
      return run;
    },
    end() {
      run = null;
    },
    sent,
  };
}

async function tapped(
  tap: TapRun,
  object: ObjectName,
  method: string,
  call: (args: unknown[]) => Promise<unknown>,
  args: unknown[],
): Promise<unknown> {
  const name = `${object}.${method}`;
  tap.seen.add(name);
  if (tap.mode.kind === "replay") {
    const recorded = tap.take(name);
    if (recorded?.kind !== "rpc") return call(args);
    // the previous release's call, with this flow's identities, to the object now
    const answer = await call(rebindArgs(asJson(recorded.args), asJson(args)));
    if (!tap.mode.noOutcome?.includes(name)) {
      const was = JSON.stringify(outcomeOf(asJson(recorded.result)));
      const is = JSON.stringify(outcomeOf(asJson(answer)));
      if (was !== is) tap.problems.push(`${name}: the previous release's call answered ${was}, the code now ${is}`);
    }
    // and its caller now reads the answer as the previous release gave it
    return recorded.result === undefined ? answer : rebind(asJson(recorded.result), asJson(answer));
  }
  const sentArgs = asJson(args);
  const answer = await call(args);
  const event: RpcEvent = { kind: "rpc", object, method, args: sentArgs, ...(answer === undefined ? {} : { result: asJson(answer) }) };
  tap.events.push(event);
  if (tap.mode.kind === "check") {
    const rpc = tap.mode.previous.rpcs[object]?.[method];
    if (!rpc) {
      if (!(name in NEW_RPCS_CALLERS_DO_WITHOUT))
        tap.problems.push(`${name}: the previous release has no such RPC (a call to an object still running it throws)`);
    } else {
      for (const e of validate(rpc.args, event.args, `${name}(args)`)) tap.problems.push(e);
      if ("result" in event) for (const e of validate(rpc.result, event.result, `${name}(result)`)) tap.problems.push(e);
    }
  }
  return answer;
}

/** The errors of a fire message against every kind a release's consumer reads ([] when one reads it). */
function messageErrors(previous: WireJsonSchema, body: unknown): string[] {
  const byKind = Object.entries(previous.messages).map(([kind, schema]) => validate(schema, body, `message as ${kind}`));
  return byKind.some((e) => e.length === 0) ? [] : byKind.flat();
}

/** What a flow is given: the file's clock, dispatch and the consumer, both through the tap. */
export interface Flow {
  clock: ReturnType<typeof fileClock>;
  /** Moves the clock to their due time and runs their buckets' alarms: the fire messages carrying them, as sent. */
  dispatch(...executions: Execution[]): Promise<unknown[]>;
  /** Runs one bucket's alarm at the clock: the messages it sent carrying executions `wanted` picks. */
  alarm(bucket: number, wanted: (ref: { executionId: string; dueAt: number }) => boolean): Promise<unknown[]>;
  /** The consumer (fire, or the dead-letter queue's) on these messages: what it did with each ("m0", "m1", ...). */
  consume(bodies: unknown[], options?: { queue?: string }): Promise<{ acked: string[]; retried: string[] }>;
}

export function flowOf(clock: ReturnType<typeof fileClock>, tap: { sent: unknown[] }, run: () => TapRun): Flow {
  const carrying = (body: unknown, wanted: (ref: { executionId: string; dueAt: number }) => boolean) =>
    isRecord(body) && Array.isArray(body.executions) && (body.executions as { executionId: string; dueAt: number }[]).some(wanted);
  const alarm: Flow["alarm"] = async (bucket, wanted) => {
    tap.sent.length = 0;
    await runAlarm(bucketStub(bucket));
    return tap.sent.splice(0).filter((body) => carrying(body, wanted));
  };
  return {
    clock,
    alarm,
    async dispatch(...executions) {
      const due = await Promise.all(executions.map(async (e) => (await live(e.stub, e.exe.id))?.dueAt ?? 0));
      clock.travelTo(Math.max(clock.at, ...due));
      const ids = new Set(executions.map((e) => e.exe.id));
      const bodies: unknown[] = [];
      for (const bucket of new Set(executions.map((e) => e.exe.bucket)))
        bodies.push(...(await alarm(bucket, (r) => ids.has(r.executionId))));
      return bodies;
    },
    async consume(bodies, options = {}) {
      const tapRun = run();
      const queue = options.queue ?? "fire";
      const given = bodies.map((body) => {
        if (tapRun.mode.kind !== "replay") return body;
        const recorded = tapRun.take(`message ${queue}`);
        return recorded?.kind === "message" ? rebind(asJson(recorded.body), asJson(body)) : body;
      });
      const result = await fire(given, { queue });
      const acked = result.explicitAcks;
      const retried = result.retryMessages.map((m) => m.msgId);
      for (const [i, body] of given.entries()) {
        const id = `m${i}`;
        const outcome = acked.includes(id) ? "acked" : retried.includes(id) ? "retried" : "neither";
        tapRun.seen.add(`message ${queue}`);
        tapRun.events.push({ kind: "message", queue, body: asJson(body), outcome });
        if (tapRun.mode.kind === "check") for (const e of messageErrors(tapRun.mode.previous, body)) tapRun.problems.push(e);
      }
      return { acked, retried };
    },
  };
}

// ---------------------------------------------------------------------------------------------------
// the flows

let names = 0;
/** A name unique to one flow run (a digit in it: it is an identity, rebound on replay). */
function fresh(prefix: string): string {
  names += 1;
  return `${prefix}${names}-${crypto.randomUUID().slice(0, 8)}`;
}

const targetAt = (kind = "ok") => {
  const path = uniquePath(kind);
  return { path, target: { url: `${receiverUrl()}${path}` } };
};

async function ok(path: string, init: Omit<RequestInit, "body"> & { body?: unknown } = {}): Promise<Record<string, unknown>> {
  const res = await api(path, init);
  expect(res.status, `${init.method ?? "GET"} ${path}`).toBeLessThan(300);
  return res.status === 204 ? {} : ((await res.json()) as Record<string, unknown>);
}

/**
 * Per flow, the RPCs whose answers depend on what the file ran before it, not on the flow: the
 * metrics read every bucket's counters and every flow key the tenant has used, the counts a bucket's executions.
 */
export const HISTORY_DEPENDENT: Record<string, readonly string[]> = { scanAndMetrics: ["Bucket.metrics", "FlowKey.view", "Bucket.counts"] };

export const FLOWS: Record<string, (f: Flow) => Promise<void>> = {
  /** A webhook job: create (applyJobs), fire message, claim, its origin's flow key (ask, release), complete, a live read (inspect). */
  async webhook(f) {
    const { path, target } = targetAt();
    const e = await newExecution({ target });
    const bodies = await f.dispatch(e);
    expect(bodies).toHaveLength(1);
    expect((await f.consume(bodies)).acked).toEqual(["m0"]);
    expect(await ok(`/v1/executions/${e.exe.id}`)).toMatchObject({ status: "succeeded" });
    await f.clock.flush(e.stub);
    expect(await jobRow(e.job.id)).toMatchObject({ status: "completed", run_status: "succeeded" });
    expect(await received(path)).toHaveLength(1);
  },

  /** A pull target: offered (PullQueue.offer), leased by a worker (lease, leaseOffered), heartbeat, complete; an offer swept (stillOffered). */
  async pull(f) {
    const queue = fresh("q");
    const e = await newExecution({ target: { pull: queue, payload: { n: 1 } } });
    expect((await f.consume(await f.dispatch(e))).acked).toEqual(["m0"]);
    expect(await ok(`/v1/pull/${queue}`)).toMatchObject({ waiting: 1 });
    const { leases } = (await ok(`/v1/pull/${queue}/lease`, { method: "POST", body: { max: 5, leaseMs: 60_000 } })) as {
      leases: { token: string; executionId: string }[];
    };
    expect(leases.map((l) => l.executionId)).toEqual([e.exe.id]);
    const token = leases[0]!.token;
    expect(await ok(`/v1/pull/leases/${token}/heartbeat`, { method: "POST" })).toMatchObject({ canceled: false });
    expect(await ok(`/v1/pull/leases/${token}/complete`, { method: "POST" })).toMatchObject({ status: "succeeded" });
    // an offer no worker asks about: the queue's sweep asks its bucket whether it still stands
    const other = await newExecution({ target: { pull: queue, payload: null } });
    expect((await f.consume(await f.dispatch(other))).acked).toEqual(["m0"]);
    await runDurableObjectAlarm(env.PULL_QUEUE.getByName(`acme\n${queue}`));
    expect(await ok(`/v1/pull/${queue}`)).toMatchObject({ waiting: 1 });
    await ok(`/v1/jobs/${other.job.id}`, { method: "DELETE" });
    await f.clock.flush(e.stub);
    expect(await jobRow(e.job.id)).toMatchObject({ run_status: "succeeded" });
  },

  /** An origin key's part slowed by its target's Retry-After tells the other parts (FlowKey.slowDown). */
  async originSlowDown(f) {
    // the receiver by another name: an origin of this flow's own, whose slow-down the others never meet
    const { target } = targetAt("fail/429");
    const url = new URL(`${target.url}&retryAfter=30`);
    url.hostname = "localhost";
    const e = await newExecution({ target: { url: url.href } });
    expect((await f.consume(await f.dispatch(e))).acked).toEqual(["m0"]);
    expect(await e.view()).toMatchObject({ status: "scheduled", lastHttpStatus: 429 });
    await ok(`/v1/jobs/${e.job.id}`, { method: "DELETE" });
    await ok(`/v1/flow-control/${encodeURIComponent(`origin:${url.origin}`)}/resume`, { method: "POST" });
  },

  /** A job's own flow-control key: asked and released by the consumer; read, paused, resumed and changed by the API. */
  async flowControl(f) {
    const key = fresh("k");
    const { path, target } = targetAt();
    const e = await newExecution({ target, flowControl: { key, rate: 100, parallelism: 2 } });
    expect((await f.consume(await f.dispatch(e))).acked).toEqual(["m0"]);
    expect(await received(path)).toHaveLength(1);
    expect(await ok(`/v1/flow-control/${key}`)).toMatchObject({ paused: false });
    expect(await ok(`/v1/flow-control/${key}/pause`, { method: "POST" })).toMatchObject({ paused: true });
    expect(await ok(`/v1/flow-control/${key}/resume`, { method: "POST" })).toMatchObject({ paused: false });
    expect(await ok(`/v1/flow-control/${key}`, { method: "PATCH", body: { parallelism: 3 } })).toMatchObject({
      limits: { parallelism: 3 },
    });
    await f.clock.flush(e.stub);
    expect(await jobRow(e.job.id)).toMatchObject({ run_status: "succeeded" });
  },

  /** Idempotency keys: claimed by a create, the same key answers the same job; a create D1 refuses as full releases its key. */
  async idempotency() {
    const key = fresh("i");
    const { target } = targetAt();
    const first = await createJob({ target, delay: "1h", idempotencyKey: key });
    const again = await api("/v1/jobs", { method: "POST", body: { target, delay: "1h", idempotencyKey: key } });
    expect(again.status).toBe(200);
    expect(((await again.json()) as { id: string }).id).toBe(first.id);
    // the Worker with an env of its own: its shards' sizes are its own (db/shards.ts), so this full shard is this call's
    const full = interceptD1Batch(() => Promise.reject(new Error("D1_ERROR: database or disk is full: SQLITE_FULL")));
    try {
      const ctx = createExecutionContext();
      const refused = await worker.fetch(
        new Request("http://scheduler/v1/jobs", {
          method: "POST",
          headers: { authorization: `Bearer ${KEYS.acme}`, "content-type": "application/json" },
          body: JSON.stringify({ target, delay: "1h", idempotencyKey: fresh("i") }),
        }),
        { ...env } as Env,
        ctx,
      );
      expect(refused.status).toBe(507);
      await waitOnExecutionContext(ctx);
    } finally {
      full.mockRestore();
    }
    await ok(`/v1/jobs/${first.id}`, { method: "DELETE" });
  },

  /** A debounced create and one that replaces it (DebounceKeys.submit). */
  async debounce(f) {
    const key = fresh("d");
    const { target } = targetAt();
    const first = await createJob({ target, debounce: { key, delay: "10s" } });
    f.clock.advance(1_000);
    const res = await api("/v1/jobs", { method: "POST", body: { target: { ...target, body: { n: 2 } }, debounce: { key, delay: "10s" } } });
    expect(res.status).toBe(200);
    const second = (await res.json()) as { id: string; debounce: { replaced?: boolean } };
    expect(second.id).toBe(first.id);
    expect(second.debounce.replaced).toBe(true);
    await ok(`/v1/jobs/${first.id}`, { method: "DELETE" });
  },

  /** Alerts: the target set and read; a death reported by its bucket; a throttle reported by its flow key; the digest counted (bump). */
  async alerts(f) {
    const digest = targetAt();
    expect(await ok("/v1/alerts", { method: "PUT", body: { url: digest.target.url, throttledForMs: 60_000 } })).toMatchObject({
      throttledForMs: 60_000,
    });
    expect(await ok("/v1/alerts")).toMatchObject({ url: digest.target.url });
    const dying = await newExecution({ target: targetAt("fail/400").target, retry: { maxAttempts: 1 } });
    expect((await f.consume(await f.dispatch(dying))).acked).toEqual(["m0"]);
    await f.clock.flush(dying.stub); // the outcome reaches D1, then the alerts
    const key = fresh("t");
    const throttled = await newExecution({
      target: { url: `${receiverUrl()}${uniquePath("fail/503")}&retryAfter=120` },
      flowControl: { key, parallelism: 10 },
    });
    expect((await f.consume(await f.dispatch(throttled))).acked).toEqual(["m0"]);
    f.clock.advance(60_001);
    expect(await runDurableObjectAlarm(env.FLOW_KEY.getByName(`acme\n${key}`))).toBe(true);
    await runDurableObjectAlarm(env.ALERTS.getByName("acme"));
    const sent = await received(digest.path);
    expect(sent).toHaveLength(1);
    expect(JSON.parse(sent[0]!.body)).toMatchObject({ count: 1, throttled: [expect.objectContaining({ key })] });
    await ok("/v1/alerts", { method: "DELETE" });
    await ok(`/v1/jobs/${throttled.job.id}`, { method: "DELETE" });
    await f.clock.flush(throttled.stub);
  },

  /** A bulk cancel by label (BulkAction.start), its pages (each job to its bucket), its progress read (view). */
  async bulk(f) {
    const label = fresh("b");
    const jobs = [await createJob({ target: targetAt().target, delay: "30s", labels: { sweep: label } })];
    const res = await api("/v1/jobs/cancel", { method: "POST", body: { filter: { label: `sweep:${label}` } } });
    expect(res.status).toBe(202);
    const { id } = (await res.json()) as { id: string };
    const action = env.BULK_ACTION.getByName(`acme\n${id}`);
    for (let page = 0; page < 5; page++) if (!(await runDurableObjectAlarm(action))) break;
    expect(await ok(`/v1/actions/${id}`)).toMatchObject({ status: "done", done: 1 });
    expect(await ok(`/v1/jobs/${jobs[0]!.id}`)).toMatchObject({ status: "canceled" });
    const stub = bucketStub((await jobRow(jobs[0]!.id))!.bucket);
    await f.clock.flush(stub);
  },

  /** The dead-letter consumer marks a poisoned execution dead (markPoisoned); a recurring job's dead occurrence is redriven (redrive). */
  async deadLetter(f) {
    const e = await newExecution({ target: targetAt().target });
    const poisoned = await f.dispatch(e);
    expect((await f.consume(poisoned, { queue: "fire-dlq" })).acked).toEqual(["m0"]);
    await f.clock.flush(e.stub);
    expect(await jobRow(e.job.id)).toMatchObject({ run_status: "dead", dead_reason: "poison" });

    const recurring = await createJob({ target: targetAt("fail/503").target, cron: "* * * * *", retry: { maxAttempts: 1, jitter: 0 } });
    const row = (await jobRow(recurring.id))!;
    f.clock.travelTo(Math.max(f.clock.at, row.next_run_at!));
    const occurrence = await f.alarm(row.bucket, (r) => r.dueAt === row.next_run_at);
    expect(occurrence).toHaveLength(1);
    expect((await f.consume(occurrence)).acked).toEqual(["m0"]);
    const id = (occurrence[0] as { executions: { executionId: string }[] }).executions[0]!.executionId;
    await f.clock.flush(bucketStub(row.bucket));
    expect(await ok(`/v1/executions/${id}/redrive`, { method: "POST" })).toMatchObject({ redriven: true });
    expect(await live(bucketStub(row.bucket), id)).toMatchObject({ status: "scheduled" });
    await ok(`/v1/jobs/${recurring.id}`, { method: "DELETE" });
    await f.clock.flush(bucketStub(row.bucket));
  },

  /** The scan (pullWindow of every bucket), a far job's D1 rows counted (countD1RowsOf), the metrics (metrics), the counts, a malformed message counted (bump). */
  async scanAndMetrics(f) {
    const far = await createJob({ target: targetAt().target, delay: "2h" });
    await runScan();
    const metrics = await ok("/v1/metrics");
    expect(metrics).toHaveProperty("counters");
    const counts = await bucketStub(0).counts();
    expect(counts).toHaveProperty("byStatus");
    const malformed = await fire([{ v: 99 }]); // not a fire message: acked, dropped, counted in bucket 0
    expect(malformed.explicitAcks).toEqual(["m0"]);
    await ok(`/v1/jobs/${far.id}`, { method: "DELETE" });
    await f.clock.flush(bucketStub(0));
  },
};

/** Every wire entry the flows must reach: each RPC of the table and the message kind buckets send. */
export function wireEntries(): string[] {
  const rpcs = Object.entries(RPCS).flatMap(([object, methods]) => Object.keys(methods).map((m) => `${object}.${m}`));
  return [...rpcs, "message fire"];
}
