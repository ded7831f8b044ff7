// A database of an older schema, for the upgrade tests: every migration before `migration`
// applied (the later ones may redefine a function over what `migration` changes), from a copy
// of the migrations folder in `scratch`. Answers the folders left out, in order: what the
// upgrade to today's migrations applies.
import { cpSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { MIGRATIONS_DIR } from '../../src/config/paths.ts';
import { migrate } from '../../src/db/migrations.ts';

export async function migrateBefore(url: string, migration: string, scratch: string): Promise<string[]> {
  cpSync(MIGRATIONS_DIR, scratch, { recursive: true });
  const left = readdirSync(scratch)
    .filter((name) => /^\d{14}_/.test(name) && name >= migration)
    .sort();
  for (const name of left) rmSync(join(scratch, name), { recursive: true });
  await migrate(url, scratch);
  return left;
}
