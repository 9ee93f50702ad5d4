// Builds the browser code into the Python package (run by `npm run build`, which
// hatch-jupyter-builder runs during `pip install`):
//   widgets: one ES module per anywidget view, js/widgets/*.ts -> dask_analytics_lab/static/,
//            and their one stylesheet js/common/style.css -> static/style.css (the widgets'
//            _css; the Lab extension @imports the same file), js/team/app.ts -> static/team.js
//            (the team page) and js/report/page.ts -> static/report-page.js
//   lab:     the JupyterLab extension, js/lab/index.ts -> js/lib/index.js -> @jupyter/builder -> dask_analytics_lab/labextension
// Usage: node js/build.mjs [widgets|lab] [--dev] [--no-check]
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const what = process.argv.slice(2).filter((a) => !a.startsWith("--"));
const dev = process.argv.includes("--dev");
const want = (name) => what.length === 0 || what.includes(name);

async function widgets() {
  const out = join(root, "dask_analytics_lab", "static");
  mkdirSync(out, { recursive: true });
  copyFileSync(join(root, "js", "common", "style.css"), join(out, "style.css"));
  const dir = join(root, "js", "widgets");
  const entryPoints = readdirSync(dir)
    .filter((f) => f.endsWith(".ts"))
    .map((f) => join(dir, f));
  await esbuild.build({
    entryPoints,
    outdir: out,
    bundle: true,
    format: "esm",
    target: "es2020",
    minify: !dev,
    sourcemap: dev ? "inline" : false,
    legalComments: "none",
    logLevel: "warning",
  });
  // The team page (dask_analytics_lab/server): one classic script, served at {prefix}/widgets/team.js.
  await esbuild.build({
    entryPoints: [join(root, "js", "team", "app.ts")],
    outfile: join(out, "team.js"),
    bundle: true,
    format: "iife",
    target: "es2020",
    minify: !dev,
    legalComments: "none",
    logLevel: "warning",
  });
  // The shared-report page: one classic script, inlined into each report's HTML.
  await esbuild.build({
    entryPoints: [join(root, "js", "report", "page.ts")],
    outfile: join(root, "dask_analytics_lab", "static", "report-page.js"),
    bundle: true,
    format: "iife",
    globalName: "DaskAnalyticsReport",
    target: "es2020",
    minify: !dev,
    legalComments: "none",
    logLevel: "warning",
  });
}

async function lab() {
  await esbuild.build({
    entryPoints: [join(root, "js", "lab", "index.ts")],
    outfile: join(root, "js", "lib", "index.js"),
    bundle: true,
    format: "esm",
    target: "es2020",
    // Provided by JupyterLab at run time (shared modules of the federated build).
    external: ["@jupyterlab/*", "@lumino/*"],
    logLevel: "warning",
  });
  const builder = join(root, "node_modules", "@jupyter", "builder", "lib", "build-labextension.js");
  const core = join(root, "node_modules", "@jupyterlab", "core-meta", "core.package.json");
  const args = [builder, "--core-package-file", core, ...(dev ? ["--development"] : []), root];
  const run = spawnSync(process.execPath, args, { stdio: "inherit", cwd: root });
  if (run.status !== 0) throw new Error(`@jupyter/builder failed (exit ${run.status})`);
}

// A type error fails the build (esbuild only strips the types); --no-check skips it.
function check() {
  const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
  const run = spawnSync(process.execPath, [tsc, "--noEmit", "-p", join(root, "tsconfig.json")], {
    stdio: "inherit",
    cwd: root,
  });
  if (run.status !== 0)
    throw new Error(
      `type check failed (exit ${run.status}): fix the errors above, or build with --no-check`,
    );
}

const t0 = Date.now();
if (!process.argv.includes("--no-check")) check();
if (want("widgets")) await widgets();
if (want("lab")) await lab();
console.log(
  `dask-analytics-lab: built ${what.join(", ") || "widgets, lab"} in ${Date.now() - t0} ms`,
);
