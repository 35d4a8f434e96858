/** Counter and lag increments gathered in memory and written with the bucket's next flush. */
import { lagBin } from "../core/histogram";
import type { BucketMetrics, CounterName } from "../core/metrics";

export class Tally {
  private readonly counters = new Map<string, { name: CounterName; tenant: string; reason: string; value: number }>();
  private readonly lags = new Map<string, { tenant: string; le: number; count: number }>();

  add(name: CounterName, tenant: string, reason = "", by = 1): void {
    const key = `${name}\u0000${tenant}\u0000${reason}`;
    const entry = this.counters.get(key);
    if (entry) entry.value += by;
    else this.counters.set(key, { name, tenant, reason, value: by });
  }

  lag(tenant: string, lagMs: number): void {
    const le = lagBin(Math.max(0, lagMs));
    const key = `${tenant}\u0000${le}`;
    const entry = this.lags.get(key);
    if (entry) entry.count += 1;
    else this.lags.set(key, { tenant, le, count: 1 });
  }

  /** Whether anything but the `ignored` counters waits to be written. */
  hasPending(ignored: readonly CounterName[] = []): boolean {
    if (this.lags.size > 0) return true;
    for (const c of this.counters.values()) if (!ignored.includes(c.name)) return true;
    return false;
  }

  /** Stored metrics plus what is gathered and not yet written (reads are exact between writes). */
  addTo(stored: BucketMetrics): BucketMetrics {
    const counters = stored.counters.map((c) => ({ ...c }));
    for (const c of this.counters.values()) {
      const row = counters.find((r) => r.name === c.name && r.tenant === c.tenant && r.reason === c.reason);
      if (row) row.value += c.value;
      else counters.push({ ...c });
    }
    const lag = stored.lag.map((l) => ({ ...l }));
    for (const l of this.lags.values()) {
      const row = lag.find((r) => r.tenant === l.tenant && r.le === l.le);
      if (row) row.count += l.count;
      else lag.push({ ...l });
    }
    return { counters, lag };
  }

  /** Call inside a transactionSync. */
  write(sql: SqlStorage): void {
    for (const c of this.counters.values()) {
      sql.exec(
        `INSERT INTO counters (name, tenant, reason, value) VALUES (?, ?, ?, ?)
         ON CONFLICT (name, tenant, reason) DO UPDATE SET value = value + excluded.value`,
        c.name,
        c.tenant,
        c.reason,
        c.value,
      );
    }
    for (const l of this.lags.values()) {
      sql.exec(
        `INSERT INTO lag_histogram (tenant, le, count) VALUES (?, ?, ?)
         ON CONFLICT (tenant, le) DO UPDATE SET count = count + excluded.count`,
        l.tenant,
        l.le,
        l.count,
      );
    }
    this.counters.clear();
    this.lags.clear();
  }
}
