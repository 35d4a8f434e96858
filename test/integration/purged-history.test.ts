/**
 * What the purge of finished history must leave true (issue 36, defects 2 and 3), through the real
 * paths: the API, the bucket's alarm, the fire consumer, the flush to D1 and the scan's purge, by
 * the size watermark (HISTORY_MAX_BYTES) and by the retention (HISTORY_RETENTION_MS), with the
 * archive bound and without.
 * - A dead letter listed is redrivable: the watermark never purges a dead one-off job's row (its
 *   redrive needs the job), so GET /v1/dlq never lists a dead execution whose redrive is a 404.
 * - A key replayed within the dedupe window never runs a job twice: once the original job's row
 *   was purged, a retried keyed create is answered from the archive (200, the original id, finished)
 *   or, the archive not holding it, with `409 idempotency_job_purged`; never a new `active` job,
 *   never a second delivery under the same webhook-id. A create whose insert failed is still stored
 *   by its retry when its key was claimed after the shard's purge mark (db/purge-mark.ts purgeMark).
 *
 * Time: one file-wide virtual clock; fire-queue sends are captured and fed to the consumer by the
 * test. Its own file: the purges it provokes reach every finished row of the file's storage.
 */
import { createExecutionContext, runDurableObjectAlarm, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { oneOffExecutionId } from "../../src/core/id";
import worker from "../../src/platform/local-worker";
import { scan } from "../../src/scanner/scan";
import { assertDocumented } from "./conformance";
import {
  bucketStub,
  CONFIG,
  captureFiresForFile,
  countAll,
  type Execution,
  executionOf,
  fileClock,
  fire,
  interceptD1Batch,
  KEYS,
  received,
  receiverUrl,
  takeSent,
  uniquePath,
} from "./helpers";

const MINUTE = 60_000;
const clock = fileClock(10 * MINUTE);
const sent = captureFiresForFile();

/** The Worker's settings for one test: the file's, with these overrides (the scan and the API read the same). */
const withSettings = (settings: Record<string, string | undefined>) => ({ ...env, ...settings }) as Env;
/** A watermark below any shard's size: every round of the watermark purge runs, down to a minute of history kept. */
const WATERMARK = { HISTORY_MAX_BYTES: "1" };
const NO_ARCHIVE = { ARCHIVE: undefined };

/** Calls the Worker with `testEnv`; every answer must be one the OpenAPI document lists. */
async function call(testEnv: Env, path: string, init: { method?: string; body?: unknown; headers?: Record<string, string> } = {}) {
  const ctx = createExecutionContext();
  const url = `http://scheduler${path}`;
  const response = await worker.fetch(
    new Request(url, {
      method: init.method ?? (init.body === undefined ? "GET" : "POST"),
      headers: { authorization: `Bearer ${KEYS.acme}`, "content-type": "application/json", ...init.headers },
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
    }),
    testEnv,
    ctx,
  );
  await waitOnExecutionContext(ctx);
  await assertDocumented(init.method ?? (init.body === undefined ? "GET" : "POST"), url, response);
  return response;
}

/** Creates a one-off job due now through `testEnv`'s Worker; the execution, its bucket and the receiver path. */
async function create(testEnv: Env, kind: string, extra: { body?: Record<string, unknown>; key?: string } = {}) {
  const path = uniquePath(kind);
  const body = { target: { url: `${receiverUrl()}${path}` }, ...extra.body };
  const post = () => call(testEnv, "/v1/jobs", { body, headers: extra.key ? { "idempotency-key": extra.key } : {} });
  const created = await post();
  expect(created.status).toBe(201);
  const job = (await created.json()) as { id: string; status: string };
  const exe = (await executionOf(job.id))!;
  return { job, exe, stub: bucketStub(exe.bucket), path, post };
}

/** Runs each execution's bucket alarm at its due time, hands what was sent to the consumer, and writes the outcomes to D1. */
async function runToTheEnd(executions: Pick<Execution, "exe" | "stub">[]): Promise<void> {
  clock.travelTo(Math.max(clock.at, ...executions.map((e) => e.exe.due_at)));
  const stubs = [...new Set(executions.map((e) => e.stub))];
  for (const stub of stubs) await runDurableObjectAlarm(stub);
  const messages = executions.flatMap((e) => takeSent(sent, e.exe.id));
  expect(messages).toHaveLength(executions.length);
  const result = await fire(messages);
  expect(result.retryMessages).toEqual([]);
  clock.advance(CONFIG.FLUSH_DELAY_MS);
  for (const stub of stubs) await runDurableObjectAlarm(stub);
}

/** Every alarm of the file's buckets, at the clock's time, and what they send through the consumer: nothing left to deliver. */
async function deliverWhatIsDue(): Promise<void> {
  for (let b = 0; b < CONFIG.BUCKETS; b++) await runDurableObjectAlarm(bucketStub(b));
  const messages = sent.splice(0);
  if (messages.length > 0) await fire(messages);
}

const inD1 = (jobId: string) => countAll("SELECT count(*) AS n FROM jobs WHERE id = ?", jobId);

describe("the watermark keeps what a dead letter needs (issue 36, defect 2)", () => {
  for (const [archived, settings] of [
    ["with the archive", WATERMARK],
    ["without an archive", { ...WATERMARK, ...NO_ARCHIVE }],
  ] as const) {
    it(`${archived}: a dead one-off execution listed in GET /v1/dlq stays redrivable (202) and runs again; finished history beside it goes`, async () => {
      const testEnv = withSettings(settings);
      // dies on its only attempt (503), then answers 200
      const dead = await create(testEnv, "flaky/1", { body: { retry: { maxAttempts: 1 } } });
      const done = await create(testEnv, "ok");
      await runToTheEnd([dead, done]);
      expect(await received(dead.path)).toHaveLength(1);

      // minutes later the shard is above its watermark: the watermark purges history a minute old
      clock.advance(10 * MINUTE);
      const report = await scan(testEnv, clock.at);
      expect(report.failedShards).toEqual([]);
      expect(report.trimmed).toBeGreaterThan(0);
      expect(await inD1(done.job.id)).toBe(0); // the watermark did purge, oldest first

      const listed = (await (await call(testEnv, "/v1/dlq?limit=200")).json()) as { executions: { id: string }[] };
      expect(listed.executions.map((e) => e.id)).toContain(dead.exe.id);
      const redriven = await call(testEnv, `/v1/executions/${dead.exe.id}/redrive`, { method: "POST" });
      expect(redriven.status).toBe(202);

      // it runs again: delivered a second time, and succeeds
      await deliverWhatIsDue();
      expect(await received(dead.path)).toHaveLength(2);
      clock.advance(CONFIG.FLUSH_DELAY_MS);
      await runDurableObjectAlarm(dead.stub);
      const execution = (await (await call(testEnv, `/v1/executions/${dead.exe.id}`)).json()) as { status: string };
      expect(execution.status).toBe("succeeded");
    });
  }
});

describe("a retried keyed create after the purge took its job (issue 36, defect 3)", () => {
  const cases = [
    ["the watermark, with the archive", WATERMARK, true],
    ["the watermark, without an archive", { ...WATERMARK, ...NO_ARCHIVE }, false],
    ["a short HISTORY_RETENTION_MS, with the archive", { HISTORY_RETENTION_MS: String(5 * MINUTE) }, true],
    ["a short HISTORY_RETENTION_MS, without an archive", { HISTORY_RETENTION_MS: String(5 * MINUTE), ...NO_ARCHIVE }, false],
  ] as const;
  for (const [purge, settings, archive] of cases) {
    it(`purged by ${purge}: within the dedupe window it never creates or runs the job again`, async () => {
      const testEnv = withSettings(settings);
      const key = `purged-${crypto.randomUUID()}`;
      const keyed = await create(testEnv, "ok", { key, body: { name: "invoice", labels: { team: "billing" } } });
      await runToTheEnd([keyed]);
      expect(await received(keyed.path)).toHaveLength(1);

      clock.advance(10 * MINUTE); // well within the 24 h window
      const report = await scan(testEnv, clock.at);
      expect(report.failedShards).toEqual([]);
      expect(await inD1(keyed.job.id)).toBe(0);

      const replay = await keyed.post();
      if (archive) {
        // the original job as it was: its id, finished, its settings as sent
        expect(replay.status).toBe(200);
        expect(await replay.json()).toMatchObject({
          id: keyed.job.id,
          status: "completed",
          nextRunAt: null,
          name: "invoice",
          labels: { team: "billing" },
          idempotencyKey: key,
        });
      } else {
        expect(replay.status).toBe(409);
        expect(await replay.json()).toMatchObject({ error: { code: "idempotency_job_purged", field: "idempotencyKey" } });
      }
      // nothing was created again, and nothing is delivered again under its webhook-id
      expect(await inD1(keyed.job.id)).toBe(0);
      clock.advance(MINUTE);
      await deliverWhatIsDue();
      const deliveries = await received(keyed.path);
      expect(deliveries).toHaveLength(1);
      expect(deliveries[0]!.headers["webhook-id"]).toBe(oneOffExecutionId(keyed.job.id));
    });
  }
});

describe("a keyed create whose insert failed, retried (the purge's mark is no loss)", () => {
  it("claimed after the shard's purge mark, its retry stores and runs it once; claimed before, the retry answers 409 idempotency_job_purged", async () => {
    const testEnv = withSettings(WATERMARK);
    const failedCreate = async (key: string, path: string) => {
      const body = { target: { url: `${receiverUrl()}${path}` } };
      const post = () => call(testEnv, "/v1/jobs", { body, headers: { "idempotency-key": key } });
      const down = interceptD1Batch(() => Promise.reject(new Error("injected: D1 unavailable")));
      try {
        expect((await post()).status).toBe(503); // the shard did not answer: send it again
      } finally {
        down.mockRestore();
      }
      return post;
    };
    // a key claimed, its insert failed, and minutes later the watermark purge ran: the retry cannot
    // tell a job that never was from one purged, and runs neither
    const beforePath = uniquePath("ok");
    const retryBefore = await failedCreate(`before-${crypto.randomUUID()}`, beforePath);
    clock.advance(10 * MINUTE);
    expect((await scan(testEnv, clock.at)).failedShards).toEqual([]);
    const refused = await retryBefore();
    expect(refused.status).toBe(409);
    expect(await refused.json()).toMatchObject({ error: { code: "idempotency_job_purged" } });

    // claimed after that purge's mark: the retry stores the job under the claimed id, and it runs once
    const afterPath = uniquePath("ok");
    const retryAfter = await failedCreate(`after-${crypto.randomUUID()}`, afterPath);
    const stored = await retryAfter();
    expect(stored.status).toBe(200);
    const job = (await stored.json()) as { id: string; status: string };
    expect(job.status).toBe("active");
    expect(await inD1(job.id)).toBe(1);
    const again = await retryAfter();
    expect(again.status).toBe(200);
    expect(((await again.json()) as { id: string }).id).toBe(job.id);
    await deliverWhatIsDue();
    expect(await received(afterPath)).toHaveLength(1);
    expect(await received(beforePath)).toHaveLength(0);
  });
});
