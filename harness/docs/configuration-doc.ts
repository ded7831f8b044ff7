// Renders docs/reference/configuration.md from the settings table (src/config/settings.ts): one
// row per environment variable with its default, what it accepts and what it does. The table is a
// parameter so that a test can render a changed table and see the drift check catch it.
import type { Setting } from '../../src/config/settings.ts';

/** A Markdown table cell: pipes escaped, so a value cannot split the row. */
function cell(text: string): string {
  return text.replace(/\|/g, '\\|');
}

function defaultOf(setting: Setting): string {
  if (setting.default === null) return '(none)';
  if (setting.default === '') return '(empty)';
  return `\`${setting.default}\``;
}

/** What a variable accepts, in words: its range and unit, its values, or its form. */
export function acceptedOf(setting: Setting): string {
  switch (setting.kind) {
    case 'integer': {
      const range = `${setting.min}–${setting.max}${setting.unit === null ? '' : ` ${setting.unit}`}`;
      return setting.alsoAtMost === undefined ? range : `${range}, and at most ${setting.alsoAtMost}`;
    }
    case 'enum': {
      const values = setting.values.map((v) => `\`${v}\``).join(', ');
      return setting.list ? `comma-separated, any of ${values}` : `one of ${values}`;
    }
    case 'boolean':
      return '`true` or `false`';
    case 'url': {
      const schemes = setting.protocols.map((p) => `\`${p}//\``).join(' or ');
      return setting.allowedMore === undefined ? `${schemes} URL` : `${schemes} URL; ${setting.allowedMore}`;
    }
    case 'pattern':
    case 'special':
      return setting.allowed;
  }
}

export function renderConfigurationDoc(settings: Readonly<Record<string, Setting>>): string {
  const rows = Object.entries(settings).map(
    ([name, s]) => `| \`${name}\` | ${cell(defaultOf(s))} | ${cell(acceptedOf(s))} | ${cell(s.doc)} |`,
  );
  return [
    '# Configuration',
    '',
    'Every process of the service (the worker, the producer, the commands) reads its configuration from',
    'these environment variables, once, at start, into a frozen object; nothing else in it reads the',
    'environment.',
    'An unset or empty variable takes its default. A value outside what the variable accepts stops the',
    'process with one line that names the variable and what it accepts, for example',
    '`configuration error: LOCK_TTL_MS: expected a whole number between 100 and 600000, got "10s"`.',
    'Whole numbers are plain decimal digits: no sign, point, exponent, spaces or leading zeros.',
    '',
    'The variables are declared once, in [src/config/settings.ts](../../src/config/settings.ts); the parser',
    '([src/config/config.ts](../../src/config/config.ts)) and this page are made from that table.',
    '',
    '| variable | default | accepts | meaning |',
    '| --- | --- | --- | --- |',
    ...rows,
    '',
  ].join('\n');
}
