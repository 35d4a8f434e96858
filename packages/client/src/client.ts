/**
 * A typed client for the edge-scheduler API. It needs only the platform's fetch (Node >= 20, Workers,
 * browsers, Deno, Bun). The types come from schema.ts, generated from the server's openapi.json.
 */

import { SchedulerError, SchedulerNetworkError } from "./errors.ts";
import type { components, operations } from "./schema.ts";

type Schemas = components["schemas"];
/** A route's JSON body (of an optional body too: POST /v1/pull/{queue}/lease may be sent empty). */
type JsonBody<Op extends keyof operations> = operations[Op] extends { requestBody?: infer R }
  ? NonNullable<R> extends { content: { "application/json": infer B } }
    ? B
    : never
  : never;

export type Job = Schemas["Job"];
export type JobWithLatestExecution = Schemas["JobWithLatestExecution"];
/** The schema's Execution is nullable because a job's latestExecution may be null; an execution itself never is. */
export type Execution = Schemas["Execution"];
export type ExecutionWithAttempts = Schemas["ExecutionWithAttempts"];
export type Attempt = Schemas["Attempt"];
export type RedrivenExecution = Schemas["RedrivenExecution"];
export type FlowKey = Schemas["FlowKey"];
export type ArchivedExecution = Schemas["ArchivedExecution"];
export type ArchiveObject = Schemas["ArchiveObject"];
export type Metrics = Schemas["Metrics"];
export type BatchResults = Schemas["BatchResults"];
export type BatchResult = BatchResults["results"][number];
export type JobStatus = Job["status"];
export type FlowLimits = JsonBody<"updateFlowKey">;
export type BulkAction = Schemas["BulkAction"];
/** `{ids}` or `{filter: {status, label}}` (not empty) */
export type BulkJobs = JsonBody<"cancelJobs">;
/** `{ids}` or `{filter: {jobId, deadReason}}` (not empty) */
export type BulkRedrive = JsonBody<"redriveDeadExecutions">;

export type PullLease = Schemas["PullLease"];
export type PullQueueStatus = Schemas["PullQueueStatus"];
export type PullHeartbeat = Schemas["PullHeartbeat"];
export type PullReport = Schemas["PullReport"];
export type PullFailure = JsonBody<"failPullLease">;
/** The tenant's alert target (README Alerts) and what PUT /v1/alerts takes. */
export type AlertTarget = Schemas["AlertTarget"];
export type SetAlertTarget = JsonBody<"setAlertTarget">;
/** A list operation's query parameters without its cursor (the iterator follows nextCursor). */
type ListFilter<Op extends keyof operations> = Omit<
  NonNullable<operations[Op] extends { parameters: { query?: infer Q } } ? Q : never>,
  "cursor"
>;
/** status, label ("key:value"), name and url (prefixes), limit (the page size) */
export type JobFilter = ListFilter<"listJobs">;
/** status, jobId, label ("key:value"), url (a prefix), httpStatus, from and to (RFC 3339, the due time), limit */
export type ExecutionFilter = ListFilter<"listExecutions">;

export type CreateJob = JsonBody<"createJob">;
export type UpdateJob = JsonBody<"updateJob">;

export const VERSION = "0.1.0"; // keep in step with package.json (read at build time it would leave src/)

export interface ClientOptions {
  /** e.g. http://127.0.0.1:8787; a trailing slash is fine, a path prefix is kept */
  baseUrl: string;
  apiKey: string;
  /** defaults to the global fetch, looked up at each call */
  fetch?: typeof fetch;
  /** defaults 4, 250, 10_000; maxAttempts 1 = no retries */
  retry?: { maxAttempts?: number; initialDelayMs?: number; maxDelayMs?: number };
  /** per attempt, default 30_000 */
  timeoutMs?: number;
  /** default edge-scheduler-client/<version> */
  userAgent?: string;
}

