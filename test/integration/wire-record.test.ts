/**
 * Records a release's wire for the contract test: its JSON Schemas (src/protocol/wire.ts) and the
 * fire messages and RPCs its code produces in real flows (wire-flows.ts), written to
 * test/contract/<release>/. Skipped unless asked for, when a release is cut (test/contract/README.md):
 *
 *   VITE_WIRE_RECORD=<release> npx vitest run --project integration test/integration/wire-record.test.ts
 *
 * (add -u to write over a snapshot already there). The samples hold this run's ids and times; the
 * contract test binds them to its own flows' when it replays them.
 */
import { expect, it } from "vitest";
import { wireJsonSchema } from "../../src/protocol/wire";
import type { Samples } from "../contract/previous";
import { fileClock } from "./helpers";
import { FLOWS, flowOf, installWireTap, type TapRun } from "./wire-flows";

const release = (import.meta as unknown as { env: Record<string, string | undefined> }).env.VITE_WIRE_RECORD;

const clock = fileClock(60 * 60_000);
const tap = installWireTap();
let current: TapRun | null = null;
const flow = flowOf(clock, tap, () => current!);

it.runIf(release !== undefined)(
  "records this release's wire: its JSON Schemas and real flows' messages and RPCs",
  async () => {
    const samples: Samples = { release: release!, scenarios: {} };
    for (const [name, run] of Object.entries(FLOWS)) {
      current = tap.begin({ kind: "record" });
      try {
        await run(flow);
      } finally {
        tap.end();
      }
      samples.scenarios[name] = current.events;
    }
    await expect(`${JSON.stringify(wireJsonSchema(), null, 2)}\n`).toMatchFileSnapshot(`../contract/${release}/wire.schema.json`);
    await expect(`${JSON.stringify(samples, null, 2)}\n`).toMatchFileSnapshot(`../contract/${release}/samples.json`);
  },
  120_000,
);
