// "Share report": a button for the tab bar that opens a panel under it (so nothing in
// the bar wraps or overlaps when a link appears) with
//   - "Create link": the kernel (or the Lab panel's server) makes a report of the chosen
//     computation and stores it: on the team server when one is configured (its link
//     opens for teammates), else in the local store (this Jupyter server's link);
//   - "Private": only the account's tokens open the link;
//   - "Download HTML": the same report as one self-contained file, saved by the browser.
// Traits: share {state: "idle"|"working"|"done"|"error", url, id, local, private, server,
// message}.  Sends {type: "share", private} and {type: "download"}; the answer to the
// latter is a custom message {type: "download", filename} with the page in a buffer (a
// kernel) or as `html` (the Lab panel), or {type: "download", error}.
import { h, clear, watch } from "../common/dom.js";
import { onScreen } from "../common/onscreen.js";
import type { Model, RenderProps } from "../common/model.js";

/** The `share` trait: where making a link stands. */
export interface ShareState {
  state?: "idle" | "working" | "done" | "error";
  url?: string | null;
  id?: string | null;
  local?: boolean;
  private?: boolean;
  server?: string | null;
  message?: string | null;
}

/** The answer to {type: "download"}: the page (here as `html`, or in the message's
 *  buffer), or why it could not be made. */
interface DownloadMessage {
  type?: string;
  filename?: string;
  html?: string;
  error?: string;
}

/** Jupyter's base URL when this page is JupyterLab / Notebook (its page config), else null. */
function jupyterBase(): string | null {
  try {
    const cfg = JSON.parse(document.getElementById("jupyter-config-data")?.textContent || "null");
    return cfg?.baseUrl ?? null;
  } catch {
    return null;
  }
}

/** A report kept in the local store opens from the Jupyter server the page came from
 *  (its server extension serves the same store); a team server's link is its own. */
export function reportLink(s: ShareState): string | null | undefined {
  const base = jupyterBase();
  if (s.local && s.id && base != null)
    return `${location.origin}${base.replace(/\/?$/, "/")}dask-analytics/reports/${s.id}`;
  return s.url;
}

/** Let the browser save `data` as `filename` (a Blob behind a download link). */
export function saveFile(filename: string, data: BlobPart, type = "text/html") {
  const url = URL.createObjectURL(new Blob([data], { type }));
  const a = h("a", { href: url, download: filename, style: { display: "none" } });
  document.body.append(a);
  a.click();
  a.remove();
  // The download has its bytes once it starts; the URL only has to outlive the click.
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

function copyButton(url: string) {
  const copy = h("button", { title: "Copy the link" }, "Copy");
  copy.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(url);
      copy.textContent = "Copied ✓";
    } catch {
      copy.textContent = "Select + ⌘C";
    }
    setTimeout(() => {
      copy.textContent = "Copy";
    }, 1800);
  });
  return copy;
}

/** The button (`el`, for a tab bar) and its panel (`panel`, placed under the bar). */
export function shareControl(model: Model, { open = false } = {}) {
  let isOpen = open;
  let priv = !!(model.get("share") || {}).private;
  let download: { state: string; message: string } = { state: "idle", message: "" };
  const toggle = h(
    "button.dal-btn.primary.dal-share-toggle",
    {
      title: "Share a report of this computation: a link for your team, or an HTML file",
      "aria-expanded": String(isOpen),
      onclick: () => {
        isOpen = !isOpen;
        draw();
      },
    },
    "Share report",
  );
  const el = h("div.dal-share", toggle);
  const panel = h("div.dal-share-panel", { role: "region", "aria-label": "Share report" });

  const draw = () => {
    const s: ShareState = model.get("share") || { state: "idle" };
    toggle.setAttribute("aria-expanded", String(isOpen));
    toggle.classList.toggle("open", isOpen);
    panel.style.display = isOpen ? "" : "none";
    clear(panel);
    const privateBox = h("input.dal-share-private", {
      type: "checkbox",
      checked: priv,
      disabled: s.state === "working",
      onchange: (e) => {
        priv = (e.target as HTMLInputElement).checked;
      },
    });
    const create = h(
      "button.dal-btn.primary.dal-share-create",
      {
        disabled: s.state === "working",
        title: "Store a report of this computation and get a link to it",
        onclick: () => {
          model.send({ type: "share", private: priv });
        },
      },
      s.state === "working"
        ? "Making report…"
        : s.state === "done"
          ? "Create a new link"
          : "Create link",
    );
    const save = h(
      "button.dal-btn.dal-share-download",
      {
        disabled: download.state === "working",
        title: "Save the report as one HTML file that opens anywhere, offline",
        onclick: () => {
          download = { state: "working", message: "" };
          draw();
          model.send({ type: "download" });
        },
      },
      download.state === "working" ? "Preparing…" : "Download HTML",
    );
    panel.append(
      h(
        "div.dal-share-row",
        create,
        h(
          "label.dal-share-private-label",
          { title: "Only tokens of your account open a private report" },
          privateBox,
          "Private: only my account can open it",
        ),
        h("span.dal-spacer"),
        save,
      ),
    );
    const url = s.state === "done" ? reportLink(s) : null;
    if (url) {
      panel.append(
        h(
          "div.dal-share-row",
          h(
            "span.dal-share-link",
            h("a.dal-share-url", { href: url, target: "_blank", rel: "noopener", title: url }, url),
            copyButton(url),
          ),
          h(
            "span.dal-share-where",
            s.private ? "private to your account" : "anyone with the link",
            s.server ? ` · on ${s.server}` : "",
          ),
        ),
      );
    }
    if (s.message)
      panel.append(h(`div.dal-share-msg${s.state === "error" ? ".bad" : ""}`, s.message));
    if (download.message)
      panel.append(
        h(
          `div.dal-share-msg.dal-download-msg${download.state === "error" ? ".bad" : ""}`,
          download.message,
        ),
      );
  };

  // The download's answer: a kernel's buffer, or the Lab panel's string.
  const onMessage = (
    msg: DownloadMessage | null,
    buffers?: (DataView<ArrayBuffer> | ArrayBuffer)[],
  ) => {
    if (msg?.type !== "download") return;
    if (msg.error) {
      download = { state: "error", message: `Could not make the file: ${msg.error}` };
    } else {
      saveFile(msg.filename || "dask-report.html", msg.html ?? buffers?.[0] ?? "");
      download = {
        state: "done",
        message: `Saved ${msg.filename}: it opens in any browser, offline.`,
      };
    }
    draw();
  };
  model.on("msg:custom", onMessage);
  draw();
  const off = watch(model, ["share"], draw);
  return {
    el,
    panel,
    dispose: () => {
      off();
      model.off("msg:custom", onMessage);
    },
  };
}

function render({ model, el }: RenderProps) {
  const root = h("div.dal.dal-share-widget");
  const control = shareControl(model, { open: true });
  root.append(control.el, control.panel);
  el.append(root);
  return () => {
    control.dispose();
    root.remove();
  };
}

export default onScreen({ render });
