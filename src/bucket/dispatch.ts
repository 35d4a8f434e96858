/**
 * Dispatch: what one alarm pass sends (lost dispatches again, then due executions in turns per
 * tenant, as far as the dispatch window has room), the fire messages it makes of them, and what
 * a failed send undoes. The send itself is fire-send.ts's, run by the shell (bucket.ts).
 */

import type { FireGroup, FireRef } from "./protocol";
import type { BucketState } from "./state";
import type { HeldRow } from "./store";
import { specOwnerOf } from "./store";

const SEND_BATCH = 100; // Queue.sendBatch takes at most 100 messages
/** and at most 256 KB: what one call carries is kept below this, with room for each message's envelope */
const SEND_BATCH_BYTES = 200_000;
const MESSAGE_OVERHEAD_BYTES = 100;

/** What one pass sends: first dispatches and re-sends of lost ones. */
export interface Dispatches {
  fresh: FireRef[];
  again: FireRef[];
  /** which of them are pull targets' (larger groups: FIRE_GROUP_SIZE_PULL) */
  pull?: Set<string>;
}

/**
 * Takes what was lost in flight and what is due, as far as the dispatch window has room (a
 * message unclaimed DISPATCH_TIMEOUT_MS after its send no longer counts: windowRoom): due
 * executions in turns per tenant, each tenant's in due order. A dispatch is lost when a later
 * one of this bucket was claimed at least DISPATCH_TIMEOUT_MS after it was sent, or when
 * MAX_DISPATCH_WAIT_MS passed: a queue that is merely slow never gets a copy.
 */
export function takeDispatches(s: BucketState, now: number): Dispatches {
  if (now < s.dispatchRetryAt || s.bucket === null) return { fresh: [], again: [] };
  const limit = s.config.FIRE_BATCH_LIMIT;
  const pull = new Set<string>();
  const refOf = (row: HeldRow) => {
    if (s.pullJobs.has(specOwnerOf(row))) pull.add(row.id);
    return fireRefOf(row);
  };
  const again = s.executions.redispatchLost(now, limit).map((row) => {
    s.tally.add("redispatch_total", row.tenant);
    return refOf(row);
  });
  const room = Math.min(limit - again.length, windowRoom(s, now).room);
  const fresh = s.executions.dispatchDue(now, room).map((row) => {
    // fired_total counts jobs' executions: a callback's deliveries are callbacks_attempts_total
    if (!row.callback) s.tally.add("fired_total", row.tenant);
    return refOf(row);
  });
  return { fresh, again, pull };
}

/**
 * Room in the dispatch window. A message unclaimed DISPATCH_TIMEOUT_MS after its send no longer
 * counts (it may be lost, and its re-send waits for its own turn): lost sends never close the
 * window, and due work goes on overtaking them. `reopensAt`: when the oldest message still
 * counted stops counting (null when nothing counts).
 */
export function windowRoom(s: BucketState, now: number): { room: number; reopensAt: number | null } {
  const timeout = s.config.DISPATCH_TIMEOUT_MS;
  let stale = 0;
  let reopensAt: number | null = null;
  // dispatch order is send order: the stale ones come first
  for (const d of s.executions.dispatched.values()) {
    if (d.at + timeout > now) {
      reopensAt = d.at + timeout;
      break;
    }
    stale += 1;
  }
  return { room: s.window.room(s.executions.dispatched.size - stale), reopensAt };
}

/**
 * The sendBatch calls of one pass: its executions in groups of FIRE_GROUP_SIZE (one message
 * each), 100 messages a call; `fresh` says whether they are first dispatches.
 */
export function fireBatches(s: BucketState, { fresh, again, pull }: Dispatches): { groups: FireGroup[]; fresh: boolean }[] {
  const bucket = s.bucket ?? 0;
  // pull targets' offers open no connection: larger groups; everything else as many as one
  // invocation delivers at once
  const groupsOf = (refs: FireRef[]) => {
    const offers = pull ? refs.filter((r) => pull.has(r.executionId)) : [];
    const deliveries = offers.length > 0 ? refs.filter((r) => !pull!.has(r.executionId)) : refs;
    return [...chunks(deliveries, s.config.FIRE_GROUP_SIZE), ...chunks(offers, s.config.FIRE_GROUP_SIZE_PULL)].map(
      (executions): FireGroup => ({ v: 2, bucket, executions }),
    );
  };
  return (
    [
      [fresh, true],
      [again, false],
    ] as const
  ).flatMap(([refs, isFresh]) => sendBatches(groupsOf(refs)).map((groups) => ({ groups, fresh: isFresh })));
}

/** The queue refused these first dispatches: scheduled again, and they were not fired. */
export function unsend(s: BucketState, failed: FireRef[]): void {
  for (const m of failed) {
    const row = s.executions.unsend(m.executionId, m.dueAt);
    if (row && !row.callback) s.tally.add("fired_total", row.tenant, "", -1);
  }
}

/** Groups in sendBatch calls of at most SEND_BATCH messages and SEND_BATCH_BYTES (long tenant ids make large groups). */
function sendBatches(groups: FireGroup[]): FireGroup[][] {
  const out: FireGroup[][] = [];
  let batch: FireGroup[] = [];
  let bytes = 0;
  for (const group of groups) {
    const size = JSON.stringify(group).length + MESSAGE_OVERHEAD_BYTES;
    if (batch.length > 0 && (batch.length === SEND_BATCH || bytes + size > SEND_BATCH_BYTES)) {
      out.push(batch);
      batch = [];
      bytes = 0;
    }
    batch.push(group);
    bytes += size;
  }
  if (batch.length > 0) out.push(batch);
  return out;
}

/** A held execution as its fire message names it. */
function fireRefOf(row: HeldRow): FireRef {
  return { executionId: row.id, tenant: row.tenant, dueAt: row.dueAt };
}

/** `items` in consecutive slices of at most `size`. */
function chunks<T>(items: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
