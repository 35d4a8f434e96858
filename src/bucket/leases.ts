/**
 * Leases: the claim of a fire message's execution (a lease for a consumer, an offer for a pull
 * target), a pull worker's lease on an offer, heartbeats, and the fencing check every report
 * passes (invariants 2, 3 and 7). Leases live in memory only (flight.ts), fenced by the epoch:
 * none of these writes storage.
 */
import { isPullTarget, type JobSpec, parseSpec } from "../core/job";
import { SYSTEM_TENANT } from "../core/metrics";
import { priorityOf } from "../core/priority";
import type { Lease } from "./flight";
import type { ClaimResult, ExecutionRef, HeartbeatResult, LeaseGrant, LeaseRef, OfferedLeaseRef, OfferedRef } from "./protocol";
import { type BucketState, noteSpec } from "./state";
import * as store from "./store";
import { type HeldRow, specOwnerOf } from "./store";

/**
 * A lease on a due execution a fire message names: a fresh token, a fencing seq greater than
 * every earlier one (invariant 2), a deadline. A live lease, a finished execution or a message of
 * an earlier due time is a duplicate (invariant 7); a pull target's execution is offered instead.
 */
export function claimOne(s: BucketState, ref: ExecutionRef, now: number): ClaimResult {
  const { executions, tally } = s;
  const id = ref.executionId;
  const row = executions.held.get(id);
  if (!row) {
    const closed = executions.closedAt.get(id);
    if (!closed) return { ok: false, executionId: id, code: "unknown" };
    tally.add("duplicates_suppressed_total", closed.tenant);
    return { ok: false, executionId: id, code: "duplicate" };
  }
  // the same dispatch claimed again (its message redelivered after the offer failed): the same offer
  const repeatOffer = executions.offered.get(id)?.dueAt === ref.dueAt && row.dueAt === ref.dueAt && row.jobStatus === "active";
  if (!repeatOffer && (row.dueAt !== ref.dueAt || !executions.can(row, "claim") || row.jobStatus !== "active")) {
    // a live lease, or a dispatch of an earlier due time (the execution was retried or moved)
    tally.add("duplicates_suppressed_total", row.tenant);
    return { ok: false, executionId: id, code: "duplicate" };
  }
  if (row.dueAt > now) return { ok: false, executionId: id, code: "not_due" };
  const spec = store.specOf(s.sql, row);
  if (spec === null) return { ok: false, executionId: id, code: "unknown" };
  const parsed = parseSpec(spec);
  noteSpec(s, specOwnerOf(row), parsed);
  if (isPullTarget(parsed.target)) {
    // the scheduler's part ends here: from now on it waits for a worker, not for us; a repeated
    // claim (a redelivered message) is a duplicate whose offer its queue holds once
    claimedDispatch(s, executions.offer(row, parsed.target.pull), now);
    if (repeatOffer) tally.add("duplicates_suppressed_total", row.tenant);
    else tally.lag(row.tenant, now - row.dueAt);
    return {
      ok: false,
      code: "offered",
      executionId: id,
      tenant: row.tenant,
      queue: parsed.target.pull,
      dueAt: row.dueAt,
      priority: priorityOf(parsed),
    };
  }
  // the fire lag is the jobs' (a callback starts when its parent's outcome is written, not at a due time of its own)
  if (!row.callback) tally.lag(row.tenant, now - row.dueAt);
  return grant(s, row, parsed, now);
}

/**
 * A pull worker's lease on an offered execution, for the length it chose. Only an execution
 * still offered at that due time, of that tenant, is leased; anything else is not_offered (leased
 * meanwhile, finished, canceled, moved, or offered again after a restart under the same due time,
 * which its pull queue holds once).
 */
