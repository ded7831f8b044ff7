// What `npm run config` prints: every variable of the settings table with the value the service
// resolves it to and where that value came from, secrets redacted. Built from the same table and
// the same parser as the service (loadConfig), so a value shown here is the value a worker uses.
import { isSecretName, REDACTED, redactText } from '../log/redact.ts';
import { type Config, loadConfig, redactUrl } from './config.ts';
import { SETTINGS, type Setting, type SettingName } from './settings.ts';

type Env = Readonly<Record<string, string | undefined>>;

/** One line of the view. */
export interface ConfigViewRow {
  readonly name: SettingName;
  /** The resolved value as text; `(unset)` for a variable with no default that is not set. */
  readonly value: string;
  /** `environment`: the variable is set (non-empty); `default`: the table's default, or derived from others. */
  readonly source: 'environment' | 'default';
}

function text(field: keyof Config, value: unknown): string {
  // The two ports are the only fields whose null is a word of their variable (`off`).
  if (value === null || value === undefined)
    return field === 'metricsPort' || field === 'relayMetricsPort' ? 'off' : '(none)';
  if (value === '' || (Array.isArray(value) && value.length === 0)) return '(none)';
  if (typeof value === 'bigint' || typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) return value.map((item) => text(field, item)).join(',');
  return JSON.stringify(value, (_key, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
}

function shown(name: SettingName, setting: Setting, value: string): string {
  if (isSecretName(name)) return REDACTED; // never shown, only whether it is set
  return redactText(setting.kind === 'url' ? redactUrl(value) : value);
}

/**
 * The view of `env`. Throws the ConfigError loadConfig throws when the environment is invalid, so
 * the command fails exactly where a worker would.
 */
export function configView(env: Env): ConfigViewRow[] {
  const config: Config = loadConfig(env);
  return (Object.entries(SETTINGS) as [SettingName, Setting][]).map(([name, setting]) => {
    const raw = env[name] ?? '';
    const source = raw === '' ? 'default' : 'environment';
    // The lock service's variables share one field, an object (with etcd's password in it): each
    // is shown as its own text, validated by loadConfig above.
    if (setting.field !== null && setting.field !== 'lock')
      return { name, value: shown(name, setting, text(setting.field, config[setting.field])), source };
    // Read by one command of its own, outside Config: shown as set or as its default.
    if (raw !== '') return { name, value: shown(name, setting, raw), source };
    return { name, value: setting.default === null ? '(unset)' : shown(name, setting, setting.default), source };
  });
}

/** The view as aligned text, one variable per line. */
export function formatConfigView(rows: readonly ConfigViewRow[]): string {
  const width = Math.max(...rows.map((row) => row.name.length));
  const valueWidth = Math.min(60, Math.max(...rows.map((row) => row.value.length)));
  return rows.map((row) => `${row.name.padEnd(width)}  ${row.value.padEnd(valueWidth)}  ${row.source}\n`).join('');
}
