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
      onclick: async (/** @type {Event} */ event) => {
        /** @type {HTMLButtonElement} */ (event.currentTarget).disabled = true;
        try {
          await api("POST", `/v1/executions/${encodeURIComponent(id)}/redrive`);
          fill(notices, h("p", { class: "ok" }, `Redriven: ${id} runs again with a fresh attempt budget.`));
        } catch (error) {
          fill(notices, errorNotice(error));
        }
        await refresh();
      },
    },
    "Redrive",
  );
}