export function leaseOfferedOne(s: BucketState, ref: OfferedLeaseRef, now: number): ClaimResult {
  const id = ref.executionId;
  const row = s.executions.held.get(id);
  if (!row || row.tenant !== ref.tenant) return { ok: false, executionId: id, code: "unknown" };
  if (!standsBy(s, ref)) return { ok: false, executionId: id, code: "not_offered" };
  const spec = store.specOf(s.sql, row);
  if (spec === null) return { ok: false, executionId: id, code: "unknown" };
  return grant(s, row, parseSpec(spec), now, { leaseMs: ref.leaseMs, queue: ref.queue });
}

/** Offered at this due time in this queue, for this tenant, its job active (a PATCH or a retry may have moved it since). */
export function standsBy(s: BucketState, ref: OfferedRef): boolean {
  const row = s.executions.held.get(ref.executionId);
  const offer = s.executions.offered.get(ref.executionId);
  return (
    row !== undefined &&
    row.tenant === ref.tenant &&
    row.dueAt === ref.dueAt &&
    row.jobStatus === "active" &&
    offer?.dueAt === ref.dueAt &&
    offer.queue === ref.queue
  );
}

/**
 * A lease on a due execution: a fresh token, a fencing seq above every earlier one (invariant 2), a
 * deadline; `pull`: a pull worker's, of the length it chose, asked for by its queue.
 */
function grant(s: BucketState, row: HeldRow, spec: JobSpec, now: number, pull?: { leaseMs: number; queue: string }): LeaseGrant {
  const lease: Lease = {
    token: crypto.randomUUID(),
    seq: s.epoch * 2 ** 32 + ++s.leaseSeq,
    deadlineAt: now + (pull?.leaseMs ?? s.config.LEASE_MS),
    attempt: row.attempt + 1,
    startedAt: now,
    occurrenceAt: row.occurrenceAt,
    ...(pull ?? {}),
  };
  claimedDispatch(s, s.executions.lease(row, lease), now);
  return {
    ok: true,
    executionId: row.id,
    jobId: row.jobId,
    tenant: row.tenant,
    token: lease.token,
    seq: lease.seq,
    leaseDeadlineAt: lease.deadlineAt,
    attempt: lease.attempt,
    dueAt: row.dueAt,
    target: spec.target,
    timeoutMs: spec.timeoutMs,
    flowControl: spec.flowControl ?? null,
    firstDueAt: s.executions.waitingSince(row.id) ?? row.dueAt,
    ...(spec.trace ? { trace: spec.trace } : {}),
    priority: priorityOf(spec),
  };
}

/** A claim took a dispatch: the window learns the queue's delay (send to claim). */
function claimedDispatch(s: BucketState, dispatch: { at: number } | undefined, now: number): void {
  if (dispatch) s.window.onClaimed(now - dispatch.at, now);
}

/**
 * Extends a live lease; a token that is not the live lease is rejected and counted (invariant 3).
 * Says whether the job was canceled or paused meanwhile (its running attempt still finishes).
 */
export function heartbeatOne(s: BucketState, ref: LeaseRef, now: number): HeartbeatResult {
  const lease = liveLease(s, ref, now);
  if (!lease) return { ok: false, executionId: ref.executionId, code: "stale_lease" };
  s.executions.extend(ref.executionId, lease, now, s.config.LEASE_MS);
  const canceled = s.executions.held.get(ref.executionId)?.jobStatus !== "active";
  return { ok: true, executionId: ref.executionId, leaseDeadlineAt: lease.deadlineAt, ...(canceled ? { canceled } : {}) };
}

/** The live lease a report names (its token, before its deadline, of its tenant), or undefined: counted as a stale lease. */
export function liveLease(s: BucketState, ref: LeaseRef, now: number): Lease | undefined {
  const lease = s.executions.running.get(ref.executionId);
  const held = s.executions.held.get(ref.executionId);
  const tenantOk = ref.tenant === undefined || held?.tenant === ref.tenant;
  if (lease && lease.token === ref.token && lease.deadlineAt > now && tenantOk) return lease;
  // counted for the caller: a pull worker's tenant (another tenant's token is its own mistake), else the execution's
  s.tally.add("stale_lease_rejects_total", ref.tenant ?? held?.tenant ?? SYSTEM_TENANT);
  return undefined;
}
