/** Drizzle schema of D1: the only place D1 column names are spelled (migrations/ creates them). */
import { integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";
import type { JobState } from "../core/lifecycle";

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
    status: text("status").$type<JobState>().notNull(),
    version: integer("version").notNull(),
    /** 0 until the bucket acknowledged `version` */
    synced: integer("synced").notNull(),
    spec: text("spec").notNull(),
    cron: text("cron"),
    timezone: text("timezone"),
    /** one-off: its run time; recurring: its next occurrence; null when nothing is left */
    nextRunAt: integer("next_run_at"),
    idempotencyKey: text("idempotency_key"),
    createdAt: integer("created_at").notNull(),
    updatedAt: integer("updated_at").notNull(),
    // written by the bucket
    fired: integer("fired").notNull(),
    runStatus: text("run_status"),
    attempts: integer("attempts").notNull(),
    lastHttpStatus: integer("last_http_status"),
    lastError: text("last_error"),
    deadReason: text("dead_reason"),
    finishedAt: integer("finished_at"),
    attemptLog: text("attempt_log"),
  },
  (t) => [primaryKey({ columns: [t.tenant, t.id] })],
);

/** A recurring job's finished occurrences (written once, when terminal). */
export const occurrences = sqliteTable("occurrences", {
  id: text("id").primaryKey(),
  tenant: text("tenant").notNull(),
  jobId: text("job_id").notNull(),
  dueAt: integer("due_at").notNull(),
  occurrence: integer("occurrence").notNull(),
  status: text("status").notNull(),
  attempts: integer("attempts").notNull(),
  lastHttpStatus: integer("last_http_status"),
  lastError: text("last_error"),
  deadReason: text("dead_reason"),
  finishedAt: integer("finished_at").notNull(),
  attemptLog: text("attempt_log"),
});

/** Dead executions of either kind: the DLQ list and redrive. */
export const deadLetters = sqliteTable(
  "dead_letters",
  {
    tenant: text("tenant").notNull(),
    executionId: text("execution_id").notNull(),
    jobId: text("job_id").notNull(),
    bucket: integer("bucket").notNull(),
    dueAt: integer("due_at").notNull(),
    occurrence: integer("occurrence").notNull(),
    attempts: integer("attempts").notNull(),
    lastHttpStatus: integer("last_http_status"),
    lastError: text("last_error"),
    deadReason: text("dead_reason").notNull(),
    deadAt: integer("dead_at").notNull(),
    /** set while a redrive is on its way to the bucket */
    redriveAt: integer("redrive_at"),
  },
  (t) => [primaryKey({ columns: [t.tenant, t.executionId] })],
);

export const idempotencyKeys = sqliteTable(
  "idempotency_keys",
  {
    tenant: text("tenant").notNull(),
    key: text("key").notNull(),
    jobId: text("job_id").notNull(),
    requestHash: text("request_hash").notNull(),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.tenant, t.key] })],
);

export type JobRow = typeof jobs.$inferSelect;
export type OccurrenceRow = typeof occurrences.$inferSelect;
export type DeadLetterRow = typeof deadLetters.$inferSelect;
