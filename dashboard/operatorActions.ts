import type { IncomingMessage, ServerResponse } from 'node:http';
import { OpstateError, OpstateErrorCode } from '../machines/OpstateError.ts';
import { type OperatorAction, operatorEvent } from '../machines/operatorEvent.ts';
import type { Logger } from '../observe/Logger.ts';
import { checkId } from '../persistence/applyEvents.ts';
import type { Runtime } from '../runtime/Runtime.ts';
import { bulkRetry } from './bulkRetry.ts';
import type { RequestActor } from './requestGuard.ts';
import type { Responder } from './responder.ts';

/** The dashboard's operator actions: one operation's retry, reset or cancel, and a bulk retry. */
export interface OperatorActions {
  act(req: IncomingMessage, res: ServerResponse, id: string, action: OperatorAction): Promise<void>;
  retryMany(req: IncomingMessage, res: ServerResponse): Promise<void>;
}

/** A request's JSON object body (16 KB at most); an empty body is `{}`. */
export async function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > 16_384) {
      throw new OpstateError(OpstateErrorCode.BAD_INPUT, 'request body too large (16 KB at most)');
    }
    chunks.push(chunk as Buffer);
  }
  if (chunks.length === 0) return {};
  try {
    const value: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error();
    return value as Record<string, unknown>;
  } catch {
    throw new OpstateError(
      OpstateErrorCode.BAD_INPUT,
      'the body must be a JSON object such as {"reason": "…"}',
    );
  }
}

const reasonOf = (body: Record<string, unknown>): string | undefined =>
  typeof body.reason === 'string' && body.reason.trim() !== '' ? body.reason.trim() : undefined;

/**
 * The operator actions of a dashboard, through `command` as the CLI sends them, each recorded as by
 * the operator `actorOf` names for its request (name and address, in the history and the log);
 * with `command` null every action answers 403 (read-only).
 *
 * @example
 * ```ts
 * const actions = operatorActions(runtime.command, responder(true), logger, actorOf);
 * await actions.act(req, res, id, 'retry');
 * ```
 */
export function operatorActions(
  command: Runtime['command'] | null,
  respond: Responder,
  logger: Logger,
  actorOf: (req: IncomingMessage) => RequestActor,
): OperatorActions {
  /** Both operator-action rules: actions allowed, and the header no cross-site form can send. */
  const mayAct = (req: IncomingMessage, res: ServerResponse): boolean => {
    if (command === null) {
      respond.json(res, 403, {
        code: 'READ_ONLY',
        message:
          'this dashboard is read-only; start it with --allow-actions to retry, reset or cancel',
      });
      return false;
    }
    // A custom header makes a cross-site form or fetch need a preflight, which is never granted.
    if (req.headers['x-opstate-action'] !== '1') {
      respond.json(res, 403, {
        code: 'BAD_INPUT',
        message: 'operator actions need the x-opstate-action: 1 header',
      });
      return false;
    }
    return true;
  };

  return {
    async act(req, res, id, action) {
      if (!mayAct(req, res) || command === null) return;
      const reason = reasonOf(await readJson(req));
      const actor = actorOf(req);
      const t = await command(checkId(id), operatorEvent(action, reason), { by: actor.by });
      logger.log('INFO', 'operator action from the dashboard', {
        operationId: id,
        action,
        operator: actor.operator,
        address: actor.address,
        from: t.from,
        to: t.status,
      });
      respond.json(res, 200, {
        ok: true,
        from: t.from,
        status: t.status,
        attempt: t.context.attempt,
        message: `${action}: ${t.from} → ${t.status} (attempt ${t.context.attempt})`,
      });
    },
    async retryMany(req, res) {
      if (!mayAct(req, res) || command === null) return;
      const body = await readJson(req);
      const results = await bulkRetry(command, body.ids, reasonOf(body), logger, actorOf(req));
      const retried = results.filter((r) => r.outcome === 'retried').length;
      respond.json(res, 200, {
        ok: true,
        retried,
        refused: results.length - retried,
        results,
        message: `retried ${retried} of ${results.length}${retried === results.length ? '' : `; ${results.length - retried} refused`}`,
      });
    },
  };
}
