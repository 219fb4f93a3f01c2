import { describe, expect, it } from 'vitest';
import { OperationKind } from '../../machines/OperationKind.ts';
import { OpstateError, OpstateErrorCode } from '../../machines/OpstateError.ts';
import { defaultRoute } from '../../machines/routing.ts';
import { SimulatedClock } from '../../machines/SimulatedClock.ts';
import { memoryLogger } from '../../observe/Logger.ts';
import { logTransportEvents } from '../../observe/logTransportEvents.ts';
import type { Transport } from '../../transport/Transport.ts';
import { TransportEventHub } from '../../transport/TransportEventHub.ts';

describe('transport events in the log', () => {
  it('every drop, give-up, failed delivery, disconnect and reconnect is a WARNING; repeats within the window fold into the next line', async () => {
    const hub = new TransportEventHub();
    const logger = memoryLogger();
    const clock = new SimulatedClock(0);
    logTransportEvents(
      { onEvent: (l: Parameters<Transport['onEvent']>[0]) => hub.on(l) } as unknown as Transport,
      logger,
      clock,
    );
    const route = defaultRoute(OperationKind.UNPACK);
    const message = {
      operationId: 'op-1',
      kind: OperationKind.UNPACK,
      operationType: route.operationType,
      attempt: 2,
    };
    hub.emit({
      type: 'rejected',
      route,
      subject: 'p.dispatch.x',
      reason: 'not JSON',
      size: 9,
      preview: '{"op',
    });
    hub.emit({ type: 'max_deliveries', route, subject: 'p.dispatch.x', message, deliveries: 10 });
    const outage = new OpstateError(OpstateErrorCode.DATABASE, 'connect ECONNREFUSED', {
      retryable: true,
    });
    hub.emit({ type: 'handler_error', route, message, error: outage, retryInMs: 4000 });
    hub.emit({ type: 'handler_error', route, message, error: outage, retryInMs: 4000 }); // folded
    hub.emit({ type: 'disconnected' });
    hub.emit({ type: 'reconnected' });
    await clock.advance(10_001);
    hub.emit({ type: 'handler_error', route, message, error: outage, retryInMs: 4000 });
    expect(
      logger.lines.map((l) => [l.level, l.message.split(';')[0], l.fields.repeatsSinceLastLine]),
    ).toEqual([
      ['WARNING', 'dispatch message rejected and terminated', undefined],
      ['WARNING', 'dispatch given up after 10 deliveries and removed', undefined],
      ['WARNING', 'dispatch not handled: the database or broker is unreachable', undefined],
      ['WARNING', 'broker connection lost', undefined],
      ['WARNING', 'broker connection restored', undefined],
      ['WARNING', 'dispatch not handled: the database or broker is unreachable', 1],
    ]);
    expect(logger.lines[0]?.fields).toEqual({
      subject: 'p.dispatch.x',
      reason: 'not JSON',
      size: 9,
      preview: '{"op',
    });
    expect(logger.lines[1]?.fields).toMatchObject({
      operationId: 'op-1',
      attempt: 2,
      deliveries: 10,
    });
    expect(logger.lines[2]?.fields).toMatchObject({ operationId: 'op-1', retryInMs: 4000 });
  });
});
