// A fresh PostgreSQL database per test file, on the server the global setup
// provides; `undefined` when there is none (the tests that need it skip,
// and the setup has said so once).
import pg from "pg";
import { randomBytes } from "node:crypto";
import { inject } from "vitest";

export const postgresAvailable = (): boolean => inject("postgresUrl") !== "";

/** Creates an empty database and returns its URL. */
export async function freshDatabase(prefix = "synapse_test"): Promise<string> {
  const admin = inject("postgresUrl");
  if (!admin) throw new Error("no PostgreSQL server for this test run");
  const name = `${prefix}_${randomBytes(6).toString("hex")}`;
  const client = new pg.Client({ connectionString: admin });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${name}`);
  } finally {
    await client.end();
  }
  const url = new URL(admin);
  url.pathname = `/${name}`;
  return url.toString();
}
