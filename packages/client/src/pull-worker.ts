/**
 * A pull worker: leases a queue's executions (long polling, so an idle worker makes one request
 * per `waitMs`), runs each in `handle` with its lease heartbeated, and reports how it ended. Run
 * as many as you like, anywhere: each execution is leased to one worker at a time, and a worker
 * that dies loses its leases when they expire, so the executions run again elsewhere
 * (at-least-once: `executionId` is the idempotency key of the work).
 */
import type { PullLease, SchedulerClient } from "./client.ts";
import { SchedulerError } from "./errors.ts";

export interface PullWorkerOptions {
  client: SchedulerClient;
  queue: string;
  /**
   * The work. Return to complete it; throw to fail it: retried with the job's backoff, unless the
   * error has `retryable: false` (dead at once) or `retryAfterMs` (no sooner than that). `signal`
   * aborts when the lease is lost (it expired, or the job was canceled): stop if you can.
   */
  handle(lease: PullLease, signal: AbortSignal): Promise<void>;
  /** executions run at once (default 1) */
  concurrency?: number;
  /** each lease's length, extended every third of it while `handle` runs (default 30_000) */
  leaseMs?: number;
  /** long polling: how long one lease request waits for work (default 20_000, the most) */
  waitMs?: number;
  /**
   * stops leasing: the lease request in flight (a long poll the server cannot be told to end)
   * finishes, at most waitMs later, and what it leased runs too; what is running finishes and is
   * reported, then runPullWorker returns
   */
  signal?: AbortSignal;
  /** a failed lease request or report (default: console.error); the loop goes on */
  onError?(error: unknown, lease: PullLease | null): void;
}

/** Runs until `signal` aborts, then waits for what it leased to finish and be reported. */
export async function runPullWorker(options: PullWorkerOptions): Promise<void> {
  const { client, queue, signal } = options;
  const concurrency = options.concurrency ?? 1;
  if (!Number.isSafeInteger(concurrency) || concurrency < 1 || concurrency > 100) {
    throw new RangeError(`concurrency must be a whole number from 1 to 100, not ${concurrency}`);
  }
  const leaseMs = options.leaseMs ?? 30_000;
  const waitMs = options.waitMs ?? 20_000;
  const onError = options.onError ?? ((error: unknown) => console.error(`pull worker (${queue}):`, error));
  const running = new Set<Promise<void>>();
  let failures = 0;
  while (!signal?.aborted) {
    if (running.size >= concurrency) {
      await Promise.race(running);
      continue;
    }
    let leases: PullLease[];
    try {
      // not given the stop signal: a poll the server still answers may lease work, which must run
      leases = await client.pull.lease(queue, { max: concurrency - running.size, leaseMs, waitMs });
      failures = 0;
    } catch (error) {
      if (signal?.aborted) break;
      onError(error, null);
      // the client already retried what it could: wait before asking again (1 s, 2 s, ... at most 30 s)
      failures += 1;
      await sleep(Math.min(30_000, 1_000 * 2 ** (failures - 1)), signal);
      continue;
    }
    for (const lease of leases) {
      const run: Promise<void> = runLease(lease, options, leaseMs, onError).finally(() => running.delete(run));
      running.add(run);
    }
    // without long polling, an empty answer is not followed by another at once
    if (leases.length === 0 && waitMs < 1_000) await sleep(1_000 - waitMs, signal);
  }
  await Promise.allSettled(running);
}

/** One execution: heartbeats while `handle` runs, then complete or fail. */
async function runLease(
  lease: PullLease,
  options: PullWorkerOptions,
  leaseMs: number,
  onError: (error: unknown, lease: PullLease | null) => void,
): Promise<void> {
  const { client } = options;
  const lost = new AbortController();
  let beating = false; // one heartbeat at a time: a slow one is not joined by the next
  let reported = false;
  const beat = setInterval(
    () => {
      if (beating) return;
      beating = true;
      client.pull
        .heartbeat(lease.token)
        .then(
          (answer) => {
            if (answer.canceled) lost.abort(new Error("the job was canceled or paused"));
          },
          (error: unknown) => {
            if (isStale(error)) lost.abort(error);
            else if (!reported) onError(error, lease);
          },
        )
        .finally(() => {
          beating = false;
        });
    },
    Math.max(250, Math.floor(leaseMs / 3)),
  );
  let failure: unknown = null;
  try {
    await options.handle(lease, lost.signal);
  } catch (error) {
    failure = error;
  } finally {
    clearInterval(beat);
  }
  reported = true;
  try {
    if (failure === null) await client.pull.complete(lease.token);
    else await client.pull.fail(lease.token, failureOf(failure));
  } catch (error) {
    // stale: the lease ended first (the execution runs again elsewhere, or this report was a repeat)
    onError(error, lease);
  }
}

/** The API's longest retryAfterMs (7 days) and error text (4096 characters). */
const MAX_RETRY_AFTER_MS = 7 * 86_400_000;
const MAX_ERROR_LENGTH = 4096;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/** A thrown error as the API takes it: always accepted, so the report is never refused and lost. */
function failureOf(error: unknown): { retryable: boolean; error: string; retryAfterMs?: number } {
  const fields = (typeof error === "object" && error !== null ? error : {}) as { retryable?: unknown; retryAfterMs?: unknown };
  // a lone surrogate has no UTF-8 form: the API refuses it, so it becomes U+FFFD
  const message = (error instanceof Error ? error.message : String(error)).replace(LONE_SURROGATE, "\uFFFD");
  // cut at a character, never inside a surrogate pair
  const cut = message.length > MAX_ERROR_LENGTH ? Array.from(message.slice(0, MAX_ERROR_LENGTH)).slice(0, -1).join("") : message;
  const after = fields.retryAfterMs;
  return {
    retryable: fields.retryable !== false,
    error: cut,
    ...(typeof after === "number" && after >= 0 ? { retryAfterMs: Math.min(MAX_RETRY_AFTER_MS, Math.ceil(after)) } : {}),
  };
}

function isStale(error: unknown): boolean {
  return error instanceof SchedulerError && error.code === "stale_lease";
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}
