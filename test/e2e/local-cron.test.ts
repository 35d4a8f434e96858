/**
 * The local stack runs the cron trigger as production does (scripts/lib/cron.mjs; wrangler dev
 * never fires it by itself): a one-off job due beyond the lookahead is not handed to its bucket
 * when it is created, only by the scan a cron run makes, and it still fires on time. Before the
 * local cron, such a job was never delivered (a 185 s delay still pending 90 s after its due time).
 */
import { join } from "node:path";
import { describe, expect, it, onTestFailed } from "vitest";
import { cadenceOf, readCrons } from "../../scripts/lib/cron.mjs";
import { ROOT } from "../../scripts/local-env.mjs";
import { CLOCK_TOLERANCE_MS, eventually, report, stackForFile } from "./harness.js";

const PORT = 18840;
/**
 * The lookahead, down from 180 s so the test takes about a minute and a half. It must exceed the
 * scan period (60 s: wrangler.toml's "* * * * *"): a job due more than LOOKAHEAD_MS after its
 * create is handed to its bucket only by a scan at an instant in [due - LOOKAHEAD_MS, due), and
 * with LOOKAHEAD_MS = 70 s the part [due - 70 s, due - 10 s] of it, 60 s long, always holds a minute
 * boundary: one scan hands the job over at least 10 s before it is due, whatever second the test
 * starts at. With a lookahead of 60 s or less, a job could be due before any scan saw it.
 */
const LOOKAHEAD_MS = 70_000;
/** beyond the lookahead, so the create does not hand it over; within it plus a few seconds, so the run is short */
const DUE_IN_MS = 78_000;

const local = stackForFile({ port: PORT, vars: { LOOKAHEAD_MS: String(LOOKAHEAD_MS) } });
const { receiver, sink } = local;

describe("the local stack's cron trigger", () => {
  it("hands a job due beyond the lookahead to its bucket by a scan, and it fires within 2 s of its due time", async () => {
    onTestFailed(() => console.error(sink.text().slice(-4000)));
    // precondition: the scan runs every minute (what LOOKAHEAD_MS above was chosen against)
    expect(readCrons(join(ROOT, "wrangler.toml")).map((cron) => cadenceOf(cron))).toContain("every minute");

    const dueAt = Date.now() + DUE_IN_MS;
    const created = await local.api.createJob({
      target: { url: `${receiver.url}/cron`, body: { far: true } },
      runAt: new Date(dueAt).toISOString(),
    });
    expect(created.status).toBe(201);
    const jobId = created.body.id;
    const execution = async () => (await local.api.executions(jobId)).body.executions[0];

    // right after the create: still only in D1 ("pending"; its bucket would show it "scheduled"),
    // and no scan could have pulled it yet (it is due beyond the lookahead until dueAt - LOOKAHEAD_MS)
    const first = await execution();
    const readAt = Date.now();
    expect(readAt).toBeLessThan(dueAt - LOOKAHEAD_MS);
    expect(first?.status).toBe("pending");

    // a cron run's scan hands it over, once it is within the lookahead, before it is due
    const handedAt = await eventually(
      "the job's bucket holds its execution",
      async () => ((await execution())?.status === "scheduled" ? Date.now() : undefined),
      dueAt - Date.now(),
      250,
    );
    expect(handedAt).toBeGreaterThanOrEqual(dueAt - LOOKAHEAD_MS);

    const [arrival] = await eventually(
      "the job is delivered",
      () => receiver.to("/cron").length > 0 && receiver.to("/cron"),
      dueAt - Date.now() + 10_000,
    );
    const lagMs = arrival!.at - dueAt;
    // the scheduler counts the hand-over as the scan's (scanner_recovered_total), not the create's
    const recovered = await eventually(
      "the scan's hand-over is counted",
      async () => {
        const n = (await local.api.metrics()).body.counters.scanner_recovered_total ?? 0;
        return n >= 1 ? n : undefined;
      },
      15_000,
      250,
    );
    // the cron's runs, as the stack's log shows them: at minute boundaries, each answered "ok"
    const runs = sink.text().match(/\[local cron\] cron "\* \* \* \* \*" at \S+: ran in \d+ ms/g) ?? [];

    report("local-cron", {
      lookaheadMs: LOOKAHEAD_MS,
      dueInMs: DUE_IN_MS,
      handedOverBeforeDueMs: dueAt - handedAt,
      lagMs,
      scannerRecovered: recovered,
      cronRuns: runs.length,
    });
    expect(arrival!.signatureError).toBeNull();
    expect(arrival!.attempt).toBe(1);
    expect(arrival!.body).toBe(JSON.stringify({ far: true }));
    expect(lagMs).toBeGreaterThanOrEqual(-CLOCK_TOLERANCE_MS);
    expect(lagMs).toBeLessThan(2_000);
    expect(runs.length).toBeGreaterThanOrEqual(1);
    for (const run of runs) expect(run).toMatch(/at \d{4}-\d\d-\d\dT\d\d:\d\d:00\.000Z: ran/);
    expect(receiver.to("/cron")).toHaveLength(1);
  });
});
