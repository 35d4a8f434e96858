/**
 * The flow-control gate of one key (src/core/flow.ts, issue 13): at most `rate` starts in any
 * sliding window of `periodMs`, at most `parallelism` permits in flight, nothing while paused or
 * throttled by a Retry-After, waiters served in order of first due time (a free slot goes to an
 * asker only if no earlier-due waiter still asking could take it), a waiter that stops asking
 * forgotten after its retry time plus WAITER_GRACE_MS. First a property over simulated time
 * (fast-check): executions arrive, re-ask at the retryAt they were told, deliver for a while and
 * release (some with a Retry-After, some past their permit's hold), some give up waiting. Then
 * examples of each promise. Last, which key governs a delivery: its job's own, else its target
 * origin's (originKeyOf, governingKey).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  type FlowAnswer,
  type FlowAsk,
  FlowGate,
  type FlowLimits,
  governingKey,
  isOriginKey,
  originKeyOf,
  PAUSED_RETRY_MS,
  WAITER_GRACE_MS,
} from "../../src/core/flow";

const ask = (executionId: string, firstDueAt: number, holdMs = 60_000): FlowAsk => ({ executionId, firstDueAt, holdMs });
const limits = (overrides: Partial<FlowLimits> = {}): FlowLimits => ({ rate: null, periodMs: 1_000, parallelism: null, ...overrides });
const grantedIds = (answers: FlowAnswer[]) => answers.filter((a) => a.granted).map((a) => a.executionId);

/** the retry time of a refused answer; throws when it was granted */
function retryAtOf(answer: FlowAnswer | undefined): number {
  if (!answer) throw new Error("no answer");
  if (answer.granted) throw new Error(`${answer.executionId} was granted, expected a wait`);
  return answer.retryAt;
}

