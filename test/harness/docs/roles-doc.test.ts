// docs/reference/roles.md matches the catalogs: in a scratch database migrated and with each role
// made by its command's code, the rights read again render the committed page exactly. Control:
// one table right granted by hand there (SELECT on wallets to the relay role), or EXECUTE on a
// function to PUBLIC, and the page no longer matches, with the changed row naming the right.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { DATABASE_REFERENCE_DOCS, GENERATED_NOTICE } from '../../../harness/docs/reference-docs.ts';
import {
  ROLES_DOC_PATH,
  readRoleRights,
  renderRolesDoc,
  roleColumns,
  withScratchRoles,
} from '../../../harness/docs/roles-doc.ts';
import { loadConfig } from '../../../src/config/config.ts';
import { PROJECT_ROOT } from '../../../src/config/paths.ts';

const committed = () => readFileSync(join(PROJECT_ROOT, ROLES_DOC_PATH), 'utf8');
const page = (body: string) => `${GENERATED_NOTICE}\n\n${body}`;
const changedLines = (a: string, b: string) => {
  const before = new Set(a.split('\n'));
  return b.split('\n').filter((l) => !before.has(l));
};

describe('the roles reference', () => {
  it('is registered with the generated documents', () => {
    expect(DATABASE_REFERENCE_DOCS.map((d) => d.path)).toContain(ROLES_DOC_PATH);
  });

  it('matches the catalogs; a right granted by hand makes it differ, naming the right', async () => {
    await withScratchRoles(loadConfig().databaseUrl, async ({ url, roles }) => {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        const columns = roleColumns(roles);
        const render = async () => page(renderRolesDoc(columns, await readRoleRights(client, columns)));
        const asCommitted = await render();
        expect(asCommitted).toBe(committed());
        // Every function the relay code executes is listed in its column.
        expect(asCommitted).toMatch(
          /\| function relay_claim_first_sends\(integer\) \(runs as its owner\) \| — \| — \| — \| EXECUTE \| — \|/,
        );

        await client.query(`GRANT SELECT ON wallets TO ${roles.relay}`);
        const granted = await render();
        expect(granted).not.toBe(committed());
        expect(changedLines(committed(), granted)).toEqual(['| table wallets | — | — | — | SELECT | — |']);
        await client.query(`REVOKE SELECT ON wallets FROM ${roles.relay}`);
        expect(await render()).toBe(committed());

        await client.query(
          'GRANT EXECUTE ON FUNCTION apply_transfer(text,text,text,text,bigint,text,bigint,uuid) TO PUBLIC',
        );
        expect(changedLines(committed(), await render())).toEqual([
          '| function apply_transfer(text,text,text,text,bigint,text,bigint,uuid) | EXECUTE | EXECUTE | EXECUTE | EXECUTE | EXECUTE |',
        ]);
      } finally {
        await client.end();
      }
    });
  });
});
