// A view tells its kernel-side widget whether it is on screen, so the widget reads the
// store only while someone can see it (dask_analytics_lab/widgets/_base.py keeps the
// set of views on screen and starts or stops its feed).  Message: {type: "view", id,
// visible}; a removed view, a page being left and a hidden browser tab all send false.
import type { Model, RenderProps, View } from "./model.js";

let counter = 0;

export function reportOnScreen(model: Model, el: HTMLElement): () => void {
  const id = `${Date.now().toString(36)}-${(counter++).toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  let intersecting = false;
  let sent: boolean | null = null;
  const send = (visible: boolean) => {
    if (visible === sent) return;
    sent = visible;
    try {
      model.send({ type: "view", id, visible });
    } catch {
      // the comm is closed (the kernel went away): nothing to tell
    }
  };
  const update = () => send(intersecting && !document.hidden);
  // No IntersectionObserver (an old or headless front end): count the view as shown.
  const observer =
    typeof IntersectionObserver === "function"
      ? new IntersectionObserver((entries) => {
          intersecting = entries[entries.length - 1].isIntersecting;
          update();
        })
      : null;
  if (observer) observer.observe(el);
  else {
    intersecting = true;
    update();
  }
  const leave = () => send(false);
  document.addEventListener("visibilitychange", update);
  window.addEventListener("pagehide", leave);
  return () => {
    observer?.disconnect();
    document.removeEventListener("visibilitychange", update);
    window.removeEventListener("pagehide", leave);
    leave();
  };
}

/** `view`, reporting whether it is on screen as it renders and until it is removed;
 *  a view inside another (the monitor's tabs) leaves that to the outer one. */
export function onScreen(view: View): View {
  return {
    render(props: RenderProps) {
      const nested = props.el.closest("[data-dal-onscreen]") !== null;
      props.el.dataset.dalOnscreen = "";
      const stop = nested ? () => {} : reportOnScreen(props.model, props.el);
      const cleanup = view.render(props);
      return () => {
        stop();
        if (typeof cleanup === "function") cleanup();
      };
    },
  };
}