describe("property: random asks and releases over simulated time (fast-check)", () => {
  interface ExecSpec {
    arriveAt: number;
    /** how long before its first ask it was due */
    dueLag: number;
    holdMs: number;
    durationMs: number;
    /** 0: none; else the Retry-After its delivery's release carries */
    retryAfterMs: number;
    /** null: asks until granted; n: gives up after its (n+1)th refusal */
    abandonAfter: number | null;
  }
  interface Scenario {
    rate: number;
    periodMs: number;
    parallelism: number | null;
    execs: ExecSpec[];
  }

  const scenarios: fc.Arbitrary<Scenario> = fc.record({
    rate: fc.integer({ min: 1, max: 20 }),
    periodMs: fc.integer({ min: 100, max: 2_000 }),
    parallelism: fc.option(fc.integer({ min: 1, max: 5 }), { nil: null, freq: 4 }),
    execs: fc.array(
      fc.record({
        // on a 50 ms grid over 5 s, so several often ask in one call
        arriveAt: fc.integer({ min: 0, max: 100 }).map((n) => n * 50),
        dueLag: fc.integer({ min: 0, max: 500 }),
        holdMs: fc.integer({ min: 300, max: 4_000 }),
        durationMs: fc.integer({ min: 0, max: 2_500 }),
        retryAfterMs: fc.oneof({ weight: 12, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.integer({ min: 1, max: 3_000 }) }),
        abandonAfter: fc.oneof({ weight: 8, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.integer({ min: 0, max: 3 }) }),
      }),
      { minLength: 1, maxLength: 40, size: "max" },
    ),
  });

  /** ask calls a scenario may take before every execution still asking must have been granted */
  const MAX_STEPS = 50_000;

  interface Exec extends ExecSpec {
    id: string;
    firstDueAt: number;
  }
  /** the gate's service order: first due time, then id */
  const order = (a: Exec, b: Exec) => a.firstDueAt - b.firstDueAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

  function simulate({ rate, periodMs, parallelism, execs: specs }: Scenario): void {
    const limits: FlowLimits = { rate, periodMs, parallelism };
    const gate = new FlowGate(limits);
    const execs: Exec[] = specs.map((s, i) => ({ ...s, id: `e${String(i).padStart(2, "0")}`, firstDueAt: s.arriveAt - s.dueLag }));

    /** new: not asked yet; waiting: refused and will ask again at its retryAt */
    const state = new Map<string, "new" | "waiting" | "granted" | "abandoned">(execs.map((e) => [e.id, "new"]));
    const nextAskAt = new Map<string, number>(execs.map((e) => [e.id, e.arriveAt]));
    const refusals = new Map<string, number>();
    const lastRetryAt = new Map<string, number>();
    const grantedAt = new Map<string, number>();
    const released = new Set<string>();
    let pendingReleases: { id: string; at: number; retryAfterMs: number }[] = [];
    const grants: number[] = [];
    let throttledUntil = -Infinity;
    let refusedTotal = 0;

    for (let steps = 0; ; steps++) {
      const times = [...nextAskAt.values(), ...pendingReleases.map((r) => r.at)];
      if (times.length === 0) break;
      if (steps >= MAX_STEPS) {
        const stuck = execs.filter((e) => state.get(e.id) === "waiting").map((e) => e.id);
        throw new Error(`not every ask granted within ${MAX_STEPS} steps; still waiting: ${stuck.join(", ")}`);
      }
      const now = Math.min(...times);

      // deliveries ending now release first
      for (const r of pendingReleases.filter((r) => r.at === now)) {
        gate.release(r.id, now, r.retryAfterMs > 0 ? r.retryAfterMs : undefined);
        released.add(r.id);
        if (r.retryAfterMs > 0) throttledUntil = Math.max(throttledUntil, now + r.retryAfterMs);
      }
      pendingReleases = pendingReleases.filter((r) => r.at !== now);

      // everyone due to ask now asks in one call
      const batch = execs.filter((e) => nextAskAt.get(e.id) === now);
      if (batch.length === 0) continue;
      for (const e of batch) {
        nextAskAt.delete(e.id);
        state.set(e.id, "waiting"); // asking now
      }
      const inFlightNow = () =>
        execs.filter((e) => grantedAt.has(e.id) && !released.has(e.id) && grantedAt.get(e.id)! + e.holdMs > now).length;
      const startsInWindow = () => grants.filter((g) => g > now - periodMs).length;

      const answers = gate.ask(
        batch.map((e) => ask(e.id, e.firstDueAt, e.holdMs)),
        now,
      );
      expect(answers.map((a) => a.executionId)).toEqual(batch.map((e) => e.id));
      const answerOf = new Map(answers.map((a) => [a.executionId, a]));

      // walk the answers in the gate's service order, checking each against the state before it
      const served = [...batch].sort(order);
      for (const e of served) {
        const answer = answerOf.get(e.id)!;
        if (!answer.granted) {
          expect(answer.retryAt).toBeGreaterThan(now);
          if (throttledUntil > now) expect(answer.retryAt).toBe(throttledUntil);
          refusedTotal += 1;
          refusals.set(e.id, (refusals.get(e.id) ?? 0) + 1);
          lastRetryAt.set(e.id, answer.retryAt);
          continue;
        }
        expect(throttledUntil > now, `${e.id} granted at ${now} while throttled until ${throttledUntil}`).toBe(false);
        // same call: no earlier-due asker of this very call was refused
        const refusedEarlier = served.filter((x) => order(x, e) < 0 && !answerOf.get(x.id)!.granted).map((x) => x.id);
        expect(refusedEarlier, `${e.id} granted at ${now} while earlier-due askers of the same call were refused`).toEqual([]);
        // across calls: the slot was free even after every earlier-due waiter still asking took one
        const earlierStillAsking = execs.filter((x) => x !== e && state.get(x.id) === "waiting" && order(x, e) < 0).length;
        if (parallelism !== null) {
          expect(
            inFlightNow() + earlierStillAsking,
            `${e.id} granted at ${now}: in flight + earlier waiters still asking must leave it a slot`,
          ).toBeLessThan(parallelism);
        }
        expect(
          startsInWindow() + earlierStillAsking,
          `${e.id} granted at ${now}: starts in window + earlier waiters still asking must leave it a slot`,
        ).toBeLessThan(rate);
        state.set(e.id, "granted");
        grantedAt.set(e.id, now);
        grants.push(now);
        pendingReleases.push({ id: e.id, at: now + e.durationMs, retryAfterMs: e.retryAfterMs });
      }

      // the refused ask again at the time they were told, or give up
      for (const e of batch) {
        const answer = answerOf.get(e.id)!;
        if (answer.granted) continue;
        if (e.abandonAfter !== null && refusals.get(e.id)! > e.abandonAfter) state.set(e.id, "abandoned");
        else nextAskAt.set(e.id, answer.retryAt);
      }

      const view = gate.view(now);
      expect(view.inFlight).toBe(inFlightNow());
      if (parallelism !== null) expect(view.inFlight).toBeLessThanOrEqual(parallelism);
      expect(view.currentRate).toBe(startsInWindow());
      expect(view.currentRate).toBeLessThanOrEqual(rate);
      // waiters are remembered until their retry time plus the grace, then forgotten
      const remembered = execs.filter(
        (e) => state.get(e.id) !== "granted" && lastRetryAt.has(e.id) && lastRetryAt.get(e.id)! + WAITER_GRACE_MS > now,
      ).length;
      expect(view.waiting).toBe(remembered);
      expect(view.grantedTotal).toBe(grants.length);
      expect(view.throttledTotal).toBe(refusedTotal);
    }

    // no starvation: everyone that kept asking was granted
    expect(execs.filter((e) => state.get(e.id) !== "granted" && state.get(e.id) !== "abandoned").map((e) => e.id)).toEqual([]);
    // no sliding window of periodMs holds more than `rate` starts
    const sorted = [...grants].sort((a, b) => a - b);
    for (let i = 0; i + rate < sorted.length; i++) {
      expect(sorted[i + rate]! - sorted[i]!, `starts ${i}..${i + rate} within one period`).toBeGreaterThanOrEqual(periodMs);
    }
  }

  it("never over rate or parallelism, never grants while throttled, serves in due order, starves no one", () => {
    fc.assert(fc.property(scenarios, simulate), { numRuns: 250 });
  });

  it("a burst of simultaneous asks against tight limits (rate 1..3, parallelism 1..2)", () => {
    const bursts = fc.record({
      rate: fc.integer({ min: 1, max: 3 }),
      periodMs: fc.integer({ min: 100, max: 2_000 }),
      parallelism: fc.option(fc.integer({ min: 1, max: 2 }), { nil: null, freq: 3 }),
      execs: fc.array(
        fc.record({
          arriveAt: fc.constantFrom(0, 0, 0, 50),
          dueLag: fc.integer({ min: 0, max: 3 }),
          holdMs: fc.integer({ min: 300, max: 4_000 }),
          durationMs: fc.integer({ min: 0, max: 600 }),
          retryAfterMs: fc.constant(0),
          abandonAfter: fc.oneof({ weight: 4, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.integer({ min: 0, max: 2 }) }),
        }),
        { minLength: 2, maxLength: 25, size: "max" },
      ),
    });
    fc.assert(fc.property(bursts, simulate), { numRuns: 200 });
  });
});

