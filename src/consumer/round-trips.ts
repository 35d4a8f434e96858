/**
 * What a batch's deliveries tell one object (a bucket's completions: fire.ts, a flow key's
 * releases: permits.ts), gathered into as few round trips as they allow.
 */

/**
 * Items a batch's deliveries report to one object wait this long for the others that finish
 * with them: a batch's deliveries to a fast target end within a few milliseconds of each other,
 * and sending the first alone cost a round trip (a billed request, and on the local runtime about
 * half a millisecond of its one thread) per batch and object. Holding a lease or a permit 10 ms
 * longer changes nothing a user sees.
 */
const GATHER_MS = 10;

/**
 * Sends items to one object: GATHER_MS after the first when nothing is in flight, else together
 * with the others that arrive meanwhile (one RPC per round trip, however many finish). `send`
 * never throws.
 */
export class RoundTrips<T> {
  private pending: T[] = [];
  private inFlight: Promise<void> | null = null;

  constructor(private readonly send: (items: T[]) => Promise<void>) {}

  add(item: T): void {
    this.pending.push(item);
    this.inFlight ??= this.flush();
  }

  async drained(): Promise<void> {
    while (this.inFlight !== null) await this.inFlight;
  }

  private async flush(): Promise<void> {
    await scheduler.wait(GATHER_MS);
    while (this.pending.length > 0) {
      const items = this.pending;
      this.pending = [];
      await this.send(items);
    }
    this.inFlight = null;
  }
}
