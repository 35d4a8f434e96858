/**
 * The job as its bucket applies it: the columns of a job row a bucket reads (the sync pass, a
 * change's push, a create's), never its outcome's, labels or callbacks.
 */
import type { JobDefinition } from "../protocol/bucket";
import { type JobRow, jobs } from "./schema";

/** A job's columns its bucket applies (definitionOf): not its outcome's, labels or callbacks. */
export const DEFINITION = {
  id: jobs.id,
  tenant: jobs.tenant,
  version: jobs.version,
  status: jobs.status,
  spec: jobs.spec,
  cron: jobs.cron,
  nextRunAt: jobs.nextRunAt,
  fired: jobs.fired,
  attempts: jobs.attempts,
  attemptLog: jobs.attemptLog,
};

/** The job as its bucket applies it. */
export function definitionOf(row: Pick<JobRow, keyof typeof DEFINITION>): JobDefinition {
  return {
    jobId: row.id,
    tenant: row.tenant,
    version: row.version,
    status: row.status,
    specJson: row.spec,
    recurring: row.cron !== null,
    nextRunAt: row.nextRunAt,
    fired: row.fired,
    attempts: row.attempts,
    attemptLog: row.attemptLog,
  };
}
