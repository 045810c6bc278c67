/** The database cannot be reached or is locked: the request may succeed if retried. */
export class StoreUnavailableError extends Error {
  constructor(cause: unknown) {
    super('the database is unavailable', { cause });
    this.name = 'StoreUnavailableError';
  }
}
