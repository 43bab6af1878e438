import type { z } from 'zod';

/** Raised for a bad environment variable or config key; the message names it. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** `<source> <key>: <message>` per issue; the source alone when the issue is about the whole file. */
export function describeIssues(source: string, error: z.ZodError): string {
  return error.issues
    .map((issue) => {
      const key = issue.path.reduce<string>(
        (acc, part) => (typeof part === 'number' ? `${acc}[${part}]` : acc ? `${acc}.${String(part)}` : String(part)),
        '',
      );
      return `${source}${key ? ` ${key}` : ''}: ${issue.message}`;
    })
    .join('; ');
}
