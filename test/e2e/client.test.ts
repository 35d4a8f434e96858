/**
 * The client package against the real local stack (issue 14): the typed client creates, lists,
 * changes, cancels, reads executions and the DLQ and redrives; the receiver helpers verify real
 * deliveries and refuse tampered and replayed ones; and the README's examples run as written
 * (only the stack's address and the receiver's port are put in), against the built package.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, onTestFailed, onTestFinished } from "vitest";
import { SchedulerClient, SchedulerError } from "../../packages/client/src/index.ts";
import { Receiver as WebhookReceiver, WebhookVerificationError } from "../../packages/client/src/receiver.ts";
import { eventually, runProcess, stackForFile } from "./harness.js";

const PORT = 18880;
const ROOT = join(import.meta.dirname, "../..");

const local = stackForFile({ port: PORT });
const { receiver, sink, creds } = local;
let client: SchedulerClient;

beforeAll(() => {
  client = new SchedulerClient({ baseUrl: local.stack.url, apiKey: creds.apiKey, retry: { initialDelayMs: 50 } });
});

const terminal = new Set(["succeeded", "dead", "canceled"]);

describe("the client against the local stack", () => {
  it("creates a job once per call (a repeat with its key returns the original), and it is delivered, signed", async () => {
    onTestFailed(() => console.error(sink.text().slice(-4000)));
    const job = await client.jobs.create({ target: { url: `${receiver.url}/client/one`, body: { n: 1 } }, delay: "1s" });
    expect(job).toMatchObject({ status: "active", target: { url: `${receiver.url}/client/one`, body: '{"n":1}' } });
    const again = await client.jobs.create(
      { target: { url: `${receiver.url}/client/keyed`, body: { n: 2 } }, delay: "1h" },
      { idempotencyKey: `key-${job.id}` },
    );
    const repeat = await client.jobs.create(
      { target: { url: `${receiver.url}/client/keyed`, body: { n: 2 } }, delay: "1h" },
      { idempotencyKey: `key-${job.id}` },
    );
    expect(repeat.id).toBe(again.id);

    const delivery = await eventually("the job is delivered", () => receiver.to("/client/one")[0], 15_000);
    expect(delivery).toMatchObject({ signatureError: null, jobId: job.id, body: '{"n":1}' });
    const finished = await eventually(
      "its execution succeeds",
      async () => {
        const [execution] = await client.jobs.executions(job.id);
        return execution && terminal.has(execution.status) ? execution : undefined;
      },
      10_000,
      200,
    );
    expect(finished.status).toBe("succeeded");
    expect(finished.attempts).toMatchObject([{ attempt: 1, outcome: "succeeded", httpStatus: 200 }]);
    expect(await client.executions.get(finished.id)).toMatchObject({ id: finished.id, status: "succeeded", attempts: 1 });
  });

  it("lists with an async iterator that follows cursors, gets, updates, cancels, pauses and resumes", async () => {
    const far = { target: { url: `${receiver.url}/client/far` }, delay: "1h" };
    const results = await client.jobs.createMany([
      { ...far, name: "list-a" },
      { ...far, name: "list-b" },
      { ...far, name: "list-c" },
    ]);
    expect(results.map((r) => r.status)).toEqual([201, 201, 201]);
    const ids = results.map((r) => ("job" in r ? r.job.id : ""));

    const seen: string[] = [];
    for await (const job of client.jobs.list({ status: "active", limit: 2 })) seen.push(job.id);
    expect(seen).toEqual(expect.arrayContaining(ids));
    expect(new Set(seen).size).toBe(seen.length);

    const [a, b] = ids as [string, string];
    expect((await client.jobs.update(a, { name: "renamed" })).name).toBe("renamed");
    expect((await client.jobs.get(a)).latestExecution).toMatchObject({ status: expect.any(String) });
    expect((await client.jobs.cancel(b)).status).toBe("canceled");

    const recurring = await client.jobs.create({ target: { url: `${receiver.url}/client/cron` }, cron: "0 0 1 1 *" });
    expect((await client.jobs.pause(recurring.id)).status).toBe("paused");
    expect((await client.jobs.resume(recurring.id)).status).toBe("active");
    expect((await client.jobs.get(recurring.id)).nextRuns).toHaveLength(5);

    // a bulk cancel by label runs in the background; the action's progress says when it is done
    const labelled = await client.jobs.createMany([
      { ...far, labels: { sweep: "client-e2e" } },
      { ...far, labels: { sweep: "client-e2e" } },
    ]);
    const started = await client.jobs.bulk("cancel", { filter: { label: "sweep:client-e2e" } });
    const action = await eventually(
      "the bulk cancel is done",
      async () => {
        const a = await client.actions.get(started.id);
        return a.status === "done" ? a : undefined;
      },
      15_000,
      200,
    );
    expect(action).toMatchObject({ kind: "cancel", matched: 2, done: 2, failed: 0 });
    for (const r of labelled) expect((await client.jobs.get("job" in r ? r.job.id : "")).status).toBe("canceled");
  });

  it("shows a dead execution in the DLQ and redrives it; errors carry the envelope's code and field", async () => {
    const job = await client.jobs.create({ target: { url: `${receiver.url}/fail/400` }, retry: { maxAttempts: 1 } });
    const dead = await eventually(
      "the execution is dead",
      async () => (await client.dlq.list().toArray()).find((e) => e.jobId === job.id),
      15_000,
      200,
    );
    expect(dead).toMatchObject({ status: "dead", deadReason: "permanent", lastHttpStatus: 400 });
    expect(await client.dlq.redrive(dead.id)).toMatchObject({ id: dead.id, redriven: true });
    await eventually("the redriven execution runs again", () => receiver.byWebhookId(dead.id).length >= 2, 15_000);

    const notFound = await client.jobs.get("job_nope").catch((e: unknown) => e);
    expect(notFound).toBeInstanceOf(SchedulerError);
    expect(notFound).toMatchObject({ status: 404, code: "not_found", field: "id" });
    const invalid = await client.jobs.create({ target: { url: "not a url" } }).catch((e: unknown) => e);
    expect(invalid).toMatchObject({ status: 400, code: "invalid_field", field: "target.url" });
    expect((await client.metrics()).counters.succeeded_total).toBeGreaterThanOrEqual(1);
  });

  it("verifies real deliveries with the receiver helpers, and refuses a tampered body and an exact replay", async () => {
    const delivered = receiver.to("/client/one")[0]!;
    const seen = new Set<string>();
    const replayGuard = (key: string) => {
      if (seen.has(key)) return true;
      seen.add(key);
      return false;
    };
    const helper = new WebhookReceiver({ secret: creds.secret, replayGuard });

    const delivery = await helper.verify(delivered.body, delivered.headers);
    expect(delivery).toMatchObject({ executionId: delivered.webhookId, attempt: 1, jobId: delivered.jobId, body: { n: 1 } });
    await expect(helper.verify(delivered.body, delivered.headers)).rejects.toMatchObject({ code: "replayed" });

    const fresh = new WebhookReceiver({ secret: creds.secret });
    const tampered = fresh.verify('{"n":2}', delivered.headers);
    await expect(tampered).rejects.toBeInstanceOf(WebhookVerificationError);
    await expect(tampered).rejects.toMatchObject({ code: "bad_signature" });
    const asRequest = new Request("http://hook.test/", { method: "POST", headers: delivered.headers, body: delivered.body });
    expect((await fresh.verifyRequest(asRequest)).executionId).toBe(delivered.webhookId);
  });
});

// ---------------------------------------------------------------------------------------------
// the README's examples, as written, against the built package

/** The fenced block after `<!-- example: name ... -->` in README.md. */
function readmeExample(name: string): string {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const match = new RegExp(`<!-- example: ${name}\\b[^>]*-->\\n\`\`\`\\w*\\n([\\s\\S]*?)\\n\`\`\``).exec(readme);
  if (!match) throw new Error(`README.md has no example "${name}"`);
  return match[1]!;
}

