/**
 * The CLI (packages/client/src/cli.ts) over the real local stack: each test runs it as a child
 * process, as a user's shell would, and reads its stdout, stderr and exit code. Proves: every
 * command answers (create, list, get, cancel, executions, tail, dlq, metrics), --json is the API's
 * JSON, and the exit codes scripts rely on (0, 1, 2, 3, 4, 5, 124, 130) hold.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startStack } from "../../scripts/local-stack.mjs";
import {
  credentials,
  eventually,
  type JobView,
  type LocalStack,
  logSink,
  type ProcessRun,
  Receiver,
  removeStateDir,
  runProcess,
} from "./harness.js";

const PORT = 18890;
const CLI = fileURLToPath(new URL("../../packages/client/src/cli.ts", import.meta.url));
/** a CLI run that has not exited by then is killed (SIGKILL to its pid) and fails its test */
const RUN_TIMEOUT_MS = 40_000;

// The stackForFile set-up, by hand: the CLI needs the API key, which the harness's Api keeps private.
const creds = credentials();
const receiver = new Receiver(creds.secret);
const sink = logSink();
let stack: LocalStack | undefined;

beforeAll(async () => {
  await receiver.listen();
  try {
    stack = await startStack({ port: PORT, vars: creds.vars, log: sink.log });
  } catch (error) {
    if (error instanceof Error) error.message += `\nstack log: ${relative(process.cwd(), sink.path)}`;
    throw error;
  }
});

afterAll(async () => {
  await stack?.stop();
  await receiver.close();
  removeStateDir(stack?.persistTo);
});

type Run = ProcessRun;

interface RunOptions {
  /** SCHEDULER_KEY (default: the stack's key) */
  key?: string;
  /** written to the CLI's stdin, then closed */
  input?: string;
  /** sent to the CLI (by its pid) once it has printed something */
  signalAfterOutput?: NodeJS.Signals;
}

/** Runs the CLI with SCHEDULER_URL and SCHEDULER_KEY set; resolves when it exits. */
function cli(args: string[], options: RunOptions = {}): Promise<Run> {
  const env = { ...process.env, SCHEDULER_URL: stack!.url, SCHEDULER_KEY: options.key ?? creds.apiKey };
  return runProcess(process.execPath, [CLI, ...args], {
    env,
    input: options.input,
    signalAfterOutput: options.signalAfterOutput,
    timeoutMs: RUN_TIMEOUT_MS,
  });
}

/** The id a human `jobs create` printed first. */
function createdId(run: Run): string {
  expect(run.code, run.stderr).toBe(0);
  const id = /^(job_\S+)\s/.exec(run.stdout)?.[1];
  expect(id, run.stdout).toBeDefined();
  return id!;
}

function parsed<T>(run: Run): T {
  expect(run.code, run.stderr).toBe(0);
  return JSON.parse(run.stdout) as T;
}

interface ExecutionJson {
  id: string;
  jobId: string;
  status: string;
  attempts: { attempt: number; outcome: string | null; httpStatus: number | null }[];
}

