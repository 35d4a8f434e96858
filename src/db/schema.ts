/**
 * Drizzle schema of D1: the only place D1 tables, columns, indexes and constraints are spelled.
 * migrations/ creates them by hand (append-only); `npm run db:check` fails when the two disagree.
 */
import { desc, type SQL, sql } from "drizzle-orm";
import { type AnySQLiteColumn, check, index, integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { EXECUTION_STATES, JOB_STATES, TERMINAL_STATES } from "../core/lifecycle";

/** `column IN ('a',...)`: a state column's CHECK, listing a lifecycle table's states (STYLE.md habit 2). */
function oneOf(column: AnySQLiteColumn, states: readonly string[]): SQL {
  return sql`${column} IN (${sql.raw(states.map((s) => `'${s}'`).join(","))})`;
}

/**
 * One row per job. The API writes the definition and status (raising `version`); the job's
 * bucket writes the projections below `updatedAt`, each guarded so it never goes backwards.
 */
export const jobs = sqliteTable(
  "jobs",
  {
    tenant: text("tenant").notNull(),
    id: text("id").notNull(),
    name: text("name"),
    bucket: integer("bucket").notNull(),
    status: text("status", { enum: JOB_STATES }).notNull(),
    /** raised by every change the API accepts */
    version: integer("version").notNull().default(1),
    /** 0 until the bucket acknowledged `version` */
    synced: integer("synced").notNull().default(1),
    /** JSON: target, timeoutMs, retry, metadata, schedule */
    spec: text("spec").notNull(),
    cron: text("cron"),
    timezone: text("timezone"),
    /** one-off: its run time; recurring: its next occurrence; null when nothing is left */
    nextRunAt: integer("next_run_at"),
    idempotencyKey: text("idempotency_key"),
    createdAt: integer("created_at").notNull(),
    updatedAt: integer("updated_at").notNull(),
    // written by the bucket
    /** recurring: occurrences fired (the maxOccurrences budget) */
    fired: integer("fired").notNull().default(0),
    /** one-off: its execution's state */
    runStatus: text("run_status", { enum: EXECUTION_STATES }),
    attempts: integer("attempts").notNull().default(0),
    lastHttpStatus: integer("last_http_status"),
    lastError: text("last_error"),
    deadReason: text("dead_reason"),
    finishedAt: integer("finished_at"),
    /** JSON: the execution's attempts */
    attemptLog: text("attempt_log"),
    /** JSON: the job's labels as the API shows them (job_labels indexes them); null: none */
    labels: text("labels"),
    /** one-off: JSON, its execution's callbacks (core/callback.ts CallbackState[]); null: none */
    callbacks: text("callbacks"),
  },
  (t) => [
    primaryKey({ columns: [t.tenant, t.id] }),
    check("jobs_status", oneOf(t.status, JOB_STATES)),
    check("jobs_run_status", oneOf(t.runStatus, EXECUTION_STATES)),
    // the sync pass's range (a bucket's jobs due before its horizon) and the purge's
    index("jobs_due").on(t.bucket, t.nextRunAt),
    // an entry only while a change is not acknowledged by the bucket
    index("jobs_unsynced").on(t.bucket).where(sql`${t.synced} = 0`),
  ],
);

/**
 * A recurring job's finished occurrences (written once, when terminal). Keyed (tenant, id): an
 * occurrence's id carries its due time, so a tenant's occurrences newest first are a range of the key.
 */
export const occurrences = sqliteTable(
  "occurrences",
  {
    /** the execution id (webhook-id) */
    id: text("id").notNull(),
    tenant: text("tenant").notNull(),
    jobId: text("job_id").notNull(),
    /** the occurrence's time */
    dueAt: integer("due_at").notNull(),
    occurrence: integer("occurrence").notNull(),
    status: text("status", { enum: TERMINAL_STATES }).notNull(),
    attempts: integer("attempts").notNull(),
    lastHttpStatus: integer("last_http_status"),
    lastError: text("last_error"),
    deadReason: text("dead_reason"),
    finishedAt: integer("finished_at").notNull(),
    attemptLog: text("attempt_log"),
    /** JSON: its callbacks (core/callback.ts CallbackState[]); null: none */
    callbacks: text("callbacks"),
  },
  (t) => [
    primaryKey({ columns: [t.tenant, t.id] }),
    check("occurrences_status", oneOf(t.status, TERMINAL_STATES)),
    index("occurrences_job").on(t.tenant, t.jobId, t.dueAt),
    index("occurrences_finished").on(t.finishedAt),
  ],
);

/** Dead executions of either kind: the DLQ list and redrive. */
export const deadLetters = sqliteTable(
  "dead_letters",
  {
    tenant: text("tenant").notNull(),
    executionId: text("execution_id").notNull(),
    jobId: text("job_id").notNull(),
    bucket: integer("bucket").notNull(),
    /** the occurrence's time */
    dueAt: integer("due_at").notNull(),
    occurrence: integer("occurrence").notNull(),
    attempts: integer("attempts").notNull(),
    lastHttpStatus: integer("last_http_status"),
    lastError: text("last_error"),
    deadReason: text("dead_reason").notNull(),
    deadAt: integer("dead_at").notNull(),
    /** set while a redrive is on its way to the bucket (the sync pass re-sends it) */
    redriveAt: integer("redrive_at"),
  },
  (t) => [
    primaryKey({ columns: [t.tenant, t.executionId] }),
    index("dead_letters_listed").on(t.tenant, desc(t.deadAt), desc(t.executionId)),
    index("dead_letters_redriving").on(t.bucket).where(sql`${t.redriveAt} IS NOT NULL`),
  ],
);

/** Who owns an idempotency key (invariant 8); purged after the dedupe window. */
export const idempotencyKeys = sqliteTable(
  "idempotency_keys",
  {
    tenant: text("tenant").notNull(),
    key: text("key").notNull(),
    jobId: text("job_id").notNull(),
    requestHash: text("request_hash").notNull(),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.tenant, t.key] }), index("idempotency_keys_created").on(t.createdAt)],
);

/** The flow-control keys of each tenant, written once by each key's FlowKey object: Durable Objects cannot be listed. */
export const flowKeys = sqliteTable(
  "flow_keys",
  {
    tenant: text("tenant").notNull(),
    key: text("key").notNull(),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.tenant, t.key] })],
);

/** One row per label of a job: GET /v1/jobs?label=k:v reads a range of this key, newest job first. */
export const jobLabels = sqliteTable(
  "job_labels",
  {
    tenant: text("tenant").notNull(),
    key: text("key").notNull(),
    value: text("value").notNull(),
    jobId: text("job_id").notNull(),
  },
  (t) => [primaryKey({ columns: [t.tenant, t.key, t.value, t.jobId] })],
);

/**
 * Tables created WITHOUT ROWID (the key is the table: one b-tree entry a row, docs/data-path.md).
 * Drizzle cannot declare it (drizzle-orm#408): scripts/check-schema.mjs adds it to drizzle-kit's
 * DDL for these tables and fails when migrations/ disagrees.
 */
/** Settings the deployment itself keeps (shard 0's "shards": the most shards it has had, db/shards.ts). */
export const schedulerMeta = sqliteTable("scheduler_meta", {
  key: text("key").primaryKey(),
  value: text("value").notNull(),
});

export const withoutRowid = [jobs, occurrences, deadLetters, flowKeys, jobLabels, schedulerMeta] as const;

export type JobRow = typeof jobs.$inferSelect;
export type OccurrenceRow = typeof occurrences.$inferSelect;
export type DeadLetterRow = typeof deadLetters.$inferSelect;
