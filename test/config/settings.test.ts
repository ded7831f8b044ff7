// The settings table (src/config/settings.ts) is what loadConfig enforces: every default is a
// value its own row accepts, every integer row's bounds are the ones loadConfig holds the
// variable to, and the table sets every field of Config.
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.ts';
import { SETTINGS, type Setting } from '../../src/config/settings.ts';
import { ConfigError } from '../../src/errors.ts';

const rows = Object.entries(SETTINGS) as [string, Setting][];
const integerRows = rows.filter((r): r is [string, Extract<Setting, { kind: 'integer' }>] => r[1].kind === 'integer');

/** Lets TRANSFER_BATCHES_IN_FLIGHT_MAX reach its own bound, which the pool otherwise caps. */
const ROOMY_POOL = { DB_POOL_MAX: String(SETTINGS.DB_POOL_MAX.max) };

describe('the settings table', () => {
  it.each(rows)('%s: its default is a value it accepts', (_, setting) => {
    if (setting.default === null || setting.default === '') return;
    switch (setting.kind) {
      case 'integer':
        expect(Number(setting.default)).toBeGreaterThanOrEqual(setting.min);
        expect(Number(setting.default)).toBeLessThanOrEqual(setting.max);
        break;
      case 'enum':
        expect(setting.values).toContain(setting.default);
        break;
      case 'boolean':
        expect(['true', 'false']).toContain(setting.default);
        break;
      case 'pattern':
        expect(setting.default).toMatch(setting.pattern);
        break;
      default:
        break;
    }
  });

  it.each(integerRows)('%s: loadConfig holds it to the bounds the table gives', (name, { min, max }) => {
    expect(() => loadConfig({ ...ROOMY_POOL, [name]: String(min) })).not.toThrow();
    expect(() => loadConfig({ ...ROOMY_POOL, [name]: String(max) })).not.toThrow();
    for (const outside of [String(max + 1), ...(min > 0 ? [String(min - 1)] : [])]) {
      const load = () => loadConfig({ ...ROOMY_POOL, [name]: outside });
      expect(load, outside).toThrow(ConfigError);
      expect(load, outside).toThrow(`${name}: expected a whole number between ${min} and ${max}, got ${outside}`);
    }
  });

  it('sets every field of Config, and names no field Config lacks', () => {
    const fields = new Set(rows.map(([, s]) => s.field).filter((f) => f !== null));
    expect(new Set(Object.keys(loadConfig({})))).toEqual(fields);
  });

  it('gives every variable a one-line doc', () => {
    for (const [name, setting] of rows) {
      expect(setting.doc.trim(), name).not.toBe('');
      expect(setting.doc, name).not.toContain('\n');
    }
  });
});
