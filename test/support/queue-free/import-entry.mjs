// Imports the module named by argv[2] (a file path or a package specifier) and prints one JSON
// line: its export names, and the BullMQ or ioredis files loaded through require() (which the
// hooks do not see). Run it with register.mjs imported first, so an import of either fails.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { QUEUE_MODULE } from './hooks.mjs';

const target = process.argv[2];
if (target === undefined) throw new Error('usage: import-entry.mjs <file or package>');
const url = existsSync(target) ? pathToFileURL(resolve(target)).href : target;
const loaded = await import(url);
const required = Object.keys(createRequire(import.meta.url).cache).filter((file) => QUEUE_MODULE.test(file));
process.stdout.write(`${JSON.stringify({ exports: Object.keys(loaded).sort(), required })}\n`);
