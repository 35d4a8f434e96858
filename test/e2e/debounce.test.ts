/**
 * Debounce over real HTTP (issue 29 item 3, README "Debounce"): concurrent creates with one key on
 * the real local stack make one job, which is delivered once, signed, with the payload of the
 * create the key accepted last, after the window's delay; a create after it ran makes a new job.
 */
import { describe, expect, it, onTestFailed } from "vitest";
import { eventually, type JobView, sleep, stackForFile } from "./harness.js";

const PORT = 18993;

const local = stackForFile({ port: PORT });
const { receiver, sink } = local;

type Created = JobView & { debounce?: { key: string; replaced?: boolean; absorbed?: boolean } };

describe("debounce over the real local stack", () => {
  it("8 concurrent creates with one key: one job, delivered once with the last accepted payload; after it ran, a new job", async () => {
    onTestFailed(() => console.error(sink.text().slice(-4000)));
    const key = `e2e-${crypto.randomUUID()}`;
    const create = (n: number) =>
      local.api.createJob({ target: { url: `${receiver.url}/debounced`, body: { n } }, debounce: { key, delay: "2s" } });
    const answers = await Promise.all(Array.from({ length: 8 }, (_, n) => create(n)));
    expect(answers.map((a) => a.status).sort()).toEqual([200, 200, 200, 200, 200, 200, 200, 201]);
    const ids = new Set(answers.map((a) => (a.body as Created).id));
    expect(ids.size).toBe(1);
    const [id] = ids;
    // which create the key accepted last is proved in integration/debounce.test.ts; here: what runs is what the job holds
    const job = (await local.api.job(id!)).body as Created & { target: { body: string } };
    expect(job.debounce).toEqual({ key, mode: "trailing", delayMs: 2_000, maxDelayMs: null });
    const final = JSON.parse(job.target.body) as { n: number };

    const [delivered] = await eventually(
      "the debounced job is delivered",
      () => receiver.to("/debounced").length > 0 && receiver.to("/debounced"),
      20_000,
    );
    expect(delivered!.signatureError).toBeNull();
    expect(JSON.parse(delivered!.body)).toEqual(final);
    await sleep(1_500); // nothing else comes: the 7 replaced creates made no jobs of their own
    expect(receiver.to("/debounced")).toHaveLength(1);

    const after = await create(99);
    expect(after.status).toBe(201);
    expect((after.body as Created).id).not.toBe(id);
  });
});