/** An async iterable over every item, following nextCursor; also page-at-a-time. */
export interface Paginated<T> extends AsyncIterable<T> {
  page(cursor?: string): Promise<{ items: T[]; nextCursor: string | null }>;
  /** every item, or the first `max`; stops fetching pages once it has them */
  toArray(max?: number): Promise<T[]>;
}

export interface JobsApi {
  /**
   * Sends an Idempotency-Key (yours, the job's, or a new one) kept across retries: a retry never makes a second job.
   * `traceparent` / `tracestate`: the W3C trace the job joins, sent as the request's headers (an invalid one is
   * ignored by the scheduler, as the spec says; `trace` in the job is checked and wins).
   */
  create(job: CreateJob, options?: { idempotencyKey?: string; traceparent?: string; tracestate?: string }): Promise<Job>;
  /** Up to 1000 jobs; an item without idempotencyKey gets a new one. One result per job, in order. */
  createMany(jobs: CreateJob[]): Promise<BatchResult[]>;
  get(id: string): Promise<JobWithLatestExecution>;
  /** newest first; limit = page size; with a filter a page may be short (iteration follows nextCursor) */
  list(filter?: JobFilter): Paginated<Job>;
  update(id: string, change: UpdateJob): Promise<Job>;
  cancel(id: string): Promise<Job>;
  pause(id: string): Promise<Job>;
  resume(id: string): Promise<Job>;
  /** latest first, at most 100 */
  executions(id: string): Promise<ExecutionWithAttempts[]>;
  /**
   * Cancels, pauses or resumes many jobs in the background: answers the started action (follow it
   * with actions.get). Sends an Idempotency-Key (yours, or a new one, ASCII) kept across retries,
   * so a retry finds the same action instead of starting another.
   */
  bulk(kind: "cancel" | "pause" | "resume", jobs: BulkJobs, options?: { idempotencyKey?: string }): Promise<BulkAction>;
}

export interface ExecutionsApi {
  /**
   * newest first: one-off jobs' executions and finished occurrences (with jobId, the job's live ones
   * too); a page may be short (iteration follows nextCursor)
   */
  list(filter?: ExecutionFilter): Paginated<Execution>;
  get(id: string): Promise<Execution>;
  /** Repeated only after a 429: a redrive whose answer was lost would be 409 not_dead the second time. */
  redrive(id: string): Promise<RedrivenExecution>;
}

export interface DlqApi {
  list(query?: { limit?: number }): Paginated<Execution>;
  redrive(executionId: string): Promise<RedrivenExecution>;
  /** Redrives many dead executions in the background (an Idempotency-Key as for jobs.bulk). */
  redriveMany(executions: BulkRedrive, options?: { idempotencyKey?: string }): Promise<BulkAction>;
}

/** The history archive (R2): finished executions D1 no longer holds, gzip NDJSON per tenant and hour. */
export interface ArchiveApi {
  /** the tenant's objects in time order; `prefix` "date=2026-12-01/" (or with "hour=14/") narrows it */
  list(query?: { prefix?: string; limit?: number }): Paginated<ArchiveObject>;
  /** one object as stored: gzip-compressed NDJSON, one execution a line */
  object(key: string): Promise<Uint8Array>;
}

export interface ActionsApi {
  /** a bulk action's progress */
  get(id: string): Promise<BulkAction>;
}

export interface FlowControlApi {
  get(key: string): Promise<FlowKey>;
  pause(key: string): Promise<FlowKey>;
  resume(key: string): Promise<FlowKey>;
  /** null lifts a limit */
  update(key: string, limits: FlowLimits): Promise<FlowKey>;
}

/** The tenant's alert target: dead executions and throttled flow keys, as signed digests (README Alerts). */
export interface AlertsApi {
  /** Sets (replaces) it; throttledForMs also reports a flow key its target throttled longer than that. */
  set(target: SetAlertTarget): Promise<AlertTarget>;
  /** It, or null when none is set. */
  get(): Promise<AlertTarget | null>;
  /** Removes it (what waits for a digest is dropped); also when none is set. */
  delete(): Promise<void>;
}

