/**
 * Callbacks (QStash's callback / failureCallback): a job may name a target told each execution's
 * success, and one told its death. A callback is an execution of its own in the parent's bucket
 * (its own id, so its own webhook-id stable across its retries, its own lease, retries and
 * death, its own spec and so its own priority: bucket/store.ts specOwnerOf); it carries no
 * callback itself, so a callback's failure never fires another.
 * Pure: the bucket builds a callback from what it holds, time passed in.
 */

import { newId } from "./id";
import type { CallbackTarget, JobSpec, Target } from "./job";
import { isWorkerTarget } from "./job";
import { excerpt, RESPONSE_EXCERPT_LENGTH } from "./response";
import { toRfc3339 } from "./when";

export type CallbackKind = "success" | "failure";

/** What the API shows of an execution's callback: `scheduled` until its outcome lands. */
export interface CallbackState {
  kind: CallbackKind;
  status: "scheduled" | "succeeded" | "dead";
  attempts: number;
}

/** Which callback an outcome fires (the job's spec), or null: succeeded -> callback, dead -> failureCallback. */
export function callbackFor(spec: JobSpec, status: string): { kind: CallbackKind; target: CallbackTarget } | null {
  if (status === "succeeded" && spec.callback) return { kind: "success", target: spec.callback };
  if (status === "dead" && spec.failureCallback) return { kind: "failure", target: spec.failureCallback };
  return null;
}

/** Which outcome of its parent a callback tells of: an execution redriven after it died has another. */
export interface OutcomeMark {
  /** the parent's attempts at that outcome (a redrive's attempts go on from the last) */
  attempts: number;
  /** when the outcome happened (two outcomes without an attempt between, e.g. a poisoned redrive, differ here) */
  finishedAt: number;
}

/**
 * A callback's execution id follows from its parent's outcome (the parent's id, the kind, its
 * attempts and finish time then), so a flush that runs twice makes the same one, and each outcome
 * of a redriven execution has a callback of its own: its own webhook-id (a receiver never drops
 * the second death as a duplicate of the first) and its own row beside one still retrying. It
 * keeps the parent's last 16 digits (the job's random part: its shard and bucket are the parent's)
 * and in place of the 10 time digits writes a letter the id alphabet never writes ("o" success,
 * "i" failure: no job or occurrence can ever have it) and 9 digits of a 45-bit hash of the outcome.
 */
export function callbackExecutionId(parentId: string, kind: CallbackKind, outcome: OutcomeMark): string {
  const hash = hash53(`${parentId}|${kind}|${outcome.attempts}|${outcome.finishedAt}`) % 2 ** 45;
  // newId writes a number in the id alphabet as the 10 time digits; 45 bits fill the last 9
  const digits = newId("exe", hash, new Uint8Array(0)).slice(5, 14);
  return `exe_${kind === "success" ? "o" : "i"}${digits}${parentId.slice(-16)}`;
}

/** A 53-bit string hash (cyrb53): ids of one job's callbacks collide with odds near 2^-45 a pair. */
function hash53(text: string): number {
  let h1 = 0xdeadbeef;
  let h2 = 0x41c6ce57;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    h1 = Math.imul(h1 ^ ch, 2654435761);
    h2 = Math.imul(h2 ^ ch, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return 4294967296 * (2097151 & h2) + (h1 >>> 0);
}

/** What a callback reports: its parent execution's outcome. */
export interface ParentOutcome {
  executionId: string;
  jobId: string;
  status: "succeeded" | "dead";
  attempts: number;
  /** the target's HTTP status on the last attempt (null: a handler Worker, a timeout, a network error) */
  httpStatus: number | null;
  /** the last attempt's response body (success) or error (failure), its first 256 characters */
  response: string | null;
  error: string | null;
  deadReason: string | null;
  dueAt: number;
  startedAt: number | null;
  finishedAt: number;
}

/** The callback's body (an HTTP callback's request body, a handler Worker's payload): the parent's outcome, RFC 3339 times. */
export function callbackBody(kind: CallbackKind, o: ParentOutcome): Record<string, unknown> {
  return {
    type: kind === "success" ? "execution.succeeded" : "execution.dead",
    executionId: o.executionId,
    jobId: o.jobId,
    status: o.status,
    attempts: o.attempts,
    httpStatus: o.httpStatus,
    responseExcerpt: o.response === null ? null : excerpt(o.response, RESPONSE_EXCERPT_LENGTH),
    error: o.error,
    deadReason: o.deadReason,
    dueAt: toRfc3339(o.dueAt),
    startedAt: toRfc3339(o.startedAt),
    finishedAt: toRfc3339(o.finishedAt),
  };
}

/**
 * The spec a callback execution runs: its target with the outcome as body (POST, JSON) or
 * payload, the parent's timeout, retry policy and priority (as they are at the outcome: the
 * callback's own from then on, so a later PATCH of the job changes the job's executions, not it),
 * and no callbacks, schedule or flow control: a callback fires nothing.
 */
export function callbackSpec(parent: JobSpec, target: CallbackTarget, body: Record<string, unknown>): JobSpec {
  const text = JSON.stringify(body);
  const delivered: Target = isWorkerTarget(target)
    ? { worker: target.worker, payload: text }
    : { url: target.url, method: "POST", headers: { ...target.headers, "content-type": "application/json" }, body: text };
  return {
    target: delivered,
    timeoutMs: parent.timeoutMs,
    retry: parent.retry,
    metadata: null,
    schedule: null,
    flowControl: null,
    // stored only when not the default, as a job's is
    ...(parent.priority === undefined ? {} : { priority: parent.priority }),
  };
}

/**
 * The callbacks column as stored: each state with its callback's execution id, so the write of a
 * callback's outcome lands only while the column still tells of that callback (a redriven
 * execution's later outcome has replaced it: db/write-outcomes.ts writeOutcomes).
 */
export type StoredCallback = CallbackState & { id: string };

/** The callbacks column as the API shows it (JSON read; the callback's id is not shown); a bad or absent value is none. */
export function parseCallbacks(json: string | null): CallbackState[] {
  if (!json) return [];
  try {
    const parsed = JSON.parse(json) as unknown;
    return Array.isArray(parsed) ? (parsed as CallbackState[]).map(({ kind, status, attempts }) => ({ kind, status, attempts })) : [];
  } catch {
    return [];
  }
}