describe("the edge-scheduler CLI over the real local stack", () => {
  it("--help lists the commands and exit codes; a group's --help its commands; an unknown command is a usage error", async () => {
    const help = await cli(["--help"]);
    expect(help.code).toBe(0);
    for (const command of ["jobs create", "jobs list", "executions <jobId>", "dlq redrive", "metrics", "tail <jobId>"]) {
      expect(help.stdout).toContain(command);
    }
    expect(help.stdout).toMatch(/exit codes:[\s\S]*124/);

    const jobs = await cli(["jobs", "--help"]);
    expect(jobs.code).toBe(0);
    expect(jobs.stdout).toContain("jobs cancel <id>");

    const unknown = await cli(["frobnicate"]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('unknown command "frobnicate"');
    expect(unknown.stderr).toContain("usage: edge-scheduler");

    const badFlag = await cli(["jobs", "list", "--cron", "* * * * *"]);
    expect(badFlag.code).toBe(2);
    expect(badFlag.stderr).toContain("usage: edge-scheduler jobs list");
  });

  it("alerts set (--throttled-for 2m), get and delete: the API's target; get exits 3 when none is set; a bad delay is a usage error", async () => {
    const help = await cli(["alerts", "--help"]);
    expect(help.stdout).toContain("alerts set");
    const set = await cli([
      "alerts",
      "set",
      "--target",
      `${receiver.url}/alerts`,
      "--header",
      "x-team: ops",
      "--throttled-for",
      "2m",
      "--json",
    ]);
    expect(set.code, set.stderr).toBe(0);
    expect(JSON.parse(set.stdout)).toMatchObject({ url: `${receiver.url}/alerts`, headers: { "x-team": "ops" }, throttledForMs: 120_000 });
    const get = await cli(["alerts", "get"]);
    expect(get.code, get.stderr).toBe(0);
    expect(get.stdout).toMatch(/throttled for\s+120000 ms/);
    const bad = await cli(["alerts", "set", "--target", `${receiver.url}/alerts`, "--throttled-for", "soon"]);
    expect(bad.code).toBe(2);
    const refused = await cli(["alerts", "set", "--target", `${receiver.url}/alerts`, "--throttled-for", "10ms"]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("(field throttledForMs)");
    expect((await cli(["alerts", "delete"])).code).toBe(0);
    const none = await cli(["alerts", "get"]);
    expect(none.code).toBe(3);
    expect(none.stdout).toContain("no alert target is set");
  });

  it("jobs create then tail: the delivery succeeds, tail prints it and exits 0; the receiver got the body", async () => {
    const id = createdId(await cli(["jobs", "create", "--target", `${receiver.url}/cli`, "--delay", "1s", "--body", '{"a":1}']));

    const tail = await cli(["tail", id, "--exit-after", "1", "--timeout", "20"]);
    expect(tail.code, tail.stderr).toBe(0);
    expect(tail.stdout).toMatch(/^\S+Z exe_\S+ attempt 1 succeeded http 200 lag \d+ ms$/m);
    expect(tail.stdout).toMatch(/^\S+Z exe_\S+ succeeded$/m);

    // a one-off job already final: tail --json prints its execution as one JSON line and exits
    const lines = await cli(["tail", id, "--json"]);
    expect(lines.code, lines.stderr).toBe(0);
    expect(
      lines.stdout
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line)),
    ).toMatchObject([{ jobId: id, status: "succeeded" }]);

    const [delivery] = receiver.to("/cli");
    expect(delivery?.jobId).toBe(id);
    expect(delivery?.body).toBe('{"a":1}');
    expect(delivery?.signatureError).toBeNull();

    const executions = await cli(["executions", id]);
    expect(executions.code, executions.stderr).toBe(0);
    expect(executions.stdout).toMatch(/^EXECUTION\s+STATUS\s+ATTEMPTS\s+DUE\s+LAST$/m);
    expect(executions.stdout).toMatch(/^exe_\S+\s+succeeded\s+1\s+\S+\s+http 200$/m);

    const attempts = await cli(["executions", id, "--attempts"]);
    expect(attempts.stdout).toMatch(/^exe_\S+\s+1\s+\S+\s+succeeded\s+200\s+\d+ ms/m);

    const [execution] = parsed<ExecutionJson[]>(await cli(["executions", id, "--json"]));
    expect(execution).toMatchObject({ jobId: id, status: "succeeded", attempts: [{ attempt: 1, outcome: "succeeded", httpStatus: 200 }] });

    const one = await cli(["executions", "get", execution!.id]);
    expect(one.code, one.stderr).toBe(0);
    expect(one.stdout).toMatch(/^status\s+succeeded$/m);

    const metrics = await eventually(
      "metrics count the success",
      async () => {
        const run = await cli(["metrics"]);
        return run.code === 0 && /^succeeded_total\s+[1-9]/m.test(run.stdout) ? run : undefined;
      },
      15_000,
      500,
    );
    expect(metrics.stdout).toMatch(/^fire lag\s+p50 \d+ ms/m);
  });

  it("jobs create --file (flags override it) and from stdin, --json; jobs list and get show it; cancel cancels it", async () => {
    const dir = await mkdtemp(join(tmpdir(), "cli-test-"));
    try {
      const file = join(dir, "job.json");
      const spec = { name: "from-file", target: { url: `${receiver.url}/file`, headers: { "x-one": "1" }, body: "hello" }, delay: "1h" };
      await writeFile(file, JSON.stringify(spec));
      const job = parsed<JobView & { name: string; target: { url: string; headers: Record<string, string>; body: string } }>(
        await cli(["jobs", "create", "--file", file, "--name", "cli-file-job", "--header", "x-two: 2", "--json"]),
      );
      expect(job).toMatchObject({ status: "active", name: "cli-file-job", target: { url: `${receiver.url}/file`, body: "hello" } });
      expect(job.target.headers).toMatchObject({ "x-one": "1", "x-two": "2" });

      const fromStdin = parsed<JobView & { name: string }>(
        await cli(["jobs", "create", "--file", "-", "--json"], { input: JSON.stringify(spec) }),
      );
      expect(fromStdin.name).toBe("from-file");

      const listed = parsed<JobView[]>(await cli(["jobs", "list", "--json", "--status", "active"]));
      expect(listed.map((j) => j.id)).toEqual(expect.arrayContaining([job.id, fromStdin.id]));
      const table = await cli(["jobs", "list", "--limit", "1"]);
      expect(table.stdout.trim().split("\n")).toHaveLength(2); // the head and the newest job
      expect(table.stdout).toMatch(new RegExp(`^${fromStdin.id}\\s+active\\s+\\S+\\s+from-file\\s+POST ${receiver.url}/file$`, "m"));

      const shown = await cli(["jobs", "get", job.id]);
      expect(shown.code, shown.stderr).toBe(0);
      expect(shown.stdout).toMatch(new RegExp(`^id\\s+${job.id}$`, "m"));
      expect(shown.stdout).toMatch(/^schedule\s+one-off$/m);
      expect(shown.stdout).toMatch(/^latest execution\s+exe_\S+\s+(pending|scheduled), 0 attempts/m);

      const canceled = await cli(["jobs", "cancel", job.id]);
      expect(canceled.code, canceled.stderr).toBe(0);
      expect(canceled.stdout.trim()).toBe(`${job.id}  canceled`);
      expect(parsed<JobView>(await cli(["jobs", "get", job.id, "--json"])).status).toBe("canceled");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("a job whose target answers 400 is dead: tail ends by itself, dlq list shows it, dlq redrive runs it again", async () => {
    const id = createdId(await cli(["jobs", "create", "--target", `${receiver.url}/fail/400`, "--max-attempts", "1"]));
    const tail = await cli(["tail", id, "--timeout", "20"]);
    expect(tail.code, tail.stderr).toBe(0);
    expect(tail.stdout).toMatch(/ attempt 1 permanent http 400 lag \d+ ms/);
    expect(tail.stdout).toMatch(/ exe_\S+ dead \(permanent\)$/m);

    const dead = await eventually(
      "the execution is in the DLQ",
      async () => parsed<ExecutionJson[]>(await cli(["dlq", "list", "--json"])).find((e) => e.jobId === id),
      15_000,
      500,
    );
    expect((await cli(["dlq", "list"])).stdout).toMatch(new RegExp(`^${dead.id}\\s+${id}\\s+permanent\\s+1\\s`, "m"));

    const redriven = await cli(["dlq", "redrive", dead.id]);
    expect(redriven.code, redriven.stderr).toBe(0);
    expect(redriven.stdout).toContain(`${dead.id}  redriven`);
    await eventually(
      "the redriven execution is delivered again",
      () => receiver.to("/fail/400").filter((r) => r.jobId === id).length >= 2,
      20_000,
    );
  });

  it("exit codes: 1 refused, 3 not found, 4 wrong key, 5 unreachable, 124 tail timeout, 130 Ctrl-C", async () => {
    const refused = await cli(["jobs", "create", "--target", "ftp://example.com/x"]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^error invalid_field: .+ \(field target\.url\)$/m);

    const missing = await cli(["jobs", "get", "job_nope"]);
    expect(missing.code).toBe(3);
    expect(missing.stderr).toMatch(/^error not_found: /m);

    const wrongKey = await cli(["jobs", "list"], { key: "not-a-key" });
    expect(wrongKey.code).toBe(4);

    const unreachable = await cli(["jobs", "list", "--url", "http://127.0.0.1:1"]);
    expect(unreachable.code).toBe(5);
    expect(unreachable.stderr).toMatch(/^error network: /m);

    const far = createdId(await cli(["jobs", "create", "--target", `${receiver.url}/far`, "--delay", "1h"]));
    const timedOut = await cli(["tail", far, "--timeout", "1"]);
    expect(timedOut.code).toBe(124);
    expect(timedOut.stdout).toMatch(/^\S+Z exe_\S+ (pending|scheduled) due /m);

    const interrupted = await cli(["tail", far], { signalAfterOutput: "SIGINT" });
    expect(interrupted.code).toBe(130);
  });

  it("jobs create --priority 9: the job has it, jobs get shows it; --priority 10 is the API's 400 naming the field (issue 29)", async () => {
    const id = createdId(await cli(["jobs", "create", "--target", `${receiver.url}/cli-priority`, "--delay", "1h", "--priority", "9"]));
    expect(parsed<{ priority: number }>(await cli(["jobs", "get", id, "--json"])).priority).toBe(9);
    expect((await cli(["jobs", "get", id])).stdout).toMatch(/priority\s+9/);
    const refused = await cli(["jobs", "create", "--target", `${receiver.url}/cli-priority`, "--priority", "10"]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("priority");
  });
});