/** A pull queue's workers: lease its due executions and report on each with the lease's token. */
export interface PullApi {
  /**
   * Leases up to `max` due executions for `leaseMs` each; with none due, waits up to `waitMs`
   * (at most 20 s) for one. Not repeated after a lost answer: leases granted to nobody come back
   * when they expire. `signal` ends the wait for the answer, not the request: the server may still
   * lease work to it, which then comes back when its lease expires.
   */
  lease(queue: string, options?: { max?: number; leaseMs?: number; waitMs?: number; signal?: AbortSignal }): Promise<PullLease[]>;
  /** Extends the lease by its length; a SchedulerError with code stale_lease when it is no longer yours. */
  heartbeat(token: string): Promise<PullHeartbeat>;
  complete(token: string): Promise<PullReport>;
  /** retryable (default true) is retried with the job's backoff, no sooner than retryAfterMs; false ends it dead. */
  fail(token: string, failure?: PullFailure): Promise<PullReport>;
  /** How much waits in the queue. */
  status(queue: string): Promise<PullQueueStatus>;
}

interface Call {
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  /** with its segments already encoded */
  path: string;
  query?: Record<string, string | number | undefined>;
  body?: unknown;
  headers?: Record<string, string>;
  /** ends the call early (with the per-attempt timeout) */
  signal?: AbortSignal;
  /** this call's per-attempt timeout, when the client's is too short for it (a long poll) */
  timeoutMs?: number;
  /**
   * false: repeat only after a 429 (the rate limiter refused it before anything ran). true: also
   * after a 5xx or no answer, because repeating the call cannot do it twice.
   */
  repeatable: boolean;
  /** the answer is bytes, not JSON */
  binary?: boolean;
}

const enc = encodeURIComponent;

export class SchedulerClient {
  readonly jobs: JobsApi;
  readonly executions: ExecutionsApi;
  readonly dlq: DlqApi;
  readonly archive: ArchiveApi;
  readonly flowControl: FlowControlApi;
  readonly actions: ActionsApi;
  readonly pull: PullApi;
  readonly alerts: AlertsApi;

  readonly #baseUrl: string;
  readonly #headers: Record<string, string>;
  readonly #fetch: typeof fetch;
  readonly #timeoutMs: number;
  readonly #maxAttempts: number;
  readonly #initialDelayMs: number;
  readonly #maxDelayMs: number;

  constructor(options: ClientOptions) {
    this.#baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.#headers = {
      authorization: `Bearer ${options.apiKey}`,
      accept: "application/json",
      "user-agent": options.userAgent ?? `edge-scheduler-client/${VERSION}`,
    };
    // A wrapper, not the bare global: calling fetch as a method of another object is "Illegal invocation" in browsers and Workers.
    this.#fetch = options.fetch ?? ((input, init) => fetch(input, init));
    this.#timeoutMs = options.timeoutMs ?? 30_000;
    const maxAttempts = options.retry?.maxAttempts ?? 4;
    if (!Number.isSafeInteger(maxAttempts) || maxAttempts < 1)
      throw new RangeError(`retry.maxAttempts must be a whole number ≥ 1, not ${maxAttempts}`);
    this.#maxAttempts = maxAttempts;
    this.#initialDelayMs = options.retry?.initialDelayMs ?? 250;
    this.#maxDelayMs = options.retry?.maxDelayMs ?? 10_000;

    const job = (id: string, action = "") => `/v1/jobs/${enc(id)}${action}`;
    const flowKey = (key: string, action = "") => `/v1/flow-control/${enc(key)}${action}`;
    const redrive = (id: string) =>
      this.#request<RedrivenExecution>({ method: "POST", path: `/v1/executions/${enc(id)}/redrive`, repeatable: false });

