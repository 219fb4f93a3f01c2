const pause = <T>(ms: number, value: T) => new Promise<T>((r) => setTimeout(() => r(value), ms));

/**
 * Polls `condition` until it holds or the deadline passes, then throws naming `what`. A check that
 * does not answer counts against the deadline too, and `explain` (when given) adds what the
 * caller knows to the failure, such as what its child processes printed last.
 */
export async function waitFor(
  condition: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 20_000,
  intervalMs = 20,
  explain?: () => string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const answer = await Promise.race([
      Promise.resolve(condition()),
      pause(Math.max(1, deadline - Date.now()), 'late' as const),
    ]);
    if (answer === true) return;
    if (Date.now() > deadline) {
      const hung = answer === 'late' ? ' (the check itself did not answer)' : '';
      const more = explain?.() ?? '';
      throw new Error(
        `Timed out after ${timeoutMs} ms waiting for ${what}${hung}${more ? `\n${more}` : ''}`,
      );
    }
    await pause(intervalMs, undefined);
  }
}
