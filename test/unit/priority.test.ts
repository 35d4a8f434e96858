/**
 * Priority (issue 29 item 4, src/core/priority.ts): among a tenant's due executions waiting their
 * turn, the higher priority goes first; by aging (one step per PRIORITY_AGING_MS waited past the
 * due time) a low one that waited (9 - p) steps goes before every newer one, so none starves.
 *
 * - the pure rule (comparePriority, effectivePriority), time passed in;
 * - the bucket's due order (TenantDueQueues): 9s before 1s within a tenant, the starvation bound,
 *   never before the due time, tenants' turns unchanged;
 * - a flow-control key's waiters (FlowGate, parallelism 1): the free slot goes to the 9, and to a 1
 *   that waited past the bound before newer 9s.
 */
import { describe, expect, it } from "vitest";
import { TenantDueQueues } from "../../src/bucket/due-queue";
import type { FlowAsk } from "../../src/core/flow";
import { FlowGate } from "../../src/core/flow-gate";
import {
  comparePriority,
  effectivePriority,
  PRIORITY,
  PRIORITY_AGING_MS,
  PRIORITY_MAX_PASSED_OVER_MS,
  priorityOf,
} from "../../src/core/priority";

const STEP = PRIORITY_AGING_MS;
/** the wait after which priority 1 is passed over by nothing newer */
const BOUND_1 = (PRIORITY.max - 1) * STEP;

describe("the pure rule: higher first, aged by the wait (comparePriority)", () => {
  it("defaults to 5 when a spec has none", () => {
    expect(priorityOf({})).toBe(5);
    expect(priorityOf({ priority: 0 })).toBe(0);
  });

  it("effective priority rises one step per PRIORITY_AGING_MS waited, up to 9, and not before the due time", () => {
    expect(effectivePriority(1, 1_000, 0)).toBe(1); // not due yet: no credit for the future
    expect(effectivePriority(1, 0, STEP - 1)).toBe(1);
    expect(effectivePriority(1, 0, STEP)).toBe(2);
    expect(effectivePriority(1, 0, BOUND_1)).toBe(9);
    expect(effectivePriority(1, 0, 100 * STEP)).toBe(9);
    expect(PRIORITY_MAX_PASSED_OVER_MS).toBe(9 * STEP);
  });

  const table: [string, { priority: number; dueAt: number }, { priority: number; dueAt: number }, number, "a" | "b"][] = [
    ["a 9 before an older 1", { priority: 9, dueAt: 100 }, { priority: 1, dueAt: 0 }, 200, "a"],
    ["equal priorities: due order", { priority: 5, dueAt: 100 }, { priority: 5, dueAt: 0 }, 200, "b"],
    ["a 1 just short of the bound still yields to a newer 9", { priority: 1, dueAt: 0 }, { priority: 9, dueAt: 10 }, BOUND_1 - 1, "b"],
    ["a 1 that waited the bound goes before a newer 9", { priority: 1, dueAt: 0 }, { priority: 9, dueAt: 10 }, BOUND_1, "a"],
    ["but not before an older 9", { priority: 1, dueAt: 10 }, { priority: 9, dueAt: 0 }, 100 * STEP, "b"],
    [
      "a 0 that waited 9 steps goes before a newer 9",
      { priority: 0, dueAt: 0 },
      { priority: 9, dueAt: 1 },
      PRIORITY_MAX_PASSED_OVER_MS,
      "a",
    ],
    ["a 5 aged 2 steps beats a fresh 6", { priority: 5, dueAt: 0 }, { priority: 6, dueAt: 2 * STEP }, 2 * STEP, "a"],
  ];
  it.each(table)("%s", (_, a, b, now, first) => {
    const order = comparePriority(a, b, now);
    expect(order < 0 ? "a" : "b").toBe(first);
    expect(Math.sign(comparePriority(b, a, now))).toBe(-Math.sign(order)); // antisymmetric
  });

  it("with one priority everywhere it is due order, at any time", () => {
    const dues = [5, 0, STEP * 3, 17, STEP * 12, 2];
    for (const now of [20, STEP * 4, STEP * 40]) {
      const sorted = [...dues].sort((x, y) => comparePriority({ priority: 5, dueAt: x }, { priority: 5, dueAt: y }, now));
      expect(sorted).toEqual([...dues].sort((x, y) => x - y));
    }
  });
});

