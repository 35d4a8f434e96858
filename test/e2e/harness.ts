/**
 * End-to-end harness: a loopback HTTP target that records every request (arrival time, headers,
 * body, Standard Webhooks verification, how the response ended), the stack's settings, a small
 * API client, a bounded eventually(), percentiles, and the set-up most files share (one stack and
 * one receiver for the file). Every wait here has a deadline.
 */
import { randomBytes } from "node:crypto";
import { rmSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { loadavg, tmpdir } from "node:os";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll } from "vitest";
import { startStack } from "../../scripts/local-stack.mjs";

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

export interface Received {
  path: string;
  method: string;
  headers: Record<string, string>;
  body: string;
  /** Date.now() when the request's headers arrived */
  at: number;
  webhookId: string;
  attempt: number;
  jobId: string;
  /** null when the signature verified, else why not */
  signatureError: string | null;
  /** the status the receiver answered; null while pending or if the caller went away first */
  status: number | null;
  /** Date.now() when the response was fully written; null if the caller went away first */
  completedAt: number | null;
}

export class Receiver {
  readonly requests: Received[] = [];
  private readonly behaviours = new Map<string, Behaviour>();
  private readonly failures = new Map<string, number>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly sockets = new Set<Socket>();
  private server: Server | null = null;
  private webhook: Webhook;
  url = "";

  constructor(secret: string) {
    this.webhook = new Webhook(secret);
  }

  /** Behaviour for a path (exact pathname); unknown paths answer 200. */
  on(path: string, behaviour: Behaviour): this {
    this.behaviours.set(path, behaviour);
    return this;
  }

  async listen(): Promise<this> {
    const server = createServer((req, res) => void this.handle(req, res));
    server.on("connection", (socket) => {
      this.sockets.add(socket);
      socket.on("close", () => this.sockets.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    this.server = server;
    this.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return this;
  }

  async close(): Promise<void> {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    const server = this.server;
    this.server = null;
    if (!server) return;
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Requests whose pathname is `path` (or starts with `path` when prefix is true). */
  to(path: string, prefix = false): Received[] {
    return this.requests.filter((r) => (prefix ? r.path.startsWith(path) : r.path === path));
  }

  byWebhookId(id: string): Received[] {
    return this.requests.filter((r) => r.webhookId === id);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const at = Date.now();
    const path = new URL(req.url ?? "/", "http://127.0.0.1").pathname;
    const chunks: Buffer[] = [];
    try {
      for await (const chunk of req) chunks.push(chunk as Buffer);
    } catch {
      /* the caller went away mid-body; keep what arrived */
    }
    const body = Buffer.concat(chunks).toString("utf8");
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) headers[k] = Array.isArray(v) ? v.join(", ") : (v ?? "");
    let signatureError: string | null = null;
    try {
      this.webhook.verify(body, headers, { jsonParse: false });
    } catch (error) {
      signatureError = error instanceof Error ? error.message : String(error);
    }
    const record: Received = {
      path,
      method: req.method ?? "",
      headers,
      body,
      at,
      webhookId: headers["webhook-id"] ?? "",
      attempt: Number(headers["x-scheduler-attempt"] ?? "0"),
      jobId: headers["x-scheduler-job-id"] ?? "",
      signatureError,
      status: null,
      completedAt: null,
    };
    this.requests.push(record);
    res.on("finish", () => {
      record.completedAt = Date.now();
    });

    const behaviour = this.behaviours.get(path) ?? { kind: "ok" };
    const answer = (status: number, text: string) => {
      if (res.destroyed) return; // the caller went away (timeout, crash): no answer was given
      record.status = status;
      res.statusCode = status;
      res.end(text);
    };
    const later = (ms: number, status: number, text: string) => {
      const timer = setTimeout(() => {
        this.timers.delete(timer);
        answer(status, text);
      }, ms);
      this.timers.add(timer);
    };
    switch (behaviour.kind) {
      case "ok":
        return answer(200, "ok");
      case "always":
        return answer(behaviour.status, `always ${behaviour.status}`);
      case "failTimes": {
        const key = `${path}\u0000${record.webhookId}`;
        const seen = (this.failures.get(key) ?? 0) + 1;
        this.failures.set(key, seen);
        return seen <= behaviour.times ? answer(behaviour.status, "not yet") : answer(200, "ok");
      }
      case "hang":
        return later(behaviour.ms, 200, "late");
      case "slow":
        return later(behaviour.ms, 200, "slow ok");
    }
  }
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

export interface ApiResponse<T = any> {
  status: number;
  body: T;
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

  async request<T = any>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<ApiResponse<T>> {
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
    return this.request("POST", "/v1/jobs", job, headers);
  }

  /** POST /v1/jobs/batch in chunks; returns the created jobs in order and throws if any was refused. */
  async createJobs(jobs: unknown[], chunk = 250): Promise<any[]> {
    const out: any[] = [];
    for (let i = 0; i < jobs.length; i += chunk) {
      const res = await this.request<{ results: { status: number; job?: any; error?: unknown }[] }>(
        "POST", "/v1/jobs/batch", { jobs: jobs.slice(i, i + chunk) },
      );
      if (res.status !== 200) throw new Error(`batch create answered ${res.status}: ${JSON.stringify(res.body)}`);
      for (const r of res.body.results) {
        if (r.status !== 201) throw new Error(`a job was refused: ${JSON.stringify(r)}`);
        out.push(r.job);
      }
    }
    return out;
  }

  executions(jobId: string) {
    return this.request<{ executions: any[] }>("GET", `/v1/jobs/${jobId}/executions`);
  }

  job(jobId: string) {
    return this.request("GET", `/v1/jobs/${jobId}`);
  }

  metrics() {
    return this.request("GET", "/v1/metrics");
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
  if (dir && dir.startsWith(tmpdir()) && dir.includes("scheduler-state-")) rmSync(dir, { recursive: true, force: true });
}

/** Captures the stack's log for diagnosis on failure (bounded). */
export function logSink(limitChars = 200_000): { log: (line: string) => void; text: () => string } {
  let text = "";
  return {
    log: (line) => {
      if (text.length < limitChars) text += line;
    },
    text: () => text,
  };
}

export type LocalStack = Awaited<ReturnType<typeof startStack>>;

/** the receiver and the stack read the same clock; this absorbs millisecond rounding only */
export const CLOCK_TOLERANCE_MS = 5;

/**
 * One local stack and one signing receiver for a test file, with fresh credentials and a log
 * sink: the receiver listens and the stack starts before the file's tests, and both stop after
 * them. `routes` says how the receiver answers paths (default: 200). `stack` and `api` are set
 * by beforeAll.
 */
export function stackForFile(options: { port: number; routes?: Record<string, Behaviour> }): {
  receiver: Receiver;
  sink: ReturnType<typeof logSink>;
  stack: LocalStack;
  api: Api;
} {
  const creds = credentials();
  const receiver = new Receiver(creds.secret);
  for (const [path, behaviour] of Object.entries(options.routes ?? {})) receiver.on(path, behaviour);
  const handle = { receiver, sink: logSink() } as { receiver: Receiver; sink: ReturnType<typeof logSink>; stack: LocalStack; api: Api };
  beforeAll(async () => {
    await receiver.listen();
    handle.stack = await startStack({ port: options.port, vars: creds.vars, log: handle.sink.log });
    handle.api = new Api(handle.stack.url, creds.apiKey);
  });
  afterAll(async () => {
    await handle.stack?.stop();
    await receiver.close();
    removeStateDir(handle.stack?.persistTo);
  });
  return handle;
}
