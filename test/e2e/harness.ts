/**
 * End-to-end harness: a signing receiver over the shared loopback receiver (test/support/
 * receiver.mjs: arrival time, headers, body, Standard Webhooks verification, how the response
 * ended), the stack's settings, a small API client, a bounded eventually(), percentiles, the
 * stack's log (a file, printed only for a failure) and the set-up most files share (one stack and
 * one receiver for the file). Every wait here has a deadline.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { appendFileSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { basename, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, beforeAll, beforeEach, expect } from "vitest";
import { startStack } from "../../scripts/local-stack.mjs";
import {
  type Answer,
  byPath,
  type Receiver as Loopback,
  OK,
  type ReceiverOptions,
  type Recorded,
  startReceiver,
} from "../support/receiver.mjs";

// ---------------------------------------------------------------------------------------------
// the receiver

/** How the receiver answers a path. */
export type Behaviour =
  | { kind: "ok" }
  /** `times` failures with `status` per webhook-id, then 200 */
  | { kind: "failTimes"; times: number; status: number }
  | { kind: "always"; status: number }
  /** answers only after `ms` (longer than the job's timeoutMs: the scheduler gives up first) */
  | { kind: "hang"; ms: number }
  /** a slow handler that succeeds after `ms` */
  | { kind: "slow"; ms: number };

/** One request, as receiver.mjs records it, with its signature checked. */
export type Received = Recorded & { signatureError: string | null };

/**
 * receiver.mjs's onRequest and onAnswered, called in the receiver's own event order (one Node
 * thread): a request's body arrived (recorded and its signature checked, not yet answered); its
 * answer was fully written. Each gets the very object `requests` holds.
 */
export interface ReceiverHooks {
  onRequest?: (request: Received) => void;
  onAnswered?: (request: Received) => void;
}

/** The loopback receiver of one test file, verifying every signature with the stack's secret. */
export class Receiver {
  private readonly behaviours = new Map<string, Behaviour>();
  private readonly failures = new Map<string, number>();
  private readonly byUrl = byPath();
  private loopback: Loopback | null = null;
  url = "";

  constructor(
    private readonly secret: string,
    private readonly hooks: ReceiverHooks = {},
  ) {}

  /** Behaviour for a path (exact pathname); other paths as byPath() says (/fail/<status>, ...; else 200). */
  on(path: string, behaviour: Behaviour): this {
    this.behaviours.set(path, behaviour);
    return this;
  }

  async listen(): Promise<this> {
    // with record and secret, every request a hook sees is recorded and checked: a Received
    const hooks = this.hooks as Pick<ReceiverOptions, "onRequest" | "onAnswered">;
    this.loopback = await startReceiver({ record: true, secret: this.secret, respond: (r) => this.answer(r as Received), ...hooks });
    this.url = this.loopback.url;
    return this;
  }

  async close(): Promise<void> {
    await this.loopback?.stop();
  }

  /** Every request so far, in arrival order. */
  get requests(): Received[] {
    return (this.loopback?.received ?? []) as Received[];
  }

  /** Requests whose pathname is `path` (or starts with `path` when prefix is true). */
  to(path: string, prefix = false): Received[] {
    return this.requests.filter((r) => (prefix ? pathname(r.path).startsWith(path) : pathname(r.path) === path));
  }

  byWebhookId(id: string): Received[] {
    return this.requests.filter((r) => r.webhookId === id);
  }

  private answer(request: Received): Answer {
    const behaviour = this.behaviours.get(pathname(request.path));
    if (!behaviour) return this.byUrl(request);
    switch (behaviour.kind) {
      case "ok":
        return OK;
      case "always":
        return { status: behaviour.status, body: `always ${behaviour.status}` };
      case "failTimes": {
        const key = `${pathname(request.path)}\u0000${request.webhookId}`;
        const seen = (this.failures.get(key) ?? 0) + 1;
        this.failures.set(key, seen);
        return seen <= behaviour.times ? { status: behaviour.status, body: "not yet" } : OK;
      }
      case "hang":
        return { status: 200, body: "late", afterMs: behaviour.ms };
      case "slow":
        return { status: 200, body: "slow ok", afterMs: behaviour.ms };
    }
  }
}

