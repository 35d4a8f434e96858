/**
 * Callbacks (QStash's callback / failureCallback): a job may name a target told each execution's
 * success, and one told its death. A callback is an execution of its own in the parent's bucket
 * (its own id, so its own webhook-id stable across its retries, its own lease, retries and
 * death); it carries no callback itself, so a callback's failure never fires another.
 * Pure: the bucket builds a callback from what it holds, time passed in.
 */
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

/**
 * A callback's execution id follows from its parent's and its kind, so a flush that runs twice
 * makes the same one: the parent's id with its first time digit replaced by a letter the id
 * alphabet never writes ("o" success, "i" failure). It keeps the job's random part, so its shard
 * and bucket are its parent's, and no job or occurrence can ever have it.
 */
export function callbackExecutionId(parentId: string, kind: CallbackKind): string {
  return `exe_${kind === "success" ? "o" : "i"}${parentId.slice(5)}`;
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
 * payload, the parent's timeout and retry policy, and no callbacks, schedule or flow control:
 * a callback fires nothing.
 */
export function callbackSpec(parent: JobSpec, target: CallbackTarget, body: Record<string, unknown>): JobSpec {
  const text = JSON.stringify(body);
  const delivered: Target = isWorkerTarget(target)
    ? { worker: target.worker, payload: text }
    : { url: target.url, method: "POST", headers: { ...target.headers, "content-type": "application/json" }, body: text };
  return { target: delivered, timeoutMs: parent.timeoutMs, retry: parent.retry, metadata: null, schedule: null, flowControl: null };
}

/** The callbacks column as stored (JSON) and read; a bad or absent value is none. */
export function parseCallbacks(json: string | null): CallbackState[] {
  if (!json) return [];
  try {
    const parsed = JSON.parse(json) as unknown;
    return Array.isArray(parsed) ? (parsed as CallbackState[]) : [];
  } catch {
    return [];
  }
}