describe("FlowGate examples", () => {
  it("grants within the limits, in order of first due time, and refuses the rest with a later retryAt", () => {
    const gate = new FlowGate(limits({ parallelism: 2 }));
    // asked in another order than due: the two earliest due win
    const answers = gate.ask([ask("c", 300), ask("a", 100), ask("d", 400), ask("b", 200)], 1_000);
    expect(answers.map((a) => a.executionId)).toEqual(["c", "a", "d", "b"]);
    expect(grantedIds(answers)).toEqual(["a", "b"]);
    for (const a of answers) if (!a.granted) expect(a.retryAt).toBeGreaterThan(1_000);
  });

  it("waiters of one call are told retry times in order of first due time, spread over the period", () => {
    const gate = new FlowGate(limits({ rate: 1, periodMs: 1_000 }));
    const answers = gate.ask([ask("d", 400), ask("c", 300), ask("b", 200), ask("a", 100)], 0);
    expect(grantedIds(answers)).toEqual(["a"]);
    const [d, c, b] = answers.slice(0, 3).map(retryAtOf) as [number, number, number];
    expect(b).toBeGreaterThanOrEqual(1_000); // a leaves the window at 1_000
    expect(c).toBeGreaterThanOrEqual(b + 1_000);
    expect(d).toBeGreaterThanOrEqual(c + 1_000);
  });

  it("a rate waiter is told the moment a start leaves the window", () => {
    const gate = new FlowGate(limits({ rate: 4, periodMs: 1_000 }));
    for (const [id, t] of [
      ["a", 0],
      ["b", 100],
      ["c", 200],
      ["d", 300],
    ] as const) {
      expect(grantedIds(gate.ask([ask(id, t)], t))).toEqual([id]);
    }
    expect(retryAtOf(gate.ask([ask("e", 700)], 700)[0])).toBe(1_000);
    expect(grantedIds(gate.ask([ask("e", 700)], 1_000))).toEqual(["e"]);
  });

  it("rate: the sliding window frees a start exactly one period after it", () => {
    const gate = new FlowGate(limits({ rate: 2, periodMs: 1_000 }));
    expect(grantedIds(gate.ask([ask("a", 0)], 0))).toEqual(["a"]);
    expect(grantedIds(gate.ask([ask("b", 400)], 400))).toEqual(["b"]);
    const c = retryAtOf(gate.ask([ask("c", 500)], 500)[0]);
    expect(c).toBeGreaterThanOrEqual(1_000); // a leaves the window at 1_000
    expect(grantedIds(gate.ask([ask("c", 500)], 999))).toEqual([]);
    expect(grantedIds(gate.ask([ask("c", 500)], 1_000))).toEqual(["c"]);
    expect(grantedIds(gate.ask([ask("d", 1_000)], 1_000))).toEqual([]); // b still in the window
    expect(grantedIds(gate.ask([ask("d", 1_000)], 1_400))).toEqual(["d"]);
  });

  describe("pause", () => {
    it("a paused key grants nothing; waiters are told to ask again within PAUSED_RETRY_MS, later the longer they waited", () => {
      const now = 100_000;
      const gate = new FlowGate(limits(), true);
      const waits = [now + 5_000, now, now - 500, now - 3_000, now - 7_000, now - 60_000, now - 3_600_000];
      const answers = gate.ask(
        waits.map((due, i) => ask(`w${i}`, due)),
        now,
      );
      expect(grantedIds(answers)).toEqual([]);
      const delays = answers.map((a) => retryAtOf(a) - now);
      for (const d of delays) {
        expect(d).toBeGreaterThanOrEqual(PAUSED_RETRY_MS.min);
        expect(d).toBeLessThanOrEqual(PAUSED_RETRY_MS.max);
      }
      for (let i = 1; i < delays.length; i++) expect(delays[i]!).toBeGreaterThanOrEqual(delays[i - 1]!);
      expect(delays[0]).toBe(PAUSED_RETRY_MS.min);
      expect(delays.at(-1)).toBe(PAUSED_RETRY_MS.max);
      const view = gate.view(now);
      expect(view).toMatchObject({ paused: true, inFlight: 0, grantedTotal: 0, waiting: waits.length, throttledTotal: waits.length });
    });

    it("resuming (paused = false) grants again", () => {
      const gate = new FlowGate(limits({ parallelism: 5 }), true);
      const at = retryAtOf(gate.ask([ask("a", 0)], 1_000)[0]);
      expect(gate.view(at).grantedTotal).toBe(0);
      gate.paused = false;
      expect(grantedIds(gate.ask([ask("a", 0), ask("b", 500)], at))).toEqual(["a", "b"]);
      expect(gate.view(at)).toMatchObject({ paused: false, inFlight: 2, waiting: 0, grantedTotal: 2 });
    });
  });

  describe("throttle after a 429/503 Retry-After", () => {
    it("release with retryAfterMs holds the whole key until then, answering retryAt = throttledUntil, then grants", () => {
      const gate = new FlowGate(limits({ parallelism: 10 }));
      expect(grantedIds(gate.ask([ask("a", 0), ask("b", 0)], 0))).toEqual(["a", "b"]);
      gate.release("a", 100, 5_000);
      expect(gate.view(100).throttledUntil).toBe(5_100);
      const answers = gate.ask([ask("c", 50), ask("d", 60)], 200);
      expect(answers).toEqual([
        { executionId: "c", granted: false, retryAt: 5_100 },
        { executionId: "d", granted: false, retryAt: 5_100 },
      ]);
      // a shorter Retry-After does not shorten it
      gate.release("b", 300, 1_000);
      expect(gate.view(300).throttledUntil).toBe(5_100);
      expect(gate.ask([ask("c", 50)], 5_099)).toEqual([{ executionId: "c", granted: false, retryAt: 5_100 }]);
      expect(grantedIds(gate.ask([ask("c", 50), ask("d", 60)], 5_100))).toEqual(["c", "d"]);
      expect(gate.view(5_100).throttledUntil).toBeNull();
    });

    it("a longer Retry-After extends it, and a release of a lapsed permit still throttles", () => {
      const gate = new FlowGate(limits());
      expect(grantedIds(gate.ask([ask("a", 0, 100), ask("b", 0)], 0))).toEqual(["a", "b"]);
      gate.release("b", 10, 1_000);
      gate.release("a", 500, 3_000); // a's permit lapsed at 100
      expect(gate.view(500).throttledUntil).toBe(3_500);
      expect(retryAtOf(gate.ask([ask("c", 0)], 1_200)[0])).toBe(3_500);
    });

    it("a throttle given at construction (kept across a restart) holds until it passes", () => {
      const gate = new FlowGate(limits(), false, 2_000);
      expect(retryAtOf(gate.ask([ask("a", 0)], 1_000)[0])).toBe(2_000);
      expect(grantedIds(gate.ask([ask("a", 0)], 2_000))).toEqual(["a"]);
    });
  });

  describe("permits", () => {
    it("a permit not released lapses after holdMs and frees its slot", () => {
      const gate = new FlowGate(limits({ parallelism: 1 }));
      expect(grantedIds(gate.ask([ask("a", 0, 1_000)], 0))).toEqual(["a"]);
      expect(retryAtOf(gate.ask([ask("b", 10)], 999)[0])).toBeGreaterThan(999);
      expect(gate.view(999).inFlight).toBe(1);
      expect(gate.view(1_000).inFlight).toBe(0);
      expect(grantedIds(gate.ask([ask("b", 10)], 1_000))).toEqual(["b"]);
      gate.release("a", 1_200); // too late: changes nothing
      expect(gate.view(1_200).inFlight).toBe(1);
    });

    it("release frees the slot at once", () => {
      const gate = new FlowGate(limits({ parallelism: 1 }));
      expect(grantedIds(gate.ask([ask("a", 0)], 0))).toEqual(["a"]);
      gate.release("a", 30);
      expect(grantedIds(gate.ask([ask("b", 10)], 30))).toEqual(["b"]);
    });

    it("restore() counts against parallelism until released or lapsed", () => {
      const gate = new FlowGate(limits({ parallelism: 2 }));
      gate.restore("r1", 5_000, 3_000);
      gate.restore("r2", 8_000, 3_000);
      expect(gate.view(1_000).inFlight).toBe(2);
      expect(grantedIds(gate.ask([ask("a", 0)], 1_000))).toEqual([]);
      gate.release("r1", 1_500);
      expect(grantedIds(gate.ask([ask("a", 0), ask("b", 1)], 1_500))).toEqual(["a"]);
      gate.release("a", 1_600);
      expect(grantedIds(gate.ask([ask("b", 1)], 1_600))).toEqual(["b"]);
      expect(grantedIds(gate.ask([ask("c", 2)], 7_999))).toEqual([]);
      expect(grantedIds(gate.ask([ask("c", 2)], 8_000))).toEqual(["c"]); // r2 lapsed
    });

    it("asking again while holding a permit (a redelivered message) is refused and keeps the slot taken", () => {
      const gate = new FlowGate(limits({ parallelism: 1 }));
      expect(grantedIds(gate.ask([ask("a", 0)], 0))).toEqual(["a"]);
      expect(retryAtOf(gate.ask([ask("a", 0)], 10)[0])).toBeGreaterThan(10);
      expect(gate.view(10).inFlight).toBe(1);
    });
  });

  describe("waiters", () => {
    it("an earlier-due waiter still asking keeps its place against a later-due asker", () => {
      const gate = new FlowGate(limits({ parallelism: 1 }));
      expect(grantedIds(gate.ask([ask("a", 0)], 0))).toEqual(["a"]);
      const bRetry = retryAtOf(gate.ask([ask("b", 10)], 10)[0]);
      gate.release("a", 20);
      // the slot is free, but b (due earlier) is still asking: c waits
      expect(grantedIds(gate.ask([ask("c", 15)], 25))).toEqual([]);
      expect(grantedIds(gate.ask([ask("b", 10)], bRetry))).toEqual(["b"]);
    });

    it("a waiter keeps its first due time when it asks again with a later one", () => {
      const gate = new FlowGate(limits({ parallelism: 1 }));
      expect(grantedIds(gate.ask([ask("a", 0)], 0))).toEqual(["a"]);
      retryAtOf(gate.ask([ask("b", 10)], 10)[0]);
      retryAtOf(gate.ask([ask("c", 20)], 20)[0]);
      gate.release("a", 30);
      // b now claims a later due time than c, but its place is kept
      expect(grantedIds(gate.ask([ask("c", 20), ask("b", 50)], 40))).toEqual(["b"]);
    });

    it("a waiter that stops asking is forgotten after its retryAt + WAITER_GRACE_MS and no longer blocks later-due askers", () => {
      const gate = new FlowGate(limits({ parallelism: 1 }));
      expect(grantedIds(gate.ask([ask("a", 0)], 0))).toEqual(["a"]);
      const bRetry = retryAtOf(gate.ask([ask("b", 10)], 10)[0]);
      gate.release("a", 20);
      // b never asks again
      const forgetAt = bRetry + WAITER_GRACE_MS;
      expect(gate.view(forgetAt - 1).waiting).toBeGreaterThanOrEqual(1);
      expect(grantedIds(gate.ask([ask("c", 50)], forgetAt - 1))).toEqual([]);
      expect(grantedIds(gate.ask([ask("c", 50)], forgetAt))).toEqual(["c"]);
      expect(gate.view(forgetAt).waiting).toBe(0);
    });
  });

  it("view() reports inFlight, waiting, currentRate, grantedTotal, throttledTotal", () => {
    const l = limits({ rate: 2, periodMs: 1_000, parallelism: 3 });
    const gate = new FlowGate(l);
    expect(gate.view(0)).toEqual({
      limits: l,
      paused: false,
      throttledUntil: null,
      inFlight: 0,
      waiting: 0,
      currentRate: 0,
      grantedTotal: 0,
      throttledTotal: 0,
    });
    const answers = gate.ask([ask("a", 0), ask("b", 0), ask("c", 0)], 0);
    expect(grantedIds(answers)).toEqual(["a", "b"]);
    const cRetry = retryAtOf(answers[2]);
    expect(gate.view(0)).toMatchObject({ inFlight: 2, waiting: 1, currentRate: 2, grantedTotal: 2, throttledTotal: 1 });
    gate.release("a", 500);
    expect(gate.view(500)).toMatchObject({ inFlight: 1, waiting: 1, currentRate: 2 });
    gate.release("b", 600, 2_000);
    expect(gate.view(600)).toMatchObject({ inFlight: 0, throttledUntil: 2_600 });
    expect(gate.view(1_000)).toMatchObject({ currentRate: 0, grantedTotal: 2, throttledTotal: 1 });
    expect(gate.view(cRetry + WAITER_GRACE_MS - 1).waiting).toBe(1);
    expect(gate.view(cRetry + WAITER_GRACE_MS)).toMatchObject({ waiting: 0, throttledUntil: null });
  });
});

