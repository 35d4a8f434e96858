/**
 * Labels on jobs (issue 16): a small map of strings, validated, shown on every job, replaced by
 * PATCH; GET /v1/jobs?label=k:v lists a tenant's jobs with that label, newest first, by cursor,
 * from job_labels' key (a range scan); an idempotent repeat writes no second set; a purged job's
 * labels go with it. Jobs here are due an hour ahead: nothing fires.
 */
import { describe, expect, it } from "vitest";
import { JOB_TRANSITIONS } from "../../src/core/lifecycle";
import { changeJob } from "../../src/db/change-job";
import { dbOf } from "../../src/db/kit";
import { purgeHistory } from "../../src/db/purge";
import { api, countAll, createJob, d1Of, type JobJson, KEYS, receiverUrl } from "./helpers";

const target = () => ({ url: `${receiverUrl()}/ok` });

async function listed(query: string, key: string = KEYS.acme): Promise<{ jobs: JobJson[]; nextCursor: string | null }> {
  const res = await api(`/v1/jobs?${query}`, {}, key);
  expect(res.status).toBe(200);
  return (await res.json()) as { jobs: JobJson[]; nextCursor: string | null };
}

async function labelRows(jobId: string): Promise<{ key: string; value: string }[]> {
  const { results } = await d1Of(jobId)
    .prepare("SELECT key, value FROM job_labels WHERE job_id = ? ORDER BY key")
    .bind(jobId)
    .all<{ key: string; value: string }>();
  return results;
}

