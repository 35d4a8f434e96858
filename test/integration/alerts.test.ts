/**
 * Alerts (issue 29 item 2, README "Alerts"): PUT/GET/DELETE /v1/alerts, and the tenant's dead
 * executions reaching its alert target as one signed digest per 10 s listing what died since the
 * last (the truncation rule is core/alert.ts's: unit/alert.test.ts). Deaths reach the tenant's
 * Alerts object when their bucket has written them to D1; its alarm is run here. With
 * throttledForMs, a flow key its target throttled (503 Retry-After) without a break for longer than
 * that is reported once per episode, by the key's alarm (the episode rule: unit/alert.test.ts).
 */
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import {
  api,
  bucketStub,
  captureFiresForFile,
  counters,
  deliverAll,
  dispatchNow,
  fileClock,
  fire,
  KEYS,
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
    expect(await put.json()).toEqual({
      url,
      headers: { "x-team": "ops" },
      throttledForMs: null,
      digestIntervalMs: 10_000,
      digestMaxListed: 100,
    });
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
    [{ url: "https://example.com/x", throttledForMs: 999 }, "throttledForMs"],
    [{ url: "https://example.com/x", throttledForMs: "5m" }, "throttledForMs"],
    [{ url: "https://example.com/x", throttledForMs: 86_400_001 }, "throttledForMs"],
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

  it("lists 100 of 105 deaths, oldest first, and counts the other 5 in truncated; the next digest lists none of them again", async () => {
    // tenant globex: this file's other tests use acme's object
    const path = uniquePath("ok");
    const put = await api("/v1/alerts", { method: "PUT", body: { url: `${receiverUrl()}${path}` } }, KEYS.globex);
    expect(put.status).toBe(200);
    const jobs = Array.from({ length: 105 }, () => ({ target: { url: `${receiverUrl()}${uniquePath("fail/404")}` } }));
    const created = await api("/v1/jobs/batch", { method: "POST", body: { jobs } }, KEYS.globex);
    expect(created.status).toBe(200);
    // every bucket's alarm, its deliveries through the consumer, and the flush that writes the deaths to D1
    await deliverAll(clock, sent);
    const alerts = env.ALERTS.getByName("globex");
    await runDurableObjectAlarm(alerts);
    const requests = await received(path);
    expect(requests).toHaveLength(1);
    const digest = JSON.parse(requests[0]!.body) as { count: number; truncated: number; executions: { deadAt: string }[] };
    expect(digest).toMatchObject({ count: 105, truncated: 5 });
    expect(digest.executions).toHaveLength(100);
    const deadAt = digest.executions.map((e) => Date.parse(e.deadAt));
    expect(deadAt).toEqual([...deadAt].sort((a, b) => a - b));
    // the 5 beyond the list were counted, not kept: nothing waits for another digest
    clock.advance(10_000);
    await runDurableObjectAlarm(alerts);
    expect(await received(path)).toHaveLength(1);
    expect((await api("/v1/alerts", { method: "DELETE" }, KEYS.globex)).status).toBe(204);
  });

  it("sends a failed digest again unchanged (its webhook-id and body) after a growing pause, counted; what died meanwhile goes in the next", async () => {
    const failing = uniquePath("fail/500");
    expect((await api("/v1/alerts", { method: "PUT", body: { url: `${receiverUrl()}${failing}` } })).status).toBe(200);
    const before = await counters();
    const die = async () => {
      const e = await newExecution({ target: { url: `${receiverUrl()}${uniquePath("fail/404")}` } });
      await fire([await dispatchNow({ stub: e.stub, executionId: e.exe.id }, clock, sent)]);
      await clock.flush(e.stub);
      return e.exe.id;
    };
    const first = await die();
    const alerts = env.ALERTS.getByName("acme");
    await runDurableObjectAlarm(alerts);
    const second = await die(); // while the first digest fails
    clock.advance(10_000); // one failure: tried again 10 s later
    await runDurableObjectAlarm(alerts);
    clock.advance(10_000); // two in a row: 20 s, not yet
    await runDurableObjectAlarm(alerts);
    let requests = await received(failing);
    expect(requests).toHaveLength(2);
    expect(requests[1]!.headers["webhook-id"]).toBe(requests[0]!.headers["webhook-id"]);
    expect(requests[1]!.body).toBe(requests[0]!.body);
    expect((JSON.parse(requests[0]!.body) as { executions: { executionId: string }[] }).executions.map((d) => d.executionId)).toEqual([
      first,
    ]);

    // the target mended: the same digest reaches it, then a new one with what died meanwhile
    const mended = uniquePath("ok");
    expect((await api("/v1/alerts", { method: "PUT", body: { url: `${receiverUrl()}${mended}` } })).status).toBe(200);
    clock.advance(10_000);
    await runDurableObjectAlarm(alerts);
    clock.advance(10_000);
    await runDurableObjectAlarm(alerts);
    requests = await received(mended);
    expect(requests).toHaveLength(2);
    expect(requests[0]!.headers["webhook-id"]).toBe((await received(failing))[0]!.headers["webhook-id"]);
    expect(requests[1]!.headers["webhook-id"]).not.toBe(requests[0]!.headers["webhook-id"]);
    expect((JSON.parse(requests[1]!.body) as { executions: { executionId: string }[] }).executions.map((d) => d.executionId)).toEqual([
      second,
    ]);
    const after = await counters();
    expect((after.alerts_failed_total ?? 0) - (before.alerts_failed_total ?? 0)).toBe(2);
    expect((after.alerts_sent_total ?? 0) - (before.alerts_sent_total ?? 0)).toBe(2);
    expect((await api("/v1/alerts", { method: "DELETE" })).status).toBe(204);
  });
});

