// What the sidebar and the panels say went wrong: its own module, so that the tests'
// stand-in for ./api (tests/test_polling.py) need not provide it.

/** An error's message, or what was thrown when it has none. */
export function errorText(e: unknown): string {
  const message = typeof e === "object" && e !== null && "message" in e ? e.message : null;
  return String(message || e);
}
