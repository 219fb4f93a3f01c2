import { OperationKind } from '../../machines/OperationKind.ts';
import type { OutputCopy } from '../../persistence/publicRecords.ts';
import type { OperationHandler } from '../../worker/OperationHandler.ts';

type Handlers = Readonly<Record<OperationKind, OperationHandler>>;

/** The demo's scripted events, shared by every worker it starts. */
export interface DemoHandlerEvents {
  /** The kind whose first run fails for good (a non-retryable error), on whichever worker. */
  readonly failFirstRunOf: OperationKind;
  /** Called with an unpack's output copies once it has written them, before it completes. */
  afterUnpack(outputs: readonly OutputCopy[]): Promise<void>;
}

/** Why the demo's chosen run fails: the message its FAILED operation keeps. */
export const SCRIPTED_FAILURE =
  'the destination refused the session (scripted by the demo; not retryable)';

/**
 * The workers' handlers with the demo's scripted events: the first run of one kind, on any worker,
 * throws a non-retryable error, so that operation is FAILED for good and its branch of the pipeline
 * stops until an operator retries it; later runs (the retry) go through. `failed()` is that
 * operation once it has failed.
 *
 * @example
 * ```ts
 * const scripted = scriptDemoHandlers({ failFirstRunOf: OperationKind.TRANSFER, afterUnpack });
 * runtime.startWorker({ kinds, handlers: scripted.wrap(createStageHandlers(env)) });
 * ```
 */
export function scriptDemoHandlers(events: DemoHandlerEvents) {
  let failed: string | undefined;
  return {
    failed: (): string | undefined => failed,
    wrap(handlers: Handlers): Handlers {
      const kind = events.failFirstRunOf;
      const unpack = handlers[OperationKind.UNPACK];
      const wrapped: Record<OperationKind, OperationHandler> = {
        ...handlers,
        [OperationKind.UNPACK]: async (ctx) => {
          const result = await unpack(ctx);
          await events.afterUnpack(result?.outputs ?? []);
          return result;
        },
      };
      const inner = wrapped[kind];
      wrapped[kind] = async (ctx) => {
        if (failed === undefined) {
          failed = ctx.operation.id;
          throw Object.assign(new Error(SCRIPTED_FAILURE), { retryable: false });
        }
        return inner(ctx);
      };
      return wrapped;
    },
  };
}