describe("labels", () => {
  it("are kept and shown on the job, {} when it has none", async () => {
    const job = await createJob({ target: target(), delay: "1h", labels: { team: "billing", "app.kubernetes.io/name": "invoices" } });
    expect(job.labels).toEqual({ team: "billing", "app.kubernetes.io/name": "invoices" });
    expect(((await (await api(`/v1/jobs/${job.id}`)).json()) as JobJson).labels).toEqual(job.labels);
    expect((await createJob({ target: target(), delay: "1h" })).labels).toEqual({});
  });

  it("filter the list, newest first, page by page, within the caller's tenant only", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++)
      ids.push((await createJob({ target: target(), delay: "1h", labels: { batch: "filter-1", n: String(i) } })).id);
    await createJob({ target: target(), delay: "1h", labels: { batch: "filter-2" } });
    await createJob({ target: target(), delay: "1h", labels: { batch: "filter-1" } }, KEYS.globex);

    const first = await listed("label=batch:filter-1&limit=2");
    expect(first.jobs.map((j) => j.id)).toEqual([ids[2], ids[1]]);
    const second = await listed(`label=batch:filter-1&limit=2&cursor=${first.nextCursor}`);
    expect(second.jobs.map((j) => j.id)).toEqual([ids[0]]);
    expect(second.nextCursor).toBeNull();

    // with status: one canceled drops out of the active ones
    await api(`/v1/jobs/${ids[1]}`, { method: "DELETE" });
    expect((await listed("label=batch:filter-1&status=active")).jobs.map((j) => j.id)).toEqual([ids[2], ids[0]]);
    expect((await listed("label=batch:filter-1&status=canceled")).jobs.map((j) => j.id)).toEqual([ids[1]]);
    // the page's limit counts the jobs that pass the status too: the newest, canceled, does not fill it
    const newest = await createJob({ target: target(), delay: "1h", labels: { batch: "filter-1" } });
    await api(`/v1/jobs/${newest.id}`, { method: "DELETE" });
    const one = await listed("label=batch:filter-1&status=active&limit=1");
    expect(one.jobs.map((j) => j.id)).toEqual([ids[2]]);
    expect((await listed(`label=batch:filter-1&status=active&limit=1&cursor=${one.nextCursor}`)).jobs.map((j) => j.id)).toEqual([ids[0]]);
    // a value holding a colon, and a label nobody has
    const colon = await createJob({ target: target(), delay: "1h", labels: { url: "https://example.com:8443" } });
    expect((await listed("label=url:https://example.com:8443")).jobs.map((j) => j.id)).toEqual([colon.id]);
    expect((await listed("label=batch:none")).jobs).toEqual([]);
  });

  it("are replaced by PATCH (and the filter follows), removed by null", async () => {
    const job = await createJob({ target: target(), delay: "1h", labels: { stage: "patch-old", keep: "x" } });
    const patched = await api(`/v1/jobs/${job.id}`, { method: "PATCH", body: { labels: { stage: "patch-new" } } });
    expect([200, 202]).toContain(patched.status);
    expect(((await patched.json()) as JobJson).labels).toEqual({ stage: "patch-new" });
    expect((await listed("label=stage:patch-old")).jobs).toEqual([]);
    expect((await listed("label=stage:patch-new")).jobs.map((j) => j.id)).toEqual([job.id]);
    expect(await labelRows(job.id)).toEqual([{ key: "stage", value: "patch-new" }]);

    // a PATCH of something else leaves them
    await api(`/v1/jobs/${job.id}`, { method: "PATCH", body: { name: "renamed" } });
    expect(await labelRows(job.id)).toEqual([{ key: "stage", value: "patch-new" }]);

    const cleared = await api(`/v1/jobs/${job.id}`, { method: "PATCH", body: { labels: null } });
    expect(((await cleared.json()) as JobJson).labels).toEqual({});
    expect(await labelRows(job.id)).toEqual([]);
  });

  it("stay what the job row holds when a labels change loses the version race to another change made in the same millisecond", async () => {
    const job = await createJob({ target: target(), delay: "1h", labels: { race: "old" } });
    const row = (await d1Of(job.id).prepare("SELECT version FROM jobs WHERE id = ?").bind(job.id).first<{ version: number }>())!;
    const now = Date.now() + 1_000;
    const db = dbOf(d1Of(job.id));
    // the cancel wins version + 1 at `now`; the labels change read the same version and has the same `now`
    expect(await changeJob(db, "acme", job.id, row.version, JOB_TRANSITIONS.cancel.from, { status: "canceled" }, now)).toBeDefined();
    expect(await changeJob(db, "acme", job.id, row.version, JOB_TRANSITIONS.patch.from, { labels: { race: "new" } }, now)).toBeUndefined();
    const stored = await d1Of(job.id).prepare("SELECT labels FROM jobs WHERE id = ?").bind(job.id).first<{ labels: string }>();
    expect(JSON.parse(stored!.labels)).toEqual({ race: "old" });
    expect(await labelRows(job.id)).toEqual([{ key: "race", value: "old" }]);
  });

  it("are written once for an idempotent repeat (the original job's)", async () => {
    const body = { target: target(), delay: "1h", labels: { run: "idempotent" }, idempotencyKey: "labels-repeat" };
    const first = await createJob(body);
    const repeat = await api("/v1/jobs", { method: "POST", body });
    expect(repeat.status).toBe(200);
    expect((await listed("label=run:idempotent")).jobs.map((j) => j.id)).toEqual([first.id]);
    expect(await countAll("SELECT COUNT(*) AS n FROM job_labels WHERE key = 'run' AND value = 'idempotent'")).toBe(1);
  });

  it.each<[string, unknown, string]>([
    ["a key out of shape", { "Team Name": "x" }, "labels.Team Name"],
    ["a key ending in a dot", { "team.": "x" }, "labels.team."],
    ["a value too long", { team: "v".repeat(129) }, "labels.team"],
    ["a control character", { team: "a\nb" }, "labels.team"],
    ["17 labels", Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, "v"])), "labels"],
    ["a value that is no string", { team: 1 }, "labels.team"],
  ])("refuses %s, naming the field", async (_case, labels, field) => {
    const res = await api("/v1/jobs", { method: "POST", body: { target: target(), labels } });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { field: string } }).error.field).toBe(field);
  });

  it.each(["label=nocolon", "label=Bad Key:x", "label=:x", `label=team:${"v".repeat(129)}`, "label=team:a%0Ab"])(
    "refuses the filter %s, naming it",
    async (query) => {
      const res = await api(`/v1/jobs?${query}`);
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: { field: string } }).error.field).toBe("label");
    },
  );

  it("go with their job when the history is purged", async () => {
    const job = await createJob({ target: target(), delay: "1h", labels: { purge: "me" } });
    await api(`/v1/jobs/${job.id}`, { method: "DELETE" });
    expect(await labelRows(job.id)).toEqual([{ key: "purge", value: "me" }]);
    // a cutoff past everything: every finished job of this file goes, labels and all
    const later = Date.now() + 365 * 86_400_000;
    await purgeHistory(dbOf(d1Of(job.id)), 4, later, 0, 1_000);
    expect(await d1Of(job.id).prepare("SELECT id FROM jobs WHERE id = ?").bind(job.id).first()).toBeNull();
    expect(await labelRows(job.id)).toEqual([]);
  });
});
