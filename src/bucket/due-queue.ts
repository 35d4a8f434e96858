/**
 * The bucket's scheduled executions by due time: a binary min-heap of (dueAt, id) with lazy
 * removal (an entry whose row moved or left is skipped when it surfaces), so scheduling, taking
 * the earliest and rescheduling are O(log n) with no SQL on the alarm's hot path.
 */
export class DueQueue {
  private readonly heap: { dueAt: number; id: string }[] = [];

  get size(): number {
    return this.heap.length;
  }

  push(dueAt: number, id: string): void {
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
}
