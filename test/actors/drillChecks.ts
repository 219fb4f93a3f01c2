import { randomUUID } from 'node:crypto';
import { classifyFailure } from '../../machines/classifyFailure.ts';
import { OperationKind } from '../../machines/OperationKind.ts';
import type { Database } from '../../persistence/openDatabase.ts';
import type { World } from '../persistence/fixtures.ts';
import type { Deployment } from './harness.ts';

/** Every step the lifecycle allows, as `from>event>to` (the diagram in the README). */
const ALLOWED = new Set([
  'null>CREATE>PENDING',
  'PENDING>SCHEDULE>SCHEDULED',
  'PENDING>CANCEL>FAILED',
  'SCHEDULED>START>IN_PROGRESS',
  'SCHEDULED>RESET>PENDING',
  'SCHEDULED>RESET>FAILED',
  'SCHEDULED>CANCEL>FAILED',
  'IN_PROGRESS>COMPLETE>COMPLETED',
  'IN_PROGRESS>FAIL>PENDING',
  'IN_PROGRESS>FAIL>FAILED',
  'IN_PROGRESS>RESET>PENDING',
  'IN_PROGRESS>RESET>FAILED',
  'IN_PROGRESS>CANCEL>FAILED',
  'FAILED>RETRY>PENDING',
]);

interface Row extends Record<string, unknown> {
  operation_id: string;
  from_status: string | null;
  to_status: string;
  event: string;
  by: string;
  reason: string | null;
  at: string;
}

/**
 * What is wrong with the stored paths of the given operations, as sentences (empty: nothing):
 * a step the lifecycle does not allow, a step that does not start where the previous one ended,
 * a path that does not end COMPLETED with exactly one COMPLETE, a reset by a path `forbidden`
 * names (e.g. the reconciler, whose floor a drill must not have waited for).
 */
export async function pathProblems(
  database: Database,
  ids: readonly string[],
  forbidden: readonly string[] = [],
): Promise<string[]> {
  const rows = await database.execute<Row>(
    `select operation_id::text, from_status, to_status, event, by, reason, at::text
       from operation_transition order by operation_id, id`,
  );
  const byOp = new Map<string, Row[]>();
  for (const r of rows) byOp.set(r.operation_id, [...(byOp.get(r.operation_id) ?? []), r]);
  const problems: string[] = [];
  for (const id of ids) {
    const path = byOp.get(id) ?? [];
    const text = path.map((r) => `${r.from_status}>${r.event}(${r.by})>${r.to_status}`).join(' ');
    let at: string | null = null;
    for (const r of path) {
      const step = `${r.from_status}>${r.event}>${r.to_status}`;
      if (!ALLOWED.has(step)) problems.push(`${id}: ${step} is not a lifecycle step: ${text}`);
      if (r.from_status !== at) problems.push(`${id}: a step starts off the path: ${text}`);
      if (r.event === 'RESET' && forbidden.includes(r.by)) {
        const times = path.map((p) => `${p.event} at ${p.at}`).join(', ');
        problems.push(`${id}: reset by ${r.by} (${r.reason ?? 'no reason'}): ${text}; ${times}`);
      }
      at = r.to_status;
    }
    if (at !== 'COMPLETED') problems.push(`${id}: ends ${at}: ${text}`);
    if (path.filter((r) => r.event === 'COMPLETE').length !== 1)
      problems.push(`${id}: not exactly one COMPLETE: ${text}`);
  }
  return problems;
}

/**
 * Every line the given processes printed that names one of the operations the problems name: what
 * each worker and control plane said about an operation whose path went wrong.
 */
export function linesAbout(
  children: readonly { readonly output: readonly string[] }[],
  problems: readonly string[],
): string[] {
  const ids = new Set(problems.flatMap((p) => p.match(/^[0-9a-f-]{36}/) ?? []));
  return children.flatMap((c, i) =>
    c.output.filter((l) => [...ids].some((id) => l.includes(id))).map((l) => `child ${i}: ${l}`),
  );
}

/** Retries `fn` through an outage (a drill's own writes ride through the restarts too). */
export async function through<T>(fn: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (classifyFailure(err) !== 'outage') throw err;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/** Submits `n` long-term archives of fresh packages in batches of 10, riding through outages. */
export async function submitArchives(
  dep: Deployment,
  w: World,
  n: number,
  ids: string[],
): Promise<void> {
  for (let i = 0; i < n; i += 10) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(10, n - i) }, async () => {
        const pkg = await through(() =>
          dep.runtime.artifacts.addRawDataPackage({ name: `rdp-${randomUUID()}` }),
        );
        const { copy } = await through(() =>
          dep.runtime.artifacts.addCopy({
            artifactType: 'raw_data_package',
            artifactId: pkg,
            locationId: w.source.id,
          }),
        );
        return { pkg, copy: copy.id };
      }),
    );
    ids.push(
      ...(await through(() =>
        dep.runtime.store.createMany(
          batch.map((b) => ({
            kind: OperationKind.LONG_TERM_ARCHIVE,
            fields: {
              rawDataPackageId: b.pkg,
              sourceLocationId: w.source.id,
              destinationLocationId: w.archive.id,
            },
            inputs: [b.copy],
          })),
        ),
      )),
    );
  }
}

/** The ids as a uuid[] literal (ids the drill's own database made, so nothing to escape). */
export const uuids = (ids: readonly string[]) => `'{${ids.join(',')}}'::uuid[]`;

export interface Latency extends Record<string, unknown> {
  to_scheduled_ms: number | null;
  to_completed_ms: number | null;
}

/** The longest submit → first SCHEDULED and last SCHEDULED → COMPLETED among `ids`. */
export async function longest(database: Database, ids: readonly string[]): Promise<Latency> {
  const [row] = await database.execute<Latency>(
    `with t as (
       select operation_id,
              min(at) filter (where event = 'CREATE') as created,
              min(at) filter (where to_status = 'SCHEDULED') as first_scheduled,
              max(at) filter (where to_status = 'SCHEDULED') as last_scheduled,
              max(at) filter (where to_status = 'COMPLETED') as completed
         from operation_transition where operation_id = any(${uuids(ids)}) group by operation_id)
     select round(max(extract(epoch from first_scheduled - created)) * 1000)::int as to_scheduled_ms,
            round(max(extract(epoch from completed - last_scheduled)) * 1000)::int as to_completed_ms
       from t`,
  );
  return row ?? { to_scheduled_ms: null, to_completed_ms: null };
}
