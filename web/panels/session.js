// The state every panel shares: the client of the current connection, and
// the settings the page keeps in localStorage.
import { State } from '../switchboard.js';

/** store keeps the page's settings in localStorage, as JSON. */
export const store = {
  get: (k, d) => {
    try {
      const v = localStorage.getItem(`switchboard.${k}`);
      return v === null ? d : JSON.parse(v);
    } catch {
      return d;
    }
  },
  set: (k, v) => {
    try {
      localStorage.setItem(`switchboard.${k}`, JSON.stringify(v));
    } catch {
      /* private mode: not persisted */
    }
  },
};

/** @type {import('../switchboard.js').SwitchboardClient|null} */
export let client = null;

/** setClient makes c the current client (null between connections). */
export function setClient(c) {
  client = c;
}

/** isOpen reports whether the current client is connected and initialized. */
export const isOpen = () => client?.state === State.OPEN;
