// CPU time and memory of the runtime: every process in the stack's process group (wrangler's
// node process is the group leader; workerd is its child in the same group), read from /proc.
// CPU = utime + stime (clock ticks, /proc/<pid>/stat); memory = VmRSS sampled every 500 ms and
// VmHWM (the kernel's peak RSS of the process) from /proc/<pid>/status.
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { sleep } from "./stats.mjs";

export let clockTicks = 100;
try {
  clockTicks = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
} catch {
  /* Linux default */
}

/** { pid, comm, pgrp, ticks } for every process in group `pgrp` (read from /proc). */
export function groupProcesses(pgrp) {
  const out = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    let stat;
    try {
      stat = readFileSync(`/proc/${name}/stat`, "utf8");
    } catch {
      continue; // gone meanwhile
    }
    const close = stat.lastIndexOf(")");
    const comm = stat.slice(stat.indexOf("(") + 1, close);
    const f = stat.slice(close + 2).split(" ");
    // f[0] = state (field 3), f[2] = pgrp (field 5), f[11] = utime (14), f[12] = stime (15)
    if (Number(f[2]) !== pgrp) continue;
    out.push({ pid: Number(name), comm, ticks: Number(f[11]) + Number(f[12]) });
  }
  return out;
}

function memoryKb(pid) {
  try {
    const text = readFileSync(`/proc/${pid}/status`, "utf8");
    const rss = /VmRSS:\s+(\d+)/.exec(text);
    const hwm = /VmHWM:\s+(\d+)/.exec(text);
    return { rss: rss ? Number(rss[1]) : 0, hwm: hwm ? Number(hwm[1]) : 0 };
  } catch {
    return null;
  }
}

/**
 * Samples one or more process groups (a crash restart adds a new group) every `intervalMs`.
 * cpu(): CPU seconds per comm since the sampler started (or since `mark()`), including
 * processes that started later; processes that died count up to their last sample.
 */
export class GroupSampler {
  constructor(intervalMs = 500) {
    this.intervalMs = intervalMs;
    this.groups = new Set();
    /** pid -> { comm, firstTicks, lastTicks, peakRssKb, hwmKb } */
    this.procs = new Map();
    this.timer = null;
    this.rssSeries = [];
    this.marks = new Map();
  }

  addGroup(pgrp) {
    this.groups.add(pgrp);
    this.sample();
  }

  start() {
    this.sample();
    this.timer = setInterval(() => this.sample(), this.intervalMs);
    this.timer.unref();
    return this;
  }

  stop() {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.sample();
  }

  sample() {
    let totalRss = 0;
    for (const g of this.groups) {
      for (const p of groupProcesses(g)) {
        let e = this.procs.get(p.pid);
        if (!e) {
          e = { comm: p.comm, firstTicks: p.ticks, lastTicks: p.ticks, peakRssKb: 0, hwmKb: 0 };
          // a process seen after the sampler started: count all its CPU
          if (this.started) e.firstTicks = 0;
          this.procs.set(p.pid, e);
        }
        e.lastTicks = p.ticks;
        e.comm = p.comm;
        const mem = memoryKb(p.pid);
        if (mem) {
          e.peakRssKb = Math.max(e.peakRssKb, mem.rss);
          e.hwmKb = Math.max(e.hwmKb, mem.hwm);
          totalRss += mem.rss;
        }
      }
    }
    this.started = true;
    this.rssSeries.push(totalRss);
  }

  /** Remembers the current CPU ticks under `name`, for cpu(name, ...). */
  mark(name) {
    this.sample();
    const snapshot = new Map();
    for (const [pid, e] of this.procs) snapshot.set(pid, e.lastTicks);
    snapshot.machine = machineTicks();
    snapshot.bench = process.cpuUsage();
    snapshot.at = Date.now();
    this.marks.set(name, snapshot);
  }

