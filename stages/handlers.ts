/**
 * The reference stage handlers as a module for `opstate worker --handlers`, built to
 * `dist/stages/handlers.js`: what a team copies to start its own. Every kind is served; each
 * location's `storageRoot` is a local folder (mount it at the same path on every worker). The
 * storage roots an operation needs are read from the worker's database when it starts
 * (`ctx.withDatabase`, which waits out an outage).
 *
 *   opstate worker --kinds all --handlers dist/stages/handlers.js
 */

import { OPERATION_KINDS, type OperationKind } from '../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { ArtifactRepository } from '../persistence/ArtifactRepository.ts';
import type { Database } from '../persistence/openDatabase.ts';
import type { HandlerContext, OperationHandler } from '../worker/OperationHandler.ts';
import { archiveCipherFromEnv } from './archiveCipher.ts';
import { createStageHandlers } from './createStageHandlers.ts';

/** Archives are encrypted at rest with the key in `OPSTATE_ARCHIVE_KEY_FILE`, when it is set. */
const cipher = archiveCipherFromEnv();

/** The storage roots of every location an operation names in its fields or its inputs. */
async function storageRoots(ctx: HandlerContext): Promise<Map<string, string>> {
  const view = await ctx.inspect();
  const ids = new Set<string>(view.inputs.map((c) => c.locationId));
  for (const [key, value] of Object.entries(view.fields)) {
    if (key.endsWith('LocationId') || key === 'locationId') {
      if (typeof value === 'string') ids.add(value);
    }
  }
  const locations = await ctx.withDatabase('reading the locations of', (database) =>
    new ArtifactRepository(database as Database).locationsById([...ids]),
  );
  return new Map(locations.map((l) => [l.id, l.storageRoot]));
}

function handlerFor(kind: OperationKind): OperationHandler {
  return async (ctx) => {
    const roots = await storageRoots(ctx);
    const table = createStageHandlers({
      ...(cipher === undefined ? {} : { cipher }),
      storageRootOf(id) {
        const root = roots.get(id);
        if (root === undefined) {
          throw new OpstateError(
            OpstateErrorCode.BAD_INPUT,
            `operation ${ctx.operation.id} names location ${id}, which is not registered`,
          );
        }
        return root;
      },
    });
    return table[kind](ctx);
  };
}

/** Handlers keyed by operation kind, as `opstate worker --handlers` expects. */
const handlers = Object.fromEntries(OPERATION_KINDS.map((k) => [k, handlerFor(k)])) as Record<
  OperationKind,
  OperationHandler
>;
export default handlers;
