/**
 * The lifecycle table drives the code (STYLE.md habit 2, issue 27 item 6):
 * - every row of TRANSITIONS is named by the code under src/ in a check of the table
 *   (assertMove / transition / canApply): a row no code names fails here;
 * - the state machine (src/bucket/flight.ts Executions) makes every row's move, from every state
 *   the row allows, and the execution ends in the row's to-state: each row is asserted by a move
 *   below (a row without one fails the first test of that block);
 * - a move the table does not allow is refused: it throws (the step's transaction rolls back),
 *   or, for the moves that pick their rows (dispatchDue, redispatchLost, unsend), the row is not taken.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { Executions } from "../../src/bucket/flight";
import type { Lease } from "../../src/bucket/lease-table";
import type { HeldRow } from "../../src/bucket/store";
import { EXECUTION_STATES, type ExecutionState, TRANSITIONS, type Transition } from "../../src/core/lifecycle";

const transitions = Object.keys(TRANSITIONS) as Transition[];
const SRC = path.join(import.meta.dirname, "../../src");

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const file = path.join(dir, name);
    if (statSync(file).isDirectory()) return sourceFiles(file);
    return file.endsWith(".ts") ? [file] : [];
  });
}

/** The argument lists of every call of the table's checks, balanced parentheses included. */
function tableChecks(text: string): string[] {
  const calls: string[] = [];
  for (const match of text.matchAll(/\b(?:assertMove|transition|canApply)\(/g)) {
    let depth = 1;
    let i = match.index + match[0].length;
    const start = i;
    for (; i < text.length && depth > 0; i++) {
      if (text[i] === "(") depth++;
      else if (text[i] === ")") depth--;
    }
    calls.push(text.slice(start, i - 1));
  }
  return calls;
}

describe("every row of the lifecycle table is named by the code", () => {
  const checks = sourceFiles(SRC)
    .filter((file) => !file.endsWith(path.join("core", "lifecycle.ts")))
    .flatMap((file) => tableChecks(readFileSync(file, "utf8")));

  it("finds the checks it reads (the scan itself works)", () => {
    expect(checks.length).toBeGreaterThan(transitions.length);
  });

  it.each(transitions)("%s is checked against the table somewhere under src/", (t) => {
    expect(checks.some((args) => args.includes(`"${t}"`))).toBe(true);
  });
});

// ---------------------------------------------------------------------------------------------
// the state machine makes each row's move

const NOW = 1_000_000;
const DISPATCH_TIMEOUT_MS = 10_000;
const detail = { attempts: 1, finishedAt: NOW, lastHttpStatus: null, lastError: null, deadReason: null, last: null };

function row(over: Partial<HeldRow> = {}): HeldRow {
  return {
    dueAt: NOW - 10,
    id: "exe_a",
    jobId: "job_a",
    tenant: "acme",
    version: 1,
    jobStatus: "active",
    occurrenceAt: NOW - 10,
    occurrence: 1,
    attempt: 0,
    budgetBase: 0,
    recurring: false,
    ...over,
  };
}

function lease(over: Partial<Lease> = {}): Lease {
  return { token: "t", seq: 1, deadlineAt: NOW + 30_000, attempt: 1, startedAt: NOW, occurrenceAt: NOW - 10, ...over };
}

/** The state an execution is in: memory's, or a tombstone's (it left), or pending (never held). */
function stateAfter(ex: Executions, r: HeldRow): ExecutionState | undefined {
  if (ex.held.has(r.id)) return ex.stateOf(r);
  return ex.closedAt.has(r.id) ? ex.closedAt.get(r.id)!.status : "pending";
}

/** Brings an execution to a state; the states memory does not hold (D1's) need nothing. */
const reach: Record<ExecutionState, (ex: Executions, r: HeldRow) => void> = {
  pending: () => {},
  scheduled: (ex, r) => ex.handOff(r),
  dispatched: (ex, r) => {
    ex.handOff(r);
    expect(ex.dispatchDue(NOW, 10)).toEqual([r]);
  },
  running: (ex, r) => {
    reach.dispatched(ex, r);
    ex.lease(r, lease());
  },
  succeeded: () => {},
  dead: () => {},
  canceled: () => {},
};

/** Each row's move; returns the Executions to look at (a restart's is a new one). */
// biome-ignore lint/suspicious/noConfusingVoidType: a move returns the Executions to look at only when it is another one
const moves: Record<Transition, (ex: Executions, r: HeldRow) => Executions | void> = {
  handOff: (ex, r) => void ex.handOff(r),
  dispatch: (ex, r) => void expect(ex.dispatchDue(NOW, 10)).toEqual([r]),
  redispatch: (ex, r) => {
    // unclaimed and overtaken by nothing: lost only after MAX_DISPATCH_WAIT_MS
    expect(ex.redispatchLost(NOW + 1, 10)).toEqual([]);
    expect(ex.redispatchLost(NOW + 3_600_000, 10)).toEqual([r]);
    expect(ex.dispatched.get(r.id)?.count).toBe(2);
  },
  unsend: (ex, r) => {
    expect(ex.unsend(r.id, r.dueAt - 1)).toBeUndefined(); // another dispatch's failed send: not this one
    expect(ex.unsend(r.id, r.dueAt)).toBe(r);
    expect(ex.isScheduledAt(r.id, r.dueAt)).toBe(true);
  },
  offer: (ex, r) => {
    ex.offer(r, "jobs");
    expect(ex.offered.get(r.id)).toEqual({ dueAt: r.dueAt, queue: "jobs" });
    expect(ex.dispatched.has(r.id)).toBe(false); // out of the dispatch order: never re-sent
  },
  claim: (ex, r) => {
    ex.lease(r, lease());
    expect(ex.running.get(r.id)?.token).toBe("t");
  },
  succeed: (ex, r) => void ex.succeed(r, detail),
  retry: (ex, r) => {
    ex.retry(r, { ...r, dueAt: NOW + 5_000, attempt: 1 });
    expect(ex.isScheduledAt(r.id, NOW + 5_000)).toBe(true);
  },
  wait: (ex, r) => {
    ex.wait(r, { ...r, dueAt: NOW + 5_000 });
    expect(ex.waitingSince(r.id)).toBe(r.dueAt);
  },
  kill: (ex, r) => void ex.kill(r, detail),
  poison: (ex, r) => void ex.poison(r, detail),
  cancel: (ex, r) => {
    if (ex.held.has(r.id)) ex.cancel(r, detail);
    else ex.cancelPending(r.id, { at: NOW, tenant: r.tenant, version: r.version });
  },
  abandon: (ex, r) => void ex.abandon(r, detail),
  restart: (_ex, r) => {
    // a new epoch: whatever the last one had in memory, the stored row is scheduled
    const next = new Executions(DISPATCH_TIMEOUT_MS);
    expect(next.restore(r)).toBe(true);
    return next;
  },
  reschedule: (ex, r) => {
    ex.reschedule(r, { ...r, dueAt: NOW + 7_000, occurrenceAt: NOW + 7_000 });
    expect(ex.running.has(r.id) || ex.dispatched.has(r.id) || ex.offered.has(r.id)).toBe(false);
  },
  redrive: (ex, r) => void ex.redrive(r),
  reopen: (ex, r) => void ex.reopen(r),
};

describe("the state machine makes each row's move (flight.ts Executions)", () => {
  it("has a move for every row of the table, and none other", () => {
    expect(Object.keys(moves).sort()).toEqual([...transitions].sort());
  });

  const cases = transitions.flatMap((t) => TRANSITIONS[t].from.map((from) => [t, from as ExecutionState] as const));
  it.each(cases)("%s from %s ends in the table's to-state", (t, from) => {
    const ex = new Executions(DISPATCH_TIMEOUT_MS);
    const r = row();
    reach[from](ex, r);
    if (ex.held.has(r.id)) expect(ex.stateOf(r)).toBe(from);
    const after = moves[t](ex, r) ?? ex;
    expect(stateAfter(after, r)).toBe(TRANSITIONS[t].to);
  });

  it("an offered execution is dispatched, and its lease starts from there (a pull worker's claim)", () => {
    const ex = new Executions(DISPATCH_TIMEOUT_MS);
    const r = row();
    reach.dispatched(ex, r);
    ex.offer(r, "jobs");
    expect(ex.stateOf(r)).toBe("dispatched");
    ex.lease(r, lease({ leaseMs: 60_000 }));
    expect(ex.stateOf(r)).toBe("running");
    expect(ex.offered.has(r.id)).toBe(false);
  });

  it("a restored row whose job is no longer active is held, not scheduled (its cancel follows)", () => {
    const ex = new Executions(DISPATCH_TIMEOUT_MS);
    const r = row({ jobStatus: "paused" });
    expect(ex.restore(r)).toBe(false);
    expect(ex.held.has(r.id)).toBe(true);
    expect(ex.isScheduledAt(r.id, r.dueAt)).toBe(false);
    ex.cancel(r, detail);
    expect(ex.stateOf(r)).toBe("canceled");
  });

  it("leave: an outcome D1 has leaves memory, its tombstone says how it ended", () => {
    const ex = new Executions(DISPATCH_TIMEOUT_MS);
    const r = row();
    reach.running(ex, r);
    ex.kill(r, detail);
    ex.leave(r, NOW);
    expect(ex.held.has(r.id)).toBe(false);
    expect(ex.closing.has(r.id)).toBe(false);
    expect(ex.closedAt.get(r.id)).toEqual({ at: NOW, tenant: "acme", version: 1, status: "dead" });
  });
});

describe("a move the table does not allow is refused", () => {
  const refused: [Transition, ExecutionState][] = [];
  for (const t of transitions) {
    for (const from of ["scheduled", "dispatched", "running"] as const) {
      if (!(TRANSITIONS[t].from as readonly string[]).includes(from)) refused.push([t, from]);
    }
  }
  // moves made from a state memory does not hold (D1's, the last epoch's) name it themselves
  const fromElsewhere: Transition[] = ["handOff", "redrive", "reopen", "restart"];

  it.each(refused.filter(([t]) => !fromElsewhere.includes(t)))("%s from %s", (t, from) => {
    const ex = new Executions(DISPATCH_TIMEOUT_MS);
    const r = row();
    reach[from](ex, r);
    // "lifecycle: ..." from assertMove; "expected ..." when the move did not take the row
    expect(() => moves[t](ex, r)).toThrow(/lifecycle|expected/);
  });

  it("nothing leaves a terminal state but by the table (a closing execution cannot be claimed, sent or retried)", () => {
    const ex = new Executions(DISPATCH_TIMEOUT_MS);
    const r = row();
    reach.running(ex, r);
    ex.succeed(r, detail);
    for (const t of ["claim", "offer", "retry", "wait", "reschedule", "cancel", "kill", "poison"] as const) {
      expect(() => moves[t](ex, r), t).toThrow(/lifecycle/);
    }
  });

  it("covers every state", () => {
    expect(Object.keys(reach).sort()).toEqual([...EXECUTION_STATES].sort());
  });
});
