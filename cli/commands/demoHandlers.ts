import { OperationKind } from '../../machines/OperationKind.ts';
import type { OutputCopy } from '../../persistence/publicRecords.ts';
import type { OperationHandler } from '../../worker/OperationHandler.ts';

type Handlers = Readonly<Record<OperationKind, OperationHandler>>;

/** The demo's scripted events, shared by every worker it starts. */
export interface DemoHandlerEvents {
  /**
   * The kind whose first operation to run fails for good (a non-retryable error), on whichever
   * worker, every time it runs until `fix()`.
   */
  readonly failFirstOf: OperationKind;
  /** Called with an unpack's output copies once it has written them, before it completes. */
  afterUnpack(outputs: readonly OutputCopy[]): Promise<void>;
}

/** Why the demo's chosen operation fails: the message its FAILED operation keeps. */
export const SCRIPTED_FAILURE =
  'the destination refused the session (scripted by the demo; not retryable)';

/**
 * The workers' handlers with the demo's scripted events: the first operation of one kind to run,
 * on any worker, throws a non-retryable error, so it is FAILED for good and its branch of the
 * pipeline stops until an operator retries it. It keeps failing (should a recovery path run it
 * again) until `fix()`, which the operator calls before the retry; every other operation runs as
 * it would. `failed()` is that operation once it has failed.
 *
 * @example
 * ```ts
 * const scripted = scriptDemoHandlers({ failFirstOf: OperationKind.TRANSFER, afterUnpack });
 * runtime.startWorker({ kinds, handlers: scripted.wrap(createStageHandlers(env)) });
 * ```
 */
export function scriptDemoHandlers(events: DemoHandlerEvents) {
  let failed: string | undefined;
  let fixed = false;
  return {
    failed: (): string | undefined => failed,
    /** The cause is gone: the failed operation runs as it would from now on. */
    fix(): void {
      fixed = true;
    },
    wrap(handlers: Handlers): Handlers {
      const kind = events.failFirstOf;
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
        failed ??= ctx.operation.id;
        if (ctx.operation.id === failed && !fixed) {
          throw Object.assign(new Error(SCRIPTED_FAILURE), { retryable: false });
        }
        return inner(ctx);
      };
      return wrapped;
    },
  };
}
