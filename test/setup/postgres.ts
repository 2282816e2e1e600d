// Global setup: a PostgreSQL server for the tests that need one. Uses
// SYNAPSE_TEST_POSTGRES (a URL to a server where databases may be created)
// when set, else starts a throwaway cluster when initdb is installed, else
// says in one line that the PostgreSQL tests do not run (or fails, when
// SYNAPSE_REQUIRE_POSTGRES=1).
import type { TestProject } from "vitest/node";
import { findPostgresBin, startCluster, type Cluster } from "../../scripts/postgres-cluster.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** A PostgreSQL URL (to its maintenance database), or "" when there is none. */
    postgresUrl: string;
  }
}

let cluster: Cluster | undefined;

export default async function setup(project: TestProject): Promise<() => void> {
  const given = process.env.SYNAPSE_TEST_POSTGRES;
  if (given) {
    project.provide("postgresUrl", given);
    return () => undefined;
  }
  if (findPostgresBin() === undefined) {
    const why = "PostgreSQL tests did not run: set SYNAPSE_TEST_POSTGRES or install Debian's postgresql package (initdb)";
    if (process.env.SYNAPSE_REQUIRE_POSTGRES === "1") throw new Error(why);
    process.stdout.write(`\n  ${why}\n\n`);
    project.provide("postgresUrl", "");
    return () => undefined;
  }
  cluster = await startCluster();
  project.provide("postgresUrl", cluster.url);
  return () => cluster?.stop();
}
