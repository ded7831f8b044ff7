// What redact.ts removes from log lines and error texts (the end-to-end search over a real run
// is test/security/credentials-in-logs.test.ts).
import { ReplyError } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { errorSerializer, REDACTED, redactText, redactValue } from '../../src/log/redact.ts';

describe('redactText', () => {
  it('masks the password of any URL and password query parameters, keeps the rest', () => {
    expect(redactText('connect to postgresql://worker:s3cr%40t@db:5432/x failed')).toBe(
      `connect to postgresql://worker:${REDACTED}@db:5432/x failed`,
    );
    expect(redactText('rediss://:pw@cache:6380 and redis://cache:6379')).toBe(
      `rediss://:${REDACTED}@cache:6380 and redis://cache:6379`,
    );
    expect(redactText('postgres://u@h/db?sslmode=verify-full&password=pw&sslpassword=k')).toBe(
      `postgres://u@h/db?sslmode=verify-full&password=${REDACTED}&sslpassword=${REDACTED}`,
    );
    expect(redactText('no url here')).toBe('no url here');
  });
});

describe('errorSerializer', () => {
  it('drops the arguments of a refused AUTH, which ioredis attaches to the error', () => {
    const err = new ReplyError('WRONGPASS invalid username-password pair or user is disabled.') as Error & {
      command?: unknown;
    };
    err.command = { name: 'auth', args: ['the-password'] };
    const out = JSON.stringify(errorSerializer(err));
    expect(out).not.toContain('the-password');
    expect(out).toContain('WRONGPASS');
    expect(out).toContain(`"args":"${REDACTED}"`);
  });

  it('keeps the arguments of other commands, and censors secret-looking properties and URLs in causes', () => {
    const err = new Error('outer', { cause: new Error('inner at redis://:pw2@h:1') }) as Error &
      Record<string, unknown>;
    err.command = { name: 'evalsha', args: ['sha', '1', 'key'] };
    err.config = { connectionString: 'postgresql://u:pw3@h/d', password: 'pw4', user: 'u' };
    const out = JSON.stringify(errorSerializer(err));
    for (const secret of ['pw2', 'pw3', 'pw4']) expect(out).not.toContain(secret);
    expect(out).toContain('"args":["sha","1","key"]');
    expect(out).toContain('"user":"u"');
  });

  it('redactValue walks arrays and stops at a bounded depth', () => {
    let deep: Record<string, unknown> = { password: 'x' };
    for (let i = 0; i < 20; i++) deep = { next: deep };
    expect(JSON.stringify(redactValue([deep]))).not.toContain('"x"');
  });
});
