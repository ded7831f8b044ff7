// Loaded with `node --import` into a worker process by test/tracing/transfer-trace.test.ts:
// registers record-loads-hooks.mjs, which appends to MODULE_LOADS_FILE the URL of every
// OpenTelemetry SDK module the process resolves (the API, which the product always loads, aside).
import { register } from 'node:module';

register('./record-loads-hooks.mjs', import.meta.url, { data: { file: process.env.MODULE_LOADS_FILE ?? '' } });
