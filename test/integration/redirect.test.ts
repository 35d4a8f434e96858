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
 * The file runs on one virtual clock and its fire-queue sends are captured: attempts run only
 * when a test feeds the messages to the consumer with fire().
 */
import { env } from "cloudflare:workers";
import { describe, expect, it, onTestFinished, vi } from "vitest";
import type { AttemptRecord } from "../../src/bucket/protocol";
import { deliver } from "../../src/consumer/webhook";
import { SigningKeys } from "../../src/core/signing";
import {
  api,
  bucketRow,
  bucketStub,
  captureFiresForFile,
  createJob,
  executionOf,
  fileClock,
  fire,
  jobRow,
  live,
  received,
  receiverUrl,
  runAlarm,
  uniquePath,
} from "./helpers";

const clock = fileClock(10 * 60_000); // ahead of the real clock: no real alarm dispatches a job before the test does
const sent = captureFiresForFile();

/** Runs a bucket's alarm and takes the fire messages it sent for this execution. */
async function dispatch(stub: ReturnType<typeof bucketStub>, executionId: string) {
  await runAlarm(stub);
  const mine = sent.filter((m) => m.executionId === executionId);
  sent.splice(0, sent.length, ...sent.filter((m) => m.executionId !== executionId));
  return mine;
}

/**
 * Creates a job aimed at `url` with room for retries (due now), runs its first attempt through
 * the consumer, writes its outcome to D1, and returns where it ended: the D1 job row and its
 * attempt log. A retry would be due 1 s later: the clock is moved past it to show none comes.
 */
async function runOnce(url: string) {
  const job = await createJob({ target: { url, body: { n: 1 } }, retry: { maxAttempts: 5, initialDelayMs: 1000, jitter: 0 } });
  const exe = (await executionOf(job.id))!;
  const stub = bucketStub(exe.bucket);
  const messages = await dispatch(stub, exe.id);
  expect(messages).toHaveLength(1);
  const result = await fire(messages);
  expect(result.explicitAcks).toEqual(["m0"]);
  expect(result.retryMessages).toEqual([]);
  const view = await live(stub, exe.id);
  await clock.flush(stub);
  // no retry: the bucket holds nothing of it and sends nothing more, however long we wait
  clock.advance(60_000);
  expect(await dispatch(stub, exe.id)).toEqual([]);
  expect(await bucketRow(stub, exe.id)).toBeUndefined();
  const row = (await jobRow(job.id))!;
  const attempts = row.attempt_log ? (JSON.parse(row.attempt_log) as AttemptRecord[]) : [];
  return { job, exe, stub, view, row, attempts };
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
  it.each([301, 302, 303, 307, 308])(
    "fails permanently on %d: dead with reason permanent and the status kept, no retry",
    async (status) => {
      const path = uniquePath(`fail/${status}`);
      const { exe, view, row, attempts } = await runOnce(`${receiverUrl()}${path}`);
      expect(view).toMatchObject({ status: "dead", attempts: 1, lastHttpStatus: status });
      expect(row).toMatchObject({
        status: "completed",
        run_status: "dead",
        dead_reason: "permanent",
        last_http_status: status,
        attempts: 1,
      });
      expect(attempts).toEqual([expect.objectContaining({ attempt: 1, httpStatus: status, outcome: "permanent" })]);
      expect(await received(path)).toHaveLength(1);

      const shown = (await (await api(`/v1/executions/${exe.id}`)).json()) as Record<string, unknown>;
      expect(shown).toMatchObject({ status: "dead", deadReason: "permanent", lastHttpStatus: status, attempts: 1 });
      const { executions } = (await (await api("/v1/dlq?limit=200")).json()) as { executions: { id: string }[] };
      expect(executions.map((e) => e.id)).toContain(exe.id);
    },
  );
});

describe("the Location of a redirect is never requested", () => {
  it("fails permanently on a 302 to the receiver's other path and never requests it", async () => {
    const tag = crypto.randomUUID();
    const followed = `/ok?followed=${tag}`;
    const { seen } = redirectingFetch("/redirect-source", `${receiverUrl()}${followed}`);
    const { row } = await runOnce(`${receiverUrl()}/redirect-source?t=${tag}`);

    expect(row).toMatchObject({ run_status: "dead", dead_reason: "permanent", last_http_status: 302, attempts: 1 });
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
