// Prisma CLI configuration: where the schema and migrations live, and the database URL.
//
// Prisma 7's CLI insists on a native schema engine for every command, including `generate`,
// and downloads it when missing. Machines without internet access cannot, so when the real
// engine is absent we point PRISMA_SCHEMA_ENGINE_BINARY at a stand-in that explains itself.
// `generate`, `validate` and `format` never execute it; `migrate` would, and then fails with
// that message instead of a download error (use `npm run db:migrate` there).
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'prisma/config';

const root = dirname(fileURLToPath(import.meta.url));

function hasNativeSchemaEngine(): boolean {
  const enginesDir = join(root, 'node_modules', '@prisma', 'engines');
  if (!existsSync(enginesDir)) return false;
  return readdirSync(enginesDir).some((name) => name.startsWith('schema-engine'));
}

if (!process.env.PRISMA_SCHEMA_ENGINE_BINARY && !hasNativeSchemaEngine()) {
  process.env.PRISMA_SCHEMA_ENGINE_BINARY = join(root, 'prisma', 'schema-engine-unavailable.sh');
}

export default defineConfig({
  schema: join(root, 'prisma', 'schema.prisma'),
  migrations: { path: join(root, 'prisma', 'migrations') },
  datasource: {
    url: process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/transfers',
  },
});
