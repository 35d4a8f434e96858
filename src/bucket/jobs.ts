/**
 * Applying job versions from D1 (create, every change, the sync pass), redrives of recurring
 * jobs' dead occurrences, and a recurring job's due occurrences becoming executions: what the
 * bucket holds follows the newest job version it has seen. Idempotent: an older or equal version
 * than the one held is a no-op. Storage and memory only (state.ts); the shell reads D1.
 */
import { planOccurrence } from "../core/cron";
import { occurrenceId, oneOffExecutionId } from "../core/id";
import { isNear, isPullTarget, type JobSpec, parseSpec } from "../core/job";
import { priorityOf } from "../core/priority";
import type { Closing } from "./closing";
import { standsBy } from "./leases";
import type { Applied, JobDefinition, RedriveOrder, RedriveResult } from "./protocol";
import { type BucketState, cancel, close, insert, noteSpec, parseLog } from "./state";
import type { HeldRow, ScheduleRow } from "./store";
import * as store from "./store";

/**
 * `from`: "pull", the definitions come from the sync pass (a hold it brings counts as recovered);
 * "outcome", they waited for their one-off execution's outcome to land in D1 (applyDeferred).
 */
export function applyAll(s: BucketState, definitions: JobDefinition[], now: number, from: "request" | "pull" | "outcome"): Applied[] {
  const applied: Applied[] = [];
  for (const def of definitions) {
    const version = def.recurring ? applyRecurring(s, def, now) : applyOneOff(s, def, now, from);
    if (version !== null) applied.push({ jobId: def.jobId, version });
  }
  if (definitions.some((d) => d.recurring)) s.nextScheduleAt = store.nextScheduleAt(s.sql); // once per batch
  return applied;
}

/** Returns the version held afterwards, or null when it must wait for a flush. */
function applyOneOff(s: BucketState, def: JobDefinition, now: number, from: "request" | "pull" | "outcome"): number | null {
  const fromPull = from === "pull";
  const { executions, tally } = s;
  const id = oneOffExecutionId(def.jobId);
  const finishing = executions.closing.get(id);
  if (finishing) {
    // the version it finished at (or older) is done; a newer one waits for the outcome to land
    if (def.version <= finishing.row.version) return finishing.row.version;
    // a cancel meanwhile marks the stored row (the outcome is in memory only): a restart before
    // the flush ends it canceled instead of running it again after the cancel was accepted
    if (def.status !== "active") {
      store.updateJobOfExecution(s.sql, { ...finishing.row, version: def.version, jobStatus: "canceled" }, null);
    }
    const waiting = s.deferred.get(id);
    if (!waiting || waiting.version < def.version) s.deferred.set(id, withOutcomeOf(s, def, finishing));
    return null;
  }
  const row = executions.held.get(id);
  if (row && row.version >= def.version) return row.version;
  // it left at this version or a newer one: a definition read from D1 before its outcome landed
  // there is stale (only a newer version, e.g. a redrive or PATCH, brings it back)
  const closed = executions.closedAt.get(id);
  if (!row && closed && closed.version >= def.version) return def.version;
  const dueAt = def.nextRunAt ?? now;
  if (!row) {
    // due beyond the lookahead (a far job created or changed): it waits in D1 for the sync pass,
    // which hands it over at this version or a newer one (no tombstone: that would refuse it)
    if (def.status === "active" && !isNear(dueAt, now, s.config.LOOKAHEAD_MS)) return def.version;
    if (def.status !== "active") {
      // a job canceled while its execution still waited in D1 (never held, or gone with an
      // outcome: no tombstone) ends canceled here; the tombstone keeps a repeat from counting twice
      // and a racing pull from bringing it back
      const tombstone = { at: now, tenant: def.tenant, version: def.version };
      if (def.status === "canceled" && !closed) {
        tally.add("canceled_total", def.tenant);
        executions.cancelPending(id, tombstone);
      } else executions.rememberClosed(id, closed?.status ? { ...tombstone, status: closed.status } : tombstone);
      return def.version;
    }
    const fresh: HeldRow = {
      dueAt,
      id,
      jobId: def.jobId,
      tenant: def.tenant,
      version: def.version,
      jobStatus: "active",
      occurrenceAt: dueAt,
      occurrence: 1,
      attempt: def.attempts,
      budgetBase: def.attempts,
      recurring: false,
    };
    // noted first: the row enters the due order under its priority (insert fails only if it is held already)
    noteDefinition(s, def);
    // an execution that already ran and is active again was redriven: a fresh budget from here;
    // one whose change waited for its outcome runs again at the new time (the run time was PATCHed
    // before its outcome reached D1, which keeps the job active), its history continued
    const via = from !== "outcome" && def.attempts > 0 ? "redrive" : "handOff";
    const inserted = insert(s, fresh, def.specJson, parseLog(def.attemptLog), via);
    if (inserted && fromPull) tally.add("scanner_recovered_total", def.tenant);
    if (inserted && via === "redrive") tally.add("redrive_total", def.tenant);
    return def.version;
  }
  const updated: HeldRow = { ...row, version: def.version, jobStatus: def.status === "active" ? "active" : "canceled" };
  const lease = executions.running.get(id);
  if (def.status !== "active") {
    if (lease) {
      store.updateJobOfExecution(s.sql, updated, def.specJson);
      executions.keep(updated);
    } else {
      cancel(s, row, def.version, now, "canceled");
    }
    return def.version;
  }
  if (dueAt !== row.occurrenceAt) {
    // PATCH of the run time: a fresh budget at the new time; a running attempt finishes first
    // and its outcome then runs the job again (reschedule)
    const moved: HeldRow = { ...updated, dueAt, occurrenceAt: dueAt, budgetBase: row.attempt };
    store.moveExecution(s.sql, row.dueAt, moved, { spec: def.specJson });
    noteDefinition(s, def);
    if (lease) executions.keep(moved);
    else executions.reschedule(row, moved);
    return def.version;
  }
  store.updateJobOfExecution(s.sql, updated, def.specJson);
  executions.keep(updated);
  const priorityBefore = executions.priorityOf(def.jobId);
  noteDefinition(s, def); // after keep: a new priority re-enters the row as it is now
  offerAgain(s, updated, parseSpec(def.specJson), priorityBefore);
  return def.version;
}

