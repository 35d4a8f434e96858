/**
 * Callbacks over the real local stack (issue 29 item 1, README "Callbacks"): a job created with
 * the CLI's --callback-url and --failure-callback-url; the loopback receiver verifies every
 * signature. Proves: a success reaches the callback signed under the callback's own webhook-id,
 * the same on its retry, with the execution's outcome as body; a death reaches the
 * failureCallback; GET /v1/executions/:id shows each callback's state.
 */
import { fileURLToPath } from "node:url";
import { describe, expect, it, onTestFailed } from "vitest";
import { type ExecutionView, eventually, runProcess, settledExecution, stackForFile } from "./harness.js";

const PORT = 18941;
const CLI = fileURLToPath(new URL("../../packages/client/src/cli.ts", import.meta.url));

const local = stackForFile({
  port: PORT,
  routes: {
    "/cb-flaky": { kind: "failTimes", times: 1, status: 503 },
    "/down": { kind: "always", status: 500 },
  },
});
const { receiver, sink } = local;

/** `edge-scheduler jobs create ...` as a shell would run it; the job id it printed. */
async function createWithCli(args: string[]): Promise<string> {
  const env = { ...process.env, SCHEDULER_URL: local.stack.url, SCHEDULER_KEY: local.creds.apiKey };
  const run = await runProcess(process.execPath, [CLI, "jobs", "create", ...args], { env, timeoutMs: 40_000 });
  expect(run.code, run.stderr).toBe(0);
  return /^(job_\S+)\s/.exec(run.stdout)![1]!;
}

type WithCallbacks = ExecutionView & { callbacks: { kind: string; status: string; attempts: number }[] };

async function callbacksSettled(executionId: string, status: string): Promise<WithCallbacks> {
  return eventually(
    `callback of ${executionId} ${status}`,
    async () => {
      const res = await local.api.request<WithCallbacks>("GET", `/v1/executions/${executionId}`);
      return res.body.callbacks?.[0]?.status === status ? res.body : undefined;
    },
    20_000,
  );
}

describe("callbacks over the real local stack", () => {
  it("tells --callback-url of a success, signed, with the same webhook-id on its retry", async () => {
    onTestFailed(() => console.error(sink.text().slice(-4000)));
    const jobId = await createWithCli([
      "--target",
      `${receiver.url}/ok-target`,
      "--callback-url",
      `${receiver.url}/cb-flaky`,
      "--failure-callback-url",
      `${receiver.url}/never`,
      "--delay",
      "200ms",
    ]);
    const e = await settledExecution(local.api, jobId, "succeeded", 1, 20_000);
    const settled = await callbacksSettled(e.id, "succeeded");
    expect(settled.callbacks).toEqual([{ kind: "success", status: "succeeded", attempts: 2 }]);
    const requests = receiver.to("/cb-flaky");
    expect(requests).toHaveLength(2);
    for (const r of requests) expect(r.signatureError).toBeNull();
    expect(requests[0]!.webhookId).not.toBe(e.id); // the callback's own id
    expect(requests[1]!.webhookId).toBe(requests[0]!.webhookId);
    expect(JSON.parse(requests[1]!.body)).toMatchObject({
      type: "execution.succeeded",
      executionId: e.id,
      jobId,
      status: "succeeded",
      attempts: 1,
      httpStatus: 200,
    });
    expect(receiver.to("/never")).toHaveLength(0);
  });

  it("tells --failure-callback-url of a death", async () => {
    onTestFailed(() => console.error(sink.text().slice(-4000)));
    const jobId = await createWithCli([
      "--target",
      `${receiver.url}/down`,
      "--max-attempts",
      "1",
      "--failure-callback-url",
      `${receiver.url}/told-dead`,
    ]);
    const e = await settledExecution(local.api, jobId, "dead", 1, 20_000);
    await callbacksSettled(e.id, "succeeded");
    const [request] = receiver.to("/told-dead");
    expect(request!.signatureError).toBeNull();
    expect(JSON.parse(request!.body)).toMatchObject({
      type: "execution.dead",
      executionId: e.id,
      status: "dead",
      httpStatus: 500,
      deadReason: "attempts_exhausted",
    });
  });
});
