/**
 * The bucket's dispatch step without the runtime (src/bucket/dispatch.ts, issue 27 items 1 and 6):
 * what one alarm pass takes (lost dispatches first, then due executions as far as the window has
 * room), the fire groups it sends (FIRE_GROUP_SIZE executions a message, 100 messages a
 * sendBatch, first dispatches before re-sends), and a failed send undone (unsend: scheduled
 * again, not counted as fired). The send itself is the shell's; the integration tests drive it.
 */
import { describe, expect, it } from "vitest";
import { fireBatches, takeDispatches, unsend, windowRoom } from "../../src/bucket/dispatch";
import { Executions } from "../../src/bucket/flight";
import type { BucketState } from "../../src/bucket/state";
import type { HeldRow } from "../../src/bucket/store";
import { Tally } from "../../src/bucket/tally";
import type { Config } from "../../src/config";
import { MAX_DISPATCH_WAIT_MS } from "../../src/core/backoff";
import { DispatchWindow } from "../../src/core/dispatch-window";

const NOW = 1_000_000;

function state(window = 64, groupSize = 6): BucketState {
  const config = { FIRE_BATCH_LIMIT: 2_000, FIRE_GROUP_SIZE: groupSize, FIRE_GROUP_SIZE_PULL: 50, DISPATCH_TIMEOUT_MS: 10_000 } as Config;
  return {
    sql: undefined as unknown as SqlStorage, // the dispatch step reads no storage
    config,
    executions: new Executions(config.DISPATCH_TIMEOUT_MS),
    tally: new Tally(),
    window: new DispatchWindow({ initial: window, min: 4, max: window, targetQueueMs: 30 }),
    epoch: 1,
    deferred: new Map(),
    dirtySchedules: new Set(),
    bucket: 3,
    nextScheduleAt: null,
    leaseSeq: 0,
    dispatchRetryAt: 0,
    pullJobs: new Set(),
  };
}

function row(i: number, tenant = "acme"): HeldRow {
  const dueAt = NOW - 1_000 + i;
  return {
    dueAt,
    id: `exe_${i}`,
    jobId: `job_${i}`,
    tenant,
    version: 1,
    jobStatus: "active",
    occurrenceAt: dueAt,
    occurrence: 1,
    attempt: 0,
    budgetBase: 0,
    recurring: false,
  };
}

function counter(s: BucketState, name: "fired_total" | "redispatch_total", tenant = "acme"): number {
  return s.tally.addTo({ counters: [], lag: [] }).counters.find((c) => c.name === name && c.tenant === tenant)?.value ?? 0;
}

describe("takeDispatches", () => {
  it("takes due executions as far as the window has room, and counts them fired", () => {
    const s = state(16);
    for (let i = 0; i < 40; i++) s.executions.handOff(row(i));
    const { fresh, again } = takeDispatches(s, NOW);
    expect(again).toEqual([]);
    expect(fresh).toHaveLength(16);
    expect(fresh[0]).toEqual({ executionId: "exe_0", tenant: "acme", dueAt: NOW - 1_000 });
    expect(counter(s, "fired_total")).toBe(16);
    expect(windowRoom(s, NOW).room).toBe(0); // full until a quarter is claimed or stops counting
    expect(windowRoom(s, NOW + 10_000)).toEqual({ room: 16, reopensAt: null }); // unclaimed past DISPATCH_TIMEOUT_MS
  });

  it("re-sends a lost dispatch first (redispatch), then what is due", () => {
    const s = state(16);
    s.executions.handOff(row(0));
    expect(takeDispatches(s, NOW).fresh).toHaveLength(1);
    s.executions.handOff(row(1));
    const later = NOW + MAX_DISPATCH_WAIT_MS;
    const { fresh, again } = takeDispatches(s, later);
    expect(again.map((r) => r.executionId)).toEqual(["exe_0"]);
    expect(fresh.map((r) => r.executionId)).toEqual(["exe_1"]);
    expect(counter(s, "redispatch_total")).toBe(1);
  });

  it("takes nothing before a failed send's retry time, or before the bucket knows its index", () => {
    const s = state();
    s.executions.handOff(row(0));
    s.dispatchRetryAt = NOW + 1;
    expect(takeDispatches(s, NOW)).toEqual({ fresh: [], again: [] });
    s.dispatchRetryAt = 0;
    s.bucket = null;
    expect(takeDispatches(s, NOW)).toEqual({ fresh: [], again: [] });
  });
});

