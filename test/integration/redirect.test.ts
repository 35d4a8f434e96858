/**
 * Redirects are answers, never followed (issue 6, target policy; DESIGN.md "HTTP targets": other
 * 4xx and 3xx are permanent): a target answering 3xx fails its attempt permanently (dead, reason
 * permanent, httpStatus kept), is not retried, and the Location it names is never requested, so
 * a redirect cannot lead the scheduler to a loopback, private or metadata address.
 *
 * The limit of what workerd lets a test show: the loopback receiver (receiver-setup.ts, shared,
 * not ours to change) answers /fail/3xx without a Location header, and a test inside workerd
 * cannot start a server of its own. So the real runtime path is shown with /fail/3xx (real
 * HTTP, real classification), and "Location never requested" with a fetch that answers one
 * target path with a 302 carrying a Location (the receiver's other path, and the cloud metadata
 * address) while every other request goes to the network: it records every request the
 * consumer made and the redirect mode each one asked the runtime for ("manual").
 *
 * The fire queue binding is replaced for the whole file (sends captured): attempts run only
 * when a test calls fire().
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterAll, beforeAll, describe, expect, it, onTestFinished, vi } from "vitest";
import type { Bucket } from "../../src/bucket/bucket";
import { deliver } from "../../src/consumer/webhook";
import { SigningKeys } from "../../src/consumer/signing";
import {
  api,
  bucketAttempts,
  bucketRow,
  bucketSql,
  bucketStub,
  createJob,
  executionOf,
  fire,
  fireMessage,
  flushMirror,
  received,
  receiverUrl,
  uniquePath,
} from "./helpers";

beforeAll(() => {
  const metadata = { metrics: { backlogCount: 0, backlogBytes: 0 } };
  for (let i = 0; env[`FIRE_QUEUE_${i}`] !== undefined; i++) {
    vi.spyOn(env[`FIRE_QUEUE_${i}`]!, "sendBatch").mockImplementation(async () => ({ metadata }));
  }
});
afterAll(() => vi.restoreAllMocks());

/** Creates a job aimed at `url` with room for retries, runs its first attempt, and returns where it ended. */
async function runOnce(url: string) {
  const job = await createJob({ target: { url, body: { n: 1 } }, retry: { maxAttempts: 5, initialDelayMs: 0, jitter: 0 } });
  const exe = (await executionOf(job.id))!;
  const stub = bucketStub(exe.bucket);
  await bucketSql(stub, "UPDATE executions SET due_at = ? WHERE id = ?", Date.now() - 1, exe.id);
  await runInDurableObject(stub, (instance: Bucket) => instance.alarm());
  const result = await fire([fireMessage(exe)]);
  expect(result.explicitAcks).toEqual(["m0"]);
  expect(result.retryMessages).toEqual([]);
  return { job, exe, stub, row: (await bucketRow(stub, exe.id))!, attempts: await bucketAttempts(stub, exe.id) };
}

/**
 * Replaces fetch for one test: a request to `path` on the receiver answers 302 with `location`;
 * everything else goes to the network. Returns every request made, as the runtime got it.
 */
function redirectingFetch(path: string, location: string): { seen: Request[]; restore: () => void } {
  const realFetch = globalThis.fetch.bind(globalThis);
  const seen: Request[] = [];
  const spy = vi.spyOn(globalThis, "fetch").mockImplementation(async (input: RequestInfo | URL, init?: RequestInit) => {
    const request = new Request(input, init);
    seen.push(request);
    if (new URL(request.url).pathname === path) return new Response("moved", { status: 302, headers: { location } });
    return realFetch(input, init);
  });
  onTestFinished(() => spy.mockRestore());
  return { seen, restore: () => spy.mockRestore() };
}

describe("a 3xx answer from the real runtime", () => {
  it.each([301, 302, 303, 307, 308])("fails permanently on %d: dead with reason permanent and the status kept, no retry", async (status) => {
    const path = uniquePath(`fail/${status}`);
    const { exe, stub, row, attempts } = await runOnce(`${receiverUrl()}${path}`);
    expect(row).toMatchObject({ status: "dead", dead_reason: "permanent", last_http_status: status, attempt: 1 });
    expect(attempts).toEqual([expect.objectContaining({ attempt: 1, http_status: status })]);
    expect(await received(path)).toHaveLength(1);

    await flushMirror(stub);
    const shown = (await (await api(`/v1/executions/${exe.id}`)).json()) as Record<string, unknown>;
    expect(shown).toMatchObject({ status: "dead", deadReason: "permanent", lastHttpStatus: status, attempts: 1 });
    const { executions } = (await (await api("/v1/dlq?limit=200")).json()) as { executions: { id: string }[] };
    expect(executions.map((e) => e.id)).toContain(exe.id);
  });
});

describe("the Location of a redirect is never requested", () => {
  it("fails permanently on a 302 to the receiver's other path and never requests it", async () => {
    const tag = crypto.randomUUID();
    const followed = `/ok?followed=${tag}`;
    const { seen } = redirectingFetch("/redirect-source", `${receiverUrl()}${followed}`);
    const { row } = await runOnce(`${receiverUrl()}/redirect-source?t=${tag}`);

    expect(row).toMatchObject({ status: "dead", dead_reason: "permanent", last_http_status: 302, attempt: 1 });
    const toTarget = seen.filter((r) => r.url.includes("/redirect-source"));
    expect(toTarget).toHaveLength(1);
    expect(toTarget[0]!.redirect).toBe("manual");
    expect(seen.filter((r) => r.url.includes(`followed=${tag}`))).toEqual([]);
    expect(await received(followed)).toEqual([]);
  });

  it("never requests a redirect into the cloud metadata address or loopback (target policy)", async () => {
    for (const location of ["http://169.254.169.254/latest/meta-data/", "http://127.0.0.1:1/admin", "http://[::1]/"]) {
      const { seen, restore } = redirectingFetch("/redirect-forbidden", location);
      const outcome = await deliver(
        {
          executionId: `exe_${crypto.randomUUID().replace(/-/g, "").slice(0, 26)}`,
          jobId: "job_redirect",
          attempt: 1,
          target: { url: `${receiverUrl()}/redirect-forbidden?t=${crypto.randomUUID()}`, method: "POST", headers: {}, body: "{}" },
          timeoutMs: 5_000,
        },
        await new SigningKeys({ WEBHOOK_SECRET: env.WEBHOOK_SECRET!, WEBHOOK_SECRETS: "" }).forTenant("acme"),
        Date.now(),
      );
      expect(outcome).toMatchObject({ kind: "failed", failure: "permanent", httpStatus: 302 });
      expect(seen.map((r) => new URL(r.url).pathname)).toEqual(["/redirect-forbidden"]);
      expect(seen[0]!.redirect).toBe("manual");
      restore();
    }
  });
});