function pathname(path: string): string {
  const query = path.indexOf("?");
  return query < 0 ? path : path.slice(0, query);
}

// ---------------------------------------------------------------------------------------------
// stack settings and the API

export interface Credentials {
  apiKey: string;
  secret: string;
  vars: Record<string, string>;
}

/** A fresh API key and whsec_ signing secret, and the vars that start a stack with them. */
export function credentials(extra: Record<string, string> = {}): Credentials {
  const apiKey = randomBytes(24).toString("base64url");
  const secret = `whsec_${randomBytes(32).toString("base64")}`;
  return {
    apiKey,
    secret,
    vars: { API_KEYS: `e2e:${apiKey}`, WEBHOOK_SECRET: secret, ALLOW_LOOPBACK_TARGETS: "true", ...extra },
  };
}

export interface ApiResponse<T = unknown> {
  status: number;
  body: T;
}

/** A job as the API shows it (the fields the end-to-end tests read). */
export interface JobView {
  id: string;
  status: string;
  nextRunAt: string | null;
  latestExecution?: ExecutionView | null;
}

/** GET /v1/metrics (the fields the end-to-end tests read). */
export interface MetricsView {
  counters: Record<string, number>;
  dead_total_by_reason: Record<string, number>;
  fire_lag_ms: { count: number; p50: number; p95: number; p99: number };
}

/** One attempt of an execution, as GET /v1/jobs/:id/executions lists it. */
export interface AttemptView {
  attempt: number;
  dueAt: string;
  startedAt: string;
  finishedAt: string | null;
  outcome: string | null;
  httpStatus: number | null;
  error: string | null;
  lagMs: number;
  /** how long flow control held the attempt back (0 when it did not wait) */
  waitMs: number;
  /** the attempt's span id in the job's W3C trace (null: the job has no trace) */
  spanId: string | null;
}

/** An execution as the API shows it; `attempts` is a count, or the attempts themselves in a job's execution list. */
export interface ExecutionView<Attempts = number> {
  id: string;
  jobId: string;
  dueAt: string;
  status: string;
  attempts: Attempts;
  lastHttpStatus: number | null;
  lastError: string | null;
  deadReason: string | null;
  finishedAt: string | null;
}

export class Api {
  constructor(
    private baseUrl: string,
    private readonly apiKey: string,
  ) {}

  /** Points the client at a restarted stack. */
  use(baseUrl: string): void {
    this.baseUrl = baseUrl;
  }

