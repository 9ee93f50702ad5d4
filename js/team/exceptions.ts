// The Exceptions page (/exceptions): the newest failures of every cluster, each linking
// where it came from.
import { h } from "../common/dom.js";
import { api } from "./api.js";
import { exceptionsList, failureCount } from "./failures.js";
import type { SentException } from "../common/rows.js";

export async function exceptionsPage(main: HTMLElement): Promise<void> {
  document.title = "Exceptions · dask-analytics";
  const { exceptions } = await api<{ exceptions: SentException[] }>("/exceptions", { limit: 500 });
  main.replaceChildren(
    h("h1", {}, "Exceptions"),
    exceptions.length ? h("p", { class: "muted" }, failureCount(exceptions)) : "",
    exceptionsList(exceptions, true),
  );
}