describe("throttled flow keys (throttledForMs)", () => {
  /** A job of `key` whose target answers 503 with Retry-After `seconds`, run through the consumer: the key slows down. */
  async function throttleBy503(key: string, seconds: number) {
    const e = await newExecution({
      target: { url: `${receiverUrl()}${uniquePath("fail/503")}&retryAfter=${seconds}` },
      flowControl: { key, parallelism: 10 },
    });
    await fire([await dispatchNow({ stub: e.stub, executionId: e.exe.id }, clock, sent)]);
  }
  const flowKey = (key: string) => env.FLOW_KEY.getByName(`acme\n${key}`);

  it("reports a key its target throttled (503 Retry-After) past the threshold once per episode, in a signed digest, counted; one throttled for less is not", async () => {
    const path = uniquePath("ok");
    const put = await api("/v1/alerts", { method: "PUT", body: { url: `${receiverUrl()}${path}`, throttledForMs: 60_000 } });
    expect(((await put.json()) as { throttledForMs: number }).throttledForMs).toBe(60_000);
    expect(((await (await api("/v1/alerts")).json()) as { throttledForMs: number }).throttledForMs).toBe(60_000);
    const before = await counters();
    const key = `throttled-${crypto.randomUUID().slice(0, 8)}`;
    const since = clock.at;
    await throttleBy503(key, 120);
    const brief = `briefly-${crypto.randomUUID().slice(0, 8)}`;
    await throttleBy503(brief, 30);
    expect(await runDurableObjectAlarm(flowKey(brief))).toBe(false); // its slow-down ends before 60 s: no alarm
    const alerts = env.ALERTS.getByName("acme");
    await runDurableObjectAlarm(alerts);
    expect(await received(path)).toHaveLength(0); // not yet past 60 s

    clock.advance(60_001);
    expect(await runDurableObjectAlarm(flowKey(key))).toBe(true); // the key's alarm: still throttled, past the threshold
    await runDurableObjectAlarm(alerts);
    const requests = await received(path);
    expect(requests).toHaveLength(1);
    const secret = (env as unknown as { WEBHOOK_SECRET: string }).WEBHOOK_SECRET;
    const digest = new Webhook(secret).verify(requests[0]!.body, requests[0]!.headers) as Record<string, unknown>;
    expect(digest).toMatchObject({ type: "flow.throttled", tenant: "acme", count: 0, executions: [] });
    expect(digest.throttled).toEqual([
      { key, since: new Date(since).toISOString(), throttledUntil: new Date(since + 120_000).toISOString(), thresholdMs: 60_000 },
    ]);

    // the same episode, slowed down again: not reported twice
    await throttleBy503(key, 120);
    clock.advance(10_000);
    await runDurableObjectAlarm(flowKey(key));
    await runDurableObjectAlarm(alerts);
    expect(await received(path)).toHaveLength(1);
    const after = await counters();
    expect((after.alerts_throttled_keys_total ?? 0) - (before.alerts_throttled_keys_total ?? 0)).toBe(1);
    expect((after.alerts_sent_total ?? 0) - (before.alerts_sent_total ?? 0)).toBe(1);
    expect((await api("/v1/alerts", { method: "DELETE" })).status).toBe(204);
  });

  // what it costs a tenant that does not use it (as rows.test.ts asks): nothing stored, no alarm
  it("a tenant without throttledForMs: a throttled key stores no episode and sets no alarm", async () => {
    const path = uniquePath("ok");
    expect((await api("/v1/alerts", { method: "PUT", body: { url: `${receiverUrl()}${path}` } })).status).toBe(200);
    const key = `unwatched-${crypto.randomUUID().slice(0, 8)}`;
    await throttleBy503(key, 120);
    const stored = await runInDurableObject(flowKey(key), (_, state) =>
      state.storage.sql.exec(`SELECT name FROM flow_settings WHERE name = 'throttleEpisode'`).toArray(),
    );
    expect(stored).toEqual([]);
    clock.advance(60_001);
    expect(await runDurableObjectAlarm(flowKey(key))).toBe(false);
    await runDurableObjectAlarm(env.ALERTS.getByName("acme"));
    expect(await received(path)).toHaveLength(0);
    expect((await api("/v1/alerts", { method: "DELETE" })).status).toBe(204);
  });
});
