/**
 * Signing secrets per tenant with rotation (issue 6): WEBHOOK_SECRETS="tenant:whsec_current
 * whsec_next" gives a tenant two active secrets, and webhook-signature then carries one "v1,<sig>"
 * per secret, space-separated, so a receiver holding either secret verifies with the standard
 * library (standardwebhooks); a receiver holding neither does not; a tenant without an entry
 * signs with WEBHOOK_SECRET.
 *
 * The integration project has no WEBHOOK_SECRETS binding, so the rotation is driven with a
 * config of its own: deliver() with SigningKeys of that config against the loopback receiver,
 * and the real fire consumer run on an env carrying WEBHOOK_SECRETS (config is parsed per env
 * object). Receivers verify what actually arrived over HTTP.
 *
 * The file runs on one virtual clock; fire-queue sends are captured, and a test feeds the
 * messages its buckets sent to the consumer itself.
 */
import { createExecutionContext, createMessageBatch, getQueueResult, type QueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import type { FireMessage } from "../../src/bucket/protocol";
import { deliver } from "../../src/consumer/webhook";
import { MAX_ACTIVE_SECRETS, SigningKeys, secretsOf } from "../../src/core/signing";
import worker from "../../src/platform/local-worker";
import {
  api,
  bucketRow,
  bucketStub,
  captureFiresForFile,
  createJob,
  executionOf,
  fileClock,
  jobRow,
  KEYS,
  live,
  type Received,
  received,
  receiverUrl,
  runAlarm,
  uniquePath,
} from "./helpers";

const clock = fileClock(0);
const sent = captureFiresForFile();

/** Runs a bucket's alarm and takes the fire messages it sent for these executions. */
async function dispatch(stub: ReturnType<typeof bucketStub>, executionIds: string[]): Promise<FireMessage[]> {
  await runAlarm(stub);
  const mine = sent.filter((m) => executionIds.includes(m.executionId));
  sent.splice(0, sent.length, ...sent.filter((m) => !executionIds.includes(m.executionId)));
  return mine;
}

/** Runs the real fire consumer on `consumerEnv` (ids m0, m1, ...) and returns what it did with each message. */
async function consume(consumerEnv: unknown, messages: FireMessage[]): Promise<QueueResult> {
  const batch = createMessageBatch(
    "fire",
    messages.map((body, i) => ({ id: `m${i}`, timestamp: new Date(), attempts: 1, body })),
  );
  const ctx = createExecutionContext();
  await expect(worker.queue(batch, consumerEnv as never, ctx)).resolves.toBeUndefined();
  return getQueueResult(batch, ctx);
}

/** Fresh whsec_ secrets (32 random bytes, base64), one per role. */
function secret(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return `whsec_${btoa(String.fromCharCode(...bytes))}`;
}
const current = secret();
const next = secret();
const stranger = secret();
const fallback = env.WEBHOOK_SECRET!;

/** Does a receiver holding `key` accept this request? (standardwebhooks, as a receiver would run it) */
function verifies(key: string, request: Received): boolean {
  try {
    new Webhook(key).verify(request.body, request.headers);
    return true;
  } catch {
    return false;
  }
}

function signaturesOf(request: Received): string[] {
  return (request.headers["webhook-signature"] ?? "").split(" ");
}

/** Delivers once, signed with `tenant`'s keys under `config`, and returns what the receiver got. */
async function deliverAs(config: { WEBHOOK_SECRET: string; WEBHOOK_SECRETS: string }, tenant: string): Promise<Received> {
  const path = uniquePath();
  const outcome = await deliver(
    {
      executionId: `exe_${crypto.randomUUID().replace(/-/g, "").slice(0, 26)}`,
      jobId: "job_signing",
      attempt: 1,
      target: {
        url: `${receiverUrl()}${path}`,
        method: "POST",
        headers: { "content-type": "application/json" },
        body: '{"hello":"world"}',
      },
      timeoutMs: 5_000,
    },
    await new SigningKeys(config).forTenant(tenant),
    Date.now(),
  );
  expect(outcome).toMatchObject({ kind: "succeeded", httpStatus: 200 });
  const [request] = await received(path);
  expect(request).toBeDefined();
  return request!;
}

describe("secretsOf: WEBHOOK_SECRETS parsing", () => {
  const config = (WEBHOOK_SECRETS: string, WEBHOOK_SECRET = "whsec_fallback") => ({ WEBHOOK_SECRET, WEBHOOK_SECRETS });

  it.each([
    ["one tenant, current and next", "acme:whsec_a whsec_b", "acme", ["whsec_a", "whsec_b"]],
    ["one secret", "acme:whsec_a", "acme", ["whsec_a"]],
    ["spaces around tenant, colon and secrets", " globex:whsec_g , acme :  whsec_a   whsec_b  ", "acme", ["whsec_a", "whsec_b"]],
    ["tabs between secrets", "acme:whsec_a\twhsec_b", "acme", ["whsec_a", "whsec_b"]],
    ["at most two active secrets: a third is ignored", "acme:whsec_a whsec_b whsec_c", "acme", ["whsec_a", "whsec_b"]],
    ["the entry of the tenant asked for, not a neighbour", "globex:whsec_g,acme:whsec_a", "globex", ["whsec_g"]],
    ["a tenant without an entry uses WEBHOOK_SECRET", "globex:whsec_g", "acme", ["whsec_fallback"]],
    ["a tenant whose name is a prefix of another's does not match it", "acme-eu:whsec_x", "acme", ["whsec_fallback"]],
    ["an empty WEBHOOK_SECRETS", "", "acme", ["whsec_fallback"]],
    ["a tenant entry without secrets falls back to WEBHOOK_SECRET", "acme:", "acme", ["whsec_fallback"]],
    ["an entry without a tenant is ignored", ":whsec_x,acme:whsec_a", "acme", ["whsec_a"]],
    ["the first entry of a tenant listed twice wins", "acme:whsec_a,acme:whsec_b", "acme", ["whsec_a"]],
  ])("%s", (_label, secrets, tenant, expected) => {
    expect(secretsOf(config(secrets), tenant)).toEqual(expected);
  });

  it(`never returns more than ${MAX_ACTIVE_SECRETS} secrets`, () => {
    const many = Array.from({ length: 10 }, (_, i) => `whsec_${i}`).join(" ");
    expect(secretsOf(config(`acme:${many}`), "acme")).toHaveLength(MAX_ACTIVE_SECRETS);
  });

  it("has no secret at all when neither WEBHOOK_SECRETS nor WEBHOOK_SECRET names one, and SigningKeys refuses", async () => {
    expect(secretsOf(config("", ""), "acme")).toEqual([]);
    await expect(new SigningKeys(config("", "")).forTenant("acme")).rejects.toThrow(/no signing secret/);
  });
});

describe("rotation: two active secrets", () => {
  const rotating = { WEBHOOK_SECRET: fallback, WEBHOOK_SECRETS: `acme:${current} ${next}` };

  it("signs with both secrets: a receiver holding only the current or only the next one verifies; a third secret does not", async () => {
    const request = await deliverAs(rotating, "acme");
    const signatures = signaturesOf(request);
    expect(signatures).toHaveLength(2);
    for (const s of signatures) expect(s).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
    expect(signatures[0]).not.toBe(signatures[1]);
    expect(verifies(current, request)).toBe(true);
    expect(verifies(next, request)).toBe(true);
    expect(verifies(stranger, request)).toBe(false);
    expect(verifies(fallback, request)).toBe(false);
  });

  it("ends the rotation cleanly: once only the next secret is configured, the old one no longer verifies", async () => {
    const request = await deliverAs({ WEBHOOK_SECRET: fallback, WEBHOOK_SECRETS: `acme:${next}` }, "acme");
    expect(signaturesOf(request)).toHaveLength(1);
    expect(verifies(next, request)).toBe(true);
    expect(verifies(current, request)).toBe(false);
  });

  it("signs a tenant without an entry with WEBHOOK_SECRET only", async () => {
    const request = await deliverAs(rotating, "globex");
    expect(signaturesOf(request)).toHaveLength(1);
    expect(verifies(fallback, request)).toBe(true);
    expect(verifies(current, request)).toBe(false);
    expect(verifies(next, request)).toBe(false);
  });

  it("ignores a third configured secret: a receiver holding only it does not verify", async () => {
    const request = await deliverAs({ WEBHOOK_SECRET: fallback, WEBHOOK_SECRETS: `acme:${current} ${next} ${stranger}` }, "acme");
    expect(signaturesOf(request)).toHaveLength(2);
    expect(verifies(current, request)).toBe(true);
    expect(verifies(next, request)).toBe(true);
    expect(verifies(stranger, request)).toBe(false);
  });

  it("a signature is bound to its body, id and timestamp: a tampered copy fails with either secret", async () => {
    const request = await deliverAs(rotating, "acme");
    const tampered = [
      { ...request, body: `${request.body} ` },
      { ...request, headers: { ...request.headers, "webhook-id": `${request.headers["webhook-id"]}x` } },
      { ...request, headers: { ...request.headers, "webhook-timestamp": String(Number(request.headers["webhook-timestamp"]) - 1) } },
    ];
    for (const copy of tampered) {
      expect(verifies(current, copy)).toBe(false);
      expect(verifies(next, copy)).toBe(false);
    }
  });
});

describe("rotation through the fire consumer", () => {
  it("delivers a real execution of a rotating tenant with both signatures, every attempt carrying the same webhook-id (invariant 5)", async () => {
    const path = uniquePath("flaky/1"); // 503 once, then 200: two attempts
    const job = await createJob(
      { target: { url: `${receiverUrl()}${path}`, body: { n: 1 } }, retry: { maxAttempts: 3, initialDelayMs: 1000, jitter: 0 } },
      KEYS.acme,
    );
    const exe = (await executionOf(job.id))!;
    const stub = bucketStub(exe.bucket);
    // the consumer's env carries WEBHOOK_SECRETS; the bucket keeps the test env
    const rotatingEnv = { ...env, WEBHOOK_SECRETS: `acme:${current} ${next}` };

    const first = await dispatch(stub, [exe.id]);
    expect(first).toHaveLength(1);
    expect((await consume(rotatingEnv, first)).explicitAcks).toEqual(["m0"]);
    expect(await live(stub, exe.id)).toMatchObject({ status: "scheduled", attempts: 1, lastHttpStatus: 503 });

    clock.advance(1000); // the retry's backoff
    const second = await dispatch(stub, [exe.id]);
    expect(second).toHaveLength(1);
    expect(second[0]!.dueAt).toBeGreaterThan(first[0]!.dueAt);
    expect((await consume(rotatingEnv, second)).explicitAcks).toEqual(["m0"]);
    expect(await live(stub, exe.id)).toMatchObject({ status: "succeeded", attempts: 2, lastHttpStatus: 200 });

    await clock.flush(stub);
    expect(await jobRow(job.id)).toMatchObject({ status: "completed", run_status: "succeeded", attempts: 2, last_http_status: 200 });
    const shown = (await (await api(`/v1/executions/${exe.id}`)).json()) as Record<string, unknown>;
    expect(shown).toMatchObject({ id: exe.id, status: "succeeded", attempts: 2 });

    const requests = await received(path);
    expect(requests).toHaveLength(2);
    for (const request of requests) {
      expect(request.headers["webhook-id"]).toBe(exe.id);
      expect(signaturesOf(request)).toHaveLength(2);
      expect(verifies(current, request)).toBe(true);
      expect(verifies(next, request)).toBe(true);
      expect(verifies(fallback, request)).toBe(false);
    }
  });
});

describe("a tenant whose signing secret is unusable", () => {
  // STYLE.md habit 7: a consumer acks or retries each message and never throws for one; one
  // tenant's broken configuration must not hold back another tenant's deliveries in the batch
  it.each([
    ["an empty secret", "acme:whsec_"],
    ["a secret that is not base64", "acme:whsec_not*base64!"],
  ])("does not fail the batch for the other tenants: %s", async (_label, secrets) => {
    const brokenPath = uniquePath();
    const healthyPath = uniquePath();
    const broken = await createJob(
      { target: { url: `${receiverUrl()}${brokenPath}` }, retry: { maxAttempts: 3, initialDelayMs: 60_000 } },
      KEYS.acme,
    );
    const healthy = await createJob({ target: { url: `${receiverUrl()}${healthyPath}` } }, KEYS.globex);
    const executions = [(await executionOf(broken.id))!, (await executionOf(healthy.id))!];
    const ids = executions.map((e) => e.id);
    const messages: FireMessage[] = [];
    for (const stub of new Set(executions.map((e) => bucketStub(e.bucket)))) messages.push(...(await dispatch(stub, ids)));
    messages.sort((a, b) => ids.indexOf(a.executionId) - ids.indexOf(b.executionId));
    expect(messages.map((m) => m.executionId)).toEqual(ids);

    const result = await consume({ ...env, WEBHOOK_SECRETS: secrets }, messages);
    // both claimed, so both acked: the broken attempt belongs to its lease and was reported failed
    expect([...result.explicitAcks].sort()).toEqual(["m0", "m1"]);
    expect(result.retryMessages).toEqual([]);

    const healthyStub = bucketStub(executions[1]!.bucket);
    expect(await live(healthyStub, executions[1]!.id)).toMatchObject({ status: "succeeded", attempts: 1 });
    expect(await received(healthyPath)).toHaveLength(1);
    await clock.flush(healthyStub);
    expect(await jobRow(healthy.id)).toMatchObject({ status: "completed", run_status: "succeeded", attempts: 1 });

    // the misconfigured tenant's target is never called unsigned: its attempt failed retryable and waits to retry
    const brokenStub = bucketStub(executions[0]!.bucket);
    expect(await live(brokenStub, executions[0]!.id)).toMatchObject({
      status: "scheduled",
      attempts: 1,
      lastError: expect.stringMatching(/no usable signing secret/),
    });
    expect(await received(brokenPath)).toHaveLength(0);

    // cleanup only: nothing of this test fires later in the file
    expect((await api(`/v1/jobs/${broken.id}`, { method: "DELETE" })).status).toBe(200);
    await clock.flush(brokenStub);
    expect(await bucketRow(brokenStub, executions[0]!.id)).toBeUndefined();
    expect(await received(brokenPath)).toHaveLength(0);
  });
});
