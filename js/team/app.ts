// dask-analytics team view: reads the JSON API and builds the page with DOM calls.
// Stored strings (names, tracebacks, code) only ever go through textContent, never
// innerHTML, so nothing recorded can inject markup or script into this page.
// Built by js/build.mjs into dask_analytics_lab/static/team.js (one classic script, served
// at {prefix}/widgets/team.js).  server/web.py names the page on <body data-page> (and
// its id on data-arg0); each page is its own module here, with the notebook views'
// helpers (js/common) and views (js/widgets).
import { h } from "../common/dom.js";
import { NOT_LOGGED_IN } from "./api.js";
import { clusterPage } from "./cluster.js";
import { clustersPage } from "./clusters.js";
import { computationPage } from "./computation.js";
import { costsPage } from "./costs.js";
import { exceptionsPage } from "./exceptions.js";
import { reportsPage } from "./reports.js";
import { whoami } from "./whoami.js";

/** A page fills `main` from the API; `arg` is the id in its URL, if it has one. */
type Page = (main: HTMLElement, arg: string) => Promise<void>;

const PAGES: Record<string, Page> = {
  clusters: clustersPage,
  cluster: clusterPage,
  computation: computationPage,
  exceptions: exceptionsPage,
  reports: reportsPage,
  costs: costsPage,
};

const main = document.getElementById("app")!;
const page = PAGES[document.body.dataset.page || ""];
if (page) {
  whoami();
  page(main, document.body.dataset.arg0 ?? "").catch((e: Error) => {
    if (e.message !== NOT_LOGGED_IN)
      main.replaceChildren(h("p", { class: "error", role: "alert" }, e.message));
  });
}
