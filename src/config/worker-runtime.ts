// The node flags every worker process runs with, whoever starts it: `npm run worker`, the
// image's CMD, the Compose service, the Kubernetes Deployment and the fleet in harness/fleet (demo,
// chaos harness, bench, scaling, tests). They keep a worker's resident memory under load at
// about half of node's defaults, with no hard heap limit a busy worker could die on.
// test/deploy/worker-runtime.test.ts holds every launcher to this list.
//
// Measured with `npm run bench -- --modes e2e` (uniform load, two workers, compiled worker):
// peak RSS per worker about 240-260 MiB with node's defaults, about 125 MiB with these flags,
// with no throughput difference beyond the machine's run-to-run noise (see README, Performance).
export const WORKER_NODE_FLAGS: readonly string[] = [
  // The young generation: node's default lets each semi-space grow to 16 MiB, which a busy worker
  // fills, and keeps (about 30 MiB more). Most of what a job allocates dies young either way.
  '--max-semi-space-size=4',
  // After a full GC the old generation may grow to 1.3× what survived, instead of V8's dynamic
  // factor (up to 4×): a worker's live set is 35-45 MiB, and the old space otherwise grew past
  // 70 MiB of mostly garbage during a 10-second run. This is a growth factor, not a cap.
  '--heap-growing-percent=30',
  // Prisma 7's query compiler is a WebAssembly module. Under load V8 re-compiles its hot
  // functions with its optimizing compiler on background threads, and one such compile of a
  // large function holds 30-40 MiB of native memory at once (heaptrack: the zone memory of
  // ExecuteTurbofanWasmCompilation), which then stays in malloc's arenas. Kept on the baseline
  // compiler, the workers showed no throughput change beyond the machine's noise.
  '--no-wasm-dynamic-tiering',
  '--no-wasm-tier-up',
  // No background GC threads: the main thread scavenges and marks alone. On the 2-core bench
  // machine, where the workers share the cores with PostgreSQL and Redis, the helper threads
  // cost more in wake-ups (futex) than they saved: e2e --runs 1, 8 invocations each way
  // alternating, median 1,989 against 1,785 transfers/s, worker CPU 0.494 against 0.571 ms per
  // transfer, peak RSS 130.5-136.0 against 127.0-131.1 MiB (docs/verification/performance.md).
  // Pauses grow: up to 27 ms in one e2e run (--trace-gc), far inside the lock's renewal margin.
  '--single-threaded-gc',
];
