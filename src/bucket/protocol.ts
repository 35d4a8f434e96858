/**
 * The bucket's RPC contract. RPCs return values, never throw for an outcome (errors lose their
 * properties across Durable Object RPC): `{ ok: true, ... } | { ok: false, code }`.
 */
import type { DeliveryOutcome } from "../core/response";
import type { JobSpec, JobStatus, Target } from "../core/job";

/** The job as its bucket keeps it: the spec as JSON (serialized once, at the edge). */
export interface BucketJob {
  specJson: string;
  recurring: boolean;
  status: JobStatus;
}

/** One execution handed to its bucket, with the job spec it needs to run. */
export interface HandOff {
  executionId: string;
  jobId: string;
  tenant: string;
  dueAt: number;
  /** the n-th occurrence of its job (1 for one-off jobs) */
  occurrence: number;
  /** resume/PATCH only: an occurrence canceled by pause or reschedule may be scheduled again */
  reopen?: boolean;
  job: BucketJob;
}

export type ClaimResult =
  | {
      ok: true;
      executionId: string;
      jobId: string;
      tenant: string;
      token: string;
      seq: number;
      leaseDeadlineAt: number;
      attempt: number;
      dueAt: number;
      target: Target;
      timeoutMs: number;
    }
  | { ok: false; executionId: string; code: "duplicate" | "unknown" | "not_due" };

export interface LeaseRef {
  executionId: string;
  token: string;
}

export interface CompletionReport extends LeaseRef {
  outcome: DeliveryOutcome;
}

export type CompletionResult =
  | { ok: true; executionId: string; status: "succeeded" | "scheduled" | "dead" }
  | { ok: false; executionId: string; code: "stale_lease" };

export type HeartbeatResult =
  | { ok: true; executionId: string; leaseDeadlineAt: number }
  | { ok: false; executionId: string; code: "stale_lease" };

export type CancelResult = { executionId: string; status: string };

/**
 * A change of a job's state in its bucket: cancel, pause, resume or a new spec (PATCH).
 * With closeOpen, its scheduled and dispatched executions are canceled (a running one finishes);
 * `known` lists executions D1 holds as handed off, so unseen ones get a canceled tombstone.
 */
export interface JobRevision {
  jobId: string;
  tenant: string;
  status: JobStatus;
  spec?: JobSpec;
  closeOpen: { reason: string; known: { executionId: string; dueAt: number }[] } | null;
}

export interface RedriveRequest {
  executionId: string;
  jobId: string;
  tenant: string;
  occurrenceAt: number;
  attempts: number;
  /** the status D1 holds, used when the row already left the bucket */
  recordStatus: string;
  job: BucketJob;
}

export type RedriveResult = { ok: true } | { ok: false; code: "not_dead" };

export type PoisonResult = { executionId: string; code: "marked_dead" | "already_terminal" | "unknown" };

export interface BucketCounts {
  byStatus: Record<string, number>;
}

export const RESULT_MESSAGES: Record<string, string> = {
  duplicate: "the execution holds a live lease or is terminal: this delivery is a duplicate",
  unknown: "the bucket does not know this execution",
  not_due: "the execution is waiting for its (retry) due time",
  stale_lease: "the lease token is not the live lease of this execution",
  not_dead: "only dead executions can be redriven",
};