/**
 * A definition that must wait for its execution's outcome to land (a change made while the outcome
 * was on its way to D1) was read before that outcome: its attempts and log are the outcome's, which
 * D1 is about to hold (without them, an execution run again for a PATCHed run time lost the attempts
 * before it: issue 36, the model-based test's succeeded_total 2 against a log of 1).
 */
function withOutcomeOf(s: BucketState, def: JobDefinition, finishing: Closing): JobDefinition {
  if (def.attempts >= finishing.attempts) return def;
  const log = store.logOf(s.sql, finishing.row);
  if (finishing.last) log.push(finishing.last);
  return {
    ...def,
    attempts: finishing.attempts,
    attemptLog: log.length > 0 ? JSON.stringify(log.slice(-store.LOG_LIMIT)) : def.attemptLog,
  };
}

/** A held one-off job's target kind and priority, from the definition applied (noteSpec). */
function noteDefinition(s: BucketState, def: JobDefinition): void {
  noteSpec(s, def.jobId, parseSpec(def.specJson));
}

function applyRecurring(s: BucketState, def: JobDefinition, now: number): number {
  const { executions } = s;
  const current = store.scheduleOf(s.sql, def.jobId);
  if (current && current.version >= def.version) return current.version;
  const spec = parseSpec(def.specJson);
  const priorityBefore = executions.priorityOf(def.jobId);
  noteSpec(s, def.jobId, spec);
  const active = def.status === "active";
  const rescheduled = current?.status !== "active" || JSON.stringify(parseSpec(current.spec).schedule) !== JSON.stringify(spec.schedule);
  const fired = Math.max(current?.fired ?? 0, def.fired);
  const exhausted = spec.schedule?.maxOccurrences != null && fired >= spec.schedule.maxOccurrences;
  const nextAt = !active || exhausted ? null : rescheduled ? (def.nextRunAt ?? null) : (current?.nextAt ?? null);
  store.putSchedule(s.sql, {
    id: def.jobId,
    tenant: def.tenant,
    version: def.version,
    status: def.status,
    spec: def.specJson,
    nextAt,
    fired,
  });
  s.dirtySchedules.add(def.jobId);
  if (active && !rescheduled) {
    for (const row of executions.rowsOfJob(def.jobId)) offerAgain(s, row, spec, priorityBefore);
    return def.version;
  }
  // pause, cancel or a new schedule: what has not started is canceled, a running attempt finishes
  for (const row of executions.rowsOfJob(def.jobId)) {
    const updated = { ...row, version: def.version, jobStatus: active ? "active" : def.status };
    if (executions.closing.has(row.id)) {
      // already finished, its outcome on its way to D1 in memory only: a stop marks its stored row,
      // so a restart before the flush ends it canceled instead of running it again after the stop
      // was answered (issue 36, MODEL_SEED 20261201); a resume or new schedule never marks it
      // active (it may be an occurrence an earlier stop canceled)
      if (!active) store.updateJobOfExecution(s.sql, updated, null);
      continue;
    }
    if (executions.running.has(row.id)) {
      store.updateJobOfExecution(s.sql, updated, null);
      executions.keep(updated);
    } else {
      cancel(s, row, def.version, now, active ? "rescheduled" : def.status);
    }
  }
  return def.version;
}

