// Who is logged in, in the header's #whoami slot, with the Log out button.
import { h } from "../common/dom.js";
import { PREFIX, api } from "./api.js";
import type { Whoami } from "./rows.js";

export async function whoami(): Promise<void> {
  const slot = document.getElementById("whoami")!;
  try {
    const { whoami: w } = await api<{ whoami: Whoami }>("/whoami");
    if (w.via === "open") {
      slot.textContent = "all accounts";
      return;
    }
    // Tornado's XSRF token from its cookie (set with the login form), sent as the field.
    const xsrf = (document.cookie.match(/(?:^|;\s*)_xsrf=([^;]*)/) || [])[1];
    const field = xsrf
      ? [h("input", { type: "hidden", name: "_xsrf", value: decodeURIComponent(xsrf) })]
      : [];
    slot.replaceChildren(
      `${w.user} · ${w.account}`,
      h(
        "form",
        { method: "post", action: `${PREFIX}/logout` },
        ...field,
        h("button", { type: "submit" }, "Log out"),
      ),
    );
  } catch {
    /* the page shows the error */
  }
}
