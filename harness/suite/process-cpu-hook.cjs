// Preloaded into every node process of a profiled test run (NODE_OPTIONS=--require, which child
// processes inherit): once a second and at exit, it writes the process's CPU so far, its parent and
// its command line to $SUITE_CPU_DIR/<pid>.json. A process killed with SIGKILL keeps its last
// sample, at most a second old. In a Vitest worker it also records the test files that worker
// holds, read from Vitest's worker state (internal, so absent files only leave a process
// unattributed). harness/suite/suite-cpu.ts walks the parents to charge each process to a file.
'use strict';
const { writeFileSync } = require('node:fs');
const { join } = require('node:path');

const dir = process.env.SUITE_CPU_DIR;
const SAMPLE_INTERVAL_MS = 1000;

function testFiles() {
  try {
    const files = globalThis.__vitest_worker__?.ctx?.files ?? [];
    return files.map((f) => (typeof f === 'string' ? f : f.filepath)).filter((f) => typeof f === 'string');
  } catch {
    return [];
  }
}

function sample() {
  const cpu = process.cpuUsage();
  const record = {
    pid: process.pid,
    ppid: process.ppid,
    argv: process.argv.slice(1, 4),
    files: testFiles(),
    cpuMs: Math.round((cpu.user + cpu.system) / 1000),
  };
  try {
    writeFileSync(join(dir, `${process.pid}.json`), JSON.stringify(record));
  } catch {
    // The directory went away: the run is over.
  }
}

// A worker thread (esbuild's buildSync runs one) loads this file too, but process.cpuUsage() is
// the whole process's: sampled there, under the same pid, it would overwrite the main thread's
// record with the process's CPU and another command line, and no test files.
if (dir !== undefined && dir !== '' && require('node:worker_threads').isMainThread) {
  setInterval(sample, SAMPLE_INTERVAL_MS).unref();
  process.on('exit', sample);
}
