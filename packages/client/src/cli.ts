#!/usr/bin/env node
/**
 * edge-scheduler: the command line of edge-scheduler-client. One table of commands (name → flags,
 * arguments, handler, help); parsing with node:util parseArgs in two passes: a lenient one finds
 * the command in the positionals, a strict one checks the flags that command takes. Human output
 * on stdout, errors on stderr, and exit codes scripts can use (EXIT, listed in --help).
 */
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname, resolve as resolvePath, sep } from "node:path";
import { parseArgs } from "node:util";
import {
  type AlertTarget,
  type Attempt,
  type CreateJob,
  type Execution,
  type ExecutionWithAttempts,
  type Job,
  type JobStatus,
  type JobWithLatestExecution,
  type Metrics,
  SchedulerClient,
  SchedulerError,
  SchedulerNetworkError,
  VERSION,
} from "./index.ts";

const EXIT = { ok: 0, api: 1, usage: 2, notFound: 3, auth: 4, network: 5, timeout: 124, interrupted: 130 } as const;
const DEFAULT_URL = "http://127.0.0.1:8787";
const DEFAULT_LIMIT = 50;
/** the API's largest page */
const MAX_PAGE = 200;
const FINAL = new Set<string>(["succeeded", "dead", "canceled"]);

// ---------------------------------------------------------------------------------------------
// the command table

interface Flag {
  type: "string" | "boolean";
  help: string;
  /** the value's placeholder in help, e.g. "<url>" */
  value?: string;
  multiple?: boolean;
  short?: string;
}

type Values = Record<string, string | boolean | (string | boolean)[] | undefined>;

interface Context {
  client: SchedulerClient;
  /** the command's positional arguments, as many as it declares */
  args: string[];
  values: Values;
  json: boolean;
}

interface Command {
  summary: string;
  /** names of the positional arguments, all required */
  args: string[];
  flags: Record<string, Flag>;
  /** runs without an API key */
  open?: boolean;
  run(context: Context): Promise<number>;
}

const GLOBAL_FLAGS: Record<string, Flag> = {
  url: { type: "string", value: "<url>", help: `the scheduler's base URL (env SCHEDULER_URL, default ${DEFAULT_URL})` },
  key: { type: "string", value: "<key>", help: "the API key (env SCHEDULER_KEY); needed by every command but health" },
  json: { type: "boolean", help: "machine output: the API's JSON (a list as one array, tail as JSON lines)" },
  help: { type: "boolean", short: "h", help: "help for the command" },
  version: { type: "boolean", help: "the client's version" },
};

const LIMIT: Flag = { type: "string", value: "<n>", help: `at most n items, following pages (default ${DEFAULT_LIMIT})` };

const ARCHIVE_PREFIX: Flag = {
  type: "string",
  value: "<prefix>",
  help: 'a day or an hour: "date=2026-12-01/" or "date=2026-12-01/hour=14/"',
};

const CREATE_FLAGS: Record<string, Flag> = {
  target: { type: "string", value: "<url>", help: "the URL to call (target.url)" },
  method: { type: "string", value: "<method>", help: "GET, POST (default), PUT, PATCH or DELETE" },
  header: { type: "string", multiple: true, value: "<name:value>", help: "a header to send; repeatable" },
  body: { type: "string", value: "<json|text>", help: "the body: sent as JSON if it parses as JSON, else as this text" },
  label: { type: "string", multiple: true, value: "<key=value>", help: "a label (labels.key); repeatable" },
  worker: { type: "string", value: "<name>", help: "instead of --target: a handler Worker granted to you (target.worker)" },
  pull: { type: "string", value: "<queue>", help: "instead of --target: a pull queue your workers lease from (target.pull)" },
  payload: {
    type: "string",
    value: "<json|text>",
    help: "the handler Worker's or pull queue's payload: JSON if it parses as JSON, else this text",
  },
  "run-at": { type: "string", value: "<time>", help: "when: RFC 3339 with an offset, or epoch milliseconds" },
  delay: { type: "string", value: "<delay>", help: 'when: from now, "500ms", "30s", "5m", "2h", "1d" or milliseconds' },
  cron: { type: "string", value: "<expr>", help: "recurring: 5 fields, or 6 with seconds first" },
  timezone: { type: "string", value: "<iana>", help: "the cron's zone (default UTC)" },
  name: { type: "string", value: "<name>", help: "a name for the job" },
  "timeout-ms": { type: "string", value: "<ms>", help: "per attempt, 1000 to 840000 (default 30000)" },
  "max-attempts": { type: "string", value: "<n>", help: "attempts before the execution is dead (retry.maxAttempts)" },
  priority: { type: "string", value: "<0-9>", help: "higher goes first among your due executions waiting their turn (default 5)" },
  "idempotency-key": { type: "string", value: "<key>", help: "a repeat with this key returns the first job" },
  traceparent: {
    type: "string",
    value: "<w3c>",
    help: "the W3C trace the job belongs to (trace.traceparent; else env TRACEPARENT, ignored if invalid); each attempt is sent a child span",
  },
  tracestate: { type: "string", value: "<w3c>", help: "the trace's W3C tracestate (trace.tracestate; else env TRACESTATE)" },
  "debounce-key": {
    type: "string",
    value: "<key>",
    help: "debounce: a create with the key of a pending job replaces it (trailing) or is absorbed (leading)",
  },
  "debounce-delay": { type: "string", value: "<delay>", help: 'debounce: the quiet time, "30s", "5m" or milliseconds' },
  "debounce-max-delay": { type: "string", value: "<delay>", help: "debounce: at most this long after the window's first create" },
  "debounce-mode": { type: "string", value: "<mode>", help: "debounce: trailing (default: the latest runs) or leading (the first runs)" },
  "callback-url": { type: "string", value: "<url>", help: "told each execution that succeeded (callback.url)" },
  "failure-callback-url": { type: "string", value: "<url>", help: "told each execution that died (failureCallback.url)" },
  "callback-worker": { type: "string", value: "<name>", help: "instead of --callback-url: a handler Worker (callback.worker)" },
  "failure-callback-worker": {
    type: "string",
    value: "<name>",
    help: "instead of --failure-callback-url: a handler Worker (failureCallback.worker)",
  },
  file: { type: "string", value: "<path>", help: 'a whole create body as JSON ("-": stdin); flags override its fields' },
};

