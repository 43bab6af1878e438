/** Whether the event stream is open and circuitlog answers, and the connection state the two make. */

import type { ConnectionState } from './options.js';
import type { ViewEntry } from './view.js';

export class Link {
  streamUp = false;
  reachable = true; // until a request fails, assume circuitlog answers
  /** Bumped at every stream open and reset: each snapshot taken before is re-taken on its next use. */
  generation = 0;

  constructor(private readonly onChange: (before: ConnectionState, after: ConnectionState, error?: Error) => void) {}

  get connection(): ConnectionState {
    return !this.reachable ? 'offline' : this.streamUp ? 'connected' : 'syncing';
  }

  /** May this entry decide a call locally? Only under the open stream it was taken under. */
  trusts(entry: ViewEntry): boolean {
    return this.streamUp && this.reachable && entry.generation === this.generation;
  }

  /** Record both; report a change of the connection state. */
  set(streamUp: boolean, reachable: boolean, error?: Error): void {
    const before = this.connection;
    this.streamUp = streamUp;
    this.reachable = reachable;
    const after = this.connection;
    if (after !== before) this.onChange(before, after, error);
  }

  /** circuitlog answered (or failed to): the stream's state is unchanged. */
  setReachable(reachable: boolean, error?: Error): void {
    this.set(this.streamUp, reachable, error);
  }
}
