// One stylesheet for every view, injected once per document.  JupyterLab's CSS
// variables make the views follow the light/dark theme; the fallbacks serve other
// front ends (classic notebook, VS Code, a static HTML export).
const CSS = `
.dal {
  --dal-fg: var(--jp-ui-font-color1, #1f2328);
  --dal-fg2: var(--jp-ui-font-color2, #59636e);
  --dal-fg3: var(--jp-ui-font-color3, #8c959f);
  --dal-bg: var(--jp-layout-color1, #ffffff);
  --dal-bg2: var(--jp-layout-color2, #f6f8fa);
  --dal-bg3: var(--jp-layout-color3, #eaeef2);
  --dal-border: var(--jp-border-color2, #e1e4e8);
  --dal-accent: #ee6b3b;
  --dal-accent-soft: rgba(238, 107, 59, 0.12);
  --dal-good: #2fa572;
  --dal-bad: #e5484d;
  --dal-warn: #f5a524;
  --dal-mono: var(--jp-code-font-family, ui-monospace, SFMono-Regular, Menlo, Consolas, monospace);
  font-family: var(--jp-ui-font-family, system-ui, -apple-system, "Segoe UI", Roboto, sans-serif);
  font-size: 12.5px;
  line-height: 1.45;
  color: var(--dal-fg);
  background: var(--dal-bg);
  box-sizing: border-box;
}
.dal *, .dal *::before, .dal *::after { box-sizing: border-box; }
.dal button { font: inherit; color: inherit; }
.dal-card { border: 1px solid var(--dal-border); border-radius: 8px; overflow: hidden; background: var(--dal-bg); }
.dal-muted { color: var(--dal-fg2); }
.dal-faint { color: var(--dal-fg3); }
.dal-mono { font-family: var(--dal-mono); font-size: 12px; }
.dal-num { font-variant-numeric: tabular-nums; text-align: right; white-space: nowrap; }
.dal-empty { padding: 28px 16px; text-align: center; color: var(--dal-fg2); }
.dal-empty-title { font-size: 13px; font-weight: 600; color: var(--dal-fg2); }
.dal-empty-hint { margin-top: 4px; font-size: 12px; color: var(--dal-fg3); }
.dal-empty-hint code, .dal code { font-family: var(--dal-mono); background: var(--dal-bg2); padding: 0 4px; border-radius: 4px; }

/* header of the monitor and of the lab panels */
.dal-header { display: flex; align-items: center; gap: 12px; padding: 10px 14px; border-bottom: 1px solid var(--dal-border);
  background: linear-gradient(180deg, var(--dal-bg2), var(--dal-bg)); flex-wrap: wrap; }
.dal-title { font-size: 14px; font-weight: 650; letter-spacing: -0.01em; }
.dal-logo { width: 18px; height: 18px; flex: none; }
.dal-stats { display: flex; gap: 14px; flex-wrap: wrap; color: var(--dal-fg2); }
.dal-stat b { color: var(--dal-fg); font-weight: 600; font-variant-numeric: tabular-nums; }
.dal-spacer { flex: 1; }
.dal-where { font-size: 11px; color: var(--dal-fg3); font-family: var(--dal-mono); max-width: 340px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }

/* badges and the live dot */
.dal-badge { display: inline-flex; align-items: center; gap: 5px; padding: 1px 8px; border-radius: 999px; font-size: 11px; font-weight: 600;
  background: var(--dal-bg3); color: var(--dal-fg2); white-space: nowrap; }
.dal-badge.running, .dal-badge.live { background: rgba(245,165,36,0.16); color: #b7740a; }
.dal-badge.live { background: rgba(47,165,114,0.14); color: #1f7a52; }
.dal-badge.finished { background: rgba(47,165,114,0.14); color: #1f7a52; }
.dal-badge.erred { background: rgba(229,72,77,0.14); color: #c0282d; }
.dal-badge.cancelled, .dal-badge.stopped { background: var(--dal-bg3); color: var(--dal-fg2); }
.dal-badge.lost { background: rgba(191,135,0,0.16); color: #9a6700; }
.dal-dot { width: 7px; height: 7px; border-radius: 50%; background: currentColor; flex: none; }
.dal-badge.live .dal-dot, .dal-badge.running .dal-dot { animation: dal-pulse 1.6s ease-in-out infinite; }
@keyframes dal-pulse { 0%, 100% { opacity: 1; } 50% { opacity: 0.25; } }

/* tabs */
.dal-tabs { display: flex; align-items: center; gap: 2px; padding: 0 10px; border-bottom: 1px solid var(--dal-border); }
.dal-tab { border: 0; background: none; padding: 8px 12px 7px; cursor: pointer; color: var(--dal-fg2); border-bottom: 2px solid transparent; font-weight: 550; }
.dal-tab:hover { color: var(--dal-fg); }
.dal-tab.active { color: var(--dal-fg); border-bottom-color: var(--dal-accent); }
.dal-tab .dal-count { margin-left: 5px; font-size: 10.5px; padding: 0 6px; border-radius: 999px; background: var(--dal-bg3); color: var(--dal-fg2); }
.dal-tab .dal-count.bad { background: rgba(229,72,77,0.14); color: #c0282d; }

/* monitor layout */
.dal-monitor { display: flex; flex-direction: column; }
.dal-body { display: flex; min-height: 320px; }
.dal-side { width: 250px; flex: none; border-right: 1px solid var(--dal-border); overflow-y: auto; max-height: 560px; background: var(--dal-bg); }
.dal-main { flex: 1; min-width: 0; display: flex; flex-direction: column; }
.dal-pane { padding: 10px 12px; overflow: auto; max-height: 560px; }
.dal-side-title { display: flex; align-items: center; justify-content: space-between; padding: 8px 12px 6px; font-size: 11px; text-transform: uppercase;
  letter-spacing: 0.06em; color: var(--dal-fg3); font-weight: 650; }
.dal-follow { display: inline-flex; gap: 4px; align-items: center; text-transform: none; letter-spacing: 0; font-weight: 500; cursor: pointer; }
.dal-comp { padding: 7px 12px; border-left: 3px solid transparent; cursor: pointer; display: grid; grid-template-columns: 1fr auto; gap: 1px 8px; }
.dal-comp:hover { background: var(--dal-bg2); }
.dal-comp.selected { background: var(--dal-accent-soft); border-left-color: var(--dal-accent); }
.dal-comp-name { font-weight: 600; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.dal-comp-code { grid-column: 1 / 3; font-family: var(--dal-mono); font-size: 11px; color: var(--dal-fg2); overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.dal-comp-meta { grid-column: 1 / 3; color: var(--dal-fg3); font-size: 11px; display: flex; gap: 2px 8px; flex-wrap: wrap; white-space: nowrap; }
.dal-mini { height: 4px; border-radius: 2px; overflow: hidden; display: flex; background: var(--dal-bg3); grid-column: 1 / 3; margin-top: 3px; }

/* progress bars */
.dal-bar { position: relative; height: 14px; border-radius: 4px; overflow: hidden; display: flex; background: var(--dal-bg3); min-width: 120px; }
.dal-bar > span, .dal-mini > span { height: 100%; transition: width 0.4s ease; }
.dal-bar > span.seg-not-run, .dal-mini > span.seg-not-run, .dal-legend i.seg-not-run {
  background-image: repeating-linear-gradient(135deg, rgba(255,255,255,0.35) 0 2px, transparent 2px 5px); }
.dal-bar > span.seg-processing, .dal-mini > span.seg-processing {
  background-image: linear-gradient(45deg, rgba(255,255,255,0.28) 25%, transparent 25%, transparent 50%, rgba(255,255,255,0.28) 50%, rgba(255,255,255,0.28) 75%, transparent 75%);
  background-size: 14px 14px; animation: dal-stripes 0.8s linear infinite; }
@keyframes dal-stripes { from { background-position: 0 0; } to { background-position: 14px 0; } }
.dal-bar-label { position: absolute; right: 6px; top: 0; font-size: 10px; line-height: 14px; color: var(--dal-fg); font-variant-numeric: tabular-nums;
  text-shadow: 0 0 3px var(--dal-bg), 0 0 3px var(--dal-bg); }

/* task groups table */
.dal-table { width: 100%; border-collapse: separate; border-spacing: 0; }
.dal-table th { position: sticky; top: 0; z-index: 1; background: var(--dal-bg); text-align: left; font-weight: 600; font-size: 11px; color: var(--dal-fg2);
  padding: 6px 8px; border-bottom: 1px solid var(--dal-border); cursor: pointer; user-select: none; white-space: nowrap; }
.dal-table th.dal-num { text-align: right; }
.dal-table th:hover { color: var(--dal-fg); }
.dal-table th .dal-arrow { color: var(--dal-accent); margin-left: 3px; }
.dal-table td { padding: 5px 8px; border-bottom: 1px solid var(--dal-border); vertical-align: middle; }
.dal-table tr.dal-row:hover td { background: var(--dal-bg2); }
.dal-table tr.erred td:first-child { box-shadow: inset 3px 0 0 var(--dal-bad); }
.dal-group { display: flex; align-items: center; gap: 7px; min-width: 180px; }
.dal-swatch { width: 9px; height: 9px; border-radius: 2px; flex: none; }
.dal-group-name { font-family: var(--dal-mono); font-size: 12px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; max-width: 280px; }
.dal-token { color: var(--dal-fg3); }
.dal-level { color: var(--dal-fg3); font-family: var(--dal-mono); font-size: 11px; white-space: pre; }
.dal-deps { color: var(--dal-fg3); font-size: 11px; margin-left: 16px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; max-width: 240px; }
.dal-err-link { border: 0; background: rgba(229,72,77,0.12); color: #c0282d; border-radius: 999px; padding: 0 7px; font-size: 11px; font-weight: 600; cursor: pointer; }
.dal-exc { background: var(--dal-bg2); padding: 8px 12px; }
.dal-exc-title { font-family: var(--dal-mono); color: #c0282d; font-weight: 600; white-space: pre-wrap; word-break: break-word; }
.dal-exc pre { margin: 6px 0 0; padding: 8px 10px; background: var(--dal-bg); border: 1px solid var(--dal-border); border-radius: 6px; max-height: 260px; overflow: auto;
  font-family: var(--dal-mono); font-size: 11.5px; line-height: 1.4; white-space: pre; }
/* failures: one row per kind, examples and traceback on demand */
.dal-fails { display: flex; flex-direction: column; gap: 4px; margin-bottom: 10px; }
.dal-fail { border: 1px solid var(--dal-border); border-left: 3px solid var(--dal-bad); border-radius: 6px; background: var(--dal-bg); }
.dal-fail > summary { display: flex; align-items: baseline; gap: 8px; padding: 5px 10px; cursor: pointer; list-style: none; flex-wrap: wrap; }
.dal-fail > summary::-webkit-details-marker { display: none; }
.dal-fail > summary::before { content: "▸"; color: var(--dal-fg3); font-size: 10px; }
.dal-fail[open] > summary::before { content: "▾"; }
.dal-fail-count { font-weight: 650; color: #c0282d; font-variant-numeric: tabular-nums; white-space: nowrap; }
.dal-fail-type { font-family: var(--dal-mono); font-weight: 650; color: #c0282d; }
.dal-fail-pattern { font-family: var(--dal-mono); font-size: 12px; color: var(--dal-fg); overflow: hidden; text-overflow: ellipsis; white-space: nowrap; max-width: 520px; }
.dal-fail-where { font-family: var(--dal-mono); font-size: 11px; color: var(--dal-fg3); }
.dal-fail-group { font-size: 11px; padding: 0 6px; border-radius: 999px; background: var(--dal-bg3); color: var(--dal-fg2); }
.dal-fail-body { padding: 2px 12px 8px 26px; }
.dal-fail-label { font-size: 10.5px; text-transform: uppercase; letter-spacing: 0.06em; color: var(--dal-fg3); font-weight: 650; }
.dal-fail-examples ul { margin: 2px 0 6px; padding-left: 18px; font-family: var(--dal-mono); font-size: 11.5px; }
.dal-fail-examples li { white-space: pre-wrap; word-break: break-word; }
.dal-fail-meta { display: flex; gap: 12px; flex-wrap: wrap; font-size: 11px; color: var(--dal-fg3); margin-bottom: 4px; }
.dal-tb > summary { cursor: pointer; font-size: 11.5px; color: var(--dal-accent); }
.dal-tb pre { margin: 4px 0 0; padding: 8px 10px; background: var(--dal-bg2); border: 1px solid var(--dal-border); border-radius: 6px; max-height: 260px; overflow: auto;
  font-family: var(--dal-mono); font-size: 11.5px; line-height: 1.4; white-space: pre; }
.dal-bad-num { color: #c0282d; font-weight: 600; }
.dal-notrun-num { color: #6e5a8a; font-weight: 600; }
.dal-legend { display: flex; gap: 12px; flex-wrap: wrap; padding: 6px 2px 10px; color: var(--dal-fg2); font-size: 11px; }
.dal-legend i { display: inline-block; width: 9px; height: 9px; border-radius: 2px; margin-right: 4px; vertical-align: -1px; }
.dal-totals { display: flex; gap: 18px; flex-wrap: wrap; padding: 2px 2px 8px; color: var(--dal-fg2); }
.dal-totals b { color: var(--dal-fg); font-variant-numeric: tabular-nums; }

/* flamegraph */
.dal-flame { position: relative; }
.dal-flame-bar { display: flex; align-items: center; gap: 8px; padding: 0 0 8px; flex-wrap: wrap; }
.dal-input { font: inherit; padding: 4px 8px; border: 1px solid var(--dal-border); border-radius: 6px; background: var(--dal-bg); color: var(--dal-fg); min-width: 220px; }
.dal-input:focus { outline: 2px solid var(--dal-accent-soft); border-color: var(--dal-accent); }
.dal-btn { border: 1px solid var(--dal-border); background: var(--dal-bg); border-radius: 6px; padding: 4px 10px; cursor: pointer; font-weight: 550; }
.dal-btn:hover { background: var(--dal-bg2); }
.dal-btn:disabled { opacity: 0.5; cursor: default; }
.dal-btn.primary { background: var(--dal-accent); border-color: var(--dal-accent); color: #fff; }
.dal-btn.primary:hover { filter: brightness(1.06); }
.dal-crumbs { color: var(--dal-fg2); font-size: 11.5px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.dal-crumbs a { color: var(--dal-accent); cursor: pointer; text-decoration: none; }
.dal-flame canvas { display: block; width: 100%; cursor: pointer; border-radius: 4px; }
.dal-tip { position: fixed; z-index: 10000; pointer-events: none; max-width: 560px; background: #1f2328; color: #f6f8fa; border-radius: 7px; padding: 8px 10px;
  font-size: 12px; box-shadow: 0 8px 24px rgba(0,0,0,0.25); }
.dal-tip b { color: #fff; }
.dal-tip .dal-tip-file { color: #9fb3c8; font-family: var(--dal-mono); font-size: 11px; margin-top: 2px; word-break: break-all; }
.dal-tip pre { margin: 6px 0 0; font-family: var(--dal-mono); font-size: 11.5px; color: #ffd49a; white-space: pre-wrap; }

/* code */
.dal-code { border: 1px solid var(--dal-border); border-radius: 8px; overflow: hidden; margin-bottom: 12px; }
.dal-code-head { display: flex; gap: 10px; align-items: center; padding: 6px 10px; background: var(--dal-bg2); border-bottom: 1px solid var(--dal-border);
  font-family: var(--dal-mono); font-size: 11.5px; color: var(--dal-fg2); }
.dal-code-body { overflow: auto; max-height: 420px; }
.dal-code pre { margin: 0; padding: 6px 0; font-family: var(--dal-mono); font-size: 12px; line-height: 1.55; }
.dal-line { display: flex; padding-right: 12px; }
.dal-line.hit { background: var(--dal-accent-soft); box-shadow: inset 3px 0 0 var(--dal-accent); }
.dal-ln { width: 46px; flex: none; text-align: right; padding-right: 12px; color: var(--dal-fg3); user-select: none; }
.dal-tok-kw { color: #cf222e; font-weight: 500; }
.dal-tok-str { color: #0a3069; }
.dal-tok-com { color: #6e7781; font-style: italic; }
.dal-tok-num { color: #0550ae; }
.dal-tok-fn { color: #8250df; }
.dal-tok-bi { color: #953800; }
.dal-tok-dec { color: #116329; }
[data-jp-theme-light="false"] .dal-tok-kw { color: #ff7b72; }
[data-jp-theme-light="false"] .dal-tok-str { color: #a5d6ff; }
[data-jp-theme-light="false"] .dal-tok-num { color: #79c0ff; }
[data-jp-theme-light="false"] .dal-tok-fn { color: #d2a8ff; }
[data-jp-theme-light="false"] .dal-tok-bi { color: #ffa657; }
[data-jp-theme-light="false"] .dal-tok-dec { color: #7ee787; }
[data-jp-theme-light="false"] .dal-tok-com { color: #8b949e; }

/* cluster summary + gpu charts */
.dal-cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(130px, 1fr)); gap: 8px; margin-bottom: 12px; }
.dal-kpi { border: 1px solid var(--dal-border); border-radius: 8px; padding: 8px 10px; background: var(--dal-bg); }
.dal-kpi-label { font-size: 10.5px; text-transform: uppercase; letter-spacing: 0.06em; color: var(--dal-fg3); font-weight: 650; }
.dal-kpi-value { font-size: 17px; font-weight: 650; font-variant-numeric: tabular-nums; margin-top: 2px; }
.dal-kpi-sub { font-size: 11px; color: var(--dal-fg3); }
.dal-charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(280px, 1fr)); gap: 10px; }
.dal-chart { border: 1px solid var(--dal-border); border-radius: 8px; padding: 8px 10px 4px; }
.dal-chart-title { font-size: 11.5px; font-weight: 600; color: var(--dal-fg2); display: flex; justify-content: space-between; }
.dal-chart svg { width: 100%; height: 110px; display: block; }
.dal-chart .axis { font-size: 9.5px; fill: var(--dal-fg3); }
.dal-kv { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; font-size: 12px; }
.dal-kv dt { color: var(--dal-fg3); }
.dal-kv dd { margin: 0; font-family: var(--dal-mono); font-size: 11.5px; overflow-wrap: anywhere; }
.dal-section { margin: 14px 0 6px; font-size: 11px; text-transform: uppercase; letter-spacing: 0.06em; color: var(--dal-fg3); font-weight: 650; }
.dal-band { display: flex; height: 10px; border-radius: 3px; overflow: hidden; background: var(--dal-bg3); margin-top: 2px; }

/* share */
.dal-share { display: inline-flex; align-items: center; gap: 8px; flex-wrap: wrap; }
.dal-share-link { display: inline-flex; align-items: center; border: 1px solid var(--dal-border); border-radius: 6px; overflow: hidden; max-width: 460px; }
.dal-share-link a { padding: 3px 8px; font-family: var(--dal-mono); font-size: 11.5px; color: var(--dal-accent); overflow: hidden; text-overflow: ellipsis; white-space: nowrap; text-decoration: none; }
.dal-share-link button { border: 0; border-left: 1px solid var(--dal-border); background: var(--dal-bg2); padding: 3px 9px; cursor: pointer; }
.dal-share-msg { font-size: 11.5px; color: var(--dal-fg2); }
.dal-share-msg.bad { color: var(--dal-bad); }
`;