  /**
   * The whole machine between two marks: busy CPU seconds of all processes, of the runtime, of
   * this bench process, and of everything else (other work on the machine: noise in the figures).
   */
  machine(from, to) {
    const a = this.marks.get(from);
    const b = this.marks.get(to);
    if (!a || !b) return null;
    const busy = (b.machine.busy - a.machine.busy) / clockTicks;
    const runtime = Object.values(this.cpu(from, to)).reduce((x, y) => x + y, 0);
    const benchUsage = (b.bench.user + b.bench.system - a.bench.user - a.bench.system) / 1e6;
    const wall = (b.at - a.at) / 1000;
    const r = (x) => Math.round(x * 100) / 100;
    return {
      wallSeconds: r(wall),
      busyCpuSeconds: r(busy),
      runtimeCpuSeconds: r(runtime),
      benchCpuSeconds: r(benchUsage),
      otherCpuSeconds: r(Math.max(0, busy - runtime - benchUsage)),
      idleCpuSeconds: r((b.machine.idle - a.machine.idle) / clockTicks),
    };
  }

  /** CPU seconds per comm between mark `from` (or the start) and mark `to` (or now). */
  cpu(from, to) {
    this.sample();
    const a = from ? this.marks.get(from) : null;
    const b = to ? this.marks.get(to) : null;
    const byComm = {};
    for (const [pid, e] of this.procs) {
      const start = a ? (a.get(pid) ?? 0) : e.firstTicks;
      const end = b ? (b.get(pid) ?? 0) : e.lastTicks;
      const s = Math.max(0, end - start) / clockTicks;
      byComm[e.comm] = Math.round(((byComm[e.comm] ?? 0) + s) * 100) / 100;
    }
    return byComm;
  }

  /** Peak RSS per comm (MB): the larger of sampled VmRSS and the kernel's VmHWM. */
  peakRssMb() {
    const byComm = {};
    for (const e of this.procs.values()) {
      const mb = Math.round(Math.max(e.peakRssKb, e.hwmKb) / 102.4) / 10;
      byComm[e.comm] = Math.max(byComm[e.comm] ?? 0, mb);
    }
    return byComm;
  }

  /** How many processes of each comm were seen: more than one workerd means the runtime restarted (a reload, a crash). */
  processCounts() {
    const byComm = {};
    for (const e of this.procs.values()) byComm[e.comm] = (byComm[e.comm] ?? 0) + 1;
    return byComm;
  }
}

/** Busy and idle clock ticks of all CPUs (/proc/stat). */
export function machineTicks() {
  const line = readFileSync("/proc/stat", "utf8").split("\n")[0];
  const [, user, nice, system, idle, iowait, irq, softirq, steal] = line.trim().split(/\s+/).map(Number);
  return { busy: user + nice + system + irq + softirq + steal, idle: idle + iowait };
}

/** CPU seconds of this (bench) process since `since` (a process.cpuUsage() value). */
export function benchCpuSeconds(since) {
  const u = process.cpuUsage(since);
  return Math.round((u.user + u.system) / 1e4) / 100;
}

/** CPU seconds (utime + stime, every thread) of one process by its pid; null once it is gone. */
export function pidCpuSeconds(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(f[11]) + Number(f[12])) / clockTicks;
  } catch {
    return null;
  }
}

/**
 * Other work on this 2-core machine (tests of other sessions) skews every figure, so a scenario
 * waits, at most `maxWaitMs`, until the machine has been nearly idle for 2 s (busy < 0.3 core,
 * this process excluded). Returns what it saw; the figures say whether it ran on a quiet machine.
 */
export async function waitForQuiet(maxWaitMs, thresholdCores = 0.3) {
  const startedAt = Date.now();
  let lastBusyCores = null;
  if (maxWaitMs <= 0) return { waitedMs: 0, quiet: null, busyCores: null };
  while (Date.now() - startedAt <= maxWaitMs) {
    const a = machineTicks();
    const u = process.cpuUsage();
    await sleep(2000);
    const b = machineTicks();
    const own = (process.cpuUsage(u).user + process.cpuUsage(u).system) / 1e6;
    lastBusyCores = Math.max(0, (b.busy - a.busy) / clockTicks - own) / 2; // cores busy over the 2 s window
    if (lastBusyCores < thresholdCores)
      return { waitedMs: Date.now() - startedAt, quiet: true, busyCores: Math.round(lastBusyCores * 100) / 100 };
  }
  return { waitedMs: Date.now() - startedAt, quiet: false, busyCores: Math.round(lastBusyCores * 100) / 100 };
}
