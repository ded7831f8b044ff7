// Whether a process traces, from OpenTelemetry's environment (src/tracing/tracing-env.ts): off
// unless an endpoint is named, an empty value is unset (Compose passes `${VAR:-}`), and the
// switches that turn it off win.
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.ts';
import { tracingEnvOf } from '../../src/tracing/tracing-env.ts';

const ENDPOINT = 'http://jaeger:4318';

describe('tracingEnvOf', () => {
  it('is off with no endpoint, or only empty ones', () => {
    expect(tracingEnvOf({}).on).toBe(false);
    expect(
      tracingEnvOf({
        OTEL_EXPORTER_OTLP_ENDPOINT: '',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: '  ',
        OTEL_SERVICE_NAME: 'x',
      }).on,
    ).toBe(false);
  });

  it('is on with an endpoint: the base gets /v1/traces, the traces endpoint is used as it is and wins', () => {
    expect(tracingEnvOf({ OTEL_EXPORTER_OTLP_ENDPOINT: `${ENDPOINT}/` })).toEqual({
      on: true,
      tracesUrl: `${ENDPOINT}/v1/traces`,
      sampler: 'parentbased_always_on',
      ratio: 1,
    });
    expect(
      tracingEnvOf({
        OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT,
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://other:4318/t',
      }),
    ).toMatchObject({ on: true, tracesUrl: 'http://other:4318/t' });
  });

  it('is off when OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none, whatever the endpoint', () => {
    expect(tracingEnvOf({ OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT, OTEL_SDK_DISABLED: 'TRUE' }).on).toBe(false);
    expect(tracingEnvOf({ OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT, OTEL_TRACES_EXPORTER: 'none' }).on).toBe(false);
    expect(tracingEnvOf({ OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT, OTEL_SDK_DISABLED: 'false' }).on).toBe(true);
  });

  it('reads the sampler and its ratio, and refuses what it cannot use', () => {
    expect(
      tracingEnvOf({
        OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT,
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0.25',
      }),
    ).toMatchObject({ sampler: 'parentbased_traceidratio', ratio: 0.25 });
    const bad = [
      { OTEL_TRACES_SAMPLER: 'jaeger_remote' },
      { OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '2' },
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'jaeger:4318' },
    ];
    for (const env of bad) {
      expect(() => tracingEnvOf({ OTEL_EXPORTER_OTLP_ENDPOINT: ENDPOINT, ...env }), JSON.stringify(env)).toThrow(
        ConfigError,
      );
    }
  });
});
