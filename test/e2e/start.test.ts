/**
 * `npm start` is quiet (issue 37 item 5): before wrangler's "Ready on" it prints a few lines of its
 * own, where it listens, the API key (which opens the API) and one line per D1 shard saying what
 * it migrated, and none of wrangler's tables (migrations, bindings), which go to start.log beside
 * the state. Run as a
 * user runs it (`npm start`, its own process group, stopped by its id) on a fresh state directory
 * (PERSIST_TO), then on the same one (up to date), then on a path wrangler cannot use: the
 * migration's failure is printed and the start exits 1.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it, onTestFailed } from "vitest";
import { migrationFiles, parseDevVars, ROOT, shardBindings } from "../../scripts/local-env.mjs";
import { eventually, sleep } from "./harness.js";

const PORT = 18950;
const URL_ = `http://127.0.0.1:${PORT}`;
/** npm's own lines: its banner, before the script prints anything */
const NPM_BANNER = /^> /;

interface Started {
  child: ChildProcess;
  output: () => string;
  exited: () => boolean;
  code: () => number | null;
}

const running: Started[] = [];

/** `npm start` in its own process group, with PORT and PERSIST_TO; its stdout and stderr as they come. */
function npmStart(persistTo: string): Started {
  const child = spawn("npm", ["start"], {
    cwd: ROOT,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, PORT: String(PORT), PERSIST_TO: persistTo },
  });
  let output = "";
  let exited = false;
  let code: number | null = null;
  child.stdout!.setEncoding("utf8").on("data", (d: string) => (output += d));
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (output += d));
  child.on("exit", (c) => {
    exited = true;
    code = c;
  });
  const started = { child, output: () => output, exited: () => exited, code: () => code };
  running.push(started);
  return started;
}

/** SIGTERM to the start's process group (npm, the script, wrangler, workerd), SIGKILL if it lingers. */
async function stop(started: Started): Promise<void> {
  const signal = (name: NodeJS.Signals) => {
    try {
      process.kill(-started.child.pid!, name);
    } catch {
      /* gone */
    }
  };
  signal("SIGTERM");
  for (let i = 0; i < 100 && !started.exited(); i++) await sleep(100);
  signal("SIGKILL");
}

/** Waits for "Ready on" (or the start's end), then answers what was printed before it, npm's banner left out. */
async function untilReady(started: Started): Promise<string[]> {
  onTestFailed(() => console.error(`npm start printed:\n${started.output()}`));
  await eventually("npm start says Ready (or exits)", () => started.output().includes("Ready on") || started.exited(), 120_000, 200);
  expect(started.exited(), started.output()).toBe(false);
  const lines = started.output().split("\n");
  const ready = lines.findIndex((line) => line.includes("Ready on"));
  expect(lines[ready]).toContain(`Ready on ${URL_}`);
  return lines.slice(0, ready).filter((line) => line.trim() !== "" && !NPM_BANNER.test(line));
}

describe("npm start", () => {
  const dir = mkdtempSync(join(tmpdir(), "npm-start-"));
  const persistTo = join(dir, "state");
  const migrations = migrationFiles();

  afterEach(async () => {
    for (const started of running.splice(0)) await stop(started);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("prints where it listens, the key and what each shard migrated, and none of wrangler's tables, before Ready", async () => {
    const started = npmStart(persistTo);
    const before = await untilReady(started);
    expect(before.length).toBeLessThanOrEqual(6);
    expect(before.join("\n")).not.toMatch(/[│┌└├]/);
    for (const binding of shardBindings()) {
      expect(before).toContain(`D1 ${binding}: ${migrations.length} migrations applied (${migrations[0]} … ${migrations.at(-1)})`);
    }
    expect(before.find((line) => line.startsWith("Scheduler: "))).toContain(URL_);

    const vars = parseDevVars(readFileSync(join(ROOT, ".dev.vars"), "utf8")) as Record<string, string>;
    const key = vars.API_KEYS?.split(",")[0]?.split(":")[1] ?? "";
    expect(key).not.toBe("");
    expect(before).toContain(`API key (tenant "local", in .dev.vars): export KEY=${key}`);
    const jobs = await fetch(`${URL_}/v1/jobs`, { headers: { authorization: `Bearer ${key}` } });
    expect(jobs.status).toBe(200);

    // nor later the table of bindings wrangler prints again when the example handler connects
    expect(started.output()).not.toContain("has access to the following bindings");

    // wrangler's own output until then is kept beside the state, its tables among it
    const log = readFileSync(join(dir, "start.log"), "utf8");
    expect(log).toContain(migrations.at(-1));
    expect(log).toMatch(/│/);
  });

  it("says each shard is up to date when started again on the same state", async () => {
    const before = await untilReady(npmStart(persistTo));
    for (const binding of shardBindings()) expect(before).toContain(`D1 ${binding}: up to date (${migrations.length} migrations)`);
  });

  it("prints wrangler's output and exits 1 when a shard's migrations fail", async () => {
    const notADirectory = join(dir, "a-file");
    writeFileSync(notADirectory, "");
    const started = npmStart(notADirectory);
    onTestFailed(() => console.error(`npm start printed:\n${started.output()}`));
    await eventually("npm start exits", () => started.exited(), 60_000, 200);
    expect(started.code()).toBe(1);
    expect(started.output()).toContain("ENOTDIR");
    expect(started.output()).toContain(`D1 ${shardBindings()[0]}: the migrations failed`);
    expect(started.output()).not.toContain("Ready on");
  });
});
