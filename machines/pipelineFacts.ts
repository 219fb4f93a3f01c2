import type { OperationKind } from './OperationKind.ts';

// The facts a pipeline pass decides from, as the database's reads hand them over.

/** One output copy of a completed operation, as the pass reads it. */
export interface StageOutput {
  readonly copyId: string;
  readonly artifactType: string;
  readonly artifactId: string;
  readonly locationId: string;
  /** Still PRESENT (a copy on its way to deletion is consumed by nothing new). */
  readonly present: boolean;
}

/** A COMPLETED operation the pass read past its cursor. */
export interface CompletedOperation {
  readonly id: string;
  readonly kind: OperationKind;
  readonly targetLocationId: string;
  /** Its subtype fields by camelCase key. */
  readonly fields: Readonly<Record<string, string | null>>;
  readonly outputs: readonly StageOutput[];
  /** The rollback it was created for, if any: the stages that follow it are created for it too. */
  readonly rollbackId?: string | null;
}

/** For a raw data package: its data transfer package and every member's PRESENT copy at a location. */
export interface BundleMembers {
  readonly dataTransferPackageId: string;
  /** Per member raw data package, its present copy at the bundling location, or null. */
  readonly copies: readonly (string | null)[];
}