const COMMANDS: Record<string, Command> = {
  "jobs create": { summary: "create a job; prints its id, status and next run", args: [], flags: CREATE_FLAGS, run: createJob },
  "jobs list": {
    summary: "your jobs, newest first",
    args: [],
    flags: {
      status: { type: "string", value: "<status>", help: "active, paused, canceled or completed" },
      label: { type: "string", value: "<key:value>", help: "only jobs with this label" },
      limit: LIMIT,
    },
    run: listJobs,
  },
  "jobs get": { summary: "a job, its schedule and next runs, its latest execution", args: ["id"], flags: {}, run: showJob },
  "jobs cancel": { summary: "cancel a job: nothing new fires", args: ["id"], flags: {}, run: jobAction("cancel") },
  "jobs pause": { summary: "pause a recurring job", args: ["id"], flags: {}, run: jobAction("pause") },
  "jobs resume": { summary: "resume a paused recurring job", args: ["id"], flags: {}, run: jobAction("resume") },
  executions: {
    summary: "a job's executions, latest first",
    args: ["jobId"],
    flags: { attempts: { type: "boolean", help: "one line per attempt, with its lag" } },
    run: listExecutions,
  },
  "executions get": { summary: "one execution", args: ["executionId"], flags: {}, run: showExecution },
  "dlq list": { summary: "dead executions, latest first", args: [], flags: { limit: LIMIT }, run: listDead },
  "dlq redrive": { summary: "run a dead execution again with a fresh attempt budget", args: ["executionId"], flags: {}, run: redrive },
  "archive list": {
    summary: "the history archive's objects (executions D1 no longer holds), oldest first",
    args: [],
    flags: { prefix: ARCHIVE_PREFIX, limit: LIMIT },
    run: listArchive,
  },
  "archive pull": {
    summary: "download the archive's objects into a directory, keeping their keys as paths (for DuckDB)",
    args: [],
    flags: { out: { type: "string", value: "<dir>", help: "where to write them (default ./archive)" }, prefix: ARCHIVE_PREFIX },
    run: pullArchive,
  },
  metrics: { summary: "non-zero counters, dead by reason, fire lag p50/p95/p99", args: [], flags: {}, run: showMetrics },
  tail: {
    summary: "follow a job's executions live (a one-off job's until its execution is final)",
    args: ["jobId"],
    flags: {
      interval: { type: "string", value: "<ms>", help: "between polls (default 1000)" },
      "exit-after": { type: "string", value: "<n>", help: "exit 0 once n executions are final (succeeded, dead, canceled)" },
      timeout: { type: "string", value: "<seconds>", help: `exit ${EXIT.timeout} if not finished by then` },
    },
    run: tail,
  },
  "alerts set": {
    summary: "set your alert target: dead executions (and throttled flow keys) as signed digests",
    args: [],
    flags: {
      // --target, as jobs create: --url is every command's scheduler URL
      target: { type: "string", value: "<url>", help: "where each digest is POSTed (a job target's URL rules)" },
      header: CREATE_FLAGS.header!,
      "throttled-for": {
        type: "string",
        value: "<delay>",
        help: 'also report a flow key its target throttled without a break for longer than this: "90s", "5m", "1h" or milliseconds',
      },
    },
    run: setAlerts,
  },
  "alerts get": { summary: "your alert target", args: [], flags: {}, run: showAlerts },
  "alerts delete": { summary: "remove your alert target", args: [], flags: {}, run: deleteAlerts },
  health: { summary: "is the scheduler up (no key needed)", args: [], flags: {}, open: true, run: health },
};

/** every flag of every command: the lenient first pass reads the positionals with them */
const ALL_FLAGS: Record<string, Flag> = Object.assign({}, GLOBAL_FLAGS, ...Object.values(COMMANDS).map((c) => c.flags));

