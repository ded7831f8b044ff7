// Runs once before all test files: makes Redis and PostgreSQL reachable through the same code
// path as `npm run services`, then migrates one template database that every test file's
// database is copied from (test/support/test-db.ts): a copy costs a fraction of running every
// migration again. The template takes no connection once migrated (CREATE DATABASE … TEMPLATE
// refuses a template with sessions open), and the teardown drops it.
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The migrated template's name and the server it lives on (the URL without its database). */
    templateDatabase: { name: string; server: string } | null;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const { loadConfig, withDatabase } = await import('../src/config/config.ts');
  const { ensureServices } = await import('../harness/services/ensure-services.ts');
  const { migratedTemplate } = await import('./support/template-db.ts');
  const config = loadConfig();
  await ensureServices(config);
  const template = await migratedTemplate(config.databaseUrl);
  project.provide('templateDatabase', { name: template.name, server: withDatabase(config.databaseUrl, 'postgres') });
  return () => template.drop();
}