describe("the bucket's due order (TenantDueQueues)", () => {
  const live = () => true;
  const ids = (taken: { id: string }[]) => taken.map((t) => t.id);

  it("within a tenant the 9s go before the 1s due earlier, each priority in due order", () => {
    const q = new TenantDueQueues();
    q.push(0, "low-a", "acme", 1);
    q.push(1, "low-b", "acme", 1);
    q.push(10, "high-a", "acme", 9);
    q.push(11, "high-b", "acme", 9);
    expect(ids(q.takeDue(100, 10, live))).toEqual(["high-a", "high-b", "low-a", "low-b"]);
  });

  it("a 1 that waited past the bound goes before newer 9s (no starvation)", () => {
    const q = new TenantDueQueues();
    q.push(0, "low", "acme", 1);
    for (let i = 0; i < 3; i++) q.push(BOUND_1 - 100 + i, `high-${i}`, "acme", 9);
    expect(ids(q.takeDue(BOUND_1 - 1, 1, live))).toEqual(["high-0"]);
    expect(ids(q.takeDue(BOUND_1, 10, live))).toEqual(["low", "high-1", "high-2"]);
  });

  it("priority never takes one before its due time", () => {
    const q = new TenantDueQueues();
    q.push(0, "low", "acme", 1);
    q.push(50, "high", "acme", 9);
    expect(ids(q.takeDue(10, 10, live))).toEqual(["low"]);
    expect(q.peek(live)).toEqual({ dueAt: 50, id: "high" });
  });

  it("tenants still take turns: a tenant's 9s do not take another tenant's turn", () => {
    const q = new TenantDueQueues();
    for (let i = 0; i < 4; i++) q.push(i, `a-${i}`, "acme", 9);
    for (let i = 0; i < 2; i++) q.push(i, `b-${i}`, "globex", 0);
    const taken = ids(q.takeDue(100, 4, live));
    expect(taken.filter((id) => id.startsWith("b-"))).toHaveLength(2);
    expect(taken.filter((id) => id.startsWith("a-"))).toEqual(["a-0", "a-1"]);
  });

  it("an entry under a priority that is no longer its job's is skipped (a PATCH re-enters the row under the new one)", () => {
    const q = new TenantDueQueues();
    const priorityNow = new Map([["x", 9]]);
    q.push(0, "x", "acme", 1); // before the change
    q.push(0, "x", "acme", 9); // after it
    q.push(5, "y", "acme", 5);
    const liveByPriority = (_: number, id: string, priority: number) => (priorityNow.get(id) ?? 5) === priority;
    expect(ids(q.takeDue(100, 10, liveByPriority))).toEqual(["x", "y"]);
  });
});

describe("a flow-control key's waiters (FlowGate, parallelism 1)", () => {
  const ask = (executionId: string, firstDueAt: number, priority: number): FlowAsk => ({
    executionId,
    firstDueAt,
    holdMs: 600_000,
    priority,
  });
  const granted = (gate: FlowGate, asks: FlowAsk[], now: number) =>
    gate
      .ask(asks, now)
      .filter((a) => a.granted)
      .map((a) => a.executionId);
  const gateOf = () => new FlowGate({ rate: null, periodMs: 1_000, parallelism: 1 }, { maxWaitMs: 300_000 });

  it("the free slot goes to the 9 waiting, not to the 1 due before it", () => {
    const gate = gateOf();
    expect(granted(gate, [ask("first", 0, 5)], 0)).toEqual(["first"]);
    expect(granted(gate, [ask("low", 10, 1), ask("high", 20, 9)], 30)).toEqual([]);
    gate.release("first", 40);
    // the low one asks first, but the high one waits too: the slot is kept for it
    expect(granted(gate, [ask("low", 10, 1)], 50)).toEqual([]);
    expect(granted(gate, [ask("high", 20, 9)], 60)).toEqual(["high"]);
  });

  it("a 1 that waited past the bound gets the slot before newer 9s", () => {
    const gate = gateOf();
    expect(granted(gate, [ask("first", 0, 5)], 0)).toEqual(["first"]);
    granted(gate, [ask("low", 10, 1)], 10);
    const now = 10 + BOUND_1;
    granted(gate, [ask("high", now - 100, 9)], now - 50);
    gate.release("first", now);
    expect(granted(gate, [ask("high", now - 100, 9), ask("low", 10, 1)], now)).toEqual(["low"]);
  });

  it("without priorities the order is first due time, as before", () => {
    const gate = gateOf();
    expect(granted(gate, [ask("first", 0, 5)], 0)).toEqual(["first"]);
    gate.ask(
      [
        { executionId: "b", firstDueAt: 20, holdMs: 600_000 },
        { executionId: "a", firstDueAt: 10, holdMs: 600_000 },
      ],
      30,
    );
    gate.release("first", 40);
    expect(granted(gate, [{ executionId: "b", firstDueAt: 20, holdMs: 600_000 }], 50)).toEqual([]);
    expect(granted(gate, [{ executionId: "a", firstDueAt: 10, holdMs: 600_000 }], 60)).toEqual(["a"]);
  });
});
