/** A tiny typed event emitter; a listener that throws is reported as a process warning, never into the client. */
export class Emitter<Events> {
  private readonly listeners = new Map<keyof Events, Set<(payload: never) => void>>();

  on<K extends keyof Events>(event: K, listener: (payload: Events[K]) => void): () => void {
    let set = this.listeners.get(event);
    if (set === undefined) this.listeners.set(event, (set = new Set()));
    set.add(listener as (payload: never) => void);
    return () => set.delete(listener as (payload: never) => void);
  }

  emit<K extends keyof Events>(event: K, payload: Events[K]): void {
    const set = this.listeners.get(event);
    if (set === undefined) return;
    for (const listener of set) {
      try {
        (listener as (payload: Events[K]) => void)(payload);
      } catch (error) {
        process.emitWarning(error instanceof Error ? error : String(error), { code: 'CIRCUITLOG_LISTENER_THREW' });
      }
    }
  }
}
