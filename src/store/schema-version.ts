/**
 * A store migrated by a newer build than this one. Such a build may have changed what a row
 * (or a Redis key) means, so this build refuses to start on it rather than write what it does
 * not understand (docs/operations.md#schema-version).
 */
export class SchemaTooNewError extends Error {
  readonly code = 'SCHEMA_TOO_NEW';

  constructor(
    readonly found: number,
    readonly supported: number,
  ) {
    super(
      `database schema version ${found} is newer than this build supports (${supported}): upgrade circuitlog or restore a backup`,
    );
    this.name = 'SchemaTooNewError';
  }
}
