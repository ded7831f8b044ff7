// Whether a process traces, read from OpenTelemetry's own environment variables: on only when an
// OTLP endpoint is named (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT) and
// OTEL_SDK_DISABLED is not `true` and OTEL_TRACES_EXPORTER is not `none`. An empty value counts as
// unset: Compose passes `${OTEL_EXPORTER_OTLP_ENDPOINT:-}`. Pure: no SDK is loaded to answer.

import { SETTINGS, TRACE_SAMPLERS } from '../config/settings.ts';
import { ConfigError } from '../errors.ts';

export { TRACE_SAMPLERS };

export type TraceSamplerName = (typeof TRACE_SAMPLERS)[number];
/** The specification's default sampler. */
export const TRACE_SAMPLER_DEFAULT: TraceSamplerName = SETTINGS.OTEL_TRACES_SAMPLER.default;

export type TracingEnv =
  | { readonly on: false; readonly why: string }
  | {
      readonly on: true;
      /** Where spans go (OTLP/HTTP, protobuf or JSON as OTEL_EXPORTER_OTLP_PROTOCOL says). */
      readonly tracesUrl: string;
      readonly sampler: TraceSamplerName;
      /** The ratio of the `*traceidratio` samplers (OTEL_TRACES_SAMPLER_ARG, default 1). */
      readonly ratio: number;
    };

type Env = Readonly<Record<string, string | undefined>>;

function envValue(env: Env, name: string): string {
  return (env[name] ?? '').trim();
}

/** The traces URL of a base endpoint, as the OTLP exporter specification builds it. */
function tracesUrlOf(base: string): string {
  return `${base.replace(/\/+$/, '')}/v1/traces`;
}

/** Reads the tracing variables; throws ConfigError for a sampler or ratio it cannot use. */
export function tracingEnvOf(env: Env): TracingEnv {
  if (envValue(env, 'OTEL_SDK_DISABLED').toLowerCase() === 'true') return { on: false, why: 'OTEL_SDK_DISABLED=true' };
  if (envValue(env, 'OTEL_TRACES_EXPORTER').toLowerCase() === 'none')
    return { on: false, why: 'OTEL_TRACES_EXPORTER=none' };
  const traces = envValue(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  const base = envValue(env, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  if (traces === '' && base === '') return { on: false, why: 'no OTLP endpoint configured' };
  const tracesUrl = traces !== '' ? traces : tracesUrlOf(base);
  try {
    const url = new URL(tracesUrl);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('not http');
  } catch {
    throw new ConfigError(
      traces !== '' ? 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' : 'OTEL_EXPORTER_OTLP_ENDPOINT',
      'expected an http:// or https:// URL',
    );
  }
  const samplerText = envValue(env, 'OTEL_TRACES_SAMPLER').toLowerCase() || TRACE_SAMPLER_DEFAULT;
  if (!(TRACE_SAMPLERS as readonly string[]).includes(samplerText)) {
    throw new ConfigError('OTEL_TRACES_SAMPLER', `expected one of ${TRACE_SAMPLERS.join(', ')}`);
  }
  const sampler = samplerText as TraceSamplerName;
  const ratioText = envValue(env, 'OTEL_TRACES_SAMPLER_ARG');
  const ratio = ratioText === '' || !sampler.endsWith('traceidratio') ? 1 : Number(ratioText);
  if (!Number.isFinite(ratio) || ratio < 0 || ratio > 1) {
    throw new ConfigError('OTEL_TRACES_SAMPLER_ARG', 'expected a ratio from 0 to 1');
  }
  return { on: true, tracesUrl, sampler, ratio };
}
