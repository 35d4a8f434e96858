/**
 * The history archive over the real local stack (README "History archive"): finished executions
 * leave D1 for the stack's local R2 bucket at the purge, GET /v1/executions/:id still answers them
 * (archived: true), and the README's DuckDB example (examples/archive/by-job.sql) reads what
 * `edge-scheduler archive pull` downloaded. The retention is 1 s here; the purge runs with the
 * scan, triggered by the test as the local cron would (scripts/lib/cron.mjs's route).
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { DuckDBInstance } from "@duckdb/node-api";
import { describe, expect, it, onTestFailed, onTestFinished } from "vitest";
import { SCHEDULED_PATH } from "../../scripts/lib/cron.mjs";
import { ROOT } from "../../scripts/local-env.mjs";
import { eventually, runProcess, stackForFile } from "./harness.js";

const PORT = 18970;
const CLI = fileURLToPath(new URL("../../packages/client/src/cli.ts", import.meta.url));
const QUERY = readFileSync(join(ROOT, "examples/archive/by-job.sql"), "utf8");

const local = stackForFile({
  port: PORT,
  routes: { "/archive/down": { kind: "always", status: 400 } },
  vars: { HISTORY_RETENTION_MS: "1000" },
});
const { receiver, sink } = local;

interface ExecutionJson {
  id: string;
  status: string;
  archived?: boolean;
  archiveKey?: string;
}

describe("the history archive on the local stack", () => {
  it("holds finished executions once purged from D1: read back by id, pulled by the CLI, queried by DuckDB", async () => {
    onTestFailed(() => console.error(sink.text().slice(-4000)));
    const jobs = await local.api.createJobs([
      ...Array.from({ length: 4 }, (_, i) => ({ name: "report", target: { url: `${receiver.url}/archive/ok`, body: { i } } })),
      { name: "sync", target: { url: `${receiver.url}/archive/down` }, retry: { maxAttempts: 1 } },
    ]);
    const executionOf = async (jobId: string) => (await local.api.executions(jobId)).body.executions[0];
    const finished = await eventually(
      "every execution finished",
      async () => {
        const all = await Promise.all(jobs.map((j) => executionOf(j.id)));
        return all.every((e) => e && ["succeeded", "dead"].includes(e.status)) ? all.map((e) => e!.id) : undefined;
      },
      20_000,
      250,
    );

    // past the retention (and the flush): the scan archives them, then purges them from D1
    const archived = await eventually(
      "the executions are read from the archive",
      async () => {
        const scanned = await fetch(`${local.stack.url}${SCHEDULED_PATH}?cron=${encodeURIComponent("* * * * *")}&format=json`);
        expect(scanned.status).toBe(200);
        const read = await Promise.all(finished.map((id) => local.api.request<ExecutionJson>("GET", `/v1/executions/${id}`)));
        return read.every((r) => r.status === 200 && r.body.archived) ? read.map((r) => r.body) : undefined;
      },
      30_000,
      1_000,
    );
    expect(archived.map((e) => e.status).sort()).toEqual(["dead", "succeeded", "succeeded", "succeeded", "succeeded"]);
    for (const e of archived) expect(e.archiveKey).toMatch(/^executions\/tenant=[^/]+\/date=\d{4}-\d{2}-\d{2}\/hour=\d{2}\/exe_/);
    expect((await local.api.job(jobs[0]!.id)).status).toBe(404); // D1 has let the job go

    // the CLI downloads the tenant's objects, keys as paths
    const dir = mkdtempSync(join(tmpdir(), "archive-"));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const pulled = await runProcess(process.execPath, [CLI, "archive", "pull", "--out", join(dir, "archive")], {
      env: { ...process.env, SCHEDULER_URL: local.stack.url, SCHEDULER_KEY: local.creds.apiKey },
      timeoutMs: 40_000,
    });
    expect(pulled.code, pulled.stderr).toBe(0);
    expect(pulled.stdout).toMatch(/\d+ object\(s\) in /);

    // the documented query (docs/deploying.md "History archive"), as written, over what was pulled
    expect(readFileSync(join(ROOT, "docs", "deploying.md"), "utf8")).toContain(QUERY.trim());
    const duckdb = await DuckDBInstance.create(":memory:");
    const connection = await duckdb.connect();
    onTestFinished(() => {
      connection.closeSync();
      duckdb.closeSync();
    });
    await connection.run(`SET file_search_path = '${dir.replaceAll("'", "''")}'`);
    const rows = (await connection.runAndReadAll(QUERY)).getRowObjectsJson();
    expect(rows).toEqual([
      { jobName: "report", status: "succeeded", executions: "4", attempts: "4", first_attempt_lag_ms: expect.any(Number) },
      { jobName: "sync", status: "dead", executions: "1", attempts: "1", first_attempt_lag_ms: expect.any(Number) },
    ]);
  });
});