describe("the README's examples", () => {
  // inside the repository, so `edge-scheduler-client` resolves to the workspace package
  const dir = mkdtempSync(join(ROOT, ".readme-examples-"));
  const receiverPort = PORT + 5;
  const children: ChildProcess[] = [];
  /** what the README's Node receiver printed, kept running for the examples after it */
  let hookOut = "";

  beforeAll(() => {
    // the examples import the package as a user does: its built dist/, as npm would install it
    execFileSync(process.execPath, [
      join(ROOT, "node_modules/typescript/bin/tsc"),
      "-p",
      join(ROOT, "packages/client/tsconfig.build.json"),
    ]);
  });
  afterAll(() => {
    for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  });

  const localize = (code: string) => code.replaceAll("http://127.0.0.1:8787", local.stack.url).replaceAll("9000", String(receiverPort));

  it("the Node receiver gets the job the client example creates, verified, once", async () => {
    onTestFailed(() => console.error(sink.text().slice(-4000)));
    writeFileSync(join(dir, "receiver.mjs"), localize(readmeExample("node-receiver")));
    writeFileSync(join(dir, "create.mjs"), localize(readmeExample("client")));

    const hook = spawn(process.execPath, [join(dir, "receiver.mjs")], {
      cwd: ROOT,
      env: { ...process.env, SECRET: creds.secret },
      stdio: ["ignore", "pipe", "pipe"],
    });
    children.push(hook);
    hook.stdout!.on("data", (d) => (hookOut += d));
    hook.stderr!.on("data", (d) => (hookOut += d));
    await eventually(
      "the example receiver listens",
      () =>
        fetch(`http://127.0.0.1:${receiverPort}/`).then(
          () => true,
          () => false,
        ),
      10_000,
      100,
    );

    const created = await runProcess(process.execPath, [join(dir, "create.mjs")], {
      cwd: ROOT,
      env: { ...process.env, KEY: creds.apiKey },
    });
    expect(created.stderr).toBe("");
    expect(created.code).toBe(0);
    const jobId = /created (job_\w+) due/.exec(created.stdout)?.[1];
    expect(jobId).toBeDefined();
    expect(created.stdout).toContain(`active ${jobId}`);
    expect(created.stdout).toContain("error 404 not_found id");

    await eventually("the example receiver does the work", () => hookOut.includes('{"hello":"world"}'), 20_000, 100);
    expect(hookOut).toMatch(/attempt 1 doing the work for exe_\w+ \{"hello":"world"\}/);
    const job = await client.jobs.get(jobId!);
    await eventually("the job succeeds", async () => (await client.jobs.get(jobId!)).latestExecution?.status === "succeeded", 10_000, 200);
    expect(job.target).toMatchObject({ url: `http://127.0.0.1:${receiverPort}/hook` });
  });

  it("the command-line example creates a job and tails it to its delivery", async () => {
    const run = await runProcess("bash", ["-euo", "pipefail", "-c", localize(readmeExample("cli"))], {
      cwd: ROOT,
      env: { ...process.env, KEY: creds.apiKey },
    });
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/exe_\w+ attempt 1 succeeded http 200 lag \d+ ms/);
    expect(run.stdout.trim().split("\n").at(-1)).toMatch(/exe_\w+ succeeded$/);
    await eventually("the example receiver got it", () => hookOut.match(/doing the work for/g)?.length === 2, 10_000, 100);
  });

  it("the Fetch receiver (a Next.js route handler) answers a real delivery 200 and a tampered one 401", async () => {
    writeFileSync(join(dir, "route.mjs"), readmeExample("fetch-receiver"));
    process.env.SECRET = creds.secret; // the example reads it when it is imported
    onTestFinished(() => {
      delete process.env.SECRET;
    });
    const { POST } = (await import(join(dir, "route.mjs"))) as { POST: (request: Request) => Promise<Response> };
    const delivered = receiver.to("/client/one")[0]!;
    const request = (body: string) => new Request("http://app.test/hook", { method: "POST", headers: delivered.headers, body });
    expect((await POST(request(delivered.body))).status).toBe(200);
    const refused = await POST(request('{"n":666}'));
    expect(refused.status).toBe(401);
    expect(await refused.json()).toEqual({ error: "bad_signature" });
  });
});