// ---------------------------------------------------------------------------------------------
// help

const EXIT_CODES = `exit codes:
  0    ok
  1    the API refused (prints "error <code>: <message> (field <field>)")
  2    usage: unknown command or flag, missing argument
  3    not found (404)
  4    authentication (401, 403)
  5    network: the scheduler is unreachable
  124  tail: --timeout passed
  130  interrupted (Ctrl-C)`;

/** "jobs get <id>" */
function synopsis(name: string): string {
  return [name, ...COMMANDS[name]!.args.map((a) => `<${a}>`)].join(" ");
}

function usageOf(name: string): string {
  return `edge-scheduler ${synopsis(name)} [options]`;
}

function groupUsage(group: string): string {
  return `edge-scheduler ${group} <command> [arguments] [options]`;
}

function flagLines(flags: Record<string, Flag>): string[] {
  const heads = Object.entries(flags).map(([name, flag]) =>
    [flag.short ? `-${flag.short}, ` : "", `--${name}`, flag.value ? ` ${flag.value}` : ""].join(""),
  );
  const width = Math.max(...heads.map((h) => h.length));
  return Object.values(flags).map((flag, i) => `  ${heads[i]!.padEnd(width)}  ${flag.help}`);
}

function commandList(names: string[]): string[] {
  const heads = names.map(synopsis);
  const width = Math.max(...heads.map((h) => h.length));
  return names.map((name, i) => `  ${heads[i]!.padEnd(width)}  ${COMMANDS[name]!.summary}`);
}

function mainHelp(): string {
  return [
    "edge-scheduler: jobs, executions and the dead-letter queue of an edge-scheduler",
    "",
    "usage: edge-scheduler <command> [arguments] [options]",
    "",
    "commands:",
    ...commandList(Object.keys(COMMANDS)),
    "",
    "options of every command:",
    ...flagLines(GLOBAL_FLAGS),
    "",
    EXIT_CODES,
  ].join("\n");
}

function groupHelp(group: string): string {
  return [`usage: ${groupUsage(group)}`, "", "commands:", ...commandList(namesIn(group))].join("\n");
}

function commandHelp(name: string): string {
  const command = COMMANDS[name]!;
  const own = Object.keys(command.flags).length > 0 ? ["", "options:", ...flagLines(command.flags)] : [];
  return [`usage: ${usageOf(name)}`, "", command.summary, ...own, "", "options of every command:", ...flagLines(GLOBAL_FLAGS)].join("\n");
}

function namesIn(group: string): string[] {
  return Object.keys(COMMANDS).filter((name) => name.startsWith(`${group} `));
}

// ---------------------------------------------------------------------------------------------
// parsing

class UsageError extends Error {
  readonly usage: string;

  constructor(message: string, usage = "edge-scheduler <command> [arguments] [options] (edge-scheduler --help lists them)") {
    super(message);
    this.usage = usage;
  }
}

function parse(argv: string[], flags: Record<string, Flag>, strict: boolean): { values: Values; positionals: string[] } {
  const options = Object.fromEntries(
    Object.entries(flags).map(([name, f]) => [
      name,
      { type: f.type, ...(f.multiple ? { multiple: true } : {}), ...(f.short ? { short: f.short } : {}) },
    ]),
  );
  return parseArgs({ args: argv, options, strict, allowPositionals: true });
}

/** The command the positionals name: two words ("jobs get") before one ("executions"). */
function resolve(positionals: string[]): { name: string; args: string[] } | { group: string } {
  const [first = "", second] = positionals;
  if (second !== undefined && COMMANDS[`${first} ${second}`]) return { name: `${first} ${second}`, args: positionals.slice(2) };
  if (COMMANDS[first]) return { name: first, args: positionals.slice(1) };
  if (namesIn(first).length > 0) return { group: first };
  throw new UsageError(first ? `unknown command "${first}"` : "no command given");
}

function text(values: Values, name: string): string | undefined {
  return values[name] as string | undefined;
}

/** A flag's number (an integer unless `integer` is false), or undefined when not given. */
function numberFlag(values: Values, name: string, usage: string, integer = true): number | undefined {
  const raw = text(values, name);
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (raw.trim() === "" || !Number.isFinite(n) || n < 0 || (integer && !Number.isInteger(n))) {
    throw new UsageError(`--${name} wants ${integer ? "a whole number" : "a number"}, got "${raw}"`, usage);
  }
  return n;
}

// ---------------------------------------------------------------------------------------------
// output

function out(line: string): void {
  process.stdout.write(`${line}\n`);
}

function printJson(value: unknown): void {
  out(JSON.stringify(value, null, 2));
}

function table(heads: string[], rows: string[][]): void {
  const widths = heads.map((head, i) => Math.max(head.length, ...rows.map((row) => row[i]!.length)));
  for (const row of [heads, ...rows]) out(row.map((cell, i) => (i < row.length - 1 ? cell.padEnd(widths[i]!) : cell)).join("  "));
}

