/**
 * Idempotent job creation (invariant 8): a key seen within the dedupe window returns the original
 * job, never a second one, whether it comes as the Idempotency-Key header, the idempotencyKey
 * field, twice in one batch or in concurrent requests. Keys are per tenant.
 *
 * Jobs here are due in 60 s (handed to a bucket, but not fired: the file's clock moves only when
 * a test moves it); fire-queue sends are captured anyway so nothing is consumed in the background.
 * A one-off job has exactly one execution, named after it (exe_ + the job id's body), which its
 * bucket holds as one durable row: "one execution" is counted there, across every bucket.
 *
 * Keys live in IdempotencyKeys objects (per tenant and key slot, across every D1 shard): keySql
 * reads and changes a key's row there.
 */
import { describe, expect, it } from "vitest";
import { oneOffExecutionId } from "../../src/core/id";
import {
  allShards,
  api,
  bucketSql,
  bucketStub,
  CONFIG,
  captureFiresForFile,
  d1Of,
  fileClock,
  KEYS,
  keySql,
  receiverUrl,
  uniquePath,
} from "./helpers";

const IDEMPOTENCY_WINDOW_MS = CONFIG.IDEMPOTENCY_WINDOW_MS;
const BUCKETS = CONFIG.BUCKETS;

fileClock(0);
captureFiresForFile();

const jobBody = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  target: { url: `${receiverUrl()}${uniquePath()}`, body: { n: 1 } },
  delay: "60s",
  ...extra,
});

function post(body: unknown, key?: string, apiKey: string = KEYS.acme): Promise<Response> {
  return api("/v1/jobs", { method: "POST", body, headers: key === undefined ? {} : { "idempotency-key": key } }, apiKey);
}

/**
 * Jobs D1 holds for one tenant's idempotency key, and the executions the buckets hold of them
 * (every bucket is asked, so an execution handed to the wrong one would count too).
 */
async function rowsForKey(tenant: string, key: string): Promise<{ jobs: string[]; executions: string[] }> {
  const jobs = await allShards<{ id: string }>("SELECT id FROM jobs WHERE tenant = ? AND idempotency_key = ?", tenant, key);
  const ids = JSON.stringify(jobs.map((r) => r.id));
  const executions: string[] = [];
  for (let k = 0; k < BUCKETS; k++) {
    const rows = await bucketSql<{ id: string }>(
      bucketStub(k),
      "SELECT id FROM executions WHERE job_id IN (SELECT value FROM json_each(?))",
      ids,
    );
    executions.push(...rows.map((r) => r.id));
  }
  return { jobs: jobs.map((r) => r.id), executions };
}

const newKey = () => `key-${crypto.randomUUID()}`;

