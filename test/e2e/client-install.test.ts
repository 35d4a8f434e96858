/**
 * The client installs as documented (issue 37 item 4), from a project of the user's own: in a
 * fresh directory outside the repository (`npm init -y`), the one command
 * `npm install --install-links <clone>/packages/client`, run with the npm and Node of the user's
 * shell (the system's, not the project's pinned one: Node 20 on CI), gives a working
 * `edge-scheduler-client`, its `edge-scheduler-client/receiver` subpath and its CLI, prints no npm
 * warning, and changes nothing of this repository (the package is built by the clone's own
 * `npm install`: its `prepare`, which the test runs as that install would). Then the README's
 * examples (examples/client/) run from that directory against a local stack: create.mjs creates a
 * job that receiver.mjs receives, verified, once; route.mjs (the Fetch receiver) answers a real
 * delivery 200 and a tampered one 401.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { copyFileSync, existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join, sep } from "node:path";
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from "vitest";
import { eventually, type ProcessRun, runProcess, stackForFile } from "./harness.js";

const PORT = 18860;
/** where the example receiver (examples/client/receiver.mjs) listens */
const HOOK_PORT = PORT + 5;
const ROOT = join(import.meta.dirname, "../..");
const EXAMPLES = join(ROOT, "examples", "client");
/** the install command the README gives, with the clone's path put in */
const INSTALL = ["install", "--install-links", join(ROOT, "packages", "client")];
/** an install or a build not done by then is killed (by its pid) and fails the test */
const NPM_TIMEOUT_MS = 120_000;

const local = stackForFile({ port: PORT });
const { receiver, sink, creds } = local;

/**
 * The environment of a user's shell: PATH without the repository's node_modules/.bin (which the
 * test runner's npm put first, with the project's own Node), so `node` and `npm` are the system's.
 * npm reads the registry's copy of the client's dependencies from its cache when it has one.
 */
function userEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const inRepo = [ROOT, realpathSync(join(ROOT, "node_modules"))].map((dir) => dir + sep);
  const path = (process.env.PATH ?? "")
    .split(delimiter)
    .filter((entry) => entry !== "" && !inRepo.some((dir) => (entry + sep).startsWith(dir)));
  return {
    ...process.env,
    PATH: path.join(delimiter),
    npm_config_prefer_offline: "true",
    npm_config_update_notifier: "false",
    npm_config_fund: "false",
    npm_config_audit: "false",
    ...extra,
  };
}

/** The files an install edits when it saves a dependency, which the README's must leave as they were. */
function manifests(): Record<string, string> {
  const files: Record<string, string> = {};
  for (const file of ["package.json", "package-lock.json", "packages/client/package.json"]) {
    files[file] = readFileSync(join(ROOT, file), "utf8");
  }
  return files;
}

/** git's view of the work tree: changed and untracked files (packages/client/dist is ignored) */
async function gitStatus(): Promise<string> {
  const status = await run("git", ["-C", ROOT, "status", "--porcelain"], { timeoutMs: 30_000 });
  expect(status.code, status.stderr).toBe(0);
  return status.stdout;
}

/**
 * Runs a command that reads no input to its end (harness runProcess writes to a stdin that a quick
 * command may have closed); it is killed by its pid after `timeoutMs`.
 */
function run(command: string, args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs: number }): Promise<ProcessRun> {
  const child = spawn(command, args, { cwd: options.cwd, env: options.env ?? process.env, stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
  child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  const killer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs);
  return new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(killer);
      resolve({ code, stdout, stderr });
    });
  });
}

const npmWarnings = (done: ProcessRun) => `${done.stdout}\n${done.stderr}`.split("\n").filter((line) => /^npm warn/i.test(line));