  async request<T = unknown>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<ApiResponse<T>> {
    const res = await fetch(`${this.baseUrl}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${this.apiKey}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
        ...headers,
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      /* not JSON */
    }
    return { status: res.status, body: parsed as T };
  }

  createJob(job: unknown, headers: Record<string, string> = {}) {
    return this.request<JobView>("POST", "/v1/jobs", job, headers);
  }

  /** POST /v1/jobs/batch in chunks; returns the created jobs in order and throws if any was refused. */
  async createJobs(jobs: unknown[], chunk = 250): Promise<JobView[]> {
    const out: JobView[] = [];
    for (let i = 0; i < jobs.length; i += chunk) {
      const res = await this.request<{ results: { status: number; job?: JobView; error?: unknown }[] }>("POST", "/v1/jobs/batch", {
        jobs: jobs.slice(i, i + chunk),
      });
      if (res.status !== 200) throw new Error(`batch create answered ${res.status}: ${JSON.stringify(res.body)}`);
      for (const r of res.body.results) {
        if (r.status !== 201) throw new Error(`a job was refused: ${JSON.stringify(r)}`);
        out.push(r.job!);
      }
    }
    return out;
  }

  executions(jobId: string) {
    return this.request<{ executions: ExecutionView<AttemptView[]>[] }>("GET", `/v1/jobs/${jobId}/executions`);
  }

  job(jobId: string) {
    return this.request<JobView>("GET", `/v1/jobs/${jobId}`);
  }

  metrics() {
    return this.request<MetricsView>("GET", "/v1/metrics");
  }
}

// ---------------------------------------------------------------------------------------------
// time

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Polls `check` until it returns a value other than undefined/false or stops throwing, for at
 * most `deadlineMs`; then throws with the last error or `what`.
 */
export async function eventually<T>(
  what: string,
  check: () => T | undefined | false | Promise<T | undefined | false>,
  deadlineMs: number,
  intervalMs = 100,
): Promise<T> {
  const deadline = Date.now() + deadlineMs;
  let lastError: unknown = null;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
      lastError = null;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() >= deadline) {
      const why = lastError instanceof Error ? `: ${lastError.message}` : "";
      throw new Error(`not within ${deadlineMs} ms: ${what}${why}`);
    }
    await sleep(intervalMs);
  }
}

/** Nearest-rank percentile (p in 0..100) of numbers; NaN when empty. */
export function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(sorted.length, rank) - 1]!;
}

/**
 * One JSON line of figures for the closing note, with the machine's 1-minute load average:
 * latency figures from a shared 2-core machine mean little without it.
 */
export function report(name: string, figures: Record<string, unknown>): void {
  console.log(JSON.stringify({ e2e: name, ...figures, loadAvg1m: Math.round(loadavg()[0]! * 100) / 100 }));
}

/** Removes a stack's temporary state directory (only one startStack made under the temp dir). */
export function removeStateDir(dir: string | undefined): void {
  if (dir?.startsWith(tmpdir()) && dir.includes("scheduler-state-")) rmSync(dir, { recursive: true, force: true });
}

/** Where a test file's stack log goes: overwritten each run, git-ignored with .wrangler/. */
export const LOG_DIR = fileURLToPath(new URL("../../.wrangler/test-logs/e2e", import.meta.url));

/**
 * The stacks' output for one test file (wrangler's migrations and dev server): written to
 * LOG_DIR/<file>.log (created afresh) and kept in memory (the last `limitChars`) for a failing
 * test to print, so a passing run shows none of it. A failing test also prints the log's path. A
 * production limit the stack exceeded (the local profile logs it) fails the test it happened in.
 * Call it at a test file's top level.
 */
export function logSink(limitChars = 200_000): { log: (line: string) => void; text: () => string; path: string } {
  const path = join(LOG_DIR, `${basename(expect.getState().testPath ?? "e2e").replace(/\.test\.ts$/, "")}.log`);
  mkdirSync(LOG_DIR, { recursive: true });
  writeFileSync(path, "");
  beforeEach(({ onTestFailed }) => onTestFailed(() => console.error(`stack log: ${relative(process.cwd(), path)}`)));
  // the local profile (src/platform/profile.ts) logs each production limit the stack's code exceeded,
  // also where the code caught it: any fails the test it happened in
  const breaches: string[] = [];
  afterEach(() => {
    const seen = breaches.splice(0);
    if (seen.length > 0) throw new Error(`production would refuse this:\n${seen.join("\n")}\nstack log: ${relative(process.cwd(), path)}`);
  });
  let text = "";
  return {
    log: (line) => {
      appendFileSync(path, line);
      for (const breach of line.match(/platform limit exceeded \([^\n]*/g) ?? []) breaches.push(breach);
      text += line;
      if (text.length > 2 * limitChars) text = text.slice(-limitChars);
    },
    text: () => text.slice(-limitChars),
    path,
  };
}

export type LocalStack = Awaited<ReturnType<typeof startStack>>;

/** the receiver and the stack read the same clock; this absorbs millisecond rounding only */
export const CLOCK_TOLERANCE_MS = 5;

/**
 * The job's only execution once it is terminal with `attempts` attempts and D1 has caught up:
 * the API shows the bucket's live status at once but the other fields (attempts, deadReason,
 * finishedAt) only after the mirror, so this waits for those too.
 */
export async function settledExecution(
  api: Api,
  jobId: string,
  status: "succeeded" | "dead",
  attempts: number,
  deadlineMs: number,
): Promise<ExecutionView<AttemptView[]>> {
  return eventually(
    `execution of ${jobId} is ${status} after ${attempts} attempts`,
    async () => {
      const [e] = (await api.executions(jobId)).body.executions;
      const settled =
        e &&
        e.status === status &&
        e.finishedAt !== null &&
        e.attempts.length === attempts &&
        e.attempts.every((a: AttemptView) => a.outcome !== null);
      return settled ? e : undefined;
    },
    deadlineMs,
    200,
  );
}

/**
 * One local stack and one signing receiver for a test file, with fresh credentials and a log
 * sink: the receiver listens and the stack starts before the file's tests, and both stop after
 * them. `routes` says how the receiver answers paths (others: byPath(), so mostly 200); `hooks`
 * see every request arrive and every answer leave; `vars` are settings for the stack (e.g.
 * LOOKAHEAD_MS). `stack` and `api` are set by beforeAll.
 */
export function stackForFile(options: {
  port: number;
  routes?: Record<string, Behaviour>;
  hooks?: ReceiverHooks;
  vars?: Record<string, string>;
}): {
  receiver: Receiver;
  sink: ReturnType<typeof logSink>;
  stack: LocalStack;
  api: Api;
  /** the stack's API key and signing secret, for clients other than `api` */
  creds: Credentials;
} {
  const creds = credentials(options.vars);
  const receiver = new Receiver(creds.secret, options.hooks);
  for (const [path, behaviour] of Object.entries(options.routes ?? {})) receiver.on(path, behaviour);
  const handle = { receiver, sink: logSink(), creds } as {
    receiver: Receiver;
    sink: ReturnType<typeof logSink>;
    stack: LocalStack;
    api: Api;
    creds: Credentials;
  };
  beforeAll(async () => {
    await receiver.listen();
    try {
      handle.stack = await startStack({ port: options.port, vars: creds.vars, log: handle.sink.log });
    } catch (error) {
      if (error instanceof Error) error.message += `\nstack log: ${relative(process.cwd(), handle.sink.path)}`;
      throw error;
    }
    handle.api = new Api(handle.stack.url, creds.apiKey);
  });
  afterAll(async () => {
    await handle.stack?.stop();
    await receiver.close();
    removeStateDir(handle.stack?.persistTo);
  });
  return handle;
}

// ---------------------------------------------------------------------------------------------
// a program run to its end

export interface ProcessRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs a program to its end and answers its exit code and output; it is killed (by its pid) after
 * `timeoutMs`. `input` is written to its stdin, then closed; `signalAfterOutput` is sent to it once
 * it has printed something.
 */
export function runProcess(
  command: string,
  args: string[],
  options: { env?: NodeJS.ProcessEnv; cwd?: string; input?: string; signalAfterOutput?: NodeJS.Signals; timeoutMs?: number } = {},
): Promise<ProcessRun> {
  const child = spawn(command, args, { env: options.env ?? process.env, cwd: options.cwd, stdio: ["pipe", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  const killer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 60_000);
  child.stdout.on("data", (chunk) => {
    stdout += chunk;
    if (options.signalAfterOutput) child.kill(options.signalAfterOutput);
  });
  child.stderr.on("data", (chunk) => {
    stderr += chunk;
  });
  child.stdin.end(options.input ?? "");
  return new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(killer);
      resolve({ code, stdout, stderr });
    });
  });
}
