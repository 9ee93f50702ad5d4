// Keyboard access for the views' lists and tab bars: one item of a group is in the tab
// order (a "roving" tabindex); arrow keys, Home and End move focus between the items;
// Enter and Space activate the focused one (as a click does).
const NEXT = new Set(["ArrowDown", "ArrowRight"]);
const PREV = new Set(["ArrowUp", "ArrowLeft"]);

/** Make the `selector` items inside `container` one keyboard stop.  `activateOnMove`:
 *  moving also activates (tabs: the pane follows the focus). */
export function rovingFocus(
  container: HTMLElement,
  selector: string,
  { activateOnMove = false } = {},
): void {
  container.addEventListener("keydown", (e: KeyboardEvent) => {
    const items = [...container.querySelectorAll<HTMLElement>(selector)];
    const current = (e.target as HTMLElement).closest<HTMLElement>(selector);
    const i = current ? items.indexOf(current) : -1;
    if (i < 0) return;
    let next = -1;
    if (NEXT.has(e.key)) next = Math.min(i + 1, items.length - 1);
    else if (PREV.has(e.key)) next = Math.max(i - 1, 0);
    else if (e.key === "Home") next = 0;
    else if (e.key === "End") next = items.length - 1;
    else if ((e.key === "Enter" || e.key === " ") && current!.tagName !== "BUTTON") {
      e.preventDefault();
      current!.click();
      return;
    }
    if (next < 0) return;
    e.preventDefault();
    for (const el of items) el.tabIndex = -1;
    items[next].tabIndex = 0;
    items[next].focus();
    if (activateOnMove) items[next].click();
  });
}

/** After a redraw: keep exactly one item in the tab order (the chosen one, else the
 *  first), and give focus back to the item that had it before the redraw. */
export function settleFocus(
  container: HTMLElement,
  selector: string,
  chosen: HTMLElement | null,
  refocus: HTMLElement | null,
): void {
  const items = [...container.querySelectorAll<HTMLElement>(selector)];
  for (const el of items) el.tabIndex = -1;
  const stop = chosen || items[0];
  if (stop) stop.tabIndex = 0;
  refocus?.focus();
}
