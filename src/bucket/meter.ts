/**
 * The bucket's own bill: the rows its SQL writes, counted from the platform's own counter (what
 * Cloudflare bills), not estimated, and when its counters are written.
 */
import type { CounterName } from "../core/metrics";

/**
 * Counters and the lag histogram are written at most this often: a row per counter per write, so
 * at low rates writing them with every outcome flush would cost more than the outcomes. Reads
 * add what is not written yet; a crash loses at most this much of the counts.
 */
export const COUNTER_WRITE_MS = 10_000;
/** the meter's own counters: they ride along with the next write (waking for them alone would be metered too) */
export const METER_COUNTERS: CounterName[] = ["do_rows_written_total", "d1_rows_written_total", "alarms_set_total", "do_requests_total"];

/** SQL storage whose every statement goes through one exec that remembers its cursor. */
export class RowMeter {
  readonly sql: SqlStorage;
  /** the SQL cursors not yet counted (rowsWritten is final once a statement ran) */
  private readonly cursors: SqlStorageCursor<Record<string, SqlStorageValue>>[] = [];

  constructor(raw: SqlStorage) {
    this.sql = Object.create(raw, {
      exec: {
        value: (query: string, ...bindings: SqlStorageValue[]) => {
          const cursor = raw.exec(query, ...bindings);
          this.cursors.push(cursor);
          return cursor;
        },
      },
    }) as SqlStorage;
  }

  /** The rows written by the statements run since the last take. */
  take(): number {
    let rows = 0;
    for (const cursor of this.cursors.splice(0)) rows += cursor.rowsWritten;
    return rows;
  }
}
