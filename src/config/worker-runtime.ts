// The node flags every worker process runs with, whoever starts it: `npm run worker`, the
// image's CMD, the Compose service, the Kubernetes Deployment and the fleet in harness/fleet (demo,
// chaos harness, bench, scaling, tests). They keep a worker's resident memory under load at
// about half of node's defaults, with no hard heap limit a busy worker could die on.
// test/deploy/worker-runtime.test.ts holds every launcher to this list.
//
// What each flag saves and costs, as measured by `npm run bench -- --modes e2e`, is in
// docs/verification/performance.md ("Memory: what a worker holds, and the node flags that halve it").
export const WORKER_NODE_FLAGS: readonly string[] = [
  // The young generation: node's default lets each semi-space grow several times larger, which a
  // busy worker fills, and keeps. Most of what a job allocates dies young either way.
  '--max-semi-space-size=4',
  // After a full GC the old generation may grow to 1.3× what survived, instead of V8's dynamic
  // factor, under which the old space filled with garbage promoted out of the young generation.
  // This is a growth factor, not a cap.
  '--heap-growing-percent=30',
  // Prisma 7's query compiler is a WebAssembly module. Under load V8 re-compiles its hot
  // functions with its optimizing compiler on background threads, and one such compile of a
  // large function holds tens of MiB of native memory at once (heaptrack: the zone memory of
  // ExecuteTurbofanWasmCompilation), which then stays in malloc's arenas. Kept on the baseline
  // compiler, the workers showed no throughput change beyond the machine's noise.
  '--no-wasm-dynamic-tiering',
  '--no-wasm-tier-up',
  // No background GC threads: the main thread scavenges and marks alone. On the 2-core bench
  // machine, where the workers share the cores with PostgreSQL and Redis, the helper threads
  // cost more in wake-ups (futex) than they saved (docs/verification/performance.md has the
  // side-by-side runs). Pauses grow, but stay far inside the lock's renewal margin.
  '--single-threaded-gc',
];