describe("fireBatches: the messages of one pass", () => {
  it("groups FIRE_GROUP_SIZE executions a message, 100 messages a sendBatch, first dispatches before re-sends", () => {
    const s = state(2_000, 6);
    for (let i = 0; i < 700; i++) s.executions.handOff(row(i));
    const taken = takeDispatches(s, NOW);
    const again = [taken.fresh.pop()!];
    const batches = fireBatches(s, { fresh: taken.fresh, again });
    // 699 fresh: 117 groups (116 of 6, one of 3) in sendBatch calls of 100 and 17; then 1 re-send
    expect(batches.map((b) => [b.groups.length, b.fresh])).toEqual([
      [100, true],
      [17, true],
      [1, false],
    ]);
    expect(batches[0]!.groups[0]).toEqual({ v: 2, bucket: 3, executions: taken.fresh.slice(0, 6) });
    expect(batches[1]!.groups.at(-1)!.executions).toHaveLength(3);
    expect(batches.flatMap((b) => b.groups.flatMap((g) => g.executions))).toEqual([...taken.fresh, ...again]);
  });

  it("puts pull targets' executions in groups of FIRE_GROUP_SIZE_PULL (offers open no connection), the others in groups of FIRE_GROUP_SIZE", () => {
    const s = state(2_000, 6);
    for (let i = 0; i < 120; i++) s.executions.handOff(row(i));
    // every third job is a pull target, as its bucket learned when it applied or claimed it
    for (let i = 0; i < 120; i += 3) s.pullJobs.add(`job_${i}`);
    const taken = takeDispatches(s, NOW);
    expect([...taken.pull!].sort()).toEqual(Array.from({ length: 40 }, (_, k) => `exe_${3 * k}`).sort());
    const groups = fireBatches(s, taken).flatMap((b) => b.groups);
    const isPull = (g: { executions: { executionId: string }[] }) => g.executions.every((e) => taken.pull!.has(e.executionId));
    const isDelivery = (g: { executions: { executionId: string }[] }) => g.executions.every((e) => !taken.pull!.has(e.executionId));
    expect(groups.every((g) => isPull(g) || isDelivery(g))).toBe(true);
    expect(groups.filter(isPull).map((g) => g.executions.length)).toEqual([40]);
    expect(groups.filter(isDelivery).map((g) => g.executions.length)).toEqual([...Array(13).fill(6), 2]);
    expect(groups.flatMap((g) => g.executions).sort((a, b) => a.dueAt - b.dueAt)).toEqual(taken.fresh);
  });

  it("sends nothing for an empty pass", () => {
    expect(fireBatches(state(), { fresh: [], again: [] })).toEqual([]);
  });
});

describe("unsend: a failed send of first dispatches (transition unsend)", () => {
  it("schedules them again and takes back their fired count; a dispatch that moved meanwhile is left alone", () => {
    const s = state();
    for (let i = 0; i < 3; i++) s.executions.handOff(row(i));
    const { fresh } = takeDispatches(s, NOW);
    unsend(s, [fresh[0]!, { ...fresh[1]!, dueAt: fresh[1]!.dueAt - 1 }]);
    expect(s.executions.stateOf({ id: "exe_0" })).toBe("scheduled");
    expect(s.executions.stateOf({ id: "exe_1" })).toBe("dispatched"); // another due time: not this send
    expect(counter(s, "fired_total")).toBe(2);
    expect(takeDispatches(s, NOW).fresh.map((r) => r.executionId)).toEqual(["exe_0"]);
  });
});
