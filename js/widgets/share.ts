// "Share report": asks the kernel (or the lab panel's server) to make a performance
// report of the chosen computation, upload it to the store, and shows the link.
// Traits: share {state: "idle"|"working"|"done"|"error", url, message}; sends {type: "share"}.
import { h, clear, watch } from "../common/dom.js";
import { onScreen } from "../common/onscreen.js";

/** Jupyter's base URL when this page is JupyterLab / Notebook (its page config), else null. */
function jupyterBase() {
  try {
    const cfg = JSON.parse(document.getElementById("jupyter-config-data")?.textContent || "null");
    return cfg?.baseUrl ?? null;
  } catch { return null; }
}

/** A report kept in the local store opens from the Jupyter server the page came from
 *  (its server extension serves the same store); a team server's link is its own. */
export function reportLink(s) {
  const base = jupyterBase();
  if (s.local && s.id && base != null) return `${location.origin}${base.replace(/\/?$/, "/")}dask-analytics/reports/${s.id}`;
  return s.url;
}

export function shareControl(model) {
  const box = h("div.dal-share");
  const draw = () => {
    const s = model.get("share") || { state: "idle" };
    clear(box);
    const button = h("button.dal-btn.primary", {
      disabled: s.state === "working",
      title: "Make a performance report of this computation and get a link to it",
      onclick: () => { model.send({ type: "share" }); },
    }, s.state === "working" ? "Making report…" : s.state === "done" ? "Share again" : "Share report");
    box.append(button);
    const url = s.state === "done" ? reportLink(s) : null;
    if (url) {
      const copy = h("button", { title: "Copy the link" }, "Copy");
      copy.addEventListener("click", async () => {
        try { await navigator.clipboard.writeText(url); copy.textContent = "Copied ✓"; } catch { copy.textContent = "Select + ⌘C"; }
        setTimeout(() => { copy.textContent = "Copy"; }, 1800);
      });
      box.append(h("span.dal-share-link", h("a.dal-share-url", { href: url, target: "_blank", rel: "noopener" }, url), copy));
    }
    if (s.message) box.append(h(`span.dal-share-msg${s.state === "error" ? ".bad" : ""}`, s.message));
  };
  draw();
  const off = watch(model, ["share"], draw);
  return { el: box, dispose: off };
}

function render({ model, el }) {
  const root = h("div.dal");
  const control = shareControl(model);
  root.append(control.el);
  el.append(root);
  return () => { control.dispose(); root.remove(); };
}

export default onScreen({ render });
