// One dead execution's redrive (POST /v1/executions/:id/redrive): the button the job page and the
// dead letters both show.
import { api } from "./api.js";
import { errorNotice, fill, h } from "./dom.js";

/**
 * @param {string} id
 * @param {HTMLElement} notices where the outcome is said
 * @param {() => Promise<void>} refresh the view, once the outcome is known
 */
export function redriveButton(id, notices, refresh) {
  return h(
    "button",
    {
      type: "button",
      "aria-label": `Redrive ${id}`,
      // the view's refresh draws a new button: fill() gives it the focus back by this key
      "data-key": `redrive:${id}`,
      onclick: async (/** @type {Event} */ event) => {
        const target = /** @type {HTMLButtonElement} */ (event.currentTarget);
        // busy, not disabled: a disabled button would drop the keyboard focus
        if (target.getAttribute("aria-disabled") === "true") return;
        target.setAttribute("aria-disabled", "true");
        try {
          await api("POST", `/v1/executions/${encodeURIComponent(id)}/redrive`);
          fill(notices, h("p", { class: "ok" }, `Redriven: ${id} runs again with a fresh attempt budget.`));
        } catch (error) {
          fill(notices, errorNotice(error));
          target.removeAttribute("aria-disabled"); // it may be tried again (a redriven one is drawn no more)
        }
        await refresh();
      },
    },
    "Redrive",
  );
}
