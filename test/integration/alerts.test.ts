/**
 * Alerts (issue 29 item 2, README "Alerts"): PUT/GET/DELETE /v1/alerts, and the tenant's dead
 * executions reaching its alert target as one signed digest per 10 s listing what died since the
 * last (the truncation rule is core/alert.ts's: unit/alert.test.ts). Deaths reach the tenant's
 * Alerts object when their bucket has written them to D1; its alarm is run here.
 */
import { runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import {
  api,
  bucketStub,
  captureFiresForFile,
  counters,
  dispatchNow,
  fileClock,
  fire,
  newExecution,
  received,
  receiverUrl,
  uniquePath,
} from "./helpers";

const clock = fileClock(10 * 60_000);
const sent = captureFiresForFile();

describe("PUT, GET, DELETE /v1/alerts", () => {
  it("sets, reads and removes the tenant's alert target", async () => {
    const url = `${receiverUrl()}${uniquePath("ok")}`;
    const put = await api("/v1/alerts", { method: "PUT", body: { url, headers: { "x-team": "ops" } } });
    expect(put.status).toBe(200);
    expect(await put.json()).toEqual({ url, headers: { "x-team": "ops" }, digestIntervalMs: 10_000, digestMaxListed: 100 });
    const get = await api("/v1/alerts");
    expect(get.status).toBe(200);
    expect(((await get.json()) as { url: string }).url).toBe(url);
    expect((await api("/v1/alerts", { method: "DELETE" })).status).toBe(204);
    expect((await api("/v1/alerts")).status).toBe(404);
  });

  it.each([
    [{ url: "ftp://example.com/x" }, "url"],
    [{ headers: { a: "b" } }, "url"],
    [{ url: "https://example.com/x", extra: 1 }, "extra"],
    [{ url: "https://example.com/x", headers: { "webhook-id": "x" } }, "headers.webhook-id"],
  ])("refuses %j with a 400 naming %s", async (body, field) => {
    const res = await api("/v1/alerts", { method: "PUT", body });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { field: string } }).error.field).toBe(field);
  });
});

describe("dead-execution digests", () => {
  it("sends one signed digest listing the 3 executions that died within 10 s", async () => {
    const path = uniquePath("ok");
    expect((await api("/v1/alerts", { method: "PUT", body: { url: `${receiverUrl()}${path}` } })).status).toBe(200);
    const before = await counters();
    const dead = [];
    for (let i = 0; i < 3; i++) {
      const e = await newExecution({ target: { url: `${receiverUrl()}${uniquePath("fail/404")}` } });
      await fire([await dispatchNow({ stub: e.stub, executionId: e.exe.id }, clock, sent)]);
      dead.push(e);
    }
    for (const bucket of new Set(dead.map((e) => e.exe.bucket))) await clock.flush(bucketStub(bucket));
    const alerts = env.ALERTS.getByName("acme");
    expect(await received(path)).toHaveLength(0); // nothing until the alarm
    await runDurableObjectAlarm(alerts);
    const requests = await received(path);
    expect(requests).toHaveLength(1);
    const secret = (env as unknown as { WEBHOOK_SECRET: string }).WEBHOOK_SECRET;
    const digest = new Webhook(secret).verify(requests[0]!.body, requests[0]!.headers) as {
      count: number;
      truncated: number;
      executions: { executionId: string; deadReason: string; lastHttpStatus: number }[];
    };
    expect(digest.count).toBe(3);
    expect(digest.truncated).toBe(0);
    expect(digest.executions.map((x) => x.executionId).sort()).toEqual(dead.map((e) => e.exe.id).sort());
    expect(digest.executions[0]).toMatchObject({ deadReason: "permanent", lastHttpStatus: 404 });
    // sent: nothing waits, no second digest
    await runDurableObjectAlarm(alerts);
    expect(await received(path)).toHaveLength(1);
    const after = await counters();
    expect((after.alerts_sent_total ?? 0) - (before.alerts_sent_total ?? 0)).toBe(1);
  });

  it("keeps a failed digest for the next one and counts it in alerts_failed_total", async () => {
    const path = uniquePath("fail/500");
    expect((await api("/v1/alerts", { method: "PUT", body: { url: `${receiverUrl()}${path}` } })).status).toBe(200);
    const before = await counters();
    const e = await newExecution({ target: { url: `${receiverUrl()}${uniquePath("fail/404")}` } });
    await fire([await dispatchNow({ stub: e.stub, executionId: e.exe.id }, clock, sent)]);
    await clock.flush(e.stub);
    const alerts = env.ALERTS.getByName("acme");
    await runDurableObjectAlarm(alerts);
    clock.advance(10_000);
    await runDurableObjectAlarm(alerts);
    const requests = await received(path);
    expect(requests).toHaveLength(2);
    expect(requests[1]!.headers["webhook-id"]).toBe(requests[0]!.headers["webhook-id"]); // the same digest, retried
    const after = await counters();
    expect((after.alerts_failed_total ?? 0) - (before.alerts_failed_total ?? 0)).toBe(2);
    expect((await api("/v1/alerts", { method: "DELETE" })).status).toBe(204);
  });
});