function fields(pairs: [string, string][]): void {
  const width = Math.max(...pairs.map(([name]) => name.length));
  for (const [name, value] of pairs) out(`${name.padEnd(width)}  ${value}`);
}

function dash(value: string | number | null | undefined): string {
  return value === null || value === undefined || value === "" ? "-" : String(value);
}

/** the last answer of an execution: http status, error, dead reason */
function lastOf(execution: Pick<Execution, "lastHttpStatus" | "lastError" | "deadReason">): string {
  const parts = [
    execution.lastHttpStatus === null ? "" : `http ${execution.lastHttpStatus}`,
    execution.lastError ?? "",
    execution.deadReason ? `dead: ${execution.deadReason}` : "",
  ];
  return dash(parts.filter(Boolean).join(", "));
}

function attemptsText(count: number): string {
  return `${count} attempt${count === 1 ? "" : "s"}`;
}

// ---------------------------------------------------------------------------------------------
// jobs

async function readJobFile(path: string): Promise<Record<string, unknown>> {
  let raw: string;
  try {
    raw = path === "-" ? await readStdin() : await readFile(path, "utf8");
  } catch (error) {
    throw new UsageError(`--file ${path}: ${(error as Error).message}`, usageOf("jobs create"));
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (error) {
    throw new UsageError(`--file ${path} is not JSON: ${(error as Error).message}`, usageOf("jobs create"));
  }
  if (!isObject(parsed)) throw new UsageError(`--file ${path} is not a JSON object`, usageOf("jobs create"));
  return parsed;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function jsonOrText(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

/** epoch milliseconds when all digits, else the text (RFC 3339, "30s") for the API to read */
function msOrText(raw: string | undefined): string | number | undefined {
  return raw !== undefined && /^\d+$/.test(raw) ? Number(raw) : raw;
}

function labelsOf(raw: string[]): Record<string, string> {
  return Object.fromEntries(
    raw.map((label) => {
      const equals = label.indexOf("=");
      if (equals <= 0) throw new UsageError(`--label wants key=value, got "${label}"`, usageOf("jobs create"));
      return [label.slice(0, equals), label.slice(equals + 1)];
    }),
  );
}

function headersOf(raw: string[], usage = usageOf("jobs create")): Record<string, string> {
  return Object.fromEntries(
    raw.map((header) => {
      const colon = header.indexOf(":");
      if (colon <= 0) throw new UsageError(`--header wants name:value, got "${header}"`, usage);
      return [header.slice(0, colon).trim(), header.slice(colon + 1).trim()];
    }),
  );
}

/** The create body: --file's, with the flags given replacing its fields (a time flag replaces all of runAt, delay and cron). */
async function jobOf(values: Values): Promise<CreateJob> {
  const usage = usageOf("jobs create");
  const file = text(values, "file");
  const job = file === undefined ? {} : await readJobFile(file);
  const target: Record<string, unknown> = isObject(job.target) ? { ...job.target } : {};
  const header = values.header as string[] | undefined;
  const body = text(values, "body");
  const payload = text(values, "payload");
  Object.assign(
    target,
    defined({
      url: text(values, "target"),
      method: text(values, "method")?.toUpperCase(),
      worker: text(values, "worker"),
      pull: text(values, "pull"),
    }),
  );
  if (header) target.headers = { ...(isObject(target.headers) ? target.headers : {}), ...headersOf(header) };
  if (body !== undefined) target.body = jsonOrText(body);
  if (payload !== undefined) target.payload = jsonOrText(payload);
  if (target.url === undefined && target.worker === undefined && target.pull === undefined) {
    throw new UsageError(
      "no target: give --target <url>, --worker <name> or --pull <queue> (or target.url, target.worker or target.pull in --file)",
      usage,
    );
  }
  const when = defined({ runAt: msOrText(text(values, "run-at")), delay: msOrText(text(values, "delay")), cron: text(values, "cron") });
  if (Object.keys(when).length > 0) for (const field of ["runAt", "delay", "cron"]) delete job[field];
  const labels = values.label as string[] | undefined;
  if (labels) job.labels = { ...(isObject(job.labels) ? job.labels : {}), ...labelsOf(labels) };
  const debounce = defined({
    key: text(values, "debounce-key"),
    delay: msOrText(text(values, "debounce-delay")),
    maxDelay: msOrText(text(values, "debounce-max-delay")),
    mode: text(values, "debounce-mode"),
  });
  if (Object.keys(debounce).length > 0) job.debounce = { ...(isObject(job.debounce) ? job.debounce : {}), ...debounce };
  const maxAttempts = numberFlag(values, "max-attempts", usage);
  if (maxAttempts !== undefined) job.retry = { ...(isObject(job.retry) ? job.retry : {}), maxAttempts };
  const rest = defined({
    name: text(values, "name"),
    timezone: text(values, "timezone"),
    timeoutMs: numberFlag(values, "timeout-ms", usage),
    callback: callbackOf(text(values, "callback-url"), text(values, "callback-worker")),
    failureCallback: callbackOf(text(values, "failure-callback-url"), text(values, "failure-callback-worker")),
    priority: numberFlag(values, "priority", usage),
  });
  // an explicit --traceparent is checked (a 400 names it); the environment's is sent as headers (createJob)
  const traceparent = text(values, "traceparent");
  if (traceparent !== undefined) {
    const tracestate = text(values, "tracestate");
    job.trace = { traceparent, ...(tracestate ? { tracestate } : {}) };
  } else if (text(values, "tracestate") !== undefined) {
    throw new UsageError("--tracestate needs --traceparent", usage);
  }
  return { ...job, ...when, ...rest, target } as CreateJob;
}

/** A callback from its flags: a URL or a handler Worker (the API refuses both at once, naming the field). */
function callbackOf(url: string | undefined, worker: string | undefined): Record<string, string> | undefined {
  if (url === undefined && worker === undefined) return undefined;
  return defined({ url, worker }) as Record<string, string>;
}

function defined(record: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(record).filter(([, value]) => value !== undefined));
}

async function createJob({ client, values, json }: Context): Promise<number> {
  const idempotencyKey = text(values, "idempotency-key");
  // OpenTelemetry's environment carrier: a CLI run inside a traced script joins its trace. Sent as
  // the request's headers, so a stale or invalid one is ignored, never a reason to refuse the job
  const { TRACEPARENT: traceparent, TRACESTATE: tracestate } = process.env;
  const job = await client.jobs.create(await jobOf(values), {
    ...(idempotencyKey === undefined ? {} : { idempotencyKey }),
    ...(traceparent ? { traceparent, ...(tracestate ? { tracestate } : {}) } : {}),
  });
  if (json) printJson(job);
  else {
    const outcome = job.debounce?.replaced
      ? "  (replaced the key's pending job)"
      : job.debounce?.absorbed
        ? "  (absorbed by the key's job)"
        : "";
    out(`${job.id}  ${job.status}  next run ${dash(job.nextRunAt)}${outcome}`);
  }
  return EXIT.ok;
}

async function listJobs({ client, values, json }: Context): Promise<number> {
  const limit = numberFlag(values, "limit", usageOf("jobs list")) ?? DEFAULT_LIMIT;
  const status = text(values, "status") as JobStatus | undefined;
  const label = text(values, "label");
  const jobs = await client.jobs
    .list({ ...(status ? { status } : {}), ...(label ? { label } : {}), limit: Math.min(limit, MAX_PAGE) })
    .toArray(limit);
  if (json) printJson(jobs);
  else table(["ID", "STATUS", "NEXT RUN", "NAME", "TARGET"], jobs.map(jobRow));
  return EXIT.ok;
}

/** "POST https://…" for an HTTP target, "worker billing" for a handler Worker, "pull video-encode" for a pull queue. */
function targetText(target: Job["target"]): string {
  if ("worker" in target) return `worker ${target.worker}`;
  if ("pull" in target) return `pull ${target.pull}`;
  return `${target.method} ${target.url}`;
}

function jobRow(job: Job): string[] {
  return [job.id, job.status, dash(job.nextRunAt), dash(job.name), targetText(job.target)];
}

async function showJob({ client, args, json }: Context): Promise<number> {
  const job = await client.jobs.get(args[0]!);
  if (json) printJson(job);
  else fields(jobFields(job));
  return EXIT.ok;
}

function jobFields(job: JobWithLatestExecution): [string, string][] {
  const schedule = job.schedule;
  const latest = job.latestExecution;
  return [
    ["id", job.id],
    ["name", dash(job.name)],
    ["status", job.status],
    ["target", targetText(job.target)],
    ["next run", dash(job.nextRunAt)],
    ["schedule", schedule ? scheduleText(schedule) : "one-off"],
    ...(schedule ? [["next runs", dash(job.nextRuns?.join(", "))] as [string, string]] : []),
    ...(job.debounce ? [["debounce", debounceText(job.debounce)] as [string, string]] : []),
    ["timeout", `${job.timeoutMs} ms`],
    ["priority", String(job.priority)],
    ["created", job.createdAt],
    [
      "latest execution",
      latest ? `${latest.id}  ${latest.status}, ${attemptsText(latest.attempts)}, due ${latest.dueAt}, last ${lastOf(latest)}` : "none",
    ],
  ];
}

function debounceText(d: NonNullable<Job["debounce"]>): string {
  return `key ${d.key}, ${d.mode}, delay ${d.delayMs} ms${d.maxDelayMs === null ? "" : `, at most ${d.maxDelayMs} ms`}`;
}

function scheduleText(schedule: NonNullable<Job["schedule"]>): string {
  const bounds = [
    schedule.startAt ? `from ${schedule.startAt}` : "",
    schedule.endAt ? `until ${schedule.endAt}` : "",
    schedule.maxOccurrences === null ? "" : `at most ${schedule.maxOccurrences} times`,
  ];
  return [`cron "${schedule.cron}" ${schedule.timezone}`, ...bounds.filter(Boolean), `catch-up ${schedule.catchUp}`].join(", ");
}

function jobAction(action: "cancel" | "pause" | "resume"): (context: Context) => Promise<number> {
  return async ({ client, args, json }) => {
    const job = await client.jobs[action](args[0]!);
    if (json) printJson(job);
    else out(`${job.id}  ${job.status}`);
    return EXIT.ok;
  };
}

// ---------------------------------------------------------------------------------------------
// executions and the dead-letter queue

async function listExecutions({ client, args, values, json }: Context): Promise<number> {
  const executions = await client.jobs.executions(args[0]!);
  if (json) printJson(executions);
  else if (values.attempts)
    table(["EXECUTION", "ATTEMPT", "STARTED", "OUTCOME", "HTTP", "LAG", "WAIT", "SPAN", "ERROR"], executions.flatMap(attempts));
  else table(["EXECUTION", "STATUS", "ATTEMPTS", "DUE", "LAST"], executions.map(executionRow));
  return EXIT.ok;
}

function executionRow(execution: ExecutionWithAttempts): string[] {
  return [execution.id, execution.status, String(execution.attempts.length), execution.dueAt, lastOf(execution)];
}

function attempts(execution: ExecutionWithAttempts): string[][] {
  return execution.attempts.map((a) => [
    execution.id,
    String(a.attempt),
    a.startedAt,
    dash(a.outcome ?? "running"),
    dash(a.httpStatus),
    `${Math.round(a.lagMs)} ms`,
    `${Math.round(a.waitMs)} ms`,
    dash(a.spanId),
    dash(a.error),
  ]);
}

async function showExecution({ client, args, json }: Context): Promise<number> {
  const execution = await client.executions.get(args[0]!);
  if (json) printJson(execution);
  else fields(executionFields(execution));
  return EXIT.ok;
}

function executionFields(execution: Execution): [string, string][] {
  return [
    ["id", execution.id],
    ["job", execution.jobId],
    ["status", execution.status],
    ["due", execution.dueAt],
    ["attempts", String(execution.attempts)],
    ["last", lastOf(execution)],
    ["finished", dash(execution.finishedAt)],
  ];
}

async function listDead({ client, values, json }: Context): Promise<number> {
  const limit = numberFlag(values, "limit", usageOf("dlq list")) ?? DEFAULT_LIMIT;
  const dead = await client.dlq.list({ limit: Math.min(limit, MAX_PAGE) }).toArray(limit);
  if (json) printJson(dead);
  else table(["EXECUTION", "JOB", "REASON", "ATTEMPTS", "FINISHED", "LAST"], dead.map(deadRow));
  return EXIT.ok;
}

function deadRow(execution: Execution): string[] {
  const last = lastOf({ ...execution, deadReason: null });
  return [execution.id, execution.jobId, dash(execution.deadReason), String(execution.attempts), dash(execution.finishedAt), last];
}

async function redrive({ client, args, json }: Context): Promise<number> {
  const execution = await client.dlq.redrive(args[0]!);
  if (json) printJson(execution);
  else out(`${execution.id}  redriven  ${execution.status}, due ${execution.dueAt}`);
  return EXIT.ok;
}

// ---------------------------------------------------------------------------------------------
// the history archive

async function listArchive({ client, values, json }: Context): Promise<number> {
  const limit = numberFlag(values, "limit", usageOf("archive list")) ?? DEFAULT_LIMIT;
  const prefix = typeof values.prefix === "string" ? values.prefix : undefined;
  const objects = await client.archive.list({ prefix, limit: Math.min(limit, 1000) }).toArray(limit);
  if (json) printJson(objects);
  else
    table(
      ["KEY", "EXECUTIONS", "BYTES", "UPLOADED"],
      objects.map((o) => [o.key, String(o.executions), String(o.size), o.uploadedAt]),
    );
  return EXIT.ok;
}

async function pullArchive({ client, values, json }: Context): Promise<number> {
  const dir = resolvePath(typeof values.out === "string" ? values.out : "archive");
  const prefix = typeof values.prefix === "string" ? values.prefix : undefined;
  const written: { key: string; path: string; bytes: number }[] = [];
  for await (const object of client.archive.list({ prefix, limit: 1000 })) {
    const path = resolvePath(dir, ...object.key.split("/"));
    // a key is the API's; still, nothing is written outside the directory
    if (!path.startsWith(`${dir}${sep}`)) throw new Error(`archive key ${object.key} leaves ${dir}`);
    const bytes = await client.archive.object(object.key);
    await mkdir(dirname(path), { recursive: true });
    await writeFile(path, bytes);
    written.push({ key: object.key, path, bytes: bytes.byteLength });
    if (!json) out(`${object.key}  ${bytes.byteLength} bytes`);
  }
  if (json) printJson(written);
  else out(`${written.length} object(s) in ${dir}`);
  return EXIT.ok;
}

// ---------------------------------------------------------------------------------------------
// alerts

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** "90s", "5m", "1h", "1d", "500ms" or milliseconds, in milliseconds (the API takes whole milliseconds). */
function durationFlag(values: Values, name: string, usage: string): number | undefined {
  const raw = text(values, name);
  if (raw === undefined) return undefined;
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(raw.trim());
  if (!match) throw new UsageError(`--${name} wants a delay like "90s", "5m" or milliseconds, got "${raw}"`, usage);
  return Math.round(Number(match[1]) * UNIT_MS[match[2] ?? "ms"]!);
}

async function setAlerts({ client, values, json }: Context): Promise<number> {
  const usage = usageOf("alerts set");
  const url = text(values, "target");
  if (url === undefined) throw new UsageError("alerts set wants --target <url>", usage);
  const header = values.header as string[] | undefined;
  const throttledForMs = durationFlag(values, "throttled-for", usage);
  const target = await client.alerts.set({
    url,
    ...(header ? { headers: headersOf(header, usage) } : {}),
    ...(throttledForMs === undefined ? {} : { throttledForMs }),
  });
  if (json) printJson(target);
  else fields(alertFields(target));
  return EXIT.ok;
}

async function showAlerts({ client, json }: Context): Promise<number> {
  const target = await client.alerts.get();
  if (json) printJson(target);
  else if (target === null) out("no alert target is set");
  else fields(alertFields(target));
  return target === null ? EXIT.notFound : EXIT.ok;
}

async function deleteAlerts({ client, json }: Context): Promise<number> {
  await client.alerts.delete();
  if (json) printJson(null);
  else out("alert target removed");
  return EXIT.ok;
}

function alertFields(target: AlertTarget): [string, string][] {
  const headers = Object.entries(target.headers).map(([name, value]) => `${name}: ${value}`);
  return [
    ["url", target.url],
    ["headers", dash(headers.join(", "))],
    ["throttled for", target.throttledForMs === null ? "- (throttled keys not reported)" : `${target.throttledForMs} ms`],
    ["digests", `at most one per ${target.digestIntervalMs} ms, listing at most ${target.digestMaxListed} deaths`],
  ];
}

// ---------------------------------------------------------------------------------------------
// metrics and health

async function showMetrics({ client, json }: Context): Promise<number> {
  const metrics = await client.metrics();
  if (json) printJson(metrics);
  else fields(metricFields(metrics));
  return EXIT.ok;
}

function metricFields(metrics: Metrics): [string, string][] {
  const nonZero = (record: Record<string, number>) => Object.entries(record).filter(([, n]) => n !== 0);
  const lag = metrics.fire_lag_ms;
  const ms = (n: number | null) => (n === null ? "-" : `${Math.round(n)} ms`);
  return [
    ...nonZero(metrics.counters).map(([name, n]): [string, string] => [name, String(n)]),
    ...nonZero(metrics.dead_total_by_reason).map(([reason, n]): [string, string] => [`dead ${reason}`, String(n)]),
    ["fire lag", `p50 ${ms(lag.p50)}, p95 ${ms(lag.p95)}, p99 ${ms(lag.p99)} (${lag.count} fires)`],
  ];
}

async function health({ client, json }: Context): Promise<number> {
  const answer = await client.health();
  if (json) printJson(answer);
  else out("ok");
  return EXIT.ok;
}

// ---------------------------------------------------------------------------------------------
// tail

async function tail({ client, args, values, json }: Context): Promise<number> {
  const usage = usageOf("tail");
  const intervalMs = numberFlag(values, "interval", usage) ?? 1000;
  const exitAfter = numberFlag(values, "exit-after", usage);
  const timeoutS = numberFlag(values, "timeout", usage, false);
  process.once("SIGINT", () => process.exit(EXIT.interrupted));
  const deadline = timeoutS === undefined ? undefined : AbortSignal.timeout(timeoutS * 1000);
  if ((await follow(client, args[0]!, { intervalMs, exitAfter, json, deadline })) === "finished") return EXIT.ok;
  process.stderr.write(`tail: not finished after ${timeoutS} s\n`);
  return EXIT.timeout;
}

/** Polls the job's executions, printing each change, until `exitAfter` of them are final (a one-off job: its one). */
async function follow(
  client: SchedulerClient,
  jobId: string,
  how: { intervalMs: number; exitAfter?: number; json: boolean; deadline?: AbortSignal },
): Promise<"finished" | "timed out"> {
  const { intervalMs, exitAfter, json, deadline } = how;
  const job = await client.jobs.get(jobId);
  const enough = job.schedule ? exitAfter : 1;
  const seen = new Map<string, ExecutionWithAttempts>();
  for (;;) {
    const executions = (await client.jobs.executions(jobId)).reverse();
    for (const execution of executions.filter(settled)) {
      const before = seen.get(execution.id);
      if (json && JSON.stringify(before) !== JSON.stringify(execution)) out(JSON.stringify(execution));
      if (!json) for (const line of changes(execution, before)) out(line);
      seen.set(execution.id, execution);
    }
    const final = [...seen.values()].filter((e) => FINAL.has(e.status)).length;
    if (enough !== undefined && final >= enough) return "finished";
    await sleep(intervalMs, deadline);
    if (deadline?.aborted) return "timed out";
  }
}

/**
 * False while an execution is final in its bucket but its attempts and finishedAt are not yet in
 * D1 (the API shows the live status first): it is shown, and counted final, once they are.
 */
function settled(execution: ExecutionWithAttempts): boolean {
  return !FINAL.has(execution.status) || (execution.finishedAt !== null && execution.attempts.every((a) => a.outcome !== null));
}

/** Lines for what changed in an execution since the last poll: attempts started or finished, then its status. */
function changes(execution: ExecutionWithAttempts, before: ExecutionWithAttempts | undefined): string[] {
  // an outcome is a string or null, never undefined: an attempt not seen before differs too
  const earlier = new Map(before?.attempts.map((a) => [a.attempt, a.outcome]));
  const lines = execution.attempts.filter((a) => earlier.get(a.attempt) !== a.outcome).map((a) => attemptLine(execution.id, a));
  if (before?.status !== execution.status) {
    const detail = FINAL.has(execution.status) ? (execution.deadReason ? ` (${execution.deadReason})` : "") : ` due ${execution.dueAt}`;
    lines.push(`${execution.finishedAt ?? now()} ${execution.id} ${execution.status}${detail}`);
  }
  return lines;
}

function attemptLine(executionId: string, a: Attempt): string {
  const parts = [
    a.finishedAt ?? a.startedAt,
    executionId,
    `attempt ${a.attempt}`,
    a.outcome ?? "started",
    a.httpStatus === null ? "" : `http ${a.httpStatus}`,
    `lag ${Math.round(a.lagMs)} ms`,
    a.waitMs > 0 ? `waited ${Math.round(a.waitMs)} ms` : "",
    a.error ? `error ${a.error}` : "",
  ];
  return parts.filter(Boolean).join(" ");
}

function now(): string {
  return new Date().toISOString();
}

/** Resolves after `ms`, or as soon as `until` aborts (no timer is left behind to hold the process). */
function sleep(ms: number, until?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    until?.addEventListener("abort", done, { once: true });
    function done() {
      clearTimeout(timer);
      until?.removeEventListener("abort", done);
      resolve();
    }
  });
}

