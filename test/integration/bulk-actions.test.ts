/**
 * Bulk actions (issue 16): POST /v1/jobs/cancel, /pause, /resume by ids or by a filter answer 202
 * with an action that runs in pages in the background (the BulkAction object's alarm);
 * GET /v1/actions/:id shows its progress. Proves: the filter acts on exactly the jobs it lists,
 * across pages; a refusal is counted per job with the code a single request gets; an empty filter
 * is refused; the same Idempotency-Key answers the same action and changes nothing twice; another
 * tenant sees neither the action nor its jobs. Jobs here are due an hour ahead: nothing fires,
 * except where a job finishes while a page runs (issue 36 item 5): its bulk cancel or pause then
 * does what its single request does in that state (refused once the completion is in D1, the job
 * left completed; changed while the outcome is only in its bucket), whether by ids or by a filter.
 */
import { runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { ACTION_RETENTION_MS, bulkActionName, PAGE } from "../../src/actions/bulk-action";
import { occurrenceId, oneOffExecutionId } from "../../src/core/id";
import {
  api,
  bucketStub,
  captureFiresForFile,
  createJob,
  dispatchOf,
  fileClock,
  fire,
  type JobJson,
  jobRow,
  KEYS,
  newExecution,
  receiverUrl,
  runAlarm,
  sentFor,
} from "./helpers";

const clock = fileClock(10 * 60_000);
const sent = captureFiresForFile();
const dispatch = dispatchOf(clock, sent);

interface Action {
  id: string;
  kind: string;
  status: "running" | "done";
  matched: number;
  done: number;
  failed: number;
  failures: { id: string; code: string }[];
}

/** A one-off job whose only attempt is answered 400: dead (permanent), its dead letter in D1. */
async function deadExecution() {
  const e = await newExecution({ target: { url: `${receiverUrl()}/fail/400` }, retry: { maxAttempts: 1 } });
  await fire([await dispatch(e)]);
  await clock.flush(e.stub);
  return e;
}

const target = () => ({ url: `${receiverUrl()}/ok` });

async function start(kind: string, body: unknown, headers: Record<string, string> = {}, key: string = KEYS.acme) {
  return api(`/v1/jobs/${kind}`, { method: "POST", body, headers }, key);
}

const redrive = (body: unknown) => api("/v1/dlq/redrive", { method: "POST", body });

/** Runs the action's alarm page after page until it is done (bounded), and answers it as the API shows it. */
async function finished(id: string, tenant = "acme", key: string = KEYS.acme): Promise<Action> {
  const stub = env.BULK_ACTION.getByName(bulkActionName(tenant, id));
  for (let page = 0; page < 50 && (await stub.view())?.status !== "done"; page++) await runDurableObjectAlarm(stub);
  const res = await api(`/v1/actions/${id}`, {}, key);
  expect(res.status).toBe(200);
  return (await res.json()) as Action;
}

async function statusOf(id: string): Promise<string> {
  return ((await (await api(`/v1/jobs/${id}`)).json()) as JobJson).status;
}

/**
 * Runs `meanwhile` once, just before the first bucket call of the page (its first job's change
 * reaching its bucket): what happens there happens after the page read its jobs and before it
 * changes the next ones. ran() answers whether it ran (and throws what it threw: the page's sync
 * would only log it); restore() undoes it.
 */
function beforeFirstApply(meanwhile: () => Promise<void>): { ran: () => boolean; restore: () => void } {
  const namespace = env.BUCKET as unknown as { getByName(name: string): Record<string, (...args: unknown[]) => Promise<unknown>> };
  const original = namespace.getByName.bind(namespace);
  let ran = false;
  let failure: unknown;
  const spy = vi.spyOn(namespace, "getByName").mockImplementation((name: string) => {
    const real = original(name);
    return new Proxy(real, {
      get(target, prop) {
        if (prop !== "applyJobs" || ran) return Reflect.get(target, prop);
        return async (...args: unknown[]) => {
          ran = true;
          // what runs meanwhile gets the buckets' own stubs (a proxy is no stub to runInDurableObject,
          // and workerd refuses a method called on it)
          spy.mockRestore();
          await meanwhile().catch((error: unknown) => {
            failure = error;
          });
          return real.applyJobs!(...args);
        };
      },
    });
  });
  return {
    ran: () => {
      if (failure) throw failure;
      return ran;
    },
    restore: () => spy.mockRestore(),
  };
}

describe("bulk actions racing single changes (issue 24)", () => {
  it("a bulk cancel whose jobs are PATCHed while its page runs still cancels every one (it was done with jobs active, counted as conflict)", async () => {
    const jobs: JobJson[] = [];
    for (let i = 0; i < 3; i++) jobs.push(await createJob({ target: target(), delay: "1h", name: `race-${i}` }));
    // while the page applies the first cancel in its bucket, the other two are renamed: their
    // versions move past the ones the page read
    const race = beforeFirstApply(async () => {
      for (const job of jobs.slice(1)) {
        const res = await api(`/v1/jobs/${job.id}`, { method: "PATCH", body: { name: `${job.name}-renamed` } });
        expect(res.status).toBeLessThan(300);
      }
    });
    try {
      const res = await start("cancel", { ids: jobs.map((j) => j.id) });
      expect(res.status).toBe(202);
      const action = await finished(((await res.json()) as Action).id);
      expect(race.ran(), "the page's first change reached a bucket").toBe(true);
      expect(action).toMatchObject({ status: "done", matched: 3, done: 3, failed: 0, failures: [] });
    } finally {
      race.restore();
    }
    for (const job of jobs) expect(await statusOf(job.id)).toBe("canceled");
  });
});

describe("bulk actions racing a job's completion (issue 36 item 5)", () => {
  type Kind = "cancel" | "pause";
  type Ending = "maxOccurrences" | "endAt";
  /** what the single request answers a finished job (DELETE /v1/jobs/:id, POST /v1/jobs/:id/pause) */
  const REFUSAL: Record<Kind, string> = { cancel: "not_cancelable", pause: "not_active" };
  const single = (kind: Kind, id: string) =>
    kind === "cancel" ? api(`/v1/jobs/${id}`, { method: "DELETE" }) : api(`/v1/jobs/${id}/pause`, { method: "POST" });
  /** a job the action changes and that does not finish: a one-off job due later, a yearly one */
  const lasting = (kind: Kind, labels: Record<string, string>) =>
    createJob({ target: target(), labels, ...(kind === "cancel" ? { delay: "2h" } : { cron: "0 0 1 1 *" }) });
  /**
   * A job whose one execution is due within a minute and ends it: a one-off job, or a recurring one
   * whose schedule ends after its first occurrence (by maxOccurrences or by endAt).
   */
  function finishing(kind: Kind, labels: Record<string, string>, ending: Ending) {
    if (kind === "cancel") return createJob({ target: target(), labels, delay: "1m" });
    const first = Math.ceil(clock.at / 60_000) * 60_000; // "* * * * *": the next whole minute
    const end = ending === "maxOccurrences" ? { maxOccurrences: 1 } : { endAt: new Date(first + 30_000).toISOString() };
    return createJob({ target: target(), labels, cron: "* * * * *", ...end });
  }

  /** Runs each job's one execution to success (its buckets' alarms, the consumer); with `flushed`, its outcome reaches D1. */
  async function runToSuccess(jobs: JobJson[], flushed: boolean): Promise<void> {
    const rows = await Promise.all(jobs.map(async (j) => (await jobRow(j.id))!));
    clock.travelTo(Math.max(clock.at, ...rows.map((r) => r.next_run_at!)));
    const buckets = new Set(rows.map((r) => r.bucket));
    for (const bucket of buckets) await runAlarm(bucketStub(bucket));
    const messages = rows.flatMap((r) => sentFor(sent, r.cron === null ? oneOffExecutionId(r.id) : occurrenceId(r.id, r.next_run_at!)));
    expect(messages).toHaveLength(jobs.length);
    expect((await fire(messages)).explicitAcks).toHaveLength(jobs.length);
    if (flushed) {
      for (const bucket of buckets) await clock.flush(bucketStub(bucket));
      for (const j of jobs) expect(await statusOf(j.id)).toBe("completed");
    }
  }

  it.each<[Kind, "ids" | "filter", boolean, Ending]>([
    ["cancel", "ids", true, "maxOccurrences"],
    ["cancel", "filter", true, "maxOccurrences"],
    ["pause", "ids", true, "maxOccurrences"],
    ["pause", "filter", true, "endAt"],
    ["cancel", "ids", false, "maxOccurrences"],
    ["cancel", "filter", false, "maxOccurrences"],
    ["pause", "ids", false, "maxOccurrences"],
  ])(
    "a bulk %s (by %s) of a job that finished while its page ran does what its single request does then (outcome in D1: %s; a schedule ends by %s)",
    async (kind, by, flushed, ending) => {
      const label = `race:done-${kind}-${by}-${flushed}-${ending}`;
      const labels = { race: label.slice("race:".length) };
      // a millisecond apart: by ids or by the list (newest first), the finishing job is the page's second
      const early = await lasting(kind, labels);
      clock.advance(1);
      const done = await finishing(kind, labels, ending);
      clock.advance(1);
      const late = await lasting(kind, labels);
      // its twin finishes with it, then gets the single request
      const twin = await finishing(kind, {}, ending);
      // read where it was sent (a body is I/O of the object whose page ran the request)
      let answer: { status: number; body: unknown } | undefined;
      // after the page read its jobs, before it changes the second
      const race = beforeFirstApply(async () => {
        await runToSuccess([done, twin], flushed);
        const res = await single(kind, twin.id);
        answer = { status: res.status, body: await res.json() };
      });
      let action: Action;
      try {
        const selector = by === "ids" ? { ids: [early.id, done.id, late.id] } : { filter: { label } };
        action = await finished(((await (await start(kind, selector)).json()) as Action).id);
        expect(race.ran(), "the page's first change reached a bucket").toBe(true);
      } finally {
        race.restore();
      }
      for (const bucket of new Set([(await jobRow(done.id))!.bucket, (await jobRow(twin.id))!.bucket]))
        await clock.flush(bucketStub(bucket));
      const changed = kind === "cancel" ? "canceled" : "paused";
      for (const job of [early, late]) expect(await statusOf(job.id)).toBe(changed);
      if (flushed) {
        // finished in D1: the single request is refused, and so is the bulk's change; the job stays completed
        expect(answer!.status).toBe(409);
        expect(answer!.body).toMatchObject({ error: { code: REFUSAL[kind] } });
        expect(action).toMatchObject({ status: "done", matched: 3, done: 2, failed: 1, failures: [{ id: done.id, code: REFUSAL[kind] }] });
        expect(await statusOf(done.id)).toBe("completed");
      } else {
        // finished in its bucket only: D1 still holds it active, so the change is written first and
        // the completion then finds it changed (data-path.md); the single request does the same
        expect(answer!.status).toBeLessThan(300);
        expect(action).toMatchObject({ status: "done", matched: 3, done: 3, failed: 0 });
        expect(await statusOf(done.id)).toBe(changed);
      }
      expect(await statusOf(done.id)).toBe(await statusOf(twin.id));
    },
  );
});

describe("bulk actions", () => {
  // hundreds of jobs through the real paths: longer than the default 5 s on a loaded 2-core machine
  it("cancel by a label filter acts on exactly the jobs listed, across pages, and answers 202 with its progress", {
    timeout: 30_000,
  }, async () => {
    const n = PAGE + 5;
    const labelled = await Promise.all(
      Array.from({ length: n }, () => createJob({ target: target(), delay: "1h", labels: { sweep: "cancel-1" } })),
    );
    const other = await createJob({ target: target(), delay: "1h", labels: { sweep: "keep" } });

    const res = await start("cancel", { filter: { label: "sweep:cancel-1" } });
    expect(res.status).toBe(202);
    const started = (await res.json()) as Action;
    expect(res.headers.get("location")).toBe(`/v1/actions/${started.id}`);
    expect(started).toMatchObject({ kind: "cancel", status: "running" });

    const action = await finished(started.id);
    expect(action).toMatchObject({ status: "done", matched: n, done: n, failed: 0, failures: [] });
    expect(new Set(await Promise.all(labelled.map((j) => statusOf(j.id))))).toEqual(new Set(["canceled"]));
    expect(await statusOf(other.id)).toBe("active");
  });

  it("counts each refusal with the code a single request gets: pause of a one-off job, an unknown id", async () => {
    const recurring = await createJob({ target: target(), cron: "0 0 1 1 *" });
    const oneOff = await createJob({ target: target(), delay: "1h" });
    const res = await start("pause", { ids: [recurring.id, oneOff.id, "job_nope"] });
    const action = await finished(((await res.json()) as Action).id);
    expect(action).toMatchObject({ status: "done", matched: 2, done: 1, failed: 2 });
    expect(action.failures).toEqual(
      expect.arrayContaining([
        { id: oneOff.id, code: "not_recurring" },
        { id: "job_nope", code: "not_found" },
      ]),
    );
    expect(await statusOf(recurring.id)).toBe("paused");

    const resumed = await finished(((await (await start("resume", { ids: [recurring.id] })).json()) as Action).id);
    expect(resumed).toMatchObject({ done: 1, failed: 0 });
    expect(await statusOf(recurring.id)).toBe("active");
  });

  it("answers the same action for the same Idempotency-Key, and runs it once", async () => {
    const job = await createJob({ target: target(), delay: "1h", labels: { sweep: "idempotent" } });
    const headers = { "idempotency-key": "sweep-idempotent" };
    const first = (await (await start("cancel", { filter: { label: "sweep:idempotent" } }, headers)).json()) as Action;
    const done = await finished(first.id);
    const again = await start("cancel", { filter: { label: "sweep:idempotent" } }, headers);
    expect(again.status).toBe(202);
    expect((await again.json()) as Action).toEqual(done);
    expect(await statusOf(job.id)).toBe("canceled");

    // the same key for another selection is a mistake to say, not an old action to answer
    const other = await start("cancel", { filter: { label: "sweep:other" } }, headers);
    expect(other.status).toBe(409);
    expect(await other.json()).toMatchObject({ error: { code: "idempotency_key_reused", field: "Idempotency-Key" } });
  });

  it("keeps a finished action readable for ACTION_RETENTION_MS, then its object deletes it", async () => {
    const started = (await (await start("cancel", { ids: ["job_gone"] })).json()) as Action;
    await finished(started.id);
    const stub = env.BULK_ACTION.getByName(bulkActionName("acme", started.id));
    clock.travelTo(clock.at + ACTION_RETENTION_MS + 1_000);
    await runDurableObjectAlarm(stub);
    expect(await stub.view()).toBeNull();
    expect((await api(`/v1/actions/${started.id}`)).status).toBe(404);
  });

  it.each<[string, unknown, string]>([
    ["an empty filter", { filter: {} }, "filter"],
    ["neither ids nor filter", {}, "body"],
    ["both ids and filter", { ids: ["job_1"], filter: { status: "active" } }, "body"],
    ["no ids", { ids: [] }, "ids"],
    ["a malformed label", { filter: { label: "nocolon" } }, "filter.label"],
    ["an unknown field", { filter: { status: "active" }, all: true }, "all"],
  ])("refuses %s, naming the field", async (_case, body, field) => {
    const res = await start("cancel", body);
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { field: string } }).error.field).toBe(field);
  });

  it("keeps actions and jobs to their tenant: another tenant's ids are not found, its action id answers 404", async () => {
    const mine = await createJob({ target: target(), delay: "1h" });
    const theirs = (await (await start("cancel", { ids: [mine.id] }, {}, KEYS.globex)).json()) as Action;
    const action = await finished(theirs.id, "globex", KEYS.globex);
    expect(action).toMatchObject({ matched: 0, failed: 1, failures: [{ id: mine.id, code: "not_found" }] });
    expect(await statusOf(mine.id)).toBe("active");
    expect((await api(`/v1/actions/${theirs.id}`)).status).toBe(404);
  });

  it("redrives dead executions by a filter, each as its single redrive would, and refuses an empty filter", async () => {
    const dead = [await deadExecution(), await deadExecution()];
    const res = await redrive({ filter: { deadReason: "permanent" } });
    expect(res.status).toBe(202);
    const action = await finished(((await res.json()) as Action).id);
    expect(action).toMatchObject({ kind: "redrive", status: "done", matched: 2, done: 2, failed: 0 });
    for (const e of dead) {
      expect(await statusOf(e.job.id)).toBe("active");
      expect((await e.view())?.status).toBe("scheduled");
    }
    // by ids: one redriven already (no longer dead) and an unknown one are refused, not run again
    const again = await finished(((await (await redrive({ ids: [dead[0]!.exe.id, "exe_nope"] })).json()) as Action).id);
    expect(again).toMatchObject({ matched: 0, done: 0, failed: 2 });
    expect(((await (await redrive({ filter: {} })).json()) as { error: { field: string } }).error.field).toBe("filter");
  });
});