describe("idempotent create", () => {
  it("answers a repeated Idempotency-Key with 200 and the original job; D1 holds one job and one execution (invariant 8)", async () => {
    const key = newKey();
    const body = jobBody();
    const first = await post(body, key);
    expect(first.status).toBe(201);
    const created = await first.json<{ id: string; idempotencyKey: string }>();
    expect(created.idempotencyKey).toBe(key);

    const second = await post(body, key);
    expect(second.status).toBe(200);
    expect(await second.json()).toMatchObject({ id: created.id, idempotencyKey: key });

    // one job, and its bucket was handed one execution of it, not two
    const rows = await rowsForKey("acme", key);
    expect(rows.jobs).toEqual([created.id]);
    expect(rows.executions).toEqual([oneOffExecutionId(created.id)]);
    const { bucket } = (await d1Of(created.id)
      .prepare("SELECT bucket FROM jobs WHERE id = ?")
      .bind(created.id)
      .first<{ bucket: number }>())!;
    const inBucket = await bucketSql(bucketStub(bucket), "SELECT id FROM executions WHERE job_id = ?", created.id);
    expect(inBucket.map((r) => r.id)).toEqual(rows.executions);
  });

  it("refuses the same key with a different body: 409 naming idempotencyKey (invariant 8)", async () => {
    const key = newKey();
    const first = await post(jobBody(), key);
    expect(first.status).toBe(201);
    const { id } = await first.json<{ id: string }>();

    const other = await post(jobBody({ name: "another request" }), key);
    expect(other.status).toBe(409);
    expect(await other.json()).toMatchObject({ error: { code: "idempotency_key_reused", field: "idempotencyKey" } });
    expect((await rowsForKey("acme", key)).jobs).toEqual([id]);
  });

  it("treats the idempotencyKey body field like the header (invariant 8)", async () => {
    const key = newKey();
    const body = jobBody({ idempotencyKey: key });
    const first = await post(body);
    expect(first.status).toBe(201);
    const { id } = await first.json<{ id: string }>();

    const again = await post(body);
    expect(again.status).toBe(200);
    expect(await again.json()).toMatchObject({ id, idempotencyKey: key });

    // the same request carrying the key as a header instead is the same request
    const { idempotencyKey: _key, ...withoutField } = body;
    const viaHeader = await post(withoutField, key);
    expect(viaHeader.status).toBe(200);
    expect(await viaHeader.json()).toMatchObject({ id });

    const changed = await post({ ...body, name: "changed" });
    expect(changed.status).toBe(409);
    expect(await changed.json()).toMatchObject({ error: { field: "idempotencyKey" } });
    expect((await rowsForKey("acme", key)).jobs).toEqual([id]);
  });

  it("creates one job for two batch items with the same key (invariant 8)", async () => {
    const key = newKey();
    const item = jobBody({ idempotencyKey: key });
    const res = await api("/v1/jobs/batch", { method: "POST", body: { jobs: [item, item, { ...item, name: "different" }] } });
    expect(res.status).toBe(200);
    const { results } = await res.json<{ results: { status: number; job?: { id: string }; error?: { field: string } }[] }>();
    expect(results.map((r) => r.status)).toEqual([201, 200, 409]);
    expect(results[1]!.job!.id).toBe(results[0]!.job!.id);
    expect(results[2]!.error!.field).toBe("jobs[2].idempotencyKey"); // a batch item's error names its place in the batch
    const rows = await rowsForKey("acme", key);
    expect(rows.jobs).toEqual([results[0]!.job!.id]);
    expect(rows.executions).toHaveLength(1);
  });

  it("keeps keys per tenant: another tenant's same key is independent, the same tenant's other API key is not (invariant 8)", async () => {
    const key = newKey();
    const body = jobBody();
    const acme = await post(body, key, KEYS.acme);
    const globex = await post(body, key, KEYS.globex);
    expect(acme.status).toBe(201);
    expect(globex.status).toBe(201);
    const acmeId = (await acme.json<{ id: string }>()).id;
    const globexId = (await globex.json<{ id: string }>()).id;
    expect(globexId).not.toBe(acmeId);
    expect((await rowsForKey("acme", key)).jobs).toEqual([acmeId]);
    expect((await rowsForKey("globex", key)).jobs).toEqual([globexId]);

    const acmeOtherKey = await post(body, key, KEYS.acme2);
    expect(acmeOtherKey.status).toBe(200);
    expect((await acmeOtherKey.json<{ id: string }>()).id).toBe(acmeId);
  });

  it("creates exactly one job for 5 concurrent requests with the same key (invariant 8)", async () => {
    const key = newKey();
    const body = jobBody();
    const responses = await Promise.all(Array.from({ length: 5 }, () => post(body, key)));
    const statuses = responses.map((r) => r.status).sort();
    expect(statuses).toEqual([200, 200, 200, 200, 201]);
    const ids = new Set(await Promise.all(responses.map(async (r) => (await r.json<{ id: string }>()).id)));
    expect(ids.size).toBe(1);
    const rows = await rowsForKey("acme", key);
    expect(rows.jobs).toEqual([...ids]);
    expect(rows.executions).toHaveLength(1);
  });

  it("creates a new job once the key is older than the dedupe window (invariant 8)", async () => {
    const key = newKey();
    const body = jobBody();
    const first = await post(body, key);
    expect(first.status).toBe(201);
    const firstId = (await first.json<{ id: string }>()).id;
    await keySql("acme", key, "UPDATE idempotency_keys SET created_at = ? WHERE key = ?", Date.now() - IDEMPOTENCY_WINDOW_MS - 1000, key);

    const later = await post(body, key);
    expect(later.status).toBe(201);
    const laterId = (await later.json<{ id: string }>()).id;
    expect(laterId).not.toBe(firstId);
    const [owner] = await keySql<{ job_id: string }>("acme", key, "SELECT job_id FROM idempotency_keys WHERE key = ?", key);
    expect(owner?.job_id).toBe(laterId);
    expect((await post(body, key)).status).toBe(200);
  });
});
