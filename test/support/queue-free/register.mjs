// `node --import <this file>`: every later import goes through hooks.mjs, which refuses BullMQ and ioredis.
import { register } from 'node:module';

register('./hooks.mjs', import.meta.url);