// One <style> per version of the sheet: the JupyterLab extension and a kernel's widget
// bundle can be different builds on one page (an extension installed before the
// package was upgraded); keyed by content, the newer sheet is added beside the older
// one instead of being skipped because "the" sheet is already there.
function digest(text) {
  let x = 2166136261;
  for (let i = 0; i < text.length; i++) x = Math.imul(x ^ text.charCodeAt(i), 16777619);
  return (x >>> 0).toString(36);
}

function inject(doc, name, css) {
  const id = `${name}-${digest(css)}`;
  if (doc.getElementById(id)) return;
  const style = doc.createElement("style");
  style.id = id;
  style.className = name;
  style.textContent = css;
  doc.head.append(style);
}

export function injectStyle(doc = document) {
  inject(doc, "dask-analytics-lab-style", CSS);
}

// The JupyterLab sidebar and main-area panels.
const LAB_CSS = `
.dal-sidebar { display: flex; flex-direction: column; height: 100%; min-width: 240px; }
.dal-sidebar-head { display: flex; align-items: center; gap: 8px; padding: 10px 12px; border-bottom: 1px solid var(--dal-border); }
.dal-sidebar-list { flex: 1; overflow-y: auto; }
.dal-sidebar-foot { padding: 6px 12px; border-top: 1px solid var(--dal-border); font-size: 11px; color: var(--dal-fg3); white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.dal-sidebar-foot a { color: var(--dal-accent); text-decoration: none; }
.dal-cl { border-bottom: 1px solid var(--dal-border); }
.dal-cl-head { display: flex; align-items: center; gap: 6px; padding: 8px 10px 2px; cursor: pointer; }
.dal-cl-head:hover .dal-cl-name { color: var(--dal-accent); }
.dal-chev { width: 10px; color: var(--dal-fg3); font-size: 10px; }
.dal-cl-name { font-weight: 650; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; flex: 1; }
.dal-cl-open { border: 1px solid var(--dal-border); background: var(--dal-bg); border-radius: 5px; font-size: 11px; padding: 0 7px; cursor: pointer; color: var(--dal-fg2); }
.dal-cl-open:hover { color: var(--dal-accent); border-color: var(--dal-accent); }
.dal-cl-size { font-variant-numeric: tabular-nums; }
.dal-cl-meta { display: flex; gap: 8px; flex-wrap: wrap; padding: 0 10px 8px 26px; font-size: 11px; color: var(--dal-fg3); }
.dal-cl-comps { padding: 0 0 6px 14px; }
.dal-cl-none { padding: 2px 12px 8px; font-size: 11px; }
.dal-lab-panel { overflow: auto; background: var(--jp-layout-color1, #fff); }
.dal-lab-panel > .dal-monitor { border: 0; border-radius: 0; min-height: 100%; }
.dal-lab-panel .dal-side, .dal-lab-panel .dal-pane { max-height: none; }
`;
export function injectLabStyle(doc = document) {
  inject(doc, "dask-analytics-lab-style-lab", LAB_CSS);
}
