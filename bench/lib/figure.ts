/** One benchmark figure, printed as one JSON line. */
export interface Figure {
  name: string;
  value: number;
  unit: string;
  /** What `value` is compared with, measured in the same run; `ratio` is `value / baseline`. */
  baseline?: number;
  ratio?: number;
  note?: string;
  [extra: string]: unknown;
}

const round = (x: number) => Math.round(x * 100) / 100;

/**
 * Prints a figure as one JSON object on its own line, rounding `value` and `baseline` to two
 * decimals and adding `ratio` when there is a baseline.
 *
 * @example
 * ```ts
 * print({ name: 'e2e_ops_per_s', value: 812.4, unit: 'ops/s', baseline: 5900 });
 * ```
 */
export function print(f: Figure): void {
  const out: Figure = { ...f, value: round(f.value) };
  if (f.baseline !== undefined) {
    out.baseline = round(f.baseline);
    out.ratio = round(f.value / f.baseline);
  }
  process.stdout.write(`${JSON.stringify(out)}\n`);
}
