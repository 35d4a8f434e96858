/**
 * The history archive (issue "History never fills the database", part 2): with R2 bound as
 * ARCHIVE, the scan writes finished executions to it as gzip NDJSON per tenant and hour before the
 * purge deletes them from D1; GET /v1/executions/:id still answers them (archived: true), and
 * GET /v1/archive lists and serves the tenant's objects.
 * - a failed R2 write deletes nothing and the next scan writes it (losing nothing);
 * - a write that succeeded before D1's delete failed is written again with the same key and bytes;
 * - another tenant sees none of it.
 *
 * Time: one file-wide virtual clock; the scan is called with a `now` past the retention (its
 * cutoffs), fire-queue sends are captured and fed to the consumer by the test. Its own file: the
 * purge reaches every finished row of the file's storage.
 */
import { runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, onTestFinished } from "vitest";
import { type ArchivedExecution, gunzip, hourPrefix } from "../../src/archive/archive";
import { occurrenceId, timeOfId } from "../../src/core/id";
import { shardsOf } from "../../src/db/shards";
import { scan } from "../../src/scanner/scan";
import {
  api,
  CONFIG,
  captureFiresForFile,
  countAll,
  counters,
  type Execution,
  fileClock,
  fire,
  interceptD1Batch,
  KEYS,
  newExecution,
  receiverUrl,
  takeSent,
  uniquePath,
} from "./helpers";

const DAY = 86_400_000;
const clock = fileClock(10 * 60_000);
const sent = captureFiresForFile();
const archive = env.ARCHIVE!;

/** Runs one-off executions due now to their end (each target answers per its path) and writes their outcomes to D1. */
async function finish(executions: Execution[]): Promise<void> {
  clock.travelTo(Math.max(clock.at, ...executions.map((e) => e.exe.due_at)));
  const stubs = [...new Set(executions.map((e) => e.stub))];
  for (const stub of stubs) expect(await runDurableObjectAlarm(stub)).toBe(true);
  const messages = executions.flatMap((e) => takeSent(sent, e.exe.id));
  expect(messages).toHaveLength(executions.length);
  await fire(messages);
  clock.advance(CONFIG.FLUSH_DELAY_MS);
  for (const stub of stubs) await runDurableObjectAlarm(stub);
}

/** Every object of the archive (this file's storage), key to lines. */
async function objects(): Promise<Map<string, { bytes: Uint8Array; lines: ArchivedExecution[] }>> {
  const found = new Map<string, { bytes: Uint8Array; lines: ArchivedExecution[] }>();
  const listed = await archive.list({ prefix: "executions/" });
  for (const o of listed.objects) {
    const bytes = new Uint8Array(await (await archive.get(o.key))!.arrayBuffer());
    const lines = (await gunzip(bytes))
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as ArchivedExecution);
    found.set(o.key, { bytes, lines });
  }
  return found;
}

