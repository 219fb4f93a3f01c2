const pause = <T>(ms: number, value: T) => new Promise<T>((r) => setTimeout(() => r(value), ms));

/** `check`'s answer, or 'late' once `ms` pass first; the timer never outlives the answer. */
async function answerWithin<T>(check: Promise<T>, ms: number): Promise<T | 'late'> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<'late'>((r) => {
    timer = setTimeout(() => r('late'), ms);
  });
  try {
    return await Promise.race([check, late]);
  } finally {
    clearTimeout(timer);
  }
}

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
    // A deadline timer left pending would keep the process alive for the rest of the timeout
    // after the wait is over (a bench's process lingered 78 s past its end).
    const answer = await answerWithin(
      Promise.resolve(condition()),
      Math.max(1, deadline - Date.now()),
    );
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
