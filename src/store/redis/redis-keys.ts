/** The store's key names under its prefix (the layout is described in `scripts.ts`). */
export class RedisKeys {
  readonly ids: string;
  readonly version: string;
  readonly index: string;
  readonly seq: string;
  readonly transitions: string;
  readonly epoch: string;
  readonly due: string;

  constructor(readonly prefix: string) {
    this.ids = `${prefix}ids`;
    this.version = `${prefix}version`;
    this.index = `${prefix}index`;
    this.seq = `${prefix}seq`;
    this.transitions = `${prefix}transitions`;
    this.epoch = `${prefix}epoch`;
    this.due = `${prefix}due`;
  }

  /** The circuit's hash; the name is a hash tag, so a circuit's keys share one Cluster slot. */
  circuit(name: string): string {
    return `${this.prefix}c:{${name}}`;
  }

  /** The circuit's newest transitions. */
  events(name: string): string {
    return `${this.prefix}e:{${name}}`;
  }
}
