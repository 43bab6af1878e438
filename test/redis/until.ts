/**
 * Poll (bounded) until `check` holds, a check that throws counting as "not yet" (a Cluster node
 * may refuse a command while it fails over); what is asserted afterwards is the value, not the time.
 */
export async function until(check: () => Promise<boolean>, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
