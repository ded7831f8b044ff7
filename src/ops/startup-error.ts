// A worker that cannot start: the variable to look at and what was found, on one line.
export class StartupError extends Error {
  override name = 'StartupError';
  constructor(
    readonly variables: readonly string[],
    detail: string,
  ) {
    super(`${variables.join(', ')}: ${detail}`);
  }
}
