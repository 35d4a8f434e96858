/**
 * The execution lifecycle as one table (DESIGN.md "Execution lifecycle", STYLE.md habit 2): every
 * state change and every SQL guard derives from TRANSITIONS, so the table itself is tested here.
 */
import { describe, expect, it } from "vitest";
import {
  canApply,
  EXECUTION_STATES,
  type ExecutionState,
  isTerminal,
  JOB_STATES,
  JOB_TRANSITIONS,
  type JobState,
  type JobTransition,
  jobTransition,
  statusCheckSql,
  TERMINAL_STATES,
  TRANSITIONS,
  type Transition,
  transition,
} from "../../src/core/lifecycle";

const transitions = Object.keys(TRANSITIONS) as Transition[];
const edges = transitions.flatMap((t) =>
  TRANSITIONS[t].from.map((from) => ({ t, from: from as ExecutionState, to: TRANSITIONS[t].to as ExecutionState })),
);

describe("TRANSITIONS", () => {
  it("names only known states", () => {
    for (const { from, to } of edges) {
      expect(EXECUTION_STATES).toContain(from);
      expect(EXECUTION_STATES).toContain(to);
    }
    for (const s of TERMINAL_STATES) expect(EXECUTION_STATES).toContain(s);
  });

  it("has the states of DESIGN.md and no others", () => {
    expect([...EXECUTION_STATES].sort()).toEqual(["canceled", "dead", "dispatched", "pending", "running", "scheduled", "succeeded"]);
    expect([...TERMINAL_STATES].sort()).toEqual(["canceled", "dead", "succeeded"]);
  });

  it("lets a terminal state out only by redrive (dead -> scheduled) or reopen (canceled -> scheduled)", () => {
    // DESIGN.md: terminal states are left only by redrive. reopen is resume of a recurring job
    // scheduling an occurrence that the pause canceled; any further exit must be a deliberate
    // change to this list.
    const outOfTerminal = edges.filter((e) => isTerminal(e.from));
    expect(outOfTerminal).toEqual([
      { t: "redrive", from: "dead", to: "scheduled" },
      { t: "reopen", from: "canceled", to: "scheduled" },
    ]);
  });

  it("succeeded is final: nothing leaves it", () => {
    expect(edges.filter((e) => e.from === "succeeded")).toEqual([]);
  });

  it("every transition has at least one from-state and no duplicates", () => {
    for (const t of transitions) {
      const from = TRANSITIONS[t].from as readonly string[];
      expect(from.length).toBeGreaterThan(0);
      expect(new Set(from).size).toBe(from.length);
    }
  });

  it("reaches every state from pending (a created execution can end up anywhere the table says)", () => {
    const seen = new Set<ExecutionState>(["pending"]);
    for (let changed = true; changed; ) {
      changed = false;
      for (const e of edges) {
        if (seen.has(e.from) && !seen.has(e.to)) {
          seen.add(e.to);
          changed = true;
        }
      }
    }
    expect([...seen].sort()).toEqual([...EXECUTION_STATES].sort());
  });

  it("every non-terminal state can reach a terminal one (nothing is stuck, invariant 4)", () => {
    for (const start of EXECUTION_STATES.filter((s) => !isTerminal(s))) {
      const seen = new Set<ExecutionState>([start]);
      for (let changed = true; changed; ) {
        changed = false;
        for (const e of edges) {
          if (seen.has(e.from) && !seen.has(e.to)) {
            seen.add(e.to);
            changed = true;
          }
        }
      }
      expect([...seen].some(isTerminal), start).toBe(true);
    }
  });
});

describe("transition", () => {
  it("returns the table's to-state for an allowed move and null otherwise, for every pair", () => {
    for (const t of transitions) {
      for (const s of EXECUTION_STATES) {
        const allowed = (TRANSITIONS[t].from as readonly string[]).includes(s);
        expect(transition(s, t)).toBe(allowed ? TRANSITIONS[t].to : null);
      }
    }
  });
});

