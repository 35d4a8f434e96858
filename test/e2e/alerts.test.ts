/**
 * Alerts over the real local stack (issue 29 item 2, README "Alerts"): PUT /v1/alerts names the
 * loopback receiver; two executions that die reach it as one signed digest listing both; a flow
 * key its target throttles (503 Retry-After 8 s) past throttledForMs (2 s) is reported in a digest
 * by the key's own alarm.
 */
import { describe, expect, it, onTestFailed } from "vitest";
import { eventually, stackForFile } from "./harness.js";

const local = stackForFile({ port: 18943, routes: { "/down": { kind: "always", status: 500 } } });
const { receiver, sink } = local;

describe("alerts over the real local stack", () => {
  it("sends the dead executions as one signed digest", async () => {
    onTestFailed(() => console.error(sink.text().slice(-4000)));
    const put = await local.api.request("PUT", "/v1/alerts", { url: `${receiver.url}/alerts` });
    expect(put.status).toBe(200);
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) {
      const res = await local.api.createJob({ target: { url: `${receiver.url}/down` }, retry: { maxAttempts: 1 } });
      expect(res.status).toBe(201);
      ids.push(res.body.id);
    }
    const digests = await eventually(
      "a digest listing both deaths",
      () => {
        const listed = receiver.to("/alerts").flatMap((r) => (JSON.parse(r.body) as { executions: { jobId: string }[] }).executions);
        return ids.every((id) => listed.some((e) => e.jobId === id)) ? receiver.to("/alerts") : undefined;
      },
      30_000,
    );
    for (const d of digests) expect(d.signatureError).toBeNull();
    expect(JSON.parse(digests[0]!.body)).toMatchObject({ type: "executions.dead" });
  });

  it("reports a flow key its target throttled longer than throttledForMs", async () => {
    onTestFailed(() => console.error(sink.text().slice(-4000)));
    const put = await local.api.request("PUT", "/v1/alerts", { url: `${receiver.url}/throttle-alerts`, throttledForMs: 2_000 });
    expect(put.status).toBe(200);
    const key = `e2e-throttled-${Date.now()}`;
    const res = await local.api.createJob({
      target: { url: `${receiver.url}/fail/503?retryAfter=8` },
      flowControl: { key, parallelism: 5 },
      retry: { maxAttempts: 1 },
    });
    expect(res.status).toBe(201);
    const digest = await eventually(
      "a digest listing the throttled key",
      () =>
        receiver
          .to("/throttle-alerts")
          .find((r) => (JSON.parse(r.body) as { throttled: { key: string }[] }).throttled.some((t) => t.key === key)),
      30_000,
    );
    expect(digest.signatureError).toBeNull();
    const entry = (JSON.parse(digest.body) as { throttled: { key: string; since: string; throttledUntil: string; thresholdMs: number }[] })
      .throttled[0]!;
    expect(entry.thresholdMs).toBe(2_000);
    expect(Date.parse(entry.throttledUntil) - Date.parse(entry.since)).toBeGreaterThan(2_000);
  });
});
