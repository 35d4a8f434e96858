/**
 * What `npm install` runs and prints (issue 37 items 4 and 5). Every locked package with an install
 * script is named in package.json's allowScripts: npm 11.16 and later list the others as a warning
 * at the end of every install, and npm 12 skips their scripts (the pinned Node's download is one).
 * The client package runs no script when another project installs it (npm would warn about it, and
 * then skip it): the clone's own `npm install` builds it (the root's prepare).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "../../scripts/local-env.mjs";

interface Manifest {
  scripts?: Record<string, string>;
  allowScripts?: Record<string, boolean>;
}
interface Lockfile {
  packages: Record<string, { version?: string; hasInstallScript?: boolean }>;
}

const readJson = <T>(file: string): T => JSON.parse(readFileSync(join(ROOT, file), "utf8")) as T;

/** the package's name from its lockfile key: the part after the last node_modules/ */
const nameOf = (key: string) => key.slice(key.lastIndexOf("node_modules/") + "node_modules/".length);

/** npm's install-time lifecycle scripts, which run when a package is installed as a dependency */
const INSTALL_SCRIPTS = ["preinstall", "install", "postinstall", "prepare"];

describe("npm install", () => {
  it("runs no dependency's install script that package.json has not allowed", () => {
    const { allowScripts = {} } = readJson<Manifest>("package.json");
    const withScripts = Object.entries(readJson<Lockfile>("package-lock.json").packages)
      .filter(([key, entry]) => key !== "" && entry.hasInstallScript)
      .map(([key, entry]) => `${nameOf(key)}@${entry.version}`);
    expect(withScripts.length).toBeGreaterThan(0);
    const unreviewed = withScripts.filter((id) => allowScripts[id.slice(0, id.lastIndexOf("@"))] !== true);
    expect(unreviewed).toEqual([]);
  });

  it("of the client into another project runs none of its scripts: the clone builds it", () => {
    const client = readJson<Manifest>("packages/client/package.json");
    expect(Object.keys(client.scripts ?? {}).filter((name) => INSTALL_SCRIPTS.includes(name))).toEqual([]);
  });
});
