import { createMessageBatch, createExecutionContext, getQueueResult, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { describe, expect, inject, it } from "vitest";
import worker from "../../src/index";

describe("smoke", () => {
  it("creates a job and fires it", async () => {
    const receiver = inject("receiverUrl");
    const res = await exports.default.fetch("http://scheduler/v1/jobs", {
      method: "POST",
      headers: { authorization: "Bearer test-key-acme", "content-type": "application/json" },
      body: JSON.stringify({ target: { url: `${receiver}/ok?smoke=1`, body: { a: 1 } } }),
    });
    expect(res.status).toBe(201);
    const job = (await res.json()) as { id: string };
    const row = await env.DB.prepare("SELECT * FROM executions WHERE job_id = ?").bind(job.id).first<{ id: string; bucket: number; status: string }>();
    expect(row?.status).toBe("scheduled");
    const stub = env.BUCKET.getByName(`bucket-${row!.bucket}`);
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    const status = await runInDurableObject(stub, (_i, state) => state.storage.sql.exec<{ status: string }>("SELECT status FROM executions WHERE id = ?", row!.id).one().status);
    expect(status).toBe("dispatched");
    const batch = createMessageBatch("fire", [{ id: "m1", timestamp: Date.now(), attempts: 1, body: { v: 1, executionId: row!.id, bucket: row!.bucket, tenant: "acme", dueAt: Date.now() } }]);
    const ctx = createExecutionContext();
    await worker.queue(batch, env);
    const result = await getQueueResult(batch, ctx);
    expect(result.explicitAcks).toEqual(["m1"]);
    const got = await (await fetch(`${receiver}/__requests?path=/ok?smoke=1`)).json() as unknown[];
    expect(got.length).toBeGreaterThanOrEqual(1);
  });
});
