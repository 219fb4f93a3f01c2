/**
 * How an id is shown where room is short (the dashboard's links, the demo's lines): its last eight
 * hex digits. Ids are time-ordered, so their first digits are the creation time and ids made in
 * the same minute begin alike; their tail is random.
 *
 * @example
 * ```ts
 * shortId('019adb2e-6c1e-7f3a-9b2d-5e8f0a1c2d3e'); // '0a1c2d3e'
 * ```
 */
export function shortId(id: string): string {
  return id.slice(-8);
}
