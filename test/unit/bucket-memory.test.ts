/**
 * What a bucket keeps in memory stays bounded however its executions move (issue 24 item 3), and
 * a row moved away and back is taken once (the defect the model-based test found: two entries of
 * one execution in the due heap made the alarm step throw, the execution went out ten minutes
 * late and another one due with it was stuck until a restart).
 *
 * - the due heap: an entry is never there twice, takeDue never returns an id twice, and entries of
 *   rows that moved are dropped once they outnumber the live ones (Executions.schedule);
 * - tombstones (Executions.closedAt): kept CLOSED_MEMORY_MS, never more than MAX_TOMBSTONES.
 */
import { describe, expect, it } from "vitest";
import { TenantDueQueues } from "../../src/bucket/due-queue";
import { CLOSED_MEMORY_MS, Executions, MAX_TOMBSTONES } from "../../src/bucket/flight";
import type { HeldRow } from "../../src/bucket/store";

function row(id: string, dueAt: number): HeldRow {
  return {
    dueAt,
    id,
    jobId: `job_${id}`,
    tenant: "acme",
    version: 1,
    jobStatus: "active",
    occurrenceAt: dueAt,
    occurrence: 1,
    attempt: 0,
    budgetBase: 0,
    recurring: false,
  };
}

describe("the due heap: a row moved away and back is taken once", () => {
  it("an entry already there is not added again, and takeDue returns each id once", () => {
    const q = new TenantDueQueues();
    q.push(100, "a", "acme");
    q.push(200, "a", "acme"); // moved later
    q.push(100, "a", "acme"); // and back
    q.push(100, "b", "acme");
    const live = (dueAt: number, _id: string) => dueAt === 100;
    const taken = q.takeDue(1_000, 10, live);
    expect(taken.map((t) => t.id).sort()).toEqual(["a", "b"]);
  });

  it("Executions: moving one row back and forth 10,000 times keeps the heap within twice the rows held plus 2,048", () => {
    const executions = new Executions(10_000);
    const rows = Array.from({ length: 100 }, (_, i) => row(`e${i}`, 1_000 + i));
    for (const r of rows) {
      executions.hold(r);
      executions.schedule(r);
    }
    let moved = rows[0]!;
    for (let i = 0; i < 10_000; i++) {
      moved = { ...moved, dueAt: moved.dueAt === 1_000 ? 5_000 + i : 1_000 };
      executions.keep(moved);
      executions.schedule(moved);
      expect(executions.due.size).toBeLessThanOrEqual(2 * executions.held.size + 2_048);
    }
    // nothing live was dropped: every row is taken once, at its due time
    const taken = executions.due.takeDue(1_000_000, 1_000, (dueAt, id) => executions.isScheduledAt(id, dueAt));
    expect(taken.map((t) => t.id).sort()).toEqual(rows.map((r) => r.id).sort());
    expect(taken.find((t) => t.id === moved.id)?.dueAt).toBe(moved.dueAt);
  });
});

describe("tombstones: kept CLOSED_MEMORY_MS, at most MAX_TOMBSTONES", () => {
  it("forgets those older than CLOSED_MEMORY_MS", () => {
    const executions = new Executions(10_000);
    executions.rememberClosed("old", { at: 0, tenant: "acme", version: 1 });
    executions.rememberClosed("new", { at: CLOSED_MEMORY_MS, tenant: "acme", version: 1 });
    executions.forgetClosed(CLOSED_MEMORY_MS + 1);
    expect([...executions.closedAt.keys()]).toEqual(["new"]);
  });

  it("filled past MAX_TOMBSTONES within the window, keeps the newest MAX_TOMBSTONES", () => {
    const executions = new Executions(10_000);
    const extra = 1_000;
    for (let i = 0; i < MAX_TOMBSTONES + extra; i++) executions.rememberClosed(`t${i}`, { at: 1_000, tenant: "acme", version: 1 });
    expect(executions.closedAt.size).toBe(MAX_TOMBSTONES);
    expect(executions.closedAt.has(`t${extra - 1}`)).toBe(false);
    expect(executions.closedAt.has(`t${extra}`)).toBe(true);
    expect(executions.closedAt.has(`t${MAX_TOMBSTONES + extra - 1}`)).toBe(true);
  });

  it("one remembered again moves to the end (its time is the new one)", () => {
    const executions = new Executions(10_000);
    executions.rememberClosed("a", { at: 0, tenant: "acme", version: 1 });
    executions.rememberClosed("b", { at: 10, tenant: "acme", version: 1 });
    executions.rememberClosed("a", { at: 20, tenant: "acme", version: 2 });
    expect([...executions.closedAt.keys()]).toEqual(["b", "a"]);
    executions.forgetClosed(10 + CLOSED_MEMORY_MS + 1);
    expect([...executions.closedAt.keys()]).toEqual(["a"]);
  });
});
