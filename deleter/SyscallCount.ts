/**
 * Counts the filesystem and process calls the deletion path makes, by kind, so the cost per member
 * can be reported (`npm run bench`). Each counted call is one system call issued by opstate's code
 * (the C library may add its own underneath, e.g. `realpath` walks the path).
 *
 * @example
 * ```ts
 * const count = new SyscallCount();
 * await revalidateMember(member, policy, count);
 * count.total(); // e.g. 1400 on a machine with 1,300 open descriptors
 * ```
 */
export class SyscallCount {
  readonly byKind = new Map<string, number>();

  add(kind: string, n = 1): void {
    this.byKind.set(kind, (this.byKind.get(kind) ?? 0) + n);
  }

  total(): number {
    let sum = 0;
    for (const n of this.byKind.values()) sum += n;
    return sum;
  }

  /** Counts as a plain object, kinds sorted. */
  toJSON(): Record<string, number> {
    return Object.fromEntries([...this.byKind].sort(([a], [b]) => a.localeCompare(b)));
  }
}
