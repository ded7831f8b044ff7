// Runs once before all test files: makes Redis and PostgreSQL reachable through the same
// code path as `npm run services`.
export default async function setup(): Promise<void> {
  const { loadConfig } = await import('../src/config/config.ts');
  const { ensureServices } = await import('../harness/services/ensure-services.ts');
  await ensureServices(loadConfig());
}
