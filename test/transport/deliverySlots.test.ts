import { describe, expect, it } from 'vitest';
import { DeliverySlots } from '../../transport/DeliverySlots.ts';

/** `n` subscriptions joined to `slots`, each its own `who`. */
function members(slots: DeliverySlots, n: number) {
  return Array.from({ length: n }, () => {
    const who = {};
    const leave = slots.join(() => {}, who);
    return { who, leave };
  });
}

describe('DeliverySlots', () => {
  it('shares the slots equally while every subscription is busy', () => {
    const slots = new DeliverySlots(32);
    const [a, b] = members(slots, 6);
    expect(slots.grant(a?.who as object, 0)).toBe(6); // ceil(32 / 6)
    slots.request(6);
    expect(slots.grant(b?.who as object, 0)).toBe(6);
  });

  it('gives an idle subscription one slot and the busy ones what the idle leave', () => {
    const slots = new DeliverySlots(32);
    const subs = members(slots, 6);
    for (const s of subs.slice(1)) slots.setIdle(s.who, true);
    for (const s of subs.slice(1)) {
      expect(slots.grant(s.who, 0)).toBe(1);
      slots.request(1);
    }
    expect(slots.grant(subs[0]?.who as object, 0)).toBe(27);
    slots.request(27);
    // Never more than the bound, busy or idle.
    expect(slots.free).toBe(0);
    expect(slots.grant(subs[0]?.who as object, 27)).toBe(0);
    // A probe that brings a message makes its queue busy again: it shares with the other busy one
    // from the slots that free up.
    slots.setIdle(subs[1]?.who as object, false);
    slots.cancel(1);
    expect(slots.grant(subs[1]?.who as object, 0)).toBe(1);
  });

  it('a subscription that leaves gives up its turn and its idle mark', () => {
    const slots = new DeliverySlots(2);
    const [a, b, c] = members(slots, 3);
    expect(slots.grant(a?.who as object, 0)).toBe(1);
    slots.request(1);
    expect(slots.grant(b?.who as object, 0)).toBe(1);
    slots.request(1);
    // Full: c waits for a turn; then c leaves, and a freed slot goes to whoever asks next.
    expect(slots.grant(c?.who as object, 0)).toBe(0);
    c?.leave();
    slots.cancel(1);
    expect(slots.grant(a?.who as object, 0)).toBe(1);
    slots.setIdle(b?.who as object, true);
    b?.leave();
    expect(slots.members).toBe(1);
  });

  it('a subscription marked idle gives up its turn: it asks its queue before it waits for slots again', () => {
    const slots = new DeliverySlots(1);
    const [a, b] = members(slots, 2);
    expect(slots.grant(a?.who as object, 0)).toBe(1);
    slots.request(1);
    // b waits first in line; then its queue turns out empty (an idle look at it, no slot held).
    expect(slots.grant(b?.who as object, 0)).toBe(0);
    slots.setIdle(b?.who as object, true);
    expect(slots.isIdle(b?.who as object)).toBe(true);
    slots.cancel(1);
    // The freed slot goes to a, which would otherwise wait behind b's stale turn.
    expect(slots.grant(a?.who as object, 0)).toBe(1);
  });
});