/** An R2 bucket like ARCHIVE whose put fails for the keys `failing` says. */
function failingArchive(failing: (key: string) => boolean): R2Bucket {
  return new Proxy(archive, {
    get(target, property) {
      if (property === "put")
        return (...args: Parameters<R2Bucket["put"]>) =>
          failing(args[0]) ? Promise.reject(new Error("injected: R2 unavailable")) : target.put(...args);
      const value = Reflect.get(target, property);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

describe("the history archive", () => {
  it("holds every finished execution before it leaves D1; a failed write delays the purge and loses nothing; GET reads it back", async () => {
    const okPath = uniquePath("ok");
    const ok = await newExecution({ target: { url: `${receiverUrl()}${okPath}` }, name: "invoice", labels: { team: "billing" } });
    const dead = await newExecution({ target: { url: `${receiverUrl()}${uniquePath("fail/400")}` }, retry: { maxAttempts: 1 } });
    await finish([ok, dead]);
    expect((await api(`/v1/executions/${ok.exe.id}`).then((r) => r.json())) as object).toMatchObject({ status: "succeeded" });
    // a recurring job's occurrence from two days ago, finished, in the shard of `ok`: the same purge
    // page, another hour, another object
    const shard = shardsOf(env).of(ok.job.id);
    const recurringJob = `job_${ok.job.id.slice(4, 14)}${ok.job.id.slice(14, 17)}${"0".repeat(13)}`;
    const occurrenceAt = clock.at - 2 * DAY;
    const occurrence = occurrenceId(recurringJob, occurrenceAt);
    await (env as unknown as Record<string, D1Database>)
      [shard.binding]!.prepare(
        `INSERT INTO occurrences (id, tenant, job_id, due_at, occurrence, status, attempts, last_http_status, finished_at, attempt_log)
       VALUES (?, 'acme', ?, ?, 3, 'succeeded', 1, 204, ?, ?)`,
      )
      .bind(
        occurrence,
        recurringJob,
        occurrenceAt,
        occurrenceAt + 40,
        JSON.stringify([
          {
            attempt: 1,
            dueAt: occurrenceAt,
            startedAt: occurrenceAt + 12,
            finishedAt: occurrenceAt + 40,
            outcome: "succeeded",
            httpStatus: 204,
            error: null,
          },
        ]),
      )
      .run();
    expect(shardsOf(env).of(occurrence)).toBe(shard);
    const later = clock.at + CONFIG.HISTORY_RETENTION_MS + DAY;
    const inD1 = async () =>
      (await countAll("SELECT count(*) AS n FROM jobs WHERE id IN (?, ?)", ok.job.id, dead.job.id)) +
      (await countAll("SELECT count(*) AS n FROM occurrences WHERE id = ?", occurrence));
    expect(await inD1()).toBe(3);

    // R2 fails the occurrence's object, takes the other of the same page: nothing of it leaves D1
    const down = await scan({ ...env, ARCHIVE: failingArchive((key) => key.startsWith(hourPrefix("acme", occurrenceAt))) } as Env, later);
    expect(down.archiveFailedShards).toEqual([shard.index]);
    expect(down.failedShards).toEqual([]);
    expect(await inD1()).toBe(shardsOf(env).of(dead.job.id) === shard ? 3 : 2);
    expect((await api(`/v1/executions/${ok.exe.id}`).then((r) => r.json())) as object).not.toHaveProperty("archived");
    expect((await counters()).archive_write_failures_total).toBeGreaterThan(0);

    // R2 answers, D1's delete fails: the objects are written, the rows stay
    const before = await objects();
    let failDelete = true;
    const deleteFails = interceptD1Batch(async (statements, run) => {
      const deleting = statements.some((s) => /^delete/i.test((s as unknown as { statement: string }).statement ?? ""));
      if (deleting && failDelete) throw new Error("injected: D1 unavailable");
      return run(statements);
    });
    onTestFinished(() => deleteFails.mockRestore());
    const noDelete = await scan(env, later);
    deleteFails.mockRestore();
    failDelete = false;
    expect(noDelete.failedShards).toContain(shard.index);
    expect(await inD1()).toBe(shardsOf(env).of(dead.job.id) === shard ? 3 : 2);
    const written = await objects();
    expect(written.size).toBeGreaterThan(before.size);

    // the next scan writes the same objects again (same keys, same bytes), then deletes
    const report = await scan(env, later);
    expect(report.failedShards).toEqual([]);
    expect(report.archiveFailedShards).toEqual([]);
    expect(report.archived.executions).toBeGreaterThanOrEqual(2);
    expect(await inD1()).toBe(0);
    const after = await objects();
    expect([...after.keys()]).toEqual([...written.keys()]);
    for (const [key, o] of written) expect(after.get(key)!.bytes, key).toEqual(o.bytes);

    // the layout: a tenant's hour of the execution id's time; one line per execution
    const lines = [...after.values()].flatMap((o) => o.lines);
    expect(lines.filter((l) => [ok.exe.id, dead.exe.id, occurrence].includes(l.id))).toHaveLength(3);
    const keyOf = (id: string) => [...after].find(([, o]) => o.lines.some((l) => l.id === id))![0];
    expect(keyOf(ok.exe.id).startsWith(hourPrefix("acme", timeOfId(ok.exe.id)!))).toBe(true);
    expect(keyOf(occurrence).startsWith(hourPrefix("acme", occurrenceAt))).toBe(true);
    expect(keyOf(occurrence)).toMatch(
      /^executions\/tenant=acme\/date=\d{4}-\d{2}-\d{2}\/hour=\d{2}\/exe_[0-9a-z]{26}\.[0-9a-f]{16}\.ndjson\.gz$/,
    );
    expect(lines.find((l) => l.id === ok.exe.id)).toMatchObject({
      tenant: "acme",
      kind: "one-off",
      jobId: ok.job.id,
      jobName: "invoice",
      labels: { team: "billing" },
      status: "succeeded",
      attempts: 1,
      lastHttpStatus: 200,
      attemptLog: [expect.objectContaining({ attempt: 1, outcome: "succeeded", httpStatus: 200 })],
    });
    expect(lines.find((l) => l.id === dead.exe.id)).toMatchObject({ status: "dead", lastHttpStatus: 400, deadReason: expect.any(String) });
    expect(lines.find((l) => l.id === occurrence)).toMatchObject({
      kind: "occurrence",
      jobId: recurringJob,
      status: "succeeded",
      lastHttpStatus: 204,
    });
    expect((await counters()).archived_executions_total).toBeGreaterThanOrEqual(3);

    // read back by id: from the archive, said so
    for (const [id, status] of [
      [ok.exe.id, "succeeded"],
      [dead.exe.id, "dead"],
      [occurrence, "succeeded"],
    ] as const) {
      const response = await api(`/v1/executions/${id}`);
      expect(response.status, id).toBe(200);
      expect(await response.json(), id).toMatchObject({ id, status, archived: true, archiveKey: keyOf(id) });
    }
    // another tenant: none of it
    expect((await api(`/v1/executions/${ok.exe.id}`, {}, KEYS.globex)).status).toBe(404);
    expect(((await (await api("/v1/archive", {}, KEYS.globex)).json()) as { objects: unknown[] }).objects).toEqual([]);
    const foreign = await api(`/v1/archive/object?key=${encodeURIComponent(keyOf(ok.exe.id))}`, {}, KEYS.globex);
    expect(foreign.status).toBe(404);

    // the tenant lists its objects and downloads one as stored
    const list = (await (await api("/v1/archive")).json()) as { objects: { key: string; executions: number }[]; nextCursor: string | null };
    expect(list.objects.map((o) => o.key).sort()).toEqual([...after.keys()].sort());
    const download = await api(`/v1/archive/object?key=${encodeURIComponent(keyOf(ok.exe.id))}`);
    expect(download.status).toBe(200);
    expect(download.headers.get("content-type")).toBe("application/gzip");
    expect(new Uint8Array(await download.arrayBuffer())).toEqual(after.get(keyOf(ok.exe.id))!.bytes);
    const day = keyOf(ok.exe.id).split("/")[2]!;
    const ofDay = (await (await api(`/v1/archive?prefix=${encodeURIComponent(`${day}/`)}`)).json()) as { objects: { key: string }[] };
    expect(ofDay.objects.map((o) => o.key)).toContain(keyOf(ok.exe.id));
    expect((await api("/v1/archive?prefix=..%2F")).status).toBe(400);
    expect((await api("/v1/archive?limit=0")).status).toBe(400);
    // a cursor the API did not hand out is a 400 naming it, as on every other list (issue 36, item 10:
    // it was a 200 with an empty page, which a paging client took for the end)
    for (const cursor of ["garbage", "not-a-cursor", "a1.", "a1.!!!"]) {
      const bad = await api(`/v1/archive?cursor=${encodeURIComponent(cursor)}`);
      expect(bad.status, cursor).toBe(400);
      expect(await bad.json(), cursor).toMatchObject({ error: { field: "cursor" } });
    }
    // page by page with the cursors it hands out: every object once
    const paged: string[] = [];
    let cursor: string | null = null;
    for (let page = 0; page < 20; page++) {
      const res = (await (await api(`/v1/archive?limit=1${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`)).json()) as {
        objects: { key: string }[];
        nextCursor: string | null;
      };
      paged.push(...res.objects.map((o) => o.key));
      cursor = res.nextCursor;
      if (cursor === null) break;
    }
    expect(paged.sort()).toEqual([...after.keys()].sort());
  });

  it("a dead job redriven while its page is being archived stays in D1 (active): the delete checks it is still finished", async () => {
    const dead = await newExecution({ target: { url: `${receiverUrl()}${uniquePath("fail/400")}` }, retry: { maxAttempts: 1 } });
    await finish([dead]);
    const later = clock.at + CONFIG.HISTORY_RETENTION_MS + DAY;
    let redriven = false;
    const redriveDuringPut = new Proxy(archive, {
      get(target, property) {
        if (property === "put")
          return async (...args: Parameters<R2Bucket["put"]>) => {
            if (!redriven) {
              redriven = true;
              expect((await api(`/v1/executions/${dead.exe.id}/redrive`, { method: "POST" })).status).toBe(202);
            }
            return target.put(...args);
          };
        const value = Reflect.get(target, property);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const report = await scan({ ...env, ARCHIVE: redriveDuringPut } as Env, later);
    expect(redriven).toBe(true);
    expect(report.archived.executions).toBeGreaterThanOrEqual(1);
    // the row was archived as dead, but the redrive made it live again: not deleted
    expect(await countAll("SELECT count(*) AS n FROM jobs WHERE id = ? AND status = 'active'", dead.job.id)).toBe(1);
    expect(await api(`/v1/executions/${dead.exe.id}`).then((r) => r.json())).not.toHaveProperty("archived");
  });

  it("without an archive bound, the purge deletes history and GET no longer finds it", async () => {
    const ok = await newExecution({ target: { url: `${receiverUrl()}${uniquePath("ok")}` } });
    await finish([ok]);
    const before = (await objects()).size;
    const report = await scan({ ...env, ARCHIVE: undefined } as Env, clock.at + CONFIG.HISTORY_RETENTION_MS + DAY);
    expect(report.archived.executions).toBe(0);
    expect(await countAll("SELECT count(*) AS n FROM jobs WHERE id = ?", ok.job.id)).toBe(0);
    expect((await api(`/v1/executions/${ok.exe.id}`)).status).toBe(404);
    expect((await objects()).size).toBe(before);
  });
});