describe("the client installed into another project with the README's one command", () => {
  const project = mkdtempSync(join(tmpdir(), "client-install-"));
  const children: ChildProcess[] = [];
  let before: { manifests: Record<string, string>; status: string };
  let nodeVersion = "";
  let install: ProcessRun;
  /** what the example receiver printed */
  let hookOut = "";
  let jobId = "";

  beforeAll(async () => {
    before = { manifests: manifests(), status: await gitStatus() };
    const env = userEnv();
    const node = await run("node", ["--version"], { env, timeoutMs: 30_000 });
    expect(node.code, `the user's shell has no node of its own: ${node.stderr}`).toBe(0);
    nodeVersion = node.stdout.trim();
    // what `npm install` in the clone runs after installing (the root's prepare): it builds packages/client/dist
    const build = await run("npm", ["run", "prepare"], { env, cwd: ROOT, timeoutMs: NPM_TIMEOUT_MS });
    expect(build.code, `${build.stdout}\n${build.stderr}`).toBe(0);
    const init = await run("npm", ["init", "-y"], { env, cwd: project, timeoutMs: NPM_TIMEOUT_MS });
    expect(init.code, init.stderr).toBe(0);
    install = await run("npm", INSTALL, { env, cwd: project, timeoutMs: NPM_TIMEOUT_MS });
  }, 3 * NPM_TIMEOUT_MS);

  afterAll(() => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    rmSync(project, { recursive: true, force: true });
  });

  it("installs a built copy with no warning, and changes nothing of the repository", async () => {
    console.log(`installed with the system's npm on node ${nodeVersion}`);
    expect(install.code, `${install.stdout}\n${install.stderr}`).toBe(0);
    expect(npmWarnings(install)).toEqual([]);
    const manifest = JSON.parse(readFileSync(join(project, "package.json"), "utf8")) as { dependencies?: Record<string, string> };
    expect(manifest.dependencies?.["edge-scheduler-client"]).toMatch(/^file:/);
    // a copy, as the registry's package would be, not a link into the clone
    const installed = join(project, "node_modules", "edge-scheduler-client");
    expect(lstatSync(installed).isSymbolicLink()).toBe(false);
    expect(existsSync(join(installed, "dist", "index.js"))).toBe(true);
    expect(existsSync(join(installed, "dist", "receiver.js"))).toBe(true);
    expect(existsSync(join(installed, "src"))).toBe(false);
    expect(existsSync(join(project, "node_modules", "standardwebhooks"))).toBe(true);

    expect(manifests()).toEqual(before.manifests);
    expect(await gitStatus()).toBe(before.status);
  });

  it("runs the client example (create.mjs), whose job the Node receiver example (receiver.mjs) receives, verified, once", async () => {
    onTestFailed(() => console.error(`receiver.mjs printed:\n${hookOut}\n${sink.text().slice(-4000)}`));
    // the user copies the examples into their project
    for (const file of readdirSync(EXAMPLES).filter((name) => name.endsWith(".mjs")))
      copyFileSync(join(EXAMPLES, file), join(project, file));

    const hook = spawn("node", ["receiver.mjs"], {
      cwd: project,
      env: userEnv({ SECRET: creds.secret, PORT: String(HOOK_PORT) }),
      stdio: ["ignore", "pipe", "pipe"],
    });
    children.push(hook);
    hook.stdout!.on("data", (d) => (hookOut += d));
    hook.stderr!.on("data", (d) => (hookOut += d));
    await eventually(
      "the example receiver listens",
      () =>
        fetch(`http://127.0.0.1:${HOOK_PORT}/`, { signal: AbortSignal.timeout(2000) }).then(
          () => true,
          () => false,
        ),
      15_000,
      100,
    );
    // an unsigned request is refused
    expect((await fetch(`http://127.0.0.1:${HOOK_PORT}/hook`, { method: "POST", body: "{}" })).status).toBe(401);

    const created = await run("node", ["create.mjs"], {
      cwd: project,
      env: userEnv({ KEY: creds.apiKey, SCHEDULER_URL: local.stack.url, HOOK_URL: `http://127.0.0.1:${HOOK_PORT}/hook` }),
      timeoutMs: 60_000,
    });
    expect(created.stderr).toBe("");
    expect(created.code).toBe(0);
    jobId = /^created (job_\w+) due \S+$/m.exec(created.stdout)?.[1] ?? "";
    expect(jobId).not.toBe("");
    expect(created.stdout).toContain(`active ${jobId}`);
    expect(created.stdout).toContain("error 404 not_found id");

    await eventually("the example receiver does the work", () => hookOut.includes('{"hello":"world"}'), 30_000, 100);
    expect(hookOut).toMatch(/^attempt 1 doing the work for exe_\w+ \{"hello":"world"\}$/m);
    const job = await eventually(
      "the job's execution succeeds",
      async () => {
        const { body } = await local.api.job(jobId);
        return body.latestExecution?.status === "succeeded" ? body : undefined;
      },
      15_000,
      200,
    );
    expect(job.id).toBe(jobId);
    expect(hookOut.match(/doing the work for/g)).toHaveLength(1);
  });

  it("runs the Fetch receiver example (route.mjs): a real delivery is answered 200, a tampered one 401", async () => {
    const created = await local.api.createJob({ target: { url: `${receiver.url}/install/fetch`, body: { n: 1 } } });
    expect(created.status).toBe(201);
    const delivered = await eventually("the delivery arrives", () => receiver.to("/install/fetch")[0], 30_000);
    expect(delivered.signatureError).toBeNull();
    // a route handler is called by its framework; here by a few lines of the user's project
    const driver = `
      import { POST } from "./route.mjs";
      let input = "";
      for await (const chunk of process.stdin) input += chunk;
      const { headers, body } = JSON.parse(input);
      const post = (text) => POST(new Request("http://app.test/hook", { method: "POST", headers, body: text }));
      const real = await post(body);
      const tampered = await post('{"n":666}');
      console.log(JSON.stringify({ real: real.status, tampered: tampered.status, refusal: await tampered.json() }));
    `;
    const routed = await runProcess("node", ["--input-type=module", "-e", driver], {
      cwd: project,
      env: userEnv({ SECRET: creds.secret }),
      input: JSON.stringify({ headers: delivered.headers, body: delivered.body }),
      timeoutMs: 30_000,
    });
    expect(routed.stderr).toBe("");
    expect(routed.code).toBe(0);
    const lines = routed.stdout.trim().split("\n");
    expect(lines[0]).toBe(`attempt 1 of ${delivered.webhookId} {"n":1}`);
    expect(JSON.parse(lines.at(-1)!)).toEqual({ real: 200, tampered: 401, refusal: { error: "bad_signature" } });
  });

  it("runs the CLI the package installs (edge-scheduler, from its build)", async () => {
    expect(jobId).not.toBe("");
    const cli = await run(join(project, "node_modules", ".bin", "edge-scheduler"), ["jobs", "get", jobId, "--json"], {
      cwd: project,
      env: userEnv({ SCHEDULER_URL: local.stack.url, SCHEDULER_KEY: creds.apiKey }),
      timeoutMs: 30_000,
    });
    expect(cli.stderr).toBe("");
    expect(cli.code).toBe(0);
    expect(JSON.parse(cli.stdout)).toMatchObject({ id: jobId, latestExecution: { status: "succeeded" } });
  });
});
