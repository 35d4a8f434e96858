import { comparePriority, PRIORITY } from "../core/priority";

/**
 * The bucket's scheduled executions by due time: a binary min-heap of (dueAt, id) with lazy
 * removal (an entry whose row moved or left is skipped when it surfaces), so scheduling, taking
 * the earliest and rescheduling are O(log n) with no SQL on the alarm's hot path.
 */
export class DueQueue {
  private readonly heap: { dueAt: number; id: string }[] = [];
  /** the entries in the heap, so one is never there twice (a row moved away and back) */
  private readonly entries = new Set<string>();

  get size(): number {
    return this.heap.length;
  }

  /** Adds an entry; one already there is not added again (taking it twice would dispatch it twice). */
  push(dueAt: number, id: string): void {
    const key = entryKey(dueAt, id);
    if (this.entries.has(key)) return;
    this.entries.add(key);
    const heap = this.heap;
    heap.push({ dueAt, id });
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (heap[parent]!.dueAt <= dueAt) break;
      heap[i] = heap[parent]!;
      i = parent;
    }
    heap[i] = { dueAt, id };
  }

  /** The earliest entry for which `live` holds, dropping stale ones on the way. */
  peek(live: (dueAt: number, id: string) => boolean): { dueAt: number; id: string } | undefined {
    while (this.heap.length > 0) {
      const top = this.heap[0]!;
      if (live(top.dueAt, top.id)) return top;
      this.pop();
    }
    return undefined;
  }

  pop(): { dueAt: number; id: string } | undefined {
    const heap = this.heap;
    const top = heap[0];
    if (top) this.entries.delete(entryKey(top.dueAt, top.id));
    const last = heap.pop();
    if (heap.length > 0 && last) {
      let i = 0;
      for (;;) {
        const left = 2 * i + 1;
        const right = left + 1;
        if (left >= heap.length) break;
        const child = right < heap.length && heap[right]!.dueAt < heap[left]!.dueAt ? right : left;
        if (heap[child]!.dueAt >= last.dueAt) break;
        heap[i] = heap[child]!;
        i = child;
      }
      heap[i] = last;
    }
    return top;
  }

  /** Keeps only the entries for which `live` holds (the stale ones of moved rows go). */
  compact(live: (dueAt: number, id: string) => boolean): void {
    const kept = this.heap.filter((e) => live(e.dueAt, e.id));
    this.heap.length = 0;
    this.entries.clear();
    for (const e of kept) this.push(e.dueAt, e.id);
  }
}

function entryKey(dueAt: number, id: string): string {
  return `${dueAt}:${id}`;
}

/** whether an entry still stands for its row (not moved, left or re-prioritized since it was pushed) */
export type Live = (dueAt: number, id: string, priority: number) => boolean;

/**
 * One tenant's scheduled executions: a DueQueue per priority, so the one that goes next among
 * those due is found at the heads (core/priority.ts: highest effective priority, then due order;
 * within one priority the oldest has waited longest, so only heads compete).
 */
class PriorityDueQueues {
  private readonly byPriority = new Map<number, DueQueue>();

  push(dueAt: number, id: string, priority: number): void {
    let queue = this.byPriority.get(priority);
    if (!queue) {
      queue = new DueQueue();
      this.byPriority.set(priority, queue);
    }
    queue.push(dueAt, id);
  }

  /** The earliest live entry of any priority. */
  peek(live: Live): { dueAt: number; id: string } | undefined {
    let earliest: { dueAt: number; id: string } | undefined;
    for (const [priority, queue] of this.byPriority) {
      const top = queue.peek((dueAt, id) => live(dueAt, id, priority));
      if (!top) {
        this.byPriority.delete(priority);
        continue;
      }
      if (!earliest || top.dueAt < earliest.dueAt) earliest = top;
    }
    return earliest;
  }

  /** Takes the live entry due at `now` or before that goes first (comparePriority), if any. */
  takeNext(now: number, live: Live): { dueAt: number; id: string } | undefined {
    let next: { queue: DueQueue; top: { dueAt: number; id: string }; priority: number } | undefined;
    for (const [priority, queue] of this.byPriority) {
      const top = queue.peek((dueAt, id) => live(dueAt, id, priority));
      if (!top) {
        this.byPriority.delete(priority);
        continue;
      }
      if (top.dueAt > now) continue;
      const candidate = { dueAt: top.dueAt, priority };
      if (!next || comparePriority(candidate, { dueAt: next.top.dueAt, priority: next.priority }, now) < 0) {
        next = { queue, top, priority };
      }
    }
    next?.queue.pop();
    return next?.top;
  }

  get size(): number {
    let size = 0;
    for (const queue of this.byPriority.values()) size += queue.size;
    return size;
  }

  compact(live: Live): void {
    for (const [priority, queue] of this.byPriority) {
      queue.compact((dueAt, id) => live(dueAt, id, priority));
      if (queue.size === 0) this.byPriority.delete(priority);
    }
  }
}

/**
 * The scheduled executions by due time, one queue per tenant, so what is due can be taken in
 * turns (issue 13, fairness): one tenant's backlog of 100,000 due jobs gets every other slot, not
 * every slot, while another tenant has something due. Within a tenant, what is due goes by
 * priority aged by its wait (core/priority.ts), which with one priority is due order.
 */
export class TenantDueQueues {
  private readonly byTenant = new Map<string, PriorityDueQueues>();
  /** the tenant served first in the next turn: turns rotate across takes */
  private turn = 0;

  push(dueAt: number, id: string, tenant: string, priority: number = PRIORITY.default): void {
    let queue = this.byTenant.get(tenant);
    if (!queue) {
      queue = new PriorityDueQueues();
      this.byTenant.set(tenant, queue);
    }
    queue.push(dueAt, id, priority);
  }

  /** The earliest live entry of any tenant (what the alarm must wake for). */
  peek(live: Live): { dueAt: number; id: string } | undefined {
    let earliest: { dueAt: number; id: string } | undefined;
    for (const [tenant, queue] of this.byTenant) {
      const top = queue.peek(live);
      if (!top) {
        this.byTenant.delete(tenant);
        continue;
      }
      if (!earliest || top.dueAt < earliest.dueAt) earliest = top;
    }
    return earliest;
  }

  /**
   * Takes up to `limit` live entries due at `now` or before, one per tenant in turn (each tenant's
   * next by priority first); the next take starts with the tenant after the first one served here.
   */
  takeDue(now: number, limit: number, live: Live): { dueAt: number; id: string }[] {
    const taken: { dueAt: number; id: string }[] = [];
    if (limit <= 0 || this.byTenant.size === 0) return taken;
    const tenants = [...this.byTenant.keys()];
    const start = this.turn % tenants.length;
    let serving = [...tenants.slice(start), ...tenants.slice(0, start)];
    this.turn = start + 1;
    while (taken.length < limit && serving.length > 0) {
      const stillDue: string[] = [];
      for (const tenant of serving) {
        if (taken.length >= limit) break;
        const next = this.byTenant.get(tenant)!.takeNext(now, live);
        if (!next) continue;
        taken.push(next);
        stillDue.push(tenant);
      }
      serving = stillDue;
    }
    return taken;
  }

  get size(): number {
    let size = 0;
    for (const queue of this.byTenant.values()) size += queue.size;
    return size;
  }

  /** Keeps only the live entries of every tenant. */
  compact(live: Live): void {
    for (const [tenant, queue] of this.byTenant) {
      queue.compact(live);
      if (queue.size === 0) this.byTenant.delete(tenant);
    }
  }
}
