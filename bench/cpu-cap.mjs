// A CPU cap per process for the capped scaling run (bench/redis-scaling.mjs): each redis-server
// primary in a CPU cgroup of its own, capped at a share of one core, so that on this 2-core
// machine a primary is the bottleneck as it is in production when a team adds primaries (each
// on its own machine, saturated). cgroup v1 (`/sys/fs/cgroup/cpu`, cpu.cfs_quota_us and
// cpu.cfs_period_us) or v2 (`/sys/fs/cgroup`, cpu.max); writing either needs root. Every group
// this module makes is removed again by `remove()` and, as a last resort, on process exit.

import fs from 'node:fs';
import path from 'node:path';

const V1 = '/sys/fs/cgroup/cpu';
const V2 = '/sys/fs/cgroup';
const made = new Set(); // groups not yet removed: { dir, root }

/** Which cgroup interface can cap CPU here, or why none can. */
export function cgroupSupport() {
  if (fs.existsSync(path.join(V1, 'cpu.cfs_quota_us'))) return probe({ version: 1, root: V1 });
  if (fs.existsSync(path.join(V2, 'cgroup.controllers'))) {
    const controllers = fs.readFileSync(path.join(V2, 'cgroup.controllers'), 'utf8');
    if (!controllers.split(/\s+/).includes('cpu')) return { ok: false, reason: 'cgroup v2 without the cpu controller' };
    try {
      const sub = path.join(V2, 'cgroup.subtree_control');
      if (!fs.readFileSync(sub, 'utf8').split(/\s+/).includes('cpu')) fs.writeFileSync(sub, '+cpu');
    } catch (error) {
      return { ok: false, reason: `cannot enable the cpu controller in ${V2} (${error.code ?? error.message})` };
    }
    return probe({ version: 2, root: V2 });
  }
  return { ok: false, reason: 'no CPU cgroup (neither /sys/fs/cgroup/cpu nor cgroup v2) on this machine' };
}

function probe(where) {
  const dir = path.join(where.root, `circuitlog-bench-probe-${process.pid}`);
  try {
    fs.mkdirSync(dir);
    fs.rmdirSync(dir);
    return { ok: true, ...where };
  } catch (error) {
    return {
      ok: false,
      reason: `cannot create a cgroup in ${where.root} (${error.code ?? error.message}; needs root)`,
    };
  }
}

/**
 * A cgroup `name` capped at `share` of one core per `periodUs` (quota = share × period).
 * Answers { add(pid), release(), stat(), remove() }; throws if the group cannot be made.
 */
export function cpuGroup(support, name, share, periodUs) {
  const dir = path.join(support.root, `circuitlog-bench-${process.pid}-${name}`);
  fs.mkdirSync(dir);
  const group = { dir, root: support.root };
  made.add(group);
  const quotaUs = Math.max(1_000, Math.round(share * periodUs));
  if (support.version === 1) {
    fs.writeFileSync(path.join(dir, 'cpu.cfs_period_us'), String(periodUs));
    fs.writeFileSync(path.join(dir, 'cpu.cfs_quota_us'), String(quotaUs));
  } else fs.writeFileSync(path.join(dir, 'cpu.max'), `${quotaUs} ${periodUs}`);
  return {
    quotaUs,
    periodUs,
    /** Move a process (all its threads) into the group. */
    add: (pid) => fs.writeFileSync(path.join(dir, 'cgroup.procs'), String(pid)),
    /** Move every process of the group back to the root group (uncapped). */
    release: () => evacuate(group),
    /** nr_periods, nr_throttled and the throttled time (ms) so far, from cpu.stat. */
    stat: () => throttling(support.version, fs.readFileSync(path.join(dir, 'cpu.stat'), 'utf8')),
    remove: () => removeGroup(group),
  };
}

function throttling(version, text) {
  const v = Object.fromEntries(
    text
      .split('\n')
      .map((l) => l.split(' '))
      .map(([k, n]) => [k, Number(n)]),
  );
  return {
    periods: v.nr_periods ?? 0,
    throttled: v.nr_throttled ?? 0,
    throttledMs: version === 1 ? (v.throttled_time ?? 0) / 1e6 : (v.throttled_usec ?? 0) / 1e3,
  };
}

function evacuate({ dir, root }) {
  let procs = [];
  try {
    procs = fs.readFileSync(path.join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean);
  } catch {
    return; // gone already
  }
  for (const pid of procs) {
    try {
      fs.writeFileSync(path.join(root, 'cgroup.procs'), pid);
    } catch {
      // exited meanwhile
    }
  }
}

function removeGroup(group) {
  if (!made.has(group)) return;
  evacuate(group);
  try {
    fs.rmdirSync(group.dir);
  } catch (error) {
    if (error.code !== 'ENOENT') throw error;
  }
  made.delete(group);
}

/** Remove every group still there (a run that failed half-way); never throws. */
export function removeAllGroups() {
  for (const group of [...made]) {
    try {
      removeGroup(group);
    } catch {
      // reported by the caller's own remove(); nothing more to do on exit
    }
  }
}

process.on('exit', removeAllGroups);
