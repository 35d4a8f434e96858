/**
 * The wire across one release, both ways (issue 35 item 4; test/contract/README.md). During a
 * deploy the Worker and each Durable Object may run the previous release or this one for minutes,
 * in any pairing, so:
 * (a) what the previous release sent is taken by the code now and does what it did: each flow of
 *     wire-flows.ts runs with every fire message and every RPC replaced by the previous release's
 *     recorded one (real messages to the real consumer, real RPCs to real objects, its ids, tokens
 *     and times bound to the live flow's), and each caller reads the answer the previous release
 *     gave. Each answer's outcome must be the recorded one, every sample must be used, and each
 *     flow must still end as it did (a recorded claim of a dispatched execution leases it, a
 *     recorded offer is leased by a worker, ...);
 * (b) what the code now sends is read by the previous release: every fire message, every RPC's
 *     arguments and every answer of the same flows, run as they are, validates against the
 *     previous release's JSON Schemas (no RPC it lacks, no field it needs missing or retyped).
 * Part (c), that the schemas are a compatible evolution of the snapshot, is pure:
 * test/unit/wire-compat.test.ts.
 */
import { describe, expect, it } from "vitest";
import { PREVIOUS } from "../contract/previous";
import { fileClock } from "./helpers";
import { FLOWS, flowOf, HISTORY_DEPENDENT, installWireTap, type TapRun, wireEntries } from "./wire-flows";

const clock = fileClock(60 * 60_000);
const tap = installWireTap();
let current: TapRun | null = null;
const flow = flowOf(clock, tap, () => current!);
const FLOW_MS = 60_000;

describe(`the previous release (${PREVIOUS.release}) reads what the code now sends (part b)`, () => {
  const seen = new Set<string>();
  for (const [name, run] of Object.entries(FLOWS)) {
    it(
      `${name}: every message, RPC argument and answer validates against its JSON Schemas`,
      async () => {
        current = tap.begin({ kind: "check", previous: PREVIOUS.schema });
        try {
          await run(flow);
        } finally {
          tap.end();
        }
        for (const entry of current.seen) seen.add(entry);
        expect(current.problems).toEqual([]);
      },
      FLOW_MS,
    );
  }
  it("the flows reached every RPC of the wire and the fire message", () => {
    expect(wireEntries().filter((entry) => !seen.has(entry))).toEqual([]);
  });
});

describe(`the code now takes what the previous release (${PREVIOUS.release}) sent, and does what it did (part a)`, () => {
  it("the previous release's samples hold a call of each of its RPCs and a fire message", () => {
    const sampled = new Set(
      Object.values(PREVIOUS.samples.scenarios)
        .flat()
        .map((e) => (e.kind === "rpc" ? `${e.object}.${e.method}` : `message ${e.queue}`)),
    );
    const rpcs = Object.entries(PREVIOUS.schema.rpcs).flatMap(([object, methods]) => Object.keys(methods).map((m) => `${object}.${m}`));
    expect([...rpcs, "message fire"].filter((entry) => !sampled.has(entry))).toEqual([]);
  });
  for (const [name, events] of Object.entries(PREVIOUS.samples.scenarios)) {
    it(
      `${name}: the recorded messages and RPCs are taken, answered as before, and the flow ends as it did`,
      async () => {
        const run = FLOWS[name];
        if (!run) throw new Error(`the previous release recorded a flow "${name}" that is gone: keep it, or cut a release snapshot`);
        current = tap.begin({ kind: "replay", tape: structuredClone(events), noOutcome: HISTORY_DEPENDENT[name] ?? [] });
        try {
          await run(flow);
        } finally {
          tap.end();
        }
        expect(current.problems).toEqual([]);
        expect(current.unreplayed()).toEqual([]);
      },
      FLOW_MS,
    );
  }
});