/**
 * A job changed while its execution waited in a pull queue. For the same queue the offer stands
 * (a lease reads the spec as it is then); under a new priority its queue is told before the change
 * is answered (flight.ts reoffer, sent by bucket.ts tellQueues), so a lease right after a PATCH's 200 goes by it
 * (issue 36 item 8). For another queue or none: dispatched again under the new target, and the old
 * queue drops the offer when a worker's request meets it.
 */
function offerAgain(s: BucketState, row: HeldRow, spec: JobSpec, priorityBefore: number): void {
  const offer = s.executions.offered.get(row.id);
  if (!offer) return;
  if (!isPullTarget(spec.target) || spec.target.pull !== offer.queue) {
    s.executions.reschedule(row, row);
    return;
  }
  if (priorityOf(spec) !== priorityBefore) s.executions.reoffer(row);
}

/**
 * A pull queue could not be told an offer's new priority: if still offered there at that due time,
 * it is dispatched again, and its claim offers it under the priority it has then.
 */
export function offerAgainUntold(s: BucketState, untold: { executionId: string; tenant: string; queue: string; dueAt: number }[]): void {
  for (const o of untold) {
    const row = s.executions.held.get(o.executionId);
    if (row && standsBy(s, o)) s.executions.reschedule(row, row);
  }
}

/** A recurring job's dead occurrence runs again with a fresh budget (a one-off job's redrive is a new job version). */
export function redriveAll(s: BucketState, orders: RedriveOrder[], now: number): RedriveResult[] {
  return orders.map((order): RedriveResult => {
    const schedule = store.scheduleOf(s.sql, order.jobId);
    if (schedule?.status !== "active") return { executionId: order.executionId, ok: false, code: "job_inactive" };
    if (s.executions.held.has(order.executionId) || s.executions.closing.has(order.executionId)) {
      return { executionId: order.executionId, ok: true };
    }
    const row: HeldRow = {
      dueAt: now,
      id: order.executionId,
      jobId: order.jobId,
      tenant: order.tenant,
      version: schedule.version,
      jobStatus: "active",
      occurrenceAt: order.occurrenceAt,
      occurrence: order.occurrence,
      attempt: order.attempts,
      budgetBase: order.attempts,
      recurring: true,
    };
    insert(s, row, null, parseLog(order.attemptLog), "redrive");
    s.tally.add("redrive_total", order.tenant);
    return { executionId: order.executionId, ok: true };
  });
}

/** A recurring job's due occurrence becomes an execution and the next one is planned (one owner: the bucket). */
export function createOccurrences(s: BucketState, now: number): void {
  if (s.nextScheduleAt === null || s.nextScheduleAt > now) return;
  for (const schedule of store.dueSchedules(s.sql, now, s.config.FIRE_BATCH_LIMIT)) {
    const spec = parseSpec(schedule.spec);
    const occurrenceAt = schedule.nextAt!;
    const ordinal = schedule.fired + 1;
    const plan = spec.schedule ? planOccurrence(spec.schedule, occurrenceAt, ordinal, now) : { run: false, next: null };
    const row: HeldRow = {
      dueAt: occurrenceAt,
      id: occurrenceId(schedule.id, occurrenceAt),
      jobId: schedule.id,
      tenant: schedule.tenant,
      version: schedule.version,
      jobStatus: "active",
      occurrenceAt,
      occurrence: ordinal,
      attempt: 0,
      budgetBase: 0,
      recurring: true,
    };
    const next: ScheduleRow = { ...schedule, nextAt: plan.next?.at ?? null, fired: ordinal };
    store.putSchedule(s.sql, next);
    s.dirtySchedules.add(schedule.id);
    if (s.executions.held.has(row.id) || s.executions.closing.has(row.id)) continue;
    // an occurrence a pause canceled, that a resume planned again, is reopened
    if (plan.run) insert(s, row, null, null, s.executions.closedAt.get(row.id)?.status === "canceled" ? "reopen" : "handOff");
    else {
      // nothing durable: the skip is only history (a crash before the flush loses that line)
      s.executions.handOff(row);
      close(s, row, "cancel", now, { reason: "skipped: missed occurrence (catchUp none)" });
    }
  }
  s.nextScheduleAt = store.nextScheduleAt(s.sql);
}