// ---------------------------------------------------------------------------------------------
// main

async function run(argv: string[]): Promise<number> {
  const loose = parse(argv, ALL_FLAGS, false);
  if (loose.values.version) {
    out(VERSION);
    return EXIT.ok;
  }
  if (loose.positionals.length === 0 && loose.values.help) {
    out(mainHelp());
    return EXIT.ok;
  }
  const found = resolve(loose.positionals);
  if ("group" in found) {
    const names = namesIn(found.group).join(", ");
    if (!loose.values.help) throw new UsageError(`${found.group} wants a command: ${names}`, groupUsage(found.group));
    out(groupHelp(found.group));
    return EXIT.ok;
  }
  const command = COMMANDS[found.name]!;
  const usage = usageOf(found.name);
  if (loose.values.help) {
    out(commandHelp(found.name));
    return EXIT.ok;
  }
  let values: Values;
  try {
    values = parse(argv, { ...GLOBAL_FLAGS, ...command.flags }, true).values;
  } catch (error) {
    // parseArgs's message, without its advice on "--" (no command takes a positional starting with "-")
    throw new UsageError((error as Error).message.replace(/\. To specify a positional.*$/s, ""), usage);
  }
  if (found.args.length < command.args.length) throw new UsageError(`missing <${command.args[found.args.length]}>`, usage);
  if (found.args.length > command.args.length) throw new UsageError(`unexpected argument "${found.args[command.args.length]}"`, usage);
  const apiKey = text(values, "key") ?? process.env.SCHEDULER_KEY;
  if (!apiKey && !command.open) throw new UsageError("no API key: give --key <key> or set SCHEDULER_KEY", usage);
  const baseUrl = text(values, "url") ?? process.env.SCHEDULER_URL ?? DEFAULT_URL;
  const client = new SchedulerClient({ baseUrl, apiKey: apiKey ?? "", userAgent: `edge-scheduler-cli/${VERSION}` });
  return command.run({ client, args: found.args, values, json: values.json === true });
}

/** Prints an error on stderr and returns its exit code. */
function failed(error: unknown): number {
  const say = (line: string) => process.stderr.write(`${line}\n`);
  if (error instanceof UsageError) {
    say(`error: ${error.message}`);
    say(`usage: ${error.usage}`);
    return EXIT.usage;
  }
  if (error instanceof SchedulerError) {
    say(`error ${error.code}: ${error.message}${error.field ? ` (field ${error.field})` : ""}`);
    if (error.status === 404) return EXIT.notFound;
    return error.status === 401 || error.status === 403 ? EXIT.auth : EXIT.api;
  }
  if (error instanceof SchedulerNetworkError) {
    say(`error network: ${error.message}`);
    return EXIT.network;
  }
  say(`error: ${error instanceof Error ? error.message : String(error)}`);
  return EXIT.api;
}

// exitCode, not exit(): output to a pipe is written to its end first
process.exitCode = await run(process.argv.slice(2)).catch(failed);
