// npm run postgres: a local PostgreSQL for running several `synapse serve`
// instances by hand. Keeps its data in ./.synapse-postgres (reused on the
// next run), listens on 127.0.0.1:5433 (or PGPORT), prints the --store URL
// and runs until Ctrl-C. Needs Debian's postgresql package (initdb).
import { resolve } from "node:path";
import { startCluster } from "./postgres-cluster.js";

const cluster = await startCluster({ dir: resolve(".synapse-postgres"), port: Number(process.env.PGPORT ?? 5433), durable: true });
process.stdout.write(`PostgreSQL is up. Serve with:\n  npx synapse serve --store ${cluster.url}\n(Ctrl-C stops it; the data stays in .synapse-postgres)\n`);
const stop = () => {
  cluster.stop();
  process.exit(0);
};
process.on("SIGINT", stop);
process.on("SIGTERM", stop);
setInterval(() => undefined, 1 << 30);
