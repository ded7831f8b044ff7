// A small reader of the project's Dockerfile: its stages and their instructions, with line
// continuations joined and comments dropped. Used by the Dockerfile test and by the compiled
// project's setup, which assembles the final stage's files the way the Dockerfile does.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PROJECT_ROOT } from '../../src/config/paths.ts';

export interface Instruction {
  op: string;
  args: string;
}

export interface Stage {
  name: string;
  from: string;
  instructions: Instruction[];
}

export const DOCKERFILE = join(PROJECT_ROOT, 'Dockerfile');

export function parseDockerfile(text: string = readFileSync(DOCKERFILE, 'utf8')): Stage[] {
  const logical: string[] = [];
  let pending = '';
  for (const line of text.split('\n')) {
    if (/^\s*#/.test(line)) continue;
    const continued = /\\\s*$/.test(line);
    pending += `${line.replace(/\\\s*$/, '').trim()} `;
    if (!continued) {
      if (pending.trim() !== '') logical.push(pending.trim());
      pending = '';
    }
  }
  if (pending.trim() !== '') logical.push(pending.trim());
  const stages: Stage[] = [];
  for (const line of logical) {
    const m = /^(\S+)\s+(.*)$/.exec(line);
    if (m === null) throw new Error(`Dockerfile: cannot read ${JSON.stringify(line)}`);
    const op = (m[1] as string).toUpperCase();
    const args = (m[2] as string).replace(/\s+/g, ' ').trim();
    if (op === 'FROM') {
      const from = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args);
      if (from === null) throw new Error(`Dockerfile: FROM ${args}`);
      stages.push({ from: from[1] as string, name: from[2] ?? String(stages.length), instructions: [] });
      continue;
    }
    const stage = stages.at(-1);
    if (stage === undefined) throw new Error(`Dockerfile: ${op} before FROM`);
    stage.instructions.push({ op, args });
  }
  return stages;
}

/** A COPY instruction's flags, sources and destination. */
export function copyParts(args: string): { from: string | null; sources: string[]; dest: string } {
  const words = args.split(' ');
  let from: string | null = null;
  while (words[0]?.startsWith('--')) {
    const flag = words.shift() as string;
    const m = /^--from=(.+)$/.exec(flag);
    if (m !== null) from = m[1] as string;
  }
  const dest = words.pop();
  if (dest === undefined || words.length === 0) throw new Error(`COPY ${args}: no source or destination`);
  return { from, sources: words, dest };
}
