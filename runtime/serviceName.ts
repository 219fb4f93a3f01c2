import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { submitterProblem } from '../machines/submitter.ts';

/** The submitter a runtime records when neither the call, the option nor the environment names one. */
export const FALLBACK_SERVICE_NAME = 'service';

/**
 * The name a runtime's `submit` records as the submitter by default: the one configured
 * (`serviceName`, `OPSTATE_SERVICE_NAME`; already validated), else the `name` in `cwd`'s
 * package.json when it is readable and a valid submitter name (`@acme/ingest`), else `service`.
 *
 * @example
 * ```ts
 * const by = await resolveServiceName(config.serviceName); // 'ingest' from ./package.json
 * ```
 */
export async function resolveServiceName(
  configured: string | undefined,
  cwd: string = process.cwd(),
): Promise<string> {
  if (configured !== undefined) return configured;
  try {
    const { name } = JSON.parse(await readFile(join(cwd, 'package.json'), 'utf8')) as {
      name?: unknown;
    };
    if (typeof name === 'string' && submitterProblem(name) === undefined) return name;
  } catch {
    // No package.json here, or not JSON: the fallback names the submitter.
  }
  return FALLBACK_SERVICE_NAME;
}