    this.jobs = {
      create: (body, options) => {
        // Made once per call, so every retry carries the same key and a repeat answers 200 with the original job.
        // In the body, not the Idempotency-Key header: a header holds only Latin-1, a key any text.
        const idempotencyKey = options?.idempotencyKey ?? body.idempotencyKey ?? crypto.randomUUID();
        const headers: Record<string, string> = {};
        if (options?.traceparent) headers.traceparent = options.traceparent;
        if (options?.traceparent && options.tracestate) headers.tracestate = options.tracestate;
        return this.#request<Job>({ method: "POST", path: "/v1/jobs", body: { ...body, idempotencyKey }, headers, repeatable: true });
      },
      createMany: async (jobs) => {
        const body = { jobs: jobs.map((j) => ({ ...j, idempotencyKey: j.idempotencyKey ?? crypto.randomUUID() })) };
        const answer = await this.#request<BatchResults>({ method: "POST", path: "/v1/jobs/batch", body, repeatable: true });
        return answer.results; // the server answers in request order
      },
      get: (id) => this.#request({ method: "GET", path: job(id), repeatable: true }),
      list: (query = {}) => this.#list<Schemas["JobList"], "jobs">("/v1/jobs", "jobs", query),
      // A job already canceled, paused or resumed answers success again, and a PATCH sets the same values again; but
      // a PATCH with runAt or delay reschedules each time it is applied (a one-off could run twice): not repeated.
      update: (id, change) =>
        this.#request({
          method: "PATCH",
          path: job(id),
          body: change,
          repeatable: change.runAt === undefined && change.delay === undefined,
        }),
      cancel: (id) => this.#request({ method: "DELETE", path: job(id), repeatable: true }),
      pause: (id) => this.#request({ method: "POST", path: job(id, "/pause"), repeatable: true }),
      resume: (id) => this.#request({ method: "POST", path: job(id, "/resume"), repeatable: true }),
      bulk: (kind, jobs, options) => this.#startAction(`/v1/jobs/${kind}`, jobs, options?.idempotencyKey),
      executions: async (id) =>
        (await this.#request<Schemas["JobExecutions"]>({ method: "GET", path: job(id, "/executions"), repeatable: true })).executions,
    };

    this.executions = {
      list: (filter = {}) => this.#list<Schemas["ExecutionList"], "executions">("/v1/executions", "executions", filter),
      get: (id) => this.#request({ method: "GET", path: `/v1/executions/${enc(id)}`, repeatable: true }),
      redrive,
    };

    this.dlq = {
      list: (query = {}) => this.#list<Schemas["ExecutionList"], "executions">("/v1/dlq", "executions", query),
      redrive,
      redriveMany: (executions, options) => this.#startAction("/v1/dlq/redrive", executions, options?.idempotencyKey),
    };

    this.archive = {
      list: (query = {}) => this.#list<Schemas["ArchiveList"], "objects">("/v1/archive", "objects", query),
      object: (key) =>
        this.#request<Uint8Array>({ method: "GET", path: "/v1/archive/object", query: { key }, repeatable: true, binary: true }),
    };

    this.actions = {
      get: (id) => this.#request({ method: "GET", path: `/v1/actions/${enc(id)}`, repeatable: true }),
    };

    const lease = (token: string, action: string) => `/v1/pull/leases/${enc(token)}/${action}`;
    this.pull = {
      lease: async (queue, { signal, ...options } = {}) =>
        (
          await this.#request<Schemas["PullLeases"]>({
            method: "POST",
            path: `/v1/pull/${enc(queue)}/lease`,
            body: options,
            repeatable: false,
            // a long poll answers after up to waitMs: the timeout must not end it first
            timeoutMs: Math.max(this.#timeoutMs, (options.waitMs ?? 0) + 10_000),
            ...(signal ? { signal } : {}),
          })
        ).leases,
      heartbeat: (token) => this.#request({ method: "POST", path: lease(token, "heartbeat"), repeatable: true }),
      // a repeat after a lost answer is answered stale_lease (the first one was recorded): the caller decides
      complete: (token) => this.#request({ method: "POST", path: lease(token, "complete"), repeatable: true }),
      fail: (token, failure = {}) => this.#request({ method: "POST", path: lease(token, "fail"), body: failure, repeatable: true }),
      status: (queue) => this.#request({ method: "GET", path: `/v1/pull/${enc(queue)}`, repeatable: true }),
    };

    this.flowControl = {
      get: (key) => this.#request({ method: "GET", path: flowKey(key), repeatable: true }),
      pause: (key) => this.#request({ method: "POST", path: flowKey(key, "/pause"), repeatable: true }),
      resume: (key) => this.#request({ method: "POST", path: flowKey(key, "/resume"), repeatable: true }),
      update: (key, limits) => this.#request({ method: "PATCH", path: flowKey(key), body: limits, repeatable: true }),
    };

    // a PUT sets the whole target and a DELETE removes it: both can be repeated
    this.alerts = {
      set: (target) => this.#request({ method: "PUT", path: "/v1/alerts", body: target, repeatable: true }),
      get: async () => {
        try {
          return await this.#request<AlertTarget>({ method: "GET", path: "/v1/alerts", repeatable: true });
        } catch (error) {
          if (error instanceof SchedulerError && error.code === "not_found") return null;
          throw error;
        }
      },
      delete: () => this.#request({ method: "DELETE", path: "/v1/alerts", repeatable: true }),
    };
  }

  /** Counters, dead by reason, fire lag and flow-control keys of your tenant. */
  metrics(): Promise<Metrics> {
    return this.#request({ method: "GET", path: "/v1/metrics", repeatable: true });
  }

  /** A bulk action, with one Idempotency-Key per call: a retry after a lost answer finds the same action. */
  #startAction(path: string, body: unknown, idempotencyKey: string = crypto.randomUUID()): Promise<BulkAction> {
    return this.#request({ method: "POST", path, body, headers: { "idempotency-key": idempotencyKey }, repeatable: true });
  }

  /** Liveness (needs no key; the key is sent anyway). */
  health(): Promise<{ ok: true }> {
    return this.#request({ method: "GET", path: "/healthz", repeatable: true });
  }

  async #request<T>(call: Call): Promise<T> {
    const search = new URLSearchParams();
    for (const [name, value] of Object.entries(call.query ?? {})) if (value !== undefined) search.set(name, String(value));
    const qs = search.toString();
    const url = `${this.#baseUrl}${call.path}${qs ? `?${qs}` : ""}`;
    const headers = { ...this.#headers, ...call.headers };
    if (call.body !== undefined) headers["content-type"] = "application/json";
    // Serialized once: every attempt sends the same bytes (and the same idempotency keys).
    const body = call.body === undefined ? undefined : JSON.stringify(call.body);
    const what = `${call.method} ${call.path}`;

    // Built once, outside the retries: a request that cannot be made (a bad URL, a header outside Latin-1) throws here, at once.
    const request = new Request(url, { method: call.method, headers, body });

    for (let attempt = 1; ; attempt++) {
      let response: Response;
      let text: string;
      let bytes: Uint8Array | undefined;
      try {
        const timeout = AbortSignal.timeout(call.timeoutMs ?? this.#timeoutMs);
        response = await this.#fetch(request.clone(), { signal: call.signal ? AbortSignal.any([timeout, call.signal]) : timeout });
        // inside the try: a body that breaks off is no answer either
        if (call.binary && response.ok) bytes = new Uint8Array(await response.arrayBuffer());
        text = bytes ? "" : await response.text();
      } catch (cause) {
        if (!call.repeatable || attempt >= this.#maxAttempts || call.signal?.aborted) {
          const tries = attempt > 1 ? ` after ${attempt} attempts` : "";
          const unknown = call.method === "GET" ? "" : "; it may or may not have been applied";
          throw new SchedulerNetworkError(`${what}: no answer${tries}${unknown}: ${describe(cause)}`, cause);
        }
        await sleep(this.#backoff(attempt, null));
        continue;
      }

      if (bytes) return bytes as T;
      if (response.status === 204) return undefined as T;
      if (response.ok) return parseSuccess<T>(response, text); // 200, 201, and 202 (durable, converging)
      const error = errorOf(response, text);
      const retryable = response.status === 429 || (call.repeatable && response.status >= 500);
      if (!retryable || attempt >= this.#maxAttempts) throw error;
      await sleep(this.#backoff(attempt, error.retryAfterMs));
    }
  }

  /**
   * Full jitter over min(maxDelayMs, initialDelayMs·2^(attempt−1)), but never earlier than the
   * server's Retry-After. That is capped at 6·maxDelayMs (60 s by default), so a far-off date does
   * not stall the caller for hours; the error, if the retries run out, still carries the full value.
   */
  #backoff(attempt: number, retryAfterMs: number | null): number {
    const jittered = Math.random() * Math.min(this.#maxDelayMs, this.#initialDelayMs * 2 ** (attempt - 1));
    return retryAfterMs === null ? jittered : Math.max(jittered, Math.min(retryAfterMs, this.#maxDelayMs * 6));
  }

  /** A list route's pages: `field` holds each page's items, `nextCursor` the next page. */
  #list<Page extends Record<Field, unknown[]> & { nextCursor: string | null }, Field extends string>(
    path: string,
    field: Field,
    query: Record<string, string | number | undefined>,
  ): Paginated<Page[Field][number]> {
    return this.#paginate(async (cursor) => {
      const page = await this.#request<Page>({ method: "GET", path, query: { ...query, cursor }, repeatable: true });
      return { items: page[field] as Page[Field][number][], nextCursor: page.nextCursor };
    });
  }

  #paginate<T>(fetchPage: (cursor: string | undefined) => Promise<{ items: T[]; nextCursor: string | null }>): Paginated<T> {
    async function* all(): AsyncGenerator<T> {
      let cursor: string | undefined;
      do {
        const page = await fetchPage(cursor);
        yield* page.items;
        cursor = page.nextCursor ?? undefined;
      } while (cursor !== undefined);
    }
    return {
      page: (cursor) => fetchPage(cursor),
      [Symbol.asyncIterator]: all,
      toArray: async (max = Number.POSITIVE_INFINITY) => {
        const items: T[] = [];
        if (max <= 0) return items;
        // Leaving the loop early returns the generator, so no page past the one holding item `max` is fetched.
        for await (const item of all()) if (items.push(item) >= max) break;
        return items;
      },
    };
  }
}

function parseSuccess<T>(response: Response, text: string): T {
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new SchedulerError({
      status: response.status,
      code: "invalid_response",
      message: `HTTP ${response.status}: the answer is not JSON`,
    });
  }
}