describe("FlowGate edge cases", () => {
  it("answers the same execution twice in one ask: granted once, the copy waits", () => {
    const gate = new FlowGate(limits());
    const [first, second] = gate.ask([ask("x", 0, 1_000), ask("x", 0, 1_000)], 0);
    expect(first).toEqual({ executionId: "x", granted: true });
    expect(second?.granted).toBe(false);
  });

  it("forgets a redelivered copy's wait when the delivery ends, so it does not hold the key", () => {
    const gate = new FlowGate(limits({ parallelism: 1 }));
    expect(grantedIds(gate.ask([ask("a", 0, 10_000)], 0))).toEqual(["a"]);
    expect(grantedIds(gate.ask([ask("a", 0, 10_000)], 10))).toEqual([]);
    gate.release("a", 50);
    expect(grantedIds(gate.ask([ask("b", 20, 10_000)], 60))).toEqual(["b"]);
  });
});

describe("origin keys (item 3): a job without a key is governed by its target's origin", () => {
  it.each([
    ["https://api.example.com/hooks/1?x=1#f", "origin:https://api.example.com"],
    ["https://API.Example.com:443/a", "origin:https://api.example.com"],
    ["http://api.example.com:80/a", "origin:http://api.example.com"],
    ["https://api.example.com:8443/a", "origin:https://api.example.com:8443"],
    ["http://127.0.0.1:8787/ok", "origin:http://127.0.0.1:8787"],
    ["http://[::1]:3000/", "origin:http://[::1]:3000"],
    ["https://user:pw@api.example.com/a", "origin:https://api.example.com"],
  ])("names %s's origin key %s: scheme, host and a port that is not the default", (url, key) => {
    expect(originKeyOf(url)).toBe(key);
    expect(isOriginKey(key)).toBe(true);
  });

  it("has no origin key for a URL without an origin", () => {
    expect(originKeyOf("not a url")).toBeNull();
    expect(originKeyOf("data:text/plain,hi")).toBeNull();
  });

  it("accepts only the one spelling of an origin key (the API names a key one way)", () => {
    for (const name of [
      "origin:https://API.example.com",
      "origin:https://api.example.com:443",
      "origin:https://api.example.com/",
      "origin:https://api.example.com/path",
      "origin:api.example.com",
      "origin:",
      "billing-api",
    ])
      expect(isOriginKey(name), name).toBe(false);
  });

  const ownKey = { key: "billing-api", rate: 50, periodSeconds: 2, parallelism: null };

  it("a job's own key wins: the origin key is not asked", () => {
    expect(governingKey(ownKey, "https://api.example.com/a", 10)).toEqual({
      key: "billing-api",
      limits: { rate: 50, periodMs: 2_000, parallelism: null },
    });
  });

  it("without one, its origin's key with only the origin parallelism", () => {
    expect(governingKey(null, "https://api.example.com/a", 10)).toEqual({
      key: "origin:https://api.example.com",
      limits: { rate: null, periodMs: 1_000, parallelism: 10 },
    });
  });

  it("origin parallelism 0 turns origin keys off: no key is asked", () => {
    expect(governingKey(null, "https://api.example.com/a", 0)).toBeNull();
    expect(governingKey(ownKey, "https://api.example.com/a", 0)?.key).toBe("billing-api");
  });
});