describe("jobTransition (the job table)", () => {
  it.each<[JobState, JobTransition, JobState | null]>([
    ["active", "cancel", "canceled"],
    ["paused", "cancel", "canceled"],
    ["canceled", "cancel", null],
    ["completed", "cancel", null], // 409: a finished job cannot be canceled
    ["active", "pause", "paused"],
    ["paused", "pause", null],
    ["paused", "resume", "active"],
    ["active", "resume", null],
    ["active", "patch", "active"],
    ["paused", "patch", "paused"],
    ["completed", "patch", null],
    ["canceled", "patch", null],
    ["completed", "redrive", "completed"], // the one-off redrive path sets active itself
    ["canceled", "redrive", null],
    ["active", "complete", "completed"],
    ["paused", "complete", null],
  ])("%s + %s -> %s", (from, event, to) => {
    expect(jobTransition(from, event)).toBe(to);
  });

  it("names only known job states", () => {
    for (const t of Object.values(JOB_TRANSITIONS)) {
      for (const s of t.from) expect(JOB_STATES).toContain(s);
      if (t.to !== null) expect(JOB_STATES).toContain(t.to);
    }
  });
});

describe("isTerminal", () => {
  it.each(EXECUTION_STATES.map((s) => [s, (TERMINAL_STATES as readonly string[]).includes(s)] as const))("%s -> %s", (state, terminal) => {
    expect(isTerminal(state)).toBe(terminal);
  });
});

describe("canApply", () => {
  it.each<[Transition, ExecutionState, boolean]>([
    ["handOff", "pending", true],
    ["handOff", "scheduled", false], // a repeated hand-off is a no-op, not a reset
    ["dispatch", "scheduled", true],
    ["dispatch", "dispatched", false],
    ["redispatch", "dispatched", true], // failure row "message lost"
    ["redispatch", "running", false],
    ["claim", "dispatched", true],
    ["claim", "running", false], // invariant 2: at most one live lease; invariant 7: duplicate delivery
    ["claim", "succeeded", false], // invariant 7: duplicate of a finished execution
    ["claim", "scheduled", true], // a message of an earlier epoch for a due row (after a restart)
    ["claim", "pending", false],
    ["succeed", "running", true],
    ["succeed", "dispatched", false], // invariant 3: only a lease holder completes
    ["succeed", "dead", false],
    ["retry", "running", true],
    ["retry", "dispatched", false],
    ["kill", "running", true], // permanent failure or attempts exhausted
    ["kill", "dispatched", false],
    ["poison", "dispatched", true], // the queue gave up on the message
    ["poison", "scheduled", true],
    ["poison", "running", false], // a lease holds it: an old message never kills a live attempt
    ["kill", "succeeded", false],
    ["kill", "dead", false],
    ["cancel", "pending", true],
    ["cancel", "scheduled", true],
    ["cancel", "dispatched", true],
    ["cancel", "running", false], // a running attempt finishes
    ["abandon", "running", true], // ... and is not retried if it fails
    ["restart", "running", true], // a new epoch: what was in memory is eligible again
    ["restart", "dispatched", true],
    ["restart", "scheduled", false],
    ["reschedule", "running", true], // PATCH of a one-off run time: runs again after the attempt
    ["reschedule", "succeeded", false],
    ["cancel", "succeeded", false],
    ["cancel", "canceled", false],
    ["redrive", "dead", true],
    ["redrive", "succeeded", false],
    ["redrive", "canceled", false],
    ["redrive", "running", false],
    ["reopen", "canceled", true],
    ["reopen", "succeeded", false],
    ["reopen", "dead", false],
  ])("%s from %s -> %s", (transition, from, expected) => {
    expect(canApply(transition, from)).toBe(expected);
  });

  it("agrees with the table for every (transition, state) pair", () => {
    for (const t of transitions) {
      for (const s of EXECUTION_STATES) expect(canApply(t, s)).toBe((TRANSITIONS[t].from as readonly string[]).includes(s));
    }
  });
});

describe("SQL derived from the table", () => {
  it("statusCheckSql lists every state, in table order", () => {
    const all = EXECUTION_STATES.map((s) => `'${s}'`).join(",");
    expect(statusCheckSql()).toBe(`CHECK (status IN (${all}))`);
    expect(statusCheckSql("state")).toBe(`CHECK (state IN (${all}))`);
    expect(statusCheckSql()).toBe("CHECK (status IN ('pending','scheduled','dispatched','running','succeeded','dead','canceled'))");
  });
});