function errorOf(response: Response, text: string): SchedulerError {
  const retryAfterMs = parseRetryAfter(response.headers.get("retry-after"));
  const envelope = parseEnvelope(text);
  if (envelope) return new SchedulerError({ status: response.status, ...envelope, retryAfterMs });
  // Not the API's envelope (a proxy, a load balancer, a Worker that crashed): keep a little of the body for the message.
  const excerpt = text.trim().slice(0, 200);
  const message = `HTTP ${response.status}${response.statusText ? ` ${response.statusText}` : ""}${excerpt ? `: ${excerpt}` : ""}`;
  return new SchedulerError({ status: response.status, code: `http_${response.status}`, message, retryAfterMs });
}

function parseEnvelope(text: string): { code: string; message: string; field: string | null } | null {
  try {
    const error = (JSON.parse(text) as { error?: { code?: unknown; message?: unknown; field?: unknown } } | null)?.error;
    if (typeof error?.code !== "string") return null;
    return {
      code: error.code,
      message: typeof error.message === "string" ? error.message : error.code,
      field: typeof error.field === "string" ? error.field : null,
    };
  } catch {
    return null;
  }
}

/** Retry-After as delay-seconds or an HTTP date, in milliseconds from now; null when absent or unreadable. */
function parseRetryAfter(value: string | null): number | null {
  if (value === null) return null;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? null : Math.max(0, at - Date.now());
}

function describe(cause: unknown): string {
  return cause instanceof Error ? `${cause.name}: ${cause.message}` : String(cause);
}

/** The global setTimeout, looked up at each call, so tests can fake it. */
function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
