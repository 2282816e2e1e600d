// Why a store could not be opened: always a sentence that names what is
// wrong and what to do, shown to the operator as it is.
/** A store that cannot be opened; the message says what is wrong and what to do. */
export class StoreOpenError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "StoreOpenError";
  }
}

/** The store is held by another running process (a second `synapse serve` on one data dir). */
export class StoreInUseError extends StoreOpenError {
  constructor(message: string) {
    super(message);
    this.name = "StoreInUseError";
  }
}
